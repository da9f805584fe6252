//! `xtop report` and (until the TUI opens recordings) `xtop replay`: the same
//! aggregation and writers as batch mode, over recorded snapshots.

use std::io::{self, Write};

use anyhow::Result;

use super::cmd::{time_window, Dims, ReplayArgs, ReportArgs, Selection};
use super::{read_files, Recording};
use crate::aggregation::{aggregate, matches_all};
use crate::dimensions;
use crate::model::{Reach, Session, Snapshot};
use crate::output::{self, Format};
use crate::value::format_local_time;

pub fn run_report(args: ReportArgs) -> Result<()> {
    let rec = read_files(&args.sel.files)?;
    warn_all(&rec.warnings);
    let mut out = io::stdout().lock();
    let written = write_report(&mut out, &rec, &args.sel, &args.group_by, args.format);
    quiet_broken_pipe(written.and_then(|()| Ok(out.flush()?)))
}

/// `xtop report ... | head` is a normal use: a closed pipe is not an error.
pub fn quiet_broken_pipe(r: Result<()>) -> Result<()> {
    match r {
        Err(e)
            if e.chain().any(|c| {
                c.downcast_ref::<io::Error>()
                    .is_some_and(|e| e.kind() == io::ErrorKind::BrokenPipe)
            }) =>
        {
            Ok(())
        }
        r => r,
    }
}

/// `xtop replay`: the interactive screen on a recording (no root needed);
/// the report when output is not a terminal.
pub fn run_replay(args: ReplayArgs) -> Result<()> {
    let dims = dimensions::parse_list(dimensions::DEFAULT_GROUP_BY).map_err(anyhow::Error::msg)?;
    if crate::ui::require_terminal().is_err() {
        return run_report(ReportArgs {
            sel: args.sel,
            group_by: Dims(dims),
            format: Format::Table,
        });
    }
    let mut rec = super::read_files(&args.sel.files)?;
    // Moved, not cloned: a long recording is held in memory once.
    let start = rec.snapshots.first().map_or(0, |s| s.time_ns);
    let (from, to) = time_window(&args.sel, start)?;
    let mut snaps: Vec<Snapshot> = std::mem::take(&mut rec.snapshots);
    snaps.retain(|s| s.time_ns >= from && s.time_ns < to);
    if snaps.is_empty() {
        anyhow::bail!("no snapshots in the selected range");
    }
    let opts = args.ui.options(dims, args.sel.filters.clone());
    let shown = crate::ui::run(crate::ui::Source::Replay(snaps), rec.session, opts);
    warn_all(&rec.warnings);
    shown
}

pub fn warn_all(warnings: &[String]) {
    for w in warnings {
        eprintln!("xtop: warning: {w}");
    }
}

/// Snapshots inside `--from/--to`.
pub fn selected<'a>(rec: &'a Recording, sel: &Selection) -> Result<Vec<&'a Snapshot>> {
    let start = rec.snapshots.first().map_or(0, |s| s.time_ns);
    let (from, to) = time_window(sel, start)?;
    Ok(rec
        .snapshots
        .iter()
        .filter(|s| s.time_ns >= from && s.time_ns < to)
        .collect())
}

/// A snapshot with only the samples that pass the filters.
pub fn filtered(snap: &Snapshot, sel: &Selection) -> Snapshot {
    let mut s = snap.clone();
    s.samples.retain(|t| matches_all(&sel.filters, snap, t));
    s
}

/// The table report's first line: where and how the recording was made.
pub fn write_session_line(out: &mut impl Write, s: &Session) -> io::Result<()> {
    writeln!(
        out,
        "# host {} kernel {} {} {} CPUs, interval {}",
        s.host,
        s.kernel,
        s.arch.name(),
        s.ncpus,
        humantime::format_duration(s.interval)
    )
}

/// How far the selected samples' user stacks reach.
fn reach(snaps: &[&Snapshot], sel: &Selection) -> Reach {
    Reach::of(
        snaps
            .iter()
            .flat_map(|snap| snap.samples.iter().filter(|s| matches_all(&sel.filters, snap, s))),
    )
}

pub fn write_report(
    out: &mut impl Write,
    rec: &Recording,
    sel: &Selection,
    dims: &Dims,
    format: Format,
) -> Result<()> {
    let snaps = selected(rec, sel)?;
    match format {
        Format::Table => {
            write_session_line(out, &rec.session)?;
            match (snaps.first(), snaps.last()) {
                (Some(a), Some(b)) => writeln!(
                    out,
                    "# {} .. {}, {} snapshots",
                    format_local_time(a.time_ns),
                    format_local_time(b.time_ns),
                    snaps.len()
                )?,
                _ => writeln!(out, "# no snapshots in the selected time range")?,
            }
            if let Some(r) = reach(&snaps, sel).summary() {
                writeln!(out, "# {r}")?;
            }
            let agg = aggregate(snaps.iter().copied(), &dims.0, &sel.filters);
            output::write_table(out, &agg, &dims.0)?;
        }
        Format::Csv => {
            output::write_csv_header(out)?;
            for s in snaps {
                output::write_csv_rows(out, &filtered(s, sel))?;
            }
        }
        Format::Json => {
            for s in snaps {
                output::write_json_rows(out, &filtered(s, sel))?;
            }
        }
    }
    Ok(())
}
