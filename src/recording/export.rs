//! `xtop export`: streams merged recordings into CSV, JSON lines, folded
//! stacks or xcapture's layout, one snapshot in memory at a time.

use std::collections::BTreeMap;
use std::io::{self, Write};
use std::path::Path;

use anyhow::{Context, Result};

use super::cmd::{time_window, ExportArgs, ExportFormat, Selection};
use super::report::{filtered, quiet_broken_pipe, warn_all};
use super::{xcapture, Merged};
use crate::dimensions::stack;
use crate::model::Snapshot;
use crate::output;

pub fn run_export(args: ExportArgs) -> Result<()> {
    let mut merged = Merged::open(&args.sel.files)?;
    let snaps = window(&mut merged, &args.sel)?;
    let out = &args.output;
    match args.format {
        ExportFormat::XcaptureCsv => xcapture::export(out, snaps)?,
        // `&mut w`: the shared writers take a sized `impl Write`.
        ExportFormat::Csv => to_file(out, |mut w| {
            output::write_csv_header(&mut w)?;
            snaps
                .into_iter()
                .try_for_each(|s| output::write_csv_rows(&mut w, &s))
        })?,
        ExportFormat::Json => to_file(out, |mut w| {
            snaps
                .into_iter()
                .try_for_each(|s| output::write_json_rows(&mut w, &s))
        })?,
        ExportFormat::Folded => to_file(out, |w| write_folded(w, snaps))?,
    }
    warn_all(&merged.warnings());
    Ok(())
}

/// The filtered snapshots inside `--from/--to`, lazily.
fn window<'a>(merged: &'a mut Merged, sel: &'a Selection) -> Result<impl Iterator<Item = Snapshot> + 'a> {
    let mut it = merged.peekable();
    let start = it.peek().map_or(0, |s| s.time_ns);
    let (from, to) = time_window(sel, start)?;
    Ok(it
        .filter(move |s| s.time_ns >= from && s.time_ns < to)
        .map(move |s| filtered(&s, sel)))
}

/// Writes to OUT (mode 0600: samples carry command lines) or stdout for `-`.
fn to_file(path: &Path, body: impl FnOnce(&mut dyn Write) -> io::Result<()>) -> Result<()> {
    let ctx = || format!("writing {}", path.display());
    if path.as_os_str() == "-" {
        let mut out = io::stdout().lock();
        return quiet_broken_pipe(body(&mut out).and_then(|()| out.flush()).with_context(ctx));
    }
    let mut w = crate::atomic_file::AtomicFile::create(path)?;
    body(&mut w).with_context(ctx)?;
    w.commit()
}

/// `root;...;leaf count` per distinct combined stack (the `stack` dimension:
/// user frames, then kernel frames marked `_[k]`), sorted for stable output.
/// Samples with neither stack are left out: there is nothing to draw.
pub fn write_folded(w: &mut dyn Write, snaps: impl IntoIterator<Item = Snapshot>) -> io::Result<()> {
    let mut counts: BTreeMap<String, u64> = BTreeMap::new();
    for snap in snaps {
        for s in &snap.samples {
            if let Some(line) = stack::combined(s) {
                *counts.entry(line).or_default() += 1;
            }
        }
    }
    for (stack, n) in counts {
        writeln!(w, "{stack} {n}")?;
    }
    Ok(())
}
