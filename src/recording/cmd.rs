//! The recording subcommands' command lines. `main` flattens
//! `RecordingCommand` into its own subcommand enum and calls `run`.

use std::path::PathBuf;
use std::time::Duration;

use anyhow::{anyhow, Result};

use crate::aggregation::Filter;
use crate::cli::SamplingArgs;
use crate::dimensions;
use crate::output::Format;

#[derive(Debug, clap::Subcommand)]
pub enum RecordingCommand {
    /// Sample headless and append snapshots to a recording file.
    Record(RecordArgs),
    /// Summarize recordings: samples grouped by dimensions (like batch mode).
    Report(ReportArgs),
    /// Convert recordings to xcapture-compatible CSV, CSV, JSON lines or folded stacks.
    Export(ExportArgs),
    /// Open recordings in the interactive screen, without root (the report when not on a terminal).
    Replay(ReplayArgs),
}

impl RecordingCommand {
    pub fn run(self) -> Result<()> {
        match self {
            RecordingCommand::Record(a) => super::record::run_record(a),
            RecordingCommand::Report(a) => super::report::run_report(a),
            RecordingCommand::Export(a) => super::export::run_export(a),
            RecordingCommand::Replay(a) => super::report::run_replay(a),
        }
    }
}

#[derive(Debug, clap::Args)]
pub struct RecordArgs {
    /// Recording file to append to (created mode 0600 if absent).
    #[arg(short, long, value_name = "FILE")]
    pub output: PathBuf,
    /// Stop after this long (e.g. 30s, 2h); default: until SIGINT/SIGTERM.
    #[arg(short, long, value_parser = humantime::parse_duration)]
    pub duration: Option<Duration>,
    /// Start a new file every period (e.g. 1h), named FILE's stem + -YYYYmmdd-HHMMSS.
    #[arg(long, value_parser = humantime::parse_duration, value_name = "DURATION")]
    pub rotate: Option<Duration>,
    #[command(flatten)]
    pub sampling: SamplingArgs,
}

/// Which samples of the recordings to look at.
#[derive(Debug, Clone, clap::Args)]
pub struct Selection {
    /// Recording files (rotated parts, several hosts' files...): merged in time order.
    #[arg(required = true, value_name = "FILE")]
    pub files: Vec<PathBuf>,
    /// Only samples matching DIM=VALUE, DIM!=VALUE or DIM~TEXT (repeatable).
    #[arg(short = 'w', long = "where", value_name = "FILTER", value_parser = parse_filter)]
    pub filters: Vec<Filter>,
    /// Start: local time (2026-11-29T12:00:00) or offset from the recording's start (10m).
    #[arg(long, value_name = "TIME")]
    pub from: Option<String>,
    /// End (exclusive): local time or offset from the recording's start.
    #[arg(long, value_name = "TIME")]
    pub to: Option<String>,
}

#[derive(Debug, clap::Args)]
pub struct ReportArgs {
    #[command(flatten)]
    pub sel: Selection,
    /// Group by these dimensions (see --list-dimensions).
    #[arg(short = 'g', long = "group-by", value_name = "DIMS", default_value = dimensions::DEFAULT_GROUP_BY,
          value_parser = parse_dims)]
    pub group_by: Dims,
    /// table: grouped summary; csv/json: one row per matching sample.
    #[arg(long, value_enum, default_value = "table")]
    pub format: Format,
}

#[derive(Debug, clap::Args)]
pub struct ExportArgs {
    #[command(flatten)]
    pub sel: Selection,
    /// Output format.
    #[arg(long, value_enum)]
    pub format: ExportFormat,
    /// Output: a directory for xcapture-csv, a file otherwise ('-' for stdout).
    #[arg(short, long, value_name = "OUT")]
    pub output: PathBuf,
}

#[derive(Debug, clap::Args)]
pub struct ReplayArgs {
    #[command(flatten)]
    pub sel: Selection,
    #[command(flatten)]
    pub ui: crate::cli::UiArgs,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum ExportFormat {
    /// xcapture v3 layout: hourly xcapture_samples/kstacks/ustacks/cgroups CSV files.
    XcaptureCsv,
    /// One row per thread sample, every dimension.
    Csv,
    /// One JSON object per thread sample (JSON lines), every dimension.
    Json,
    /// Kernel stacks as `root;...;leaf count` lines for flame graph tools.
    Folded,
}

/// Parsed dimension list, kept as a newtype so clap can hold it.
#[derive(Debug, Clone)]
pub struct Dims(pub Vec<&'static dimensions::Dimension>);

fn parse_dims(s: &str) -> Result<Dims, String> {
    dimensions::parse_list(s).map(Dims)
}

fn parse_filter(s: &str) -> Result<Filter, String> {
    Filter::parse(s)
}

/// Parses `--from/--to` once the recording's first snapshot time is known.
pub fn time_window(sel: &Selection, start_ns: u64) -> Result<(u64, u64)> {
    let bound = |t: &Option<String>, default| match t {
        Some(t) => super::timefmt::parse_bound(t, start_ns).map_err(|e| anyhow!(e)),
        None => Ok(default),
    };
    Ok((bound(&sel.from, 0)?, bound(&sel.to, u64::MAX)?))
}
