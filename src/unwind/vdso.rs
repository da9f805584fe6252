//! The vDSO: code the kernel maps into every process (`clock_gettime`,
//! `gettimeofday`, `getcpu`), with CFI of its own but no file behind it. A
//! busy server reads the clock all the time, so a thread preempted in the run
//! queue is often inside it; without its CFI the unwinder falls back to the
//! frame pointer, which at a function's first instructions skips the caller
//! or, where the register holds 0, ends the stack there as if at its root.
//!
//! The image is read once, from this process's own mapping of it: the kernel
//! maps the same one into every process of the architecture.

use std::fs::File;
use std::os::unix::fs::FileExt;

use super::cfi::Cfi;
use super::{Mapping, Source};

/// The vDSO's key among binaries' CFI (build-id hashes; a clash is negligible).
pub const KEY: u64 = u64::MAX;

/// A process's vDSO mapping at `start..end`, for the unwinder: None where the
/// image is not the one this process has (a 32-bit process's, say), since
/// its CFI would be another image's.
pub fn mapping(start: u64, end: u64) -> Option<Mapping> {
    let own = crate::symbols::own_vdso()?;
    (own.end - own.start == end.wrapping_sub(start)).then_some(Mapping {
        start,
        end,
        offset: 0,
        key: KEY,
        source: Source::Vdso,
    })
}

/// The CFI of this process's vDSO.
pub fn own_cfi() -> Option<Cfi> {
    Cfi::from_image(&own_image()?)
}

/// This process's vDSO image, read from its memory.
pub fn own_image() -> Option<Vec<u8>> {
    let own = crate::symbols::own_vdso()?;
    let mut image = vec![0; usize::try_from(own.end - own.start).ok()?];
    // /proc/self/mem rather than a raw pointer: a read that fails is an
    // error here, not a fault.
    File::open("/proc/self/mem")
        .ok()?
        .read_exact_at(&mut image, own.start)
        .ok()?;
    Some(image)
}
