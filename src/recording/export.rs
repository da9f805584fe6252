//! `xtop export`: streams merged recordings into CSV, JSON lines, folded
//! stacks or xcapture's layout, one snapshot in memory at a time.

use std::collections::BTreeMap;
use std::io::{self, Write};
use std::path::Path;

use anyhow::Result;

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
            for s in snaps {
                output::write_csv_rows(&mut w, &s?)?;
            }
            Ok(())
        })?,
        ExportFormat::Json => to_file(out, |mut w| {
            for s in snaps {
                output::write_json_rows(&mut w, &s?)?;
            }
            Ok(())
        })?,
        ExportFormat::Folded => to_file(out, |w| {
            let mut failed = None;
            let snaps = snaps.map_while(|s| s.map_err(|e| failed = Some(e)).ok());
            write_folded(w, snaps)?;
            failed.map_or(Ok(()), Err)
        })?,
    }
    warn_all(&merged.warnings());
    Ok(())
}

/// The filtered snapshots inside `--from/--to`, lazily; a file that breaks a
/// limit ends them with its error, so no export of it is published.
fn window<'a>(
    merged: &'a mut Merged,
    sel: &'a Selection,
) -> Result<impl Iterator<Item = Result<Snapshot>> + 'a> {
    let mut done = false;
    let mut it = std::iter::from_fn(move || {
        if done {
            return None;
        }
        let next = merged.next().map(Ok);
        if next.is_none() {
            done = true;
            return merged.take_error().map(Err);
        }
        next
    })
    .peekable();
    let start = match it.peek() {
        Some(Ok(s)) => s.time_ns,
        _ => 0,
    };
    let (from, to) = time_window(sel, start)?;
    Ok(it.filter_map(move |s| match s {
        Ok(s) if s.time_ns >= from && s.time_ns < to => Some(Ok(filtered(&s, sel))),
        Ok(_) => None,
        Err(e) => Some(Err(e)),
    }))
}

/// Writes to OUT (mode 0600: samples carry command lines) or stdout for `-`;
/// a failed body (a write, or a recording that broke a limit) publishes nothing.
fn to_file(path: &Path, body: impl FnOnce(&mut dyn Write) -> Result<()>) -> Result<()> {
    // Write errors name the output; read errors already name their file.
    let ctx = |e: anyhow::Error| {
        if e.is::<io::Error>() {
            e.context(format!("writing {}", path.display()))
        } else {
            e
        }
    };
    if path.as_os_str() == "-" {
        let mut out = io::stdout().lock();
        let r = body(&mut out).and_then(|()| Ok(out.flush()?));
        return quiet_broken_pipe(r.map_err(ctx));
    }
    let mut w = crate::atomic_file::AtomicFile::create(path)?;
    body(&mut w).map_err(ctx)?;
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
