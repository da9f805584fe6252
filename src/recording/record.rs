//! `xtop record`: the live sampler's snapshots appended to a recording until
//! SIGINT/SIGTERM or `--duration`, flushed and fsynced on the way out.

use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use anyhow::{bail, Context, Result};
use crossbeam_channel::{Receiver, RecvTimeoutError};
use signal_hook::consts::{SIGINT, SIGTERM};

use super::cmd::RecordArgs;
use super::rotate::{Reserved, Rotating};
use crate::model::{Session, Snapshot};
use crate::sampler::Sampler;

/// How often written frames are forced to disk: bounds loss on power failure.
const SYNC_EVERY: Duration = Duration::from_secs(10);
/// How long a wait for a snapshot may delay noticing a signal or the deadline.
const POLL: Duration = Duration::from_millis(200);

#[derive(Debug, Default)]
pub struct RecordStats {
    pub snapshots: u64,
    pub samples: u64,
    /// Snapshots the sampler dropped because the writer was behind.
    pub dropped: u64,
    pub files: Vec<PathBuf>,
    /// The sampler closed its channel: it stopped on its own.
    pub sampler_ended: bool,
}

pub fn run_record(args: RecordArgs) -> Result<()> {
    let stop = Arc::new(AtomicBool::new(false));
    for sig in [SIGINT, SIGTERM] {
        // The first signal asks for a clean stop; a second one while we flush exits at once.
        signal_hook::flag::register_conditional_shutdown(sig, 1, stop.clone())?;
        signal_hook::flag::register(sig, stop.clone())?;
    }
    // Before BPF loads: a bad path or a second recorder on the same file or
    // rotation set fails at once, with nothing sampled.
    let files = Rotating::reserve(&args.output, args.rotate, now_ns())?;
    let sampler = Sampler::start(args.sampling.options())?;
    for w in sampler.warnings() {
        eprintln!("xtop: warning: {w}");
    }
    let session = sampler.session().clone();
    let notices = || sampler.take_notices();
    let result = record_loop(
        files,
        args.duration,
        &session,
        sampler.receiver(),
        &notices,
        &stop,
    );
    // The sampler's own error says why a recording ended early; it goes first.
    let stopped = sampler.stop();
    let stats = match (result, stopped) {
        (Ok(stats), Ok(())) => stats,
        (Ok(stats), Err(e)) => {
            return Err(e.context(format!(
                "sampling failed after {} snapshots were saved",
                stats.snapshots
            )))
        }
        (Err(e), _) => return Err(e),
    };
    let files: Vec<String> = stats.files.iter().map(|f| f.display().to_string()).collect();
    eprintln!(
        "xtop: recorded {} snapshots ({} thread samples) to {}",
        stats.snapshots,
        stats.samples,
        files.join(", ")
    );
    if stats.dropped > 0 {
        eprintln!(
            "xtop: warning: the sampler dropped {} snapshots (the count is in the file)",
            stats.dropped
        );
    }
    if stats.sampler_ended {
        bail!(
            "the sampler stopped unexpectedly; {} snapshots were saved",
            stats.snapshots
        );
    }
    Ok(())
}

fn now_ns() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos() as u64)
}

/// Writes snapshots from `rx` into the reserved files until `stop`, the
/// deadline, or the sampler ends (then `sampler_ended` is set); the
/// sampler's `notices` go to stderr as they come.
pub fn record_loop(
    files: Reserved,
    duration: Option<Duration>,
    session: &Session,
    rx: &Receiver<Snapshot>,
    notices: &dyn Fn() -> Vec<String>,
    stop: &AtomicBool,
) -> Result<RecordStats> {
    let mut sink = files.start(session)?;
    let deadline = duration.map(|d| Instant::now() + d);
    let mut stats = RecordStats::default();
    let mut last_dropped = 0;
    let mut last_sync = Instant::now();
    let mut write = |sink: &mut Rotating, snap: Snapshot, stats: &mut RecordStats| -> Result<()> {
        sink.write(&snap)?;
        for w in sink.writer().warnings.drain(..).chain(notices()) {
            eprintln!("xtop: warning: {w}");
        }
        stats.snapshots += 1;
        stats.samples += snap.samples.len() as u64;
        // The sampler's counter is cumulative.
        stats.dropped += snap.dropped.saturating_sub(last_dropped);
        last_dropped = snap.dropped;
        Ok(())
    };
    let ended = loop {
        let left = deadline.map(|d| d.saturating_duration_since(Instant::now()));
        if stop.load(Ordering::Relaxed) || left == Some(Duration::ZERO) {
            break false;
        }
        match rx.recv_timeout(left.map_or(POLL, |l| l.min(POLL))) {
            Ok(snap) => write(&mut sink, snap, &mut stats)?,
            Err(RecvTimeoutError::Timeout) => {}
            Err(RecvTimeoutError::Disconnected) => break true,
        }
        if last_sync.elapsed() >= SYNC_EVERY {
            sink.writer().flush()?;
            last_sync = Instant::now();
        }
    };
    // Passes already taken are complete data: keep them.
    while let Ok(snap) = rx.try_recv() {
        write(&mut sink, snap, &mut stats)?;
    }
    stats.files = sink.files.clone();
    stats.sampler_ended = ended;
    sink.finish().context("finishing the recording")?;
    Ok(stats)
}
