//! One recording, from bytes, through what `report`, `export` and `replay` do
//! with it: the body of the mutation fuzz test (tests/recording_fuzz.rs) and of
//! the `cargo fuzz` target (fuzz/). What they look for is a panic, a hang or a
//! memory spike here; a refused or damaged file is a normal outcome, counted
//! so the tests can tell that their mutations reach the decoder.

use std::io::{self, Write};

use super::{report, timefmt, Reader};
use crate::aggregation::aggregate;
use crate::dimensions::{self, stack, Dimension};
use crate::model::Snapshot;
use crate::output;
use crate::value::format_local_time;

/// How a recording fared.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Outcome {
    /// Not readable as a recording at all (header, no intact session frame).
    pub refused: bool,
    /// An intact frame broke a limit: reading stopped, "corrupt at byte N".
    pub corrupt: bool,
    pub snapshots: u64,
    pub samples: u64,
    /// Stretches of damage the frame layer skipped (bad checksums, torn frames).
    pub damaged: u64,
    /// Frames intact (checksum right) whose contents the decoder rejected.
    pub undecodable: u64,
    /// All the warnings a user would see (the two above, dropped snapshots, ...).
    pub warnings: usize,
}

/// Reads `bytes` as a recording and renders every snapshot as the commands
/// would: all registry columns (CSV, JSON, a table grouped by all of them),
/// folded stacks, xcapture's hourly file names, the report's header.
pub fn read_bytes(bytes: Vec<u8>) -> Outcome {
    let mut out = Outcome::default();
    let Ok(mut reader) = Reader::from_bytes("fuzz", bytes) else {
        out.refused = true;
        return out;
    };
    let all: Vec<&'static Dimension> = dimensions::DIMENSIONS.iter().collect();
    let sink = &mut io::sink();
    // The report's header: interval, arch and counts come from the file.
    let _ = report::write_session_line(sink, reader.session());
    for snap in reader.by_ref() {
        out.snapshots += 1;
        out.samples += snap.samples.len() as u64;
        render(sink, &snap, &all);
    }
    out.corrupt = reader.take_error().is_some();
    (out.damaged, out.undecodable) = reader.damage();
    out.warnings = reader.warnings().len();
    out
}

fn render(sink: &mut io::Sink, snap: &Snapshot, all: &[&'static Dimension]) {
    // Writes to a sink cannot fail; what matters is that nothing panics.
    let _ = output::write_csv_rows(sink, snap);
    let _ = output::write_json_rows(sink, snap);
    let agg = aggregate(std::iter::once(snap), all, &[]);
    let _ = output::write_table(sink, &agg, all);
    for s in &snap.samples {
        let _ = stack::combined(s).map(|line| writeln!(sink, "{line} 1"));
    }
    let _ = writeln!(
        sink,
        "{} {} {}",
        timefmt::hour(snap.time_ns),
        timefmt::compact(snap.time_ns),
        format_local_time(snap.time_ns)
    );
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_real_recording_reads_whole() {
        let o = read_bytes(include_bytes!("../../assets/demo.xtop").to_vec());
        assert!(!o.refused && !o.corrupt && o.warnings == 0, "{o:?}");
        assert!(o.snapshots > 0 && o.samples > 0, "{o:?}");
    }

    #[test]
    fn outcomes_tell_refused_damaged_and_corrupt_apart() {
        assert!(read_bytes(b"not a recording".to_vec()).refused);
        let mut v = include_bytes!("testdata/v2.xtop").to_vec();
        let whole = read_bytes(v.clone());
        // The last byte of the last frame: a checksum failure, skipped with a warning.
        *v.last_mut().unwrap() ^= 0xff;
        let damaged = read_bytes(v);
        assert!(
            !damaged.refused && !damaged.corrupt && damaged.damaged == 1,
            "{damaged:?}"
        );
        assert!(damaged.snapshots < whole.snapshots, "{damaged:?} vs {whole:?}");
    }
}
