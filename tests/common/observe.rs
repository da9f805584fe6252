//! What xtop reports for the known-state workload, gathered through the
//! library or the CSV of the real binary, and the assertions shared by the
//! live end-to-end tests.

use std::collections::{BTreeSet, HashMap};
use std::process::{Command, Stdio};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use super::workload::{self as w, Workload};
use xtop::dimensions;
use xtop::model::{Snapshot, Stack};
use xtop::sampler::{Sampler, SamplerOptions};

/// The workload saturates the CPUs: one test at a time.
pub static SERIAL: Mutex<()> = Mutex::new(());

/// What xtop said about one thread in one pass, as text (the registry's own rendering).
#[derive(Debug, Clone)]
pub struct Obs {
    pub comm: String,
    pub tgid: String,
    pub state: String,
    pub syscall: String,
    pub so_far: String,
    /// The human rendering: '-' for no syscall, '?' for unknown.
    pub shown: String,
    pub runq_wait: String,
}

pub type ByComm = HashMap<String, Vec<Obs>>;

/// Runs xtop on CPU 0 with the RUNQ spinners: sampling from the spinner's CPU
/// would preempt it at every pass, and it would (rightly) show as RUNQ.
pub fn on_cpu0<T>(f: impl FnOnce() -> T + Send) -> T
where
    T: Send,
{
    std::thread::scope(|s| {
        s.spawn(|| {
            w::pin_to_cpu(0);
            f()
        })
        .join()
        .unwrap()
    })
}

/// The real sampler, started from CPU 0 (see `on_cpu0`); its thread inherits that CPU.
pub fn start_sampler(opts: SamplerOptions) -> Sampler {
    on_cpu0(|| Sampler::start(opts)).expect("BPF sampler must load (run as root)")
}

/// The sampler's next snapshot; a sampler that stalls fails the test.
pub fn next_snapshot(sampler: &Sampler) -> Snapshot {
    sampler
        .receiver()
        .recv_timeout(Duration::from_secs(30))
        .expect("a snapshot")
}

pub fn sample_live(opts: SamplerOptions, passes: usize) -> ByComm {
    let sampler = start_sampler(opts);
    let get = |name: &str| dimensions::find(name).unwrap();
    let mut by_comm = ByComm::new();
    for _ in 0..passes {
        let snap = next_snapshot(&sampler);
        for s in &snap.samples {
            let v = |n: &str| get(n).value(&snap, s).plain();
            let o = Obs {
                comm: v("comm"),
                tgid: v("tgid"),
                state: v("state"),
                syscall: v("syscall"),
                so_far: v("sysc_ns_so_far"),
                shown: get("syscall").value(&snap, s).to_string(),
                runq_wait: v("runq_wait_ns"),
            };
            by_comm.entry(o.comm.clone()).or_default().push(o);
        }
    }
    sampler.stop().unwrap();
    assert_sampler_unseen(&by_comm, std::process::id());
    by_comm
}

/// The thread running the walk is on a CPU at every pass by construction:
/// an artifact, never reported. (Other xtops on the box may be.)
fn assert_sampler_unseen(by: &ByComm, xtop_pid: u32) {
    let own = by.get("xtop-sampler").into_iter().flatten();
    assert!(
        own.clone().all(|o| o.tgid != xtop_pid.to_string()),
        "xtop reported its own sampling thread: {:?}",
        own.collect::<Vec<_>>()
    );
}

pub fn sample_cli(args: &[&str]) -> ByComm {
    let (pid, out) = on_cpu0(|| {
        let child = Command::new(env!("CARGO_BIN_EXE_xtop"))
            .args(args)
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        (child.id(), child.wait_with_output().unwrap())
    });
    assert!(
        out.status.success(),
        "xtop {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let by = parse_csv(&String::from_utf8(out.stdout).unwrap());
    assert_sampler_unseen(&by, pid);
    by
}

/// Rows of xtop's per-sample CSV (batch, report or export), by thread name.
/// One CSV row (RFC 4180 quoting: `"a,b"`, `""` for a quote; one row per line).
pub fn split_csv(line: &str) -> Vec<String> {
    let mut out = vec![String::new()];
    let mut quoted = false;
    let mut chars = line.chars().peekable();
    while let Some(c) = chars.next() {
        match (c, quoted) {
            ('"', true) if chars.peek() == Some(&'"') => {
                chars.next();
                out.last_mut().expect("a field").push('"');
            }
            ('"', _) => quoted = !quoted,
            (',', false) => out.push(String::new()),
            _ => out.last_mut().expect("a field").push(c),
        }
    }
    out
}

pub fn parse_csv(text: &str) -> ByComm {
    let mut lines = text.lines();
    let header: Vec<&str> = lines.next().expect("CSV header").split(',').collect();
    let col = |name: &str| {
        header
            .iter()
            .position(|h| *h == name)
            .unwrap_or_else(|| panic!("no column {name}"))
    };
    let (comm, tgid, state, syscall, so_far) = (
        col("COMM"),
        col("TGID"),
        col("STATE"),
        col("SYSCALL"),
        col("SYSC_NS_SO_FAR"),
    );
    let mut by_comm = ByComm::new();
    for line in lines {
        // Cmdlines and stack columns (Rust generics: `<A, B>`) hold commas: quoted fields.
        let f = split_csv(line);
        assert_eq!(f.len(), header.len(), "one record per line: {line}");
        let o = Obs {
            comm: f[comm].clone(),
            tgid: f[tgid].clone(),
            state: f[state].clone(),
            syscall: f[syscall].clone(),
            so_far: f[so_far].clone(),
            shown: String::new(),
            runq_wait: f[col("RUNQ_WAIT_NS")].clone(),
        };
        by_comm.entry(o.comm.clone()).or_default().push(o);
    }
    by_comm
}

pub fn states(by: &ByComm, comm: &str) -> BTreeSet<String> {
    by.get(comm)
        .into_iter()
        .flatten()
        .map(|o| o.state.clone())
        .collect()
}

pub fn assert_only(by: &ByComm, comm: &str, allowed: &[&str]) {
    let seen = states(by, comm);
    assert!(
        !seen.is_empty(),
        "{comm} never reported; saw {:?}",
        by.keys().collect::<Vec<_>>()
    );
    assert!(
        seen.iter().all(|s| allowed.contains(&s.as_str())),
        "{comm}: states {seen:?}, allowed {allowed:?}"
    );
}

/// Every `state` sample of `comm` is in `syscall`, or unknown: a thread that
/// got a CPU between the walk's reads of its state and of its registers has
/// none to read (rare; a wrong syscall never happens).
pub fn assert_syscall(by: &ByComm, comm: &str, state: &str, syscall: &str) {
    let obs: Vec<&Obs> = by[comm].iter().filter(|o| o.state == state).collect();
    assert!(
        !obs.is_empty(),
        "{comm} never in {state}; seen {:?}",
        states(by, comm)
    );
    let right = obs.iter().filter(|o| o.syscall == syscall).count();
    assert!(
        obs.iter().all(|o| o.syscall == syscall || o.syscall.is_empty()) && right * 4 >= obs.len() * 3,
        "{comm} in {state}: {obs:?}, want {syscall}"
    );
}

/// The assertions shared by library and CLI runs.
pub fn assert_known_states(by: &ByComm, with_sleepers: bool) {
    assert_only(by, w::SPIN, &["RUN", "RUNQ"]);
    assert!(states(by, w::SPIN).contains("RUN"), "spinner never seen on CPU");
    assert_only(by, w::RUNQ, &["RUN", "RUNQ"]);
    assert!(
        states(by, w::RUNQ).contains("RUNQ"),
        "3 threads pinned to one CPU never seen waiting"
    );
    // Waiting for the CPU is timed from the scheduler's own sched_info, below one second
    // (CFS gives each of three spinners a slice of a few ms).
    for o in by[w::RUNQ].iter().filter(|o| o.state == "RUNQ") {
        let wait: u64 = o
            .runq_wait
            .parse()
            .unwrap_or_else(|_| panic!("RUNQ without a wait time: {o:?}"));
        assert!(wait < 1_000_000_000, "{o:?}");
    }
    assert_only(by, w::DIO, &["DISK", "RUN", "RUNQ"]);
    assert_syscall(by, w::DIO, "DISK", "pread64");
    assert_only(by, w::STOPPED, &["STOPPED"]);
    assert_only(by, w::ZOMBIE, &["ZOMBIE"]);
    assert!(
        by[w::ZOMBIE].iter().all(|o| o.syscall.is_empty()),
        "zombies are in no syscall"
    );
    if with_sleepers {
        assert_only(by, w::SLEEP, &["SLEEP"]);
        assert_syscall(by, w::SLEEP, "SLEEP", "clock_nanosleep");
        assert_only(by, w::PIPE, &["SLEEP"]);
        assert_syscall(by, w::PIPE, "SLEEP", "read");
    } else {
        assert!(
            !by.contains_key(w::SLEEP) && !by.contains_key(w::PIPE),
            "sleepers reported without --all"
        );
    }
}

/// The start of every live test: one at a time, BPF available (or skipped
/// outside CI), and the workload running. None: skip the test. The workload
/// comes first so that it is dropped (its threads joined) before the next
/// test may start its own.
pub fn live_workload() -> Option<(Workload, MutexGuard<'static, ()>)> {
    let serial = live_bpf()?;
    Some((workload(), serial))
}

/// One live test at a time, BPF available; None: skip the test.
pub fn live_bpf() -> Option<MutexGuard<'static, ()>> {
    let serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    w::can_run_bpf().then_some(serial)
}

pub fn workload() -> Workload {
    Workload::start(std::path::Path::new(env!("CARGO_TARGET_TMPDIR")))
}

pub fn opts(all: bool) -> SamplerOptions {
    SamplerOptions {
        interval: Duration::from_millis(100),
        all,
        ..Default::default()
    }
}

/// The stacks xtop reported for one thread in one pass.
#[derive(Debug, Clone)]
pub struct StackObs {
    pub tid: u32,
    pub state: String,
    pub kstack: Option<Arc<Stack>>,
    pub ustack: Option<Arc<Stack>>,
}

impl StackObs {
    pub fn kframes(&self) -> &[Arc<str>] {
        self.kstack.as_deref().map_or(&[], |s| &s.frames)
    }

    pub fn uframes(&self) -> &[Arc<str>] {
        self.ustack.as_deref().map_or(&[], |s| &s.frames)
    }

    pub fn kernel_has(&self, any_of: &[&str]) -> bool {
        self.kframes()
            .iter()
            .any(|f| any_of.iter().any(|a| f.contains(a)))
    }

    pub fn user_has(&self, name: &str) -> bool {
        self.uframes().iter().any(|f| &**f == name)
    }

    /// Whether the user stack is whole, ends at a frame containing `root`, and
    /// has frames containing each of `chain` (leaf first) in that order.
    pub fn whole_through(&self, chain: &[&str], root: &str) -> bool {
        let u = self.uframes();
        let mut at = 0;
        let in_order = chain.iter().all(|f| {
            let found = u[at..].iter().position(|x| x.contains(f));
            found.inspect(|i| at += i + 1).is_some()
        });
        let whole = self.ustack.as_ref().is_some_and(|s| !s.cut_short());
        in_order && whole && u.last().is_some_and(|f| f.contains(root))
    }
}

pub fn sample_stacks(opts: SamplerOptions, passes: usize) -> HashMap<String, Vec<StackObs>> {
    let sampler = start_sampler(opts);
    let by_comm = read_stacks(&sampler, passes);
    sampler.stop().unwrap();
    by_comm
}

/// The stacks of the next `passes` snapshots of a running sampler, by thread name.
pub fn read_stacks(sampler: &Sampler, passes: usize) -> HashMap<String, Vec<StackObs>> {
    let mut by_comm: HashMap<String, Vec<StackObs>> = HashMap::new();
    for _ in 0..passes {
        let snap = next_snapshot(sampler);
        for s in snap.samples {
            by_comm
                .entry(s.ident.comm.to_string())
                .or_default()
                .push(StackObs {
                    tid: s.ident.tid,
                    state: s.state.to_string(),
                    kstack: s.kstack,
                    ustack: s.ustack,
                });
        }
    }
    by_comm
}
