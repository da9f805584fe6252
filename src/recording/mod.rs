//! Recordings: a compact, crash-safe file format for streams of snapshots,
//! and the `record`, `report`, `export` and `replay` commands over it.
//!
//! Layers, one per file: `varint` (byte encoding), `frame` (magic, version,
//! length-prefixed CRC-checked zstd frames), `session` and `codec` (what the
//! frames hold), `writer`/`rotate` (appending) and `reader` (streaming back).

pub mod cmd;
mod codec;
mod export;
mod frame;
pub mod fuzz;
mod limits;
mod reader;
mod record;
mod report;
mod rotate;
mod session;
pub mod synth;
mod timefmt;
mod varint;
mod writer;
mod xcapture;

pub use cmd::RecordingCommand;
pub use frame::VERSION;
pub use reader::{Merged, Reader};
pub use record::{record_loop, RecordStats};
pub use rotate::{rotated_path, Reserved, Rotating};
pub use writer::{write_file, Writer};

use std::path::PathBuf;

use anyhow::Result;

use crate::model::{Session, Snapshot};

/// Everything in one or more recording files, in time order.
#[derive(Clone, Debug)]
pub struct Recording {
    pub session: Session,
    pub snapshots: Vec<Snapshot>,
    /// Damage skipped, dropped snapshots, mixed hosts: one line each, for the user.
    pub warnings: Vec<String>,
}

/// Reads and merges recordings. Damaged parts become warnings; a file that is
/// not a readable recording at all, or breaks a limit (`limits`), is an error naming it.
pub fn read_files(paths: &[PathBuf]) -> Result<Recording> {
    let mut merged = Merged::open(paths)?;
    let mut snapshots: Vec<Snapshot> = merged.by_ref().collect();
    if let Some(e) = merged.take_error() {
        return Err(e);
    }
    let mut warnings = merged.warnings();
    // Files are each in order, but one written across a clock step may not be.
    snapshots.sort_by_key(|s| s.time_ns);
    let before = snapshots.len();
    snapshots.dedup_by_key(|s| s.time_ns);
    if snapshots.len() < before {
        warnings.push(format!(
            "{} duplicate snapshots ignored (same file given twice?)",
            before - snapshots.len()
        ));
    }
    Ok(Recording {
        session: merged.session().clone(),
        snapshots,
        warnings,
    })
}

#[cfg(test)]
mod tests;

#[cfg(test)]
mod cmd_tests;
