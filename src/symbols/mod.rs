//! Turning stack addresses into function names, off the UI thread (the sampler
//! calls these while decoding a pass) and cached so a steady workload costs
//! nothing new per pass. Kernel stacks resolve through kallsyms; user stacks
//! through the process's own binaries (see `user`).

mod binary;
mod cache;
mod kernel;
pub mod maps;
mod names;
mod perf_map;
mod plumbing;
mod process;
pub(crate) use process::{exe_id, stat_fields};
mod user;

pub use kernel::KernelSymbols;
pub use maps::own_vdso;
pub use user::UserSymbols;

/// Caches are dropped past this many entries: bounded memory on odd workloads.
const MAX_CACHED: usize = 200_000;

/// FNV-1a over the addresses: stable, cheap, good enough to key stacks.
pub fn stack_hash(addrs: &[u64]) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for a in addrs {
        for b in a.to_le_bytes() {
            h = (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3);
        }
    }
    h
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hash_depends_on_every_address_and_order() {
        let a = stack_hash(&[1, 2, 3]);
        assert_eq!(a, stack_hash(&[1, 2, 3]));
        assert_ne!(a, stack_hash(&[1, 2, 4]));
        assert_ne!(a, stack_hash(&[3, 2, 1]));
        assert_ne!(stack_hash(&[]), stack_hash(&[0]));
    }
}
