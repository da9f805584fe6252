//! The sampler thread: once per interval it walks every thread through the BPF
//! task iterator, decodes the records into a `Snapshot` and sends it over a
//! bounded channel. It never waits for a slow consumer: when the channel is
//! full the oldest unsent snapshot is dropped and counted.

mod bpf;
pub mod decode;
mod privilege;
mod procinfo;
mod profile;

#[allow(clippy::all, dead_code, unused_imports)]
mod skel {
    include!(concat!(env!("OUT_DIR"), "/xtop.skel.rs"));
}

use std::mem::MaybeUninit;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use anyhow::{anyhow, Context, Result};
use crossbeam_channel::{bounded, Receiver, RecvTimeoutError, Sender, TrySendError};

use crate::appwait::AppWatch;
use crate::model::{Arch, PassCost, Session, Snapshot};
use crate::symbols::{KernelSymbols, UserSymbols};

pub use privilege::check as check_privileges;

/// Snapshots the channel holds before the oldest is dropped.
const CHANNEL_DEPTH: usize = 8;

#[derive(Clone, Debug, PartialEq)]
pub struct SamplerOptions {
    pub interval: Duration,
    /// Also report sleeping, idle and parked threads.
    pub all: bool,
    /// Only these processes (thread group ids); empty for all.
    pub pids: Vec<u32>,
    /// Attach sys_enter/sys_exit: time-in-syscall and syscalls of running threads.
    /// Off by default: on the reference machine the syscall tracepoints alone
    /// add ~100 ns to every syscall of every thread (benches/sampler.rs).
    pub track_syscalls: bool,
    /// Walk user stacks of off-CPU threads at each pass and of running
    /// threads in the on-CPU profile.
    pub user_stacks: bool,
    /// How user stacks are unwound (off CPU at the pass, on CPU in the profile).
    pub unwind: Unwind,
    /// On-CPU profile rate per CPU (stacks of running threads); 0: off.
    pub profile_hz: u32,
    /// Name the file or path each thread's current syscall works on.
    pub file_names: bool,
    /// Read programs' own wait states (src/appwait).
    pub app_waits: bool,
}

/// How user stacks are unwound.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, clap::ValueEnum)]
pub enum Unwind {
    /// A window of the stack, unwound in userspace with the binaries' CFI.
    #[default]
    Cfi,
    /// Frame pointers, followed in the kernel.
    Fp,
}

/// Default on-CPU profile rate: a prime, so it does not beat with periodic work.
pub const DEFAULT_PROFILE_HZ: u32 = 49;
pub use profile::MAX_HZ as MAX_PROFILE_HZ;

impl Default for SamplerOptions {
    fn default() -> Self {
        SamplerOptions {
            interval: Duration::from_secs(1),
            all: false,
            pids: vec![],
            track_syscalls: false,
            user_stacks: true,
            unwind: Unwind::Cfi,
            profile_hz: DEFAULT_PROFILE_HZ,
            file_names: true,
            app_waits: true,
        }
    }
}

impl SamplerOptions {
    /// The options as command-line flags, recorded in the session.
    pub fn describe(&self) -> String {
        let mut v = vec![format!("-i {}", humantime::format_duration(self.interval))];
        if self.all {
            v.push("--all".into());
        }
        if !self.pids.is_empty() {
            let pids: Vec<String> = self.pids.iter().map(u32::to_string).collect();
            v.push(format!("-p {}", pids.join(",")));
        }
        if self.track_syscalls {
            v.push("--track-syscalls".into());
        }
        if !self.user_stacks {
            v.push("--no-user-stacks".into());
        } else if self.unwind == Unwind::Fp {
            v.push("--unwind fp".into());
        }
        if self.profile_hz != DEFAULT_PROFILE_HZ {
            v.push(format!("--profile-hz {}", self.profile_hz));
        }
        if !self.file_names {
            v.push("--no-file-names".into());
        }
        if !self.app_waits {
            v.push("--no-app-wait".into());
        }
        v.join(" ")
    }
}

/// Shared between the sampler thread and its owner.
#[derive(Default)]
struct Control {
    /// Dropped to stop the sampler, which notices in its wait between passes: polling
    /// instead would cost a context switch every few ms, all day.
    wake: Mutex<Option<Sender<()>>>,
    all: AtomicBool,
    dropped: AtomicU64,
    states: Mutex<(u64, u64)>,
    error: Mutex<Option<String>>,
    /// Warnings raised while sampling (a server found later that xtop
    /// cannot read), until the owner takes them.
    notices: Mutex<Vec<String>>,
}

pub struct Sampler {
    session: Session,
    rx: Receiver<Snapshot>,
    control: Arc<Control>,
    thread: Option<JoinHandle<()>>,
    warnings: Vec<String>,
}

impl Sampler {
    /// Loads and attaches the BPF programs (errors come back here, as one
    /// line) and starts sampling; the first snapshot follows at once.
    pub fn start(opts: SamplerOptions) -> Result<Sampler> {
        privilege::check()?;
        let control = Arc::new(Control::default());
        control.all.store(opts.all, Ordering::Relaxed);
        let (tx, rx) = bounded(CHANNEL_DEPTH);
        let (ready_tx, ready_rx) = bounded(1);
        let (wake_tx, wake_rx) = bounded(1);
        *control.wake.lock().unwrap_or_else(|e| e.into_inner()) = Some(wake_tx);
        let session = session_for(&opts);
        let thread = {
            let (control, rx, opts, ncpus) = (control.clone(), rx.clone(), opts.clone(), session.ncpus);
            std::thread::Builder::new()
                .name("xtop-sampler".into())
                .spawn(move || run(opts, ncpus, tx, rx, control, ready_tx, wake_rx))
                .context("cannot start the sampler thread")?
        };
        let warnings = match ready_rx.recv() {
            Ok(Ok(w)) => w,
            Ok(Err(e)) => {
                let _ = thread.join();
                return Err(anyhow!(e));
            }
            Err(_) => return Err(anyhow!("the sampler thread died while loading")),
        };
        Ok(Sampler {
            session,
            rx,
            control,
            thread: Some(thread),
            warnings,
        })
    }

    pub fn session(&self) -> &Session {
        &self.session
    }

    pub fn receiver(&self) -> &Receiver<Snapshot> {
        &self.rx
    }

    /// Hooks that could not attach, one line each.
    pub fn warnings(&self) -> &[String] {
        &self.warnings
    }

    /// Warnings raised since the last call, while sampling, one line each.
    pub fn take_notices(&self) -> Vec<String> {
        std::mem::take(&mut *self.control.notices.lock().unwrap_or_else(|e| e.into_inner()))
    }

    /// Switches between active-only and all threads from the next pass on.
    pub fn set_all(&self, all: bool) {
        self.control.all.store(all, Ordering::Relaxed);
    }

    pub fn dropped(&self) -> u64 {
        self.control.dropped.load(Ordering::Relaxed)
    }

    /// Per-thread kernel states created and freed so far.
    pub fn thread_states(&self) -> (u64, u64) {
        *self.control.states.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Stops the thread; returns the error that ended sampling, if any.
    pub fn stop(mut self) -> Result<()> {
        self.shutdown()
    }

    fn shutdown(&mut self) -> Result<()> {
        drop(self.control.wake.lock().unwrap_or_else(|e| e.into_inner()).take());
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
        match self
            .control
            .error
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .take()
        {
            Some(e) => Err(anyhow!(e)),
            None => Ok(()),
        }
    }
}

impl Drop for Sampler {
    fn drop(&mut self) {
        let _ = self.shutdown();
    }
}

fn session_for(opts: &SamplerOptions) -> Session {
    // SAFETY: uname fills the zeroed struct we own.
    let mut u: libc::utsname = unsafe { std::mem::zeroed() };
    let (host, kernel) = if unsafe { libc::uname(&mut u) } == 0 {
        let s = |f: &[libc::c_char]| {
            let bytes: Vec<u8> = f.iter().take_while(|&&c| c != 0).map(|&c| c as u8).collect();
            String::from_utf8_lossy(&bytes).into_owned()
        };
        (s(&u.nodename), s(&u.release))
    } else {
        ("unknown".into(), "unknown".into())
    };
    Session {
        host,
        kernel,
        arch: Arch::native(),
        ncpus: std::thread::available_parallelism()
            .map_or(1, |n| n.get() as u32)
            .max(online_cpus()),
        interval: opts.interval,
        xtop_version: env!("CARGO_PKG_VERSION").into(),
        options: opts.describe(),
    }
}

fn online_cpus() -> u32 {
    // SAFETY: sysconf has no preconditions.
    u32::try_from(unsafe { libc::sysconf(libc::_SC_NPROCESSORS_ONLN) }).unwrap_or(1)
}

/// CPU time (user + system) of the whole xtop process.
fn process_cpu_ns() -> u64 {
    // SAFETY: getrusage fills the zeroed struct we own.
    let mut ru: libc::rusage = unsafe { std::mem::zeroed() };
    if unsafe { libc::getrusage(libc::RUSAGE_SELF, &mut ru) } != 0 {
        return 0;
    }
    let tv = |t: libc::timeval| t.tv_sec as u64 * 1_000_000_000 + t.tv_usec as u64 * 1000;
    tv(ru.ru_utime) + tv(ru.ru_stime)
}

fn wall_ns() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos() as u64)
}

type Ready = Sender<Result<Vec<String>, String>>;

fn run(
    opts: SamplerOptions,
    ncpus: u32,
    tx: Sender<Snapshot>,
    rx: Receiver<Snapshot>,
    control: Arc<Control>,
    ready: Ready,
    wake: Receiver<()>,
) {
    let mut storage = MaybeUninit::uninit();
    let mut bpf =
        match bpf::Bpf::load(&mut storage, &opts).and_then(|mut b| b.set_pid_filter(&opts.pids).map(|_| b)) {
            Ok(b) => b,
            Err(e) => {
                let _ = ready.send(Err(format!("{e:#}")));
                return;
            }
        };
    let mut pass = Pass::default();
    // Servers already running are read from the first pass on.
    if opts.app_waits {
        pass.apps.scan();
        pass.register_apps(&mut bpf);
    }
    let mut warnings = std::mem::take(&mut bpf.warnings);
    warnings.extend(pass.apps.take_warnings());
    let _ = ready.send(Ok(warnings));

    let mut next = Instant::now();
    let mut last_cpu = process_cpu_ns();
    let mut io_full_told = false;
    loop {
        bpf.set_emit_all(control.all.load(Ordering::Relaxed));
        bpf.refresh_profile();
        let mut snap = match pass.run(&mut bpf, opts.interval, ncpus) {
            Ok(s) => s,
            Err(e) => {
                *control.error.lock().unwrap_or_else(|e| e.into_inner()) = Some(format!("{e:#}"));
                return;
            }
        };
        let mut notices = pass.apps.take_warnings();
        // Once: the first says what it means, and a count would repeat every pass.
        if !io_full_told && bpf.io_untracked() > 0 {
            io_full_told = true;
            notices.push(
                "more block I/O requests in flight than xtop tracks (16384): some threads waiting on \
                 them show device '-'"
                    .into(),
            );
        }
        if !notices.is_empty() {
            control
                .notices
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .extend(notices);
        }
        let cpu = process_cpu_ns();
        snap.cost.cpu_ns = cpu.saturating_sub(last_cpu);
        last_cpu = cpu;
        *control.states.lock().unwrap_or_else(|e| e.into_inner()) = bpf.state_counts();
        snap.dropped = control.dropped.load(Ordering::Relaxed);
        if !send_dropping_oldest(&tx, &rx, snap, &control.dropped) {
            return; // every receiver is gone
        }
        next += opts.interval;
        let now = Instant::now();
        if next < now {
            next = now; // fell behind (suspend, overload): resume the cadence from here
        }
        // Returns early only when the owner stops us (drops the sender).
        if wake.recv_deadline(next) != Err(RecvTimeoutError::Timeout) {
            return;
        }
    }
}

/// Sends without blocking; if the channel is full, drops its oldest snapshot.
fn send_dropping_oldest(
    tx: &Sender<Snapshot>,
    rx: &Receiver<Snapshot>,
    mut snap: Snapshot,
    dropped: &AtomicU64,
) -> bool {
    loop {
        match tx.try_send(snap) {
            Ok(()) => return true,
            Err(TrySendError::Disconnected(_)) => return false,
            Err(TrySendError::Full(s)) => {
                if rx.try_recv().is_ok() {
                    dropped.fetch_add(1, Ordering::Relaxed);
                }
                snap = s;
            }
        }
    }
}

/// Buffers and caches that live across passes.
#[derive(Default)]
struct Pass {
    buf: Vec<u8>,
    procs: procinfo::ProcCache,
    syms: KernelSymbols,
    usyms: UserSymbols,
    memo: decode::StackMemo,
    apps: AppWatch,
    devices: crate::blockio::DeviceNames,
    gen: u32,
}

impl Pass {
    /// Hands the processes found publishing a wait state to the kernel side.
    fn register_apps(&mut self, bpf: &mut bpf::Bpf) {
        for r in self.apps.take_pending() {
            bpf.register_app(&r);
        }
    }

    fn run(&mut self, bpf: &mut bpf::Bpf, interval: Duration, ncpus: u32) -> Result<Snapshot> {
        // Generation 1 is never used: fresh per-thread state holds 0, and 0 + 1 must not match.
        self.gen = self.gen.wrapping_add(1).max(2);
        bpf.set_pass_gen(self.gen);
        let time_ns = wall_ns();
        let t0 = Instant::now();
        bpf.walk(&mut self.buf)?;
        let t1 = Instant::now();
        self.procs.begin_pass();
        self.usyms.begin_pass();
        self.apps.begin_pass();
        let mut samples = Vec::new();
        let mut ctx = decode::Ctx {
            procs: &mut self.procs,
            syms: &mut self.syms,
            usyms: &mut self.usyms,
            memo: &mut self.memo,
            apps: &mut self.apps,
            devices: &mut self.devices,
        };
        decode::parse_records(&self.buf, |r, t| samples.push(decode::decode(r, t, &mut ctx)))
            .map_err(|e| anyhow!("malformed task iterator output: {e}"))?;
        self.memo.end_pass();
        if bpf.reads_apps() {
            self.register_apps(bpf);
        } else {
            self.apps.take_pending();
        }
        let cost = PassCost {
            walk_ns: (t1 - t0).as_nanos() as u64,
            decode_ns: t1.elapsed().as_nanos() as u64,
            cpu_ns: 0,
        };
        Ok(Snapshot {
            time_ns,
            interval,
            ncpus,
            arch: Arch::native(),
            samples,
            cost,
            dropped: 0,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::fixture::snapshot;

    #[test]
    fn full_channel_drops_the_oldest_and_counts_it() {
        let (tx, rx) = bounded(2);
        let dropped = AtomicU64::new(0);
        for i in 0..5 {
            assert!(send_dropping_oldest(&tx, &rx, snapshot(i, vec![]), &dropped));
        }
        assert_eq!(dropped.load(Ordering::Relaxed), 3);
        let left: Vec<u64> = rx.try_iter().map(|s| s.time_ns).collect();
        assert_eq!(left, [snapshot(3, vec![]).time_ns, snapshot(4, vec![]).time_ns]);
    }

    #[test]
    fn options_describe_themselves_as_flags() {
        let o = SamplerOptions {
            all: true,
            pids: vec![1, 2],
            track_syscalls: true,
            ..Default::default()
        };
        assert_eq!(o.describe(), "-i 1s --all -p 1,2 --track-syscalls");
        let o = SamplerOptions {
            user_stacks: false,
            profile_hz: 0,
            file_names: false,
            app_waits: false,
            ..Default::default()
        };
        assert_eq!(
            o.describe(),
            "-i 1s --no-user-stacks --profile-hz 0 --no-file-names --no-app-wait"
        );
    }
}
