//! What reading a recording may cost, whoever wrote it. Recordings come from
//! other machines, so every size a file declares is checked here before
//! anything is allocated for it, and a file that breaks a limit is refused as
//! "corrupt at byte N" instead of starving the machine reading it.
//!
//! Two kinds of bound:
//! - fixed ones, from what a real system can produce (thread counts, stack
//!   depths, name lengths) or what the writer never exceeds (frame sizes);
//! - a memory budget that grows with the bytes read: decoded data may cost at
//!   most `FLOOR + RATIO ×` the file bytes consumed so far. Real recordings
//!   decode to 20–200 bytes of memory per byte of file (a sample is ~180 bytes
//!   in memory and 2–10 on disk), so `RATIO` leaves a wide margin, while a zstd
//!   bomb, which expands thousands of times, hits the budget within its first
//!   frame.

use std::fmt;

/// Decompressed frame payload, absolute. The writer keeps every frame under it
/// (one pass of a million threads is ~40 MB).
pub const MAX_RAW: usize = 128 << 20;
/// A frame's payload may expand at most this many times its compressed size,
/// beyond `RAW_FLOOR` (real frames: 2–20×; a bomb: thousands).
const RAW_RATIO: usize = 256;
const RAW_FLOOR: usize = 8 << 20;

/// The kernel's PID_MAX_LIMIT: no pass can see more threads.
pub const MAX_THREADS: usize = 4 << 20;
/// Frames in one stack: the kernel gives at most 127, the user unwinder 128
/// plus a marker; generous for stacks imported from other tools.
pub const MAX_STACK_FRAMES: usize = 4096;
/// Task names are 16 bytes in the kernel (up to 48 once made valid UTF-8).
pub const MAX_COMM: usize = 64;
/// User names and other short labels.
pub const MAX_NAME: usize = 4096;
/// Any other string (command lines, paths, symbols).
pub const MAX_STRING: usize = 1 << 20;

/// Decoded memory allowed before the first byte: enough for any real first
/// frame of a small recording.
pub(super) const FLOOR: u64 = 32 << 20;
/// Decoded memory allowed per byte of file read.
pub(super) const RATIO: u64 = 4096;
/// What the writer lets one frame decode to per byte of it: a quarter of
/// what the reader allows, so estimates that differ a little never turn a
/// real recording into a refused one. A frame zstd would shrink further (an
/// idle thread pool: a few bits per sample) is stored uncompressed, where no
/// item costs more than ~90 bytes of memory per byte.
pub const WRITER_RATIO: u64 = RATIO / 4;

/// Allocator and container overhead per table entry.
const ENTRY: u64 = 64;

// What each decoded item is charged: the decoder charges these, and the
// encoder sums them (for every item it writes) to keep frames inside `WRITER_RATIO`.
pub fn string_cost(len: usize) -> u64 {
    len as u64 + ENTRY
}

pub fn process_cost() -> u64 {
    (std::mem::size_of::<crate::model::Process>() as u64) + ENTRY
}

pub fn stack_cost(frames: usize) -> u64 {
    (std::mem::size_of::<crate::model::Stack>() + frames * std::mem::size_of::<std::sync::Arc<str>>()) as u64
        + ENTRY
}

pub fn snapshot_cost(samples: usize) -> u64 {
    (std::mem::size_of::<crate::model::Snapshot>()
        + samples * std::mem::size_of::<crate::model::ThreadSample>()) as u64
}

/// A syscall target (file name), shared by the samples that have it.
pub fn target_cost() -> u64 {
    (std::mem::size_of::<crate::model::Target>() as u64) + ENTRY
}

/// A program's wait state, shared by the samples that have it.
pub fn app_cost() -> u64 {
    (std::mem::size_of::<crate::model::AppWait>() as u64) + ENTRY
}

pub fn ident_cost() -> u64 {
    (std::mem::size_of::<crate::model::ThreadIdent>() as u64) + ENTRY
}

/// The largest raw payload a frame of `compressed` bytes may declare.
pub fn raw_cap(compressed: usize) -> usize {
    RAW_FLOOR
        .saturating_add(compressed.saturating_mul(RAW_RATIO))
        .min(MAX_RAW)
}

/// A limit a file broke: what a reader reports as "corrupt at byte N: ...",
/// and stops at, where other damage only costs the frame.
#[derive(Debug)]
pub struct Corrupt(pub String);

impl fmt::Display for Corrupt {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for Corrupt {}

/// Shorthand: an `anyhow` error carrying `Corrupt`.
pub fn corrupt(msg: String) -> anyhow::Error {
    Corrupt(msg).into()
}

/// The one line a broken limit gets ("corrupt at byte N: what"), still a
/// `Corrupt` for callers up the stack; readers add the file's name.
pub fn at(offset: u64, e: &anyhow::Error) -> anyhow::Error {
    corrupt(format!("corrupt at byte {offset}: {e:#}"))
}

/// Whether an error is a broken limit (as opposed to ordinary damage).
pub fn is_corrupt(e: &anyhow::Error) -> bool {
    e.chain().any(|c| c.is::<Corrupt>())
}

/// Memory spent decoding one file, against what its size allows.
#[derive(Debug, Default)]
pub struct Budget {
    file_bytes: u64,
    used: u64,
}

impl Budget {
    pub fn new() -> Budget {
        Budget::default()
    }

    /// The file has been read up to `offset`.
    pub fn read_to(&mut self, offset: u64) {
        self.file_bytes = self.file_bytes.max(offset);
    }

    pub fn allowed(&self) -> u64 {
        FLOOR.saturating_add(self.file_bytes.saturating_mul(RATIO))
    }

    #[cfg(test)]
    pub fn used(&self) -> u64 {
        self.used
    }

    /// Accounts `bytes` about to be allocated for `what`; refuses (before the
    /// allocation) when they would pass what the file's size allows.
    pub fn charge(&mut self, bytes: u64, what: impl FnOnce() -> String) -> anyhow::Result<()> {
        let used = self.used.saturating_add(bytes);
        if used > self.allowed() {
            return Err(corrupt(format!(
                "{} would take {} MiB of memory, more than the first {} bytes of a recording can hold",
                what(),
                used >> 20,
                self.file_bytes
            )));
        }
        self.used = used;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn budget_grows_with_the_file_and_refuses_before_passing_it() {
        let mut b = Budget::new();
        assert!(b.charge(FLOOR, || "a".into()).is_ok());
        let e = b.charge(1, || "one more byte".into()).unwrap_err();
        assert!(
            is_corrupt(&e) && e.to_string().starts_with("one more byte"),
            "{e}"
        );
        assert_eq!(b.used(), FLOOR, "a refused charge is not counted");
        b.read_to(1000);
        assert!(b.charge(RATIO * 1000, || "b".into()).is_ok());
        assert!(b.charge(1, || "c".into()).is_err());
        assert!(b.charge(u64::MAX, || "d".into()).is_err());
    }

    #[test]
    fn raw_cap_is_floor_plus_ratio_up_to_the_absolute_cap() {
        assert_eq!(raw_cap(0), RAW_FLOOR);
        assert_eq!(raw_cap(1000), RAW_FLOOR + 256_000);
        assert_eq!(raw_cap(usize::MAX), MAX_RAW);
    }
}
