//! `xtop -b`: like `top -b`, text on stdout each interval.

use std::io::{self, Write};

use anyhow::Result;

use crate::aggregation::{aggregate, matches_all, Filter};
use crate::dimensions::Dimension;
use crate::model::{Reach, Snapshot};
use crate::output::{self, Format};
use crate::sampler::{Sampler, SamplerOptions};
use crate::value::format_local_time;

pub struct BatchOptions {
    pub count: Option<u64>,
    pub dims: Vec<&'static Dimension>,
    pub filters: Vec<Filter>,
    pub format: Format,
}

pub fn run(sampling: SamplerOptions, opts: BatchOptions) -> Result<()> {
    let sampler = Sampler::start(sampling)?;
    for w in sampler.warnings() {
        eprintln!("xtop: warning: {w}");
    }
    let mut out = io::BufWriter::new(io::stdout().lock());
    if opts.format == Format::Csv {
        output::write_csv_header(&mut out)?;
    }
    let mut n = 0;
    while opts.count.is_none_or(|c| n < c) {
        let Ok(mut snap) = sampler.receiver().recv() else {
            break;
        };
        for w in sampler.take_notices() {
            eprintln!("xtop: warning: {w}");
        }
        if !opts.filters.is_empty() {
            let samples = std::mem::take(&mut snap.samples);
            snap.samples = samples
                .into_iter()
                .filter(|s| matches_all(&opts.filters, &snap, s))
                .collect();
        }
        write_snapshot(&mut out, &snap, &opts)?;
        out.flush()?;
        n += 1;
    }
    drop(out);
    sampler.stop()
}

fn write_snapshot(out: &mut impl Write, snap: &Snapshot, opts: &BatchOptions) -> io::Result<()> {
    match opts.format {
        Format::Csv => output::write_csv_rows(out, snap),
        Format::Json => output::write_json_rows(out, snap),
        Format::Table => {
            writeln!(out, "{}", heading(snap))?;
            output::write_table(out, &aggregate([snap], &opts.dims, &[]), &opts.dims)?;
            writeln!(out)
        }
    }
}

/// One line of context above each table, including what sampling cost and
/// how many of the (filtered) samples' user stacks reached their root.
pub fn heading(snap: &Snapshot) -> String {
    let pct = |ns: u64| 100.0 * ns as f64 / snap.interval.as_nanos().max(1) as f64;
    let mut line = format!(
        "{}  threads {}  walk {}us decode {}us  xtop cpu {:.2}%  dropped {}",
        format_local_time(snap.time_ns),
        snap.samples.len(),
        snap.cost.walk_ns / 1000,
        snap.cost.decode_ns / 1000,
        pct(snap.cost.cpu_ns),
        snap.dropped
    );
    if let Some(r) = Reach::of(&snap.samples).summary() {
        line.push_str("  ");
        line.push_str(&r);
    }
    line
}

#[cfg(test)]
mod tests {
    use super::heading;
    use crate::model::fixture::{sample, snapshot};
    use crate::model::State;

    #[test]
    fn heading_says_how_far_the_samples_user_stacks_reach() {
        let with = sample(1, 1, "db", State::Disk, Some(0));
        let without = sample(2, 1, "db", State::Run, None);
        let line = heading(&snapshot(0, vec![with, without.clone()]));
        assert!(
            line.ends_with("  dropped 0  ustacks to root 1/1 (100%)"),
            "{line}"
        );
        let line = heading(&snapshot(0, vec![without]));
        assert!(line.ends_with("  dropped 0"), "{line}");
    }
}
