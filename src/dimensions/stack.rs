//! The combined user + kernel stack, as flame graphs draw it: the program's
//! frames from its root down, then the kernel frames it called into.

use std::sync::Arc;

use crate::model::{Stack, ThreadSample};

/// Suffix marking kernel frames, as flamegraph.pl's `--color=java` expects.
pub const KERNEL_SUFFIX: &str = "_[k]";

/// The frames of both stacks in flame graph order: the user stack root to
/// leaf, then the kernel stack root to leaf; `true` marks kernel frames.
pub fn frames<'a>(
    user: Option<&'a Stack>,
    kernel: Option<&'a Stack>,
) -> impl Iterator<Item = (&'a Arc<str>, bool)> {
    let user = user
        .into_iter()
        .flat_map(|u| u.frames.iter().rev().map(|f| (f, false)));
    let kernel = kernel
        .into_iter()
        .flat_map(|k| k.frames.iter().rev().map(|f| (f, true)));
    user.chain(kernel)
}

/// `root;...;leaf` of the user stack, then the kernel stack with each frame
/// suffixed; None when neither stack was captured.
pub fn combined(s: &ThreadSample) -> Option<String> {
    if s.ustack.is_none() && s.kstack.is_none() {
        return None;
    }
    let mut out = String::new();
    for (i, (f, kernel)) in frames(s.ustack.as_deref(), s.kstack.as_deref()).enumerate() {
        if i > 0 {
            out.push(';');
        }
        out.push_str(f);
        if kernel {
            out.push_str(KERNEL_SUFFIX);
        }
    }
    Some(out)
}

/// Identity of the pair (user hash, kernel hash); a missing half counts as 0.
pub fn combined_hash(s: &ThreadSample) -> Option<u64> {
    if s.ustack.is_none() && s.kstack.is_none() {
        return None;
    }
    let u = s.ustack.as_ref().map_or(0, |u| u.hash);
    let k = s.kstack.as_ref().map_or(0, |k| k.hash);
    Some(mix(u ^ mix(k)))
}

/// splitmix64's finalizer: stable across builds, unlike std's hashers.
fn mix(mut z: u64) -> u64 {
    z = z.wrapping_add(0x9e37_79b9_7f4a_7c15);
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::fixture::sample;
    use crate::model::State;

    #[test]
    fn user_frames_come_first_and_kernel_frames_are_marked() {
        let s = sample(1, 1, "db", State::Disk, Some(0));
        assert_eq!(
            combined(&s).unwrap(),
            "main;read_block;__libc_read;vfs_read_[k];pipe_read_[k];schedule_[k];__schedule_[k]"
        );
        let mut k_only = s.clone();
        k_only.ustack = None;
        assert_eq!(
            combined(&k_only).unwrap(),
            "vfs_read_[k];pipe_read_[k];schedule_[k];__schedule_[k]"
        );
        let mut u_only = s.clone();
        u_only.kstack = None;
        assert_eq!(combined(&u_only).unwrap(), "main;read_block;__libc_read");
        u_only.ustack = None;
        assert_eq!(combined(&u_only), None);
        assert_eq!(combined_hash(&u_only), None);
    }

    #[test]
    fn combined_hash_tells_the_halves_apart() {
        let s = sample(1, 1, "db", State::Disk, Some(0));
        let mut k_only = s.clone();
        k_only.ustack = None;
        let mut u_only = s.clone();
        u_only.kstack = None;
        let hashes = [&s, &k_only, &u_only].map(|t| combined_hash(t).unwrap());
        assert!(hashes[0] != hashes[1] && hashes[1] != hashes[2] && hashes[0] != hashes[2]);
        assert_eq!(combined_hash(&s.clone()), Some(hashes[0]));
    }
}
