//! Command-line interface: flags shared by live modes, and argument parsing helpers.

use std::time::Duration;

use clap::{Args, Parser};

use crate::output::Format;
use crate::sampler::{SamplerOptions, Unwind};

#[derive(Parser, Debug)]
#[command(
    name = "xtop",
    version,
    about = "Active session history for Linux threads: what every thread is doing, second by second"
)]
pub struct Cli {
    /// Batch mode: print text each interval instead of the interactive screen.
    #[arg(short = 'b', long)]
    pub batch: bool,
    /// Batch mode: stop after COUNT intervals.
    #[arg(short = 'n', long, value_name = "COUNT")]
    pub count: Option<u64>,
    /// Group by these dimensions (comma-separated; see --list-dimensions).
    #[arg(short = 'g', long = "group-by", value_name = "DIMS", default_value = crate::dimensions::DEFAULT_GROUP_BY)]
    pub group_by: String,
    /// Only samples matching DIM=VALUE, DIM!=VALUE (by value: comm exactly, numbers as
    /// numbers, states in any case) or DIM~TEXT (case-insensitive substring); repeatable.
    #[arg(short = 'w', long = "where", value_name = "FILTER")]
    pub filters: Vec<String>,
    /// Batch output: an aggregated table per interval, or one CSV row / JSON line per thread sample.
    #[arg(long, value_enum, default_value = "table")]
    pub format: Format,
    /// List the dimensions usable in -g, -w and exports, and exit.
    #[arg(long)]
    pub list_dimensions: bool,
    #[command(flatten)]
    pub ui: UiArgs,
    #[command(flatten)]
    pub sampling: SamplingArgs,
    /// record, report, export, replay (see `xtop help COMMAND`).
    #[command(subcommand)]
    pub command: Option<crate::recording::RecordingCommand>,
}

/// Flags of the interactive screen (live and replay).
#[derive(Args, Debug, Clone)]
pub struct UiArgs {
    /// How much history the screen keeps for `[`/`]`, e.g. 1h, 30m.
    #[arg(long, value_name = "DUR", default_value = "1h", value_parser = humantime::parse_duration)]
    pub history: Duration,
    /// Where `e` writes its exports.
    #[arg(long, value_name = "DIR", default_value = ".")]
    pub export_dir: std::path::PathBuf,
}

impl UiArgs {
    pub fn options(
        &self,
        group_by: Vec<&'static crate::dimensions::Dimension>,
        filters: Vec<crate::aggregation::Filter>,
    ) -> crate::ui::UiOptions {
        crate::ui::UiOptions {
            history: self.history,
            export_dir: self.export_dir.clone(),
            group_by,
            filters,
            warnings: Vec::new(),
        }
    }
}

/// Flags of every mode that samples the live system.
#[derive(Args, Debug, Clone)]
pub struct SamplingArgs {
    /// Sampling interval, e.g. 1s, 500ms, 5m (100ms to 1h).
    #[arg(short = 'i', long, value_name = "DUR", default_value = "1s", value_parser = parse_interval)]
    pub interval: Duration,
    /// Also report sleeping and idle threads, not just active ones.
    #[arg(short = 'a', long)]
    pub all: bool,
    /// Only these processes (comma-separated PIDs).
    #[arg(short = 'p', long = "pid", value_name = "PID,...", value_delimiter = ',')]
    pub pids: Vec<u32>,
    /// Hook syscall entry/exit: adds time-in-syscall and the syscall of threads
    /// running on a CPU, at ~100 ns per syscall (see README). Off by default: the
    /// syscall of every off-CPU thread is read from its saved registers for free.
    #[arg(long, overrides_with = "no_track_syscalls")]
    pub track_syscalls: bool,
    /// Do not hook syscall entry/exit (the default).
    #[arg(long, overrides_with = "track_syscalls")]
    pub no_track_syscalls: bool,
    /// Do not walk user stacks (kernel stacks only).
    #[arg(long)]
    pub no_user_stacks: bool,
    /// How user stacks are unwound, off CPU and on: `cfi` copies a window of the stack
    /// and unwinds it with the binaries' call frame information (works without
    /// frame pointers); `fp` follows frame pointers in the kernel (cheaper, but
    /// stops at the first function built without them).
    #[arg(long, value_name = "HOW", value_enum, default_value_t = Unwind::Cfi)]
    pub unwind: Unwind,
    /// On-CPU profile rate per CPU, for the stacks of running threads (0: off).
    #[arg(long, value_name = "HZ", default_value_t = crate::sampler::DEFAULT_PROFILE_HZ, value_parser = parse_profile_hz)]
    pub profile_hz: u32,
    /// Do not name the file or path each thread's syscall works on (the
    /// `filename` column shows '?').
    #[arg(long)]
    pub no_file_names: bool,
    /// Do not read programs' own wait states (PostgreSQL's wait events; the
    /// `app_wait` columns show '?' for them).
    #[arg(long)]
    pub no_app_wait: bool,
}

impl SamplingArgs {
    pub fn options(&self) -> SamplerOptions {
        SamplerOptions {
            interval: self.interval,
            all: self.all,
            pids: self.pids.clone(),
            track_syscalls: self.track_syscalls && !self.no_track_syscalls,
            user_stacks: !self.no_user_stacks,
            unwind: self.unwind,
            profile_hz: self.profile_hz,
            file_names: !self.no_file_names,
            app_waits: !self.no_app_wait,
        }
    }
}

pub fn parse_interval(s: &str) -> Result<Duration, String> {
    let d = humantime::parse_duration(s).map_err(|e| format!("{e} (examples: 1s, 250ms, 5m)"))?;
    if d < Duration::from_millis(100) || d > Duration::from_secs(3600) {
        return Err("must be between 100ms and 1h".into());
    }
    Ok(d)
}

pub fn parse_profile_hz(s: &str) -> Result<u32, String> {
    let max = crate::sampler::MAX_PROFILE_HZ;
    match s.parse::<u32>() {
        Ok(hz) if hz <= max => Ok(hz),
        _ => Err(format!("must be a whole number from 0 (off) to {max}")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn interval_bounds() {
        assert_eq!(parse_interval("250ms"), Ok(Duration::from_millis(250)));
        assert_eq!(parse_interval("1h"), Ok(Duration::from_secs(3600)));
        assert!(parse_interval("50ms").unwrap_err().contains("between"));
        assert!(parse_interval("2h").is_err());
        assert!(parse_interval("soon").is_err());
    }

    #[test]
    fn parses_batch_flags() {
        let c = Cli::try_parse_from([
            "xtop", "-b", "-n", "3", "-i", "200ms", "-a", "-p", "1,2", "-g", "state", "--format", "csv",
        ])
        .unwrap();
        assert!(c.batch && c.sampling.all);
        assert_eq!(c.count, Some(3));
        assert_eq!(c.sampling.pids, [1, 2]);
        assert_eq!(c.format, Format::Csv);
        assert_eq!(c.sampling.options().interval, Duration::from_millis(200));
        assert!(!c.sampling.options().track_syscalls, "off by default");
        let c = Cli::try_parse_from(["xtop", "--no-track-syscalls", "--track-syscalls"]).unwrap();
        assert!(c.sampling.options().track_syscalls, "last flag wins");
    }

    #[test]
    fn stack_flags() {
        let o = Cli::try_parse_from(["xtop"]).unwrap().sampling.options();
        assert!(o.user_stacks);
        assert_eq!(o.profile_hz, crate::sampler::DEFAULT_PROFILE_HZ);
        let c = Cli::try_parse_from(["xtop", "--no-user-stacks", "--profile-hz", "0"]).unwrap();
        assert!(!c.sampling.options().user_stacks);
        assert_eq!(c.sampling.options().profile_hz, 0);
        assert_eq!(o.unwind, Unwind::Cfi);
        let c = Cli::try_parse_from(["xtop", "--unwind", "fp"]).unwrap();
        assert_eq!(c.sampling.options().unwind, Unwind::Fp);
        assert!(Cli::try_parse_from(["xtop", "--unwind", "dwarf"]).is_err());
        assert_eq!(parse_profile_hz("1000"), Ok(1000));
        for bad in ["1001", "-1", "fast", ""] {
            assert!(
                parse_profile_hz(bad).unwrap_err().contains("0 (off) to 1000"),
                "{bad}"
            );
        }
    }
}
