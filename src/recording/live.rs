//! The one seam between `xtop record` and the live BPF sampler
//! (`crate::sampler`, developed on main). Everything else in `record` works on
//! a session plus a channel of snapshots, and is tested that way.

use std::time::Duration;

use anyhow::{bail, Result};
use crossbeam_channel::Receiver;

use crate::model::{Session, Snapshot};

pub struct LiveOptions {
    pub interval: Duration,
    pub all: bool,
    pub pids: Vec<u32>,
    pub track_syscalls: bool,
}

/// A running sampler, seen as what `record` needs from it.
pub struct Live {
    pub session: Session,
    pub rx: Receiver<Snapshot>,
    stop: Box<dyn FnOnce() + Send>,
}

impl Live {
    pub fn stop(self) {
        (self.stop)()
    }
}

/// Loads the BPF programs and starts sampling.
///
/// Once `crate::sampler` is merged, the body becomes:
/// ```text
/// use crate::sampler::{Sampler, SamplerOptions};
/// let s = Sampler::start(SamplerOptions {
///     interval: opts.interval, all: opts.all, pids: opts.pids, track_syscalls: opts.track_syscalls,
/// })?;
/// Ok(Live { session: s.session().clone(), rx: s.receiver().clone(), stop: Box::new(move || s.stop()) })
/// ```
pub fn start(opts: LiveOptions) -> Result<Live> {
    let _ = (opts.interval, opts.all, opts.pids, opts.track_syscalls);
    bail!(
        "this build has no live sampler yet, so it cannot record (report, export and replay work)"
    )
}
