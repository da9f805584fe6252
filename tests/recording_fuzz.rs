//! Mutation fuzzing of the recording reader. Seed recordings (real ones from
//! the repository, synthetic ones written by xtop at test time) are mutated
//! inside their frames, with checksums made valid again (tests/common/mutate.rs),
//! and each mutant goes through what `report`, `export` and `replay` do with a
//! file (`xtop::recording::fuzz::read_bytes`).
//!
//! The cases run in a child process under a 1 GiB address-space limit, so a
//! bomb that slips through fails this test, not the machine. The test fails on
//! a panic (the child prints how to rerun that case), on a case over 5 s or a
//! run over its deadline (a hang), and on a peak RSS over 256 MB. It also
//! checks that the mutants reach the decoder: most must still decode
//! snapshots, and some must be refused, damaged and corrupt.
//!
//! Seeded and fixed in CI; longer runs: `XTOP_FUZZ_CASES=200000
//! XTOP_FUZZ_SEED=7 cargo test --release --test recording_fuzz`, or the
//! `cargo fuzz` target (README).

use std::fs;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use xtop::recording::{fuzz, synth, write_file, Writer};

mod common;

/// Set in the child: the file where it notes each case before running it, so
/// the parent can name the case that killed it (an allocation failure aborts
/// without a word).
const CHILD: &str = "XTOP_FUZZ_CHILD";
const DEFAULT_CASES: u64 = 20_000;
const DEFAULT_SEED: u64 = 0x5eed_2026;
const AS_LIMIT: u64 = 1 << 30;
const MAX_RSS_KB: i64 = 256 * 1024;
const CASE_LIMIT: Duration = Duration::from_secs(5);
/// The whole run's deadline per case, in ns (CI: 20,000 cases in 110 s; they take ~40).
const RUN_LIMIT_PER_CASE_NS: u64 = 5_500_000;

fn env_u64(name: &str, default: u64) -> u64 {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

#[test]
fn mutated_recordings_never_panic_hang_or_balloon() {
    let dir = scratch("parent");
    let (outp, errp, progress) = (dir.join("stdout"), dir.join("stderr"), dir.join("case"));
    let mut cmd = Command::new(std::env::current_exe().unwrap());
    cmd.args([
        "fuzz_cases",
        "--exact",
        "--ignored",
        "--nocapture",
        "--test-threads=1",
    ])
    .env(CHILD, &progress)
    .stdin(Stdio::null())
    .stdout(fs::File::create(&outp).unwrap())
    .stderr(fs::File::create(&errp).unwrap());
    common::limited::limit_address_space(&mut cmd, AS_LIMIT);
    let t = Instant::now();
    // Reaped by `reap` (wait4), which also gives its peak RSS.
    #[allow(clippy::zombie_processes)]
    let child = cmd.spawn().expect("starting the fuzz child");
    let cases = env_u64("XTOP_FUZZ_CASES", DEFAULT_CASES);
    let deadline = Duration::from_nanos(RUN_LIMIT_PER_CASE_NS.saturating_mul(cases.max(2000)));
    let ended = common::limited::reap(child, t, deadline, "the fuzz run");
    let (out, err) = (read(&outp), read(&errp));
    let last = fs::read(&progress)
        .ok()
        .and_then(|b| Some(u64::from_le_bytes(b.get(..8)?.try_into().ok()?)));
    let _ = fs::remove_dir_all(&dir);
    let base = env_u64("XTOP_FUZZ_SEED", DEFAULT_SEED);
    assert!(
        ended.code == Some(0),
        "fuzz child failed (exit {:?}, signal {:?}) in case {last:?}; {}\n{out}\n{err}",
        ended.code,
        ended.signal,
        last.map_or_else(String::new, |i| rerun(base, i))
    );
    assert!(
        ended.max_rss_kb < MAX_RSS_KB,
        "fuzz child peaked at {} MB (limit 256)",
        ended.max_rss_kb / 1024
    );
    let line = out
        .lines()
        .find_map(|l| Some(l.split_once("fuzz: ")?.1))
        .unwrap_or_else(|| panic!("no summary from the fuzz child:\n{out}\n{err}"));
    eprintln!(
        "fuzz: {line}; peak {} MB, {:?}",
        ended.max_rss_kb / 1024,
        ended.wall
    );
    let n = |key: &str| -> u64 {
        line.split_whitespace()
            .find_map(|w| w.strip_prefix(key)?.strip_prefix('='))
            .and_then(|v| v.parse().ok())
            .unwrap_or_else(|| panic!("no {key} in {line}"))
    };
    assert_eq!(n("cases"), cases, "{line}");
    // The mutants reach the decoder behind the checksum: had checksums not
    // been made valid again, nearly every case would be "damaged" and none
    // "undecodable" or "corrupt". Many still decode snapshots, and every kind
    // of outcome occurs.
    if cases < 1000 {
        return; // too few for shares to mean anything
    }
    assert!(n("decoded") * 3 > cases, "{line}");
    assert!((n("undecodable") + n("corrupt")) * 5 > cases, "{line}");
    assert!(n("damaged") * 2 < cases, "{line}");
    for kind in ["refused", "damaged", "corrupt"] {
        assert!(n(kind) * 200 > cases, "too few {kind} cases: {line}");
    }
}

#[test]
#[ignore = "the body of mutated_recordings_never_panic_hang_or_balloon, which runs it in a child under RLIMIT_AS"]
fn fuzz_cases() {
    if std::env::var_os(CHILD).is_none() {
        // Run by hand (--ignored): limit this process itself.
        let lim = libc::rlimit {
            rlim_cur: AS_LIMIT,
            rlim_max: AS_LIMIT,
        };
        // SAFETY: setrlimit reads the struct we own.
        assert_eq!(unsafe { libc::setrlimit(libc::RLIMIT_AS, &lim) }, 0);
    }
    let dir = scratch("seeds");
    let seeds = seeds(&dir);
    let _ = fs::remove_dir_all(&dir);
    let base = env_u64("XTOP_FUZZ_SEED", DEFAULT_SEED);
    let from = env_u64("XTOP_FUZZ_FROM", 0);
    let cases = env_u64("XTOP_FUZZ_CASES", DEFAULT_CASES);
    let progress = Progress::start(base);
    let mut tally = Tally::default();
    for i in from..from + cases {
        progress.begin(i);
        let seed = base.wrapping_add(i);
        let file = &seeds[(seed % seeds.len() as u64) as usize];
        let input = common::mutate::mutate(file, seed, &seeds);
        let t = Instant::now();
        let o = fuzz::read_bytes(input);
        tally.add(&o, t.elapsed(), i);
    }
    println!("fuzz: {}", tally.summary());
}

/// Which case runs, and since when: a panic names it (with how to rerun
/// it), a watchdog aborts a case over `CASE_LIMIT`, and the parent reads it
/// from the file in `CHILD` after any other death.
struct Progress {
    case: Arc<AtomicU64>,
    /// Milliseconds after `started` when the current case began.
    case_start: Arc<AtomicU64>,
    started: Instant,
    file: Option<fs::File>,
}

impl Progress {
    fn start(base: u64) -> Progress {
        let p = Progress {
            case: Arc::default(),
            case_start: Arc::default(),
            started: Instant::now(),
            file: std::env::var_os(CHILD).map(|p| fs::File::create(p).unwrap()),
        };
        let (case, case_start, started) = (p.case.clone(), p.case_start.clone(), p.started);
        std::thread::spawn(move || loop {
            std::thread::sleep(Duration::from_millis(100));
            let ms =
                (started.elapsed().as_millis() as u64).saturating_sub(case_start.load(Ordering::Relaxed));
            if ms > CASE_LIMIT.as_millis() as u64 {
                let i = case.load(Ordering::Relaxed);
                eprintln!("fuzz: case {i} ran over {CASE_LIMIT:?}; {}", rerun(base, i));
                std::process::abort();
            }
        });
        let hook = std::panic::take_hook();
        let case = p.case.clone();
        std::panic::set_hook(Box::new(move |info| {
            let i = case.load(Ordering::Relaxed);
            eprintln!("fuzz: case {i} panicked; {}", rerun(base, i));
            hook(info);
        }));
        p
    }

    fn begin(&self, i: u64) {
        self.case.store(i, Ordering::Relaxed);
        if let Some(f) = &self.file {
            f.write_all_at(&i.to_le_bytes(), 0).unwrap();
        }
        let now = self.started.elapsed().as_millis() as u64;
        self.case_start.store(now, Ordering::Relaxed);
    }
}

fn rerun(base: u64, case: u64) -> String {
    format!("rerun: XTOP_FUZZ_SEED={base} XTOP_FUZZ_FROM={case} XTOP_FUZZ_CASES=1 cargo test --release --test recording_fuzz -- --ignored fuzz_cases")
}

/// Outcomes so far, for the summary line the parent checks.
#[derive(Default)]
struct Tally {
    cases: u64,
    refused: u64,
    corrupt: u64,
    /// Damage skipped by the frame layer (a checksum failed).
    damaged: u64,
    /// An intact frame the decoder rejected.
    undecodable: u64,
    /// At least one snapshot decoded.
    decoded: u64,
    snapshots: u64,
    slowest: (Duration, u64),
}

impl Tally {
    fn add(&mut self, o: &fuzz::Outcome, took: Duration, case: u64) {
        self.cases += 1;
        self.refused += u64::from(o.refused);
        self.corrupt += u64::from(o.corrupt);
        self.damaged += u64::from(o.damaged > 0);
        self.undecodable += u64::from(o.undecodable > 0);
        self.decoded += u64::from(o.snapshots > 0);
        self.snapshots += o.snapshots;
        if took > self.slowest.0 {
            self.slowest = (took, case);
        }
    }

    fn summary(&self) -> String {
        format!(
            "cases={} decoded={} refused={} damaged={} undecodable={} corrupt={} snapshots={} slowest_ms={} (case {})",
            self.cases,
            self.decoded,
            self.refused,
            self.damaged,
            self.undecodable,
            self.corrupt,
            self.snapshots,
            self.slowest.0.as_millis(),
            self.slowest.1
        )
    }
}

/// The seed recordings: the repository's (a real capture with stacks, golden
/// files of the older formats and of the current one, whose fields are a
/// superset of version 4's) and synthetic ones written by xtop here (key and delta
/// frames, compressed and raw, an appended second session).
fn seeds(dir: &Path) -> Vec<Vec<u8>> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut seeds: Vec<Vec<u8>> = [
        "assets/demo.xtop",
        "src/recording/testdata/v1.xtop",
        "src/recording/testdata/v2.xtop",
        "src/recording/testdata/v3.xtop",
        "src/recording/testdata/v5.xtop",
    ]
    .iter()
    .map(|p| fs::read(root.join(p)).unwrap())
    .collect();
    let interval = Duration::from_secs(1);
    let session = synth::session(interval);
    let busy = dir.join("busy.xtop");
    write_file(&busy, &session, &synth::workload(40, 30, interval, 7)).unwrap();
    let appended = dir.join("appended.xtop");
    for (k, snaps) in [
        synth::workload(12, 5, interval, 8),
        synth::workload(6, 70, interval, 9),
    ]
    .iter()
    .enumerate()
    {
        let mut w = if k == 0 {
            Writer::create(&appended, &session).unwrap()
        } else {
            Writer::append(&appended, &session).unwrap()
        };
        // One frame per snapshot: a key frame, then deltas against it.
        snaps.iter().for_each(|s| w.write_snapshot(s).unwrap());
        w.finish().unwrap();
    }
    seeds.push(fs::read(&busy).unwrap());
    seeds.push(fs::read(&appended).unwrap());
    seeds
}

/// A fresh directory of this test's own.
fn scratch(tag: &str) -> PathBuf {
    let d = Path::new(env!("CARGO_TARGET_TMPDIR")).join(format!("fuzz-{tag}-{}", std::process::id()));
    let _ = fs::remove_dir_all(&d);
    fs::create_dir_all(&d).unwrap();
    d
}

fn read(p: &Path) -> String {
    String::from_utf8_lossy(&fs::read(p).unwrap_or_default()).into_owned()
}
