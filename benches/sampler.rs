//! Sampler cost benchmark (needs root): `cargo bench --bench sampler`.
//!
//! 1. Cost of a sampling pass with 100, 2,000 and 10,000 extra sleeping
//!    threads: kernel walk and userspace decode, per pass and per thread, in
//!    the default active-only mode and with --all.
//! 2. Added cost per syscall of the syscall hooks: a tight getppid loop
//!    without xtop, with xtop, and with xtop --no-track-syscalls.
//! 3. Added cost per context switch of the sched hooks: a pipe ping-pong.
//!    2 and 3 also compare stacks on (the default) and off: stack capture adds
//!    nothing on those hot paths.
//! 4. Cost of user stacks per walked thread: threads that run between passes,
//!    walked by frame pointer in the kernel or copied and unwound with CFI.
//! 5. CPU share of the on-CPU profile program (BPF run-time stats) under load.
//! 6. xtop's total CPU at 10,000 threads, 1 s interval, stacks on.

use std::io::{Read, Write};
use std::os::unix::net::UnixStream;
use std::sync::{Arc, Condvar, Mutex};
use std::time::{Duration, Instant};

#[path = "common/pass.rs"]
mod pass;

use libbpf_rs::libbpf_sys;
use pass::{median, pass_cost_with};
use xtop::sampler::{Sampler, SamplerOptions, Unwind};

fn threads_on_system() -> usize {
    std::fs::read_dir("/proc")
        .into_iter()
        .flatten()
        .flatten()
        .filter(|e| {
            e.file_name()
                .to_string_lossy()
                .bytes()
                .all(|b| b.is_ascii_digit())
        })
        .filter_map(|e| std::fs::read_dir(e.path().join("task")).ok())
        .map(|t| t.count())
        .sum()
}

/// Threads blocked until the end, like the idle threads of real servers.
struct Sleepers {
    gate: Arc<(Mutex<bool>, Condvar)>,
    handles: Vec<std::thread::JoinHandle<()>>,
}

fn sleepers(n: usize) -> Sleepers {
    let gate = Arc::new((Mutex::new(false), Condvar::new()));
    let handles = (0..n)
        .map(|_| {
            let gate = gate.clone();
            std::thread::Builder::new()
                .stack_size(64 * 1024)
                .spawn(move || {
                    let (done, cv) = &*gate;
                    let mut d = done.lock().unwrap();
                    while !*d {
                        d = cv.wait(d).unwrap();
                    }
                })
                .expect("spawn sleeper")
        })
        .collect();
    Sleepers { gate, handles }
}

impl Drop for Sleepers {
    fn drop(&mut self) {
        let (done, cv) = &*self.gate;
        *done.lock().unwrap() = true;
        cv.notify_all();
        for h in self.handles.drain(..) {
            let _ = h.join();
        }
    }
}

fn pass_cost(all: bool) -> (u64, u64, usize) {
    pass_cost_with(SamplerOptions {
        interval: Duration::from_millis(100),
        all,
        ..Default::default()
    })
}

fn getppid_ns(calls: u64) -> f64 {
    let mut best = f64::MAX;
    for _ in 0..5 {
        let t = Instant::now();
        for _ in 0..calls {
            // SAFETY: getppid has no preconditions.
            std::hint::black_box(unsafe { libc::syscall(libc::SYS_getppid) });
        }
        best = best.min(t.elapsed().as_nanos() as f64 / calls as f64);
    }
    best
}

fn pin_to_cpu0() {
    // SAFETY: cpu_set_t is plain data; pins the calling thread.
    unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        libc::CPU_SET(0, &mut set);
        libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &set);
    }
}

/// ns per one-way message between two threads on one CPU: one context switch each.
fn pingpong_ns(rounds: u64) -> f64 {
    let (mut a, mut b) = UnixStream::pair().unwrap();
    pin_to_cpu0();
    let h = std::thread::spawn(move || {
        let mut buf = [0u8; 1];
        for _ in 0..rounds {
            b.read_exact(&mut buf).unwrap();
            b.write_all(&buf).unwrap();
        }
    });
    let mut buf = [0u8; 1];
    let t = Instant::now();
    for _ in 0..rounds {
        a.write_all(&buf).unwrap();
        a.read_exact(&mut buf).unwrap();
    }
    let ns = t.elapsed().as_nanos() as f64 / (rounds * 2) as f64;
    h.join().unwrap();
    ns
}

/// xtop without any stack capture.
fn no_stacks() -> SamplerOptions {
    SamplerOptions {
        user_stacks: false,
        profile_hz: 0,
        ..Default::default()
    }
}

fn with_xtop<T>(opts: SamplerOptions, f: impl FnOnce() -> T) -> T {
    let s = Sampler::start(opts).expect("BPF must load: run as root");
    let r = f();
    s.stop().unwrap();
    r
}

/// A child process (this bench, re-executed) holding blocked threads until its stdin closes.
struct SleeperProcess(std::process::Child);

impl SleeperProcess {
    fn start(n: usize) -> SleeperProcess {
        use std::io::Read;
        let mut child = std::process::Command::new(std::env::current_exe().expect("own path"))
            .args(["--sleeper-process", &n.to_string()])
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .spawn()
            .expect("spawn the sleeper process");
        let mut ready = [0u8; 1];
        child
            .stdout
            .take()
            .expect("piped")
            .read_exact(&mut ready)
            .expect("sleepers ready");
        SleeperProcess(child)
    }
}

impl Drop for SleeperProcess {
    fn drop(&mut self) {
        drop(self.0.stdin.take());
        let _ = self.0.wait();
    }
}

fn sleeper_process(n: usize) {
    use std::io::{Read, Write};
    let _s = sleepers(n);
    std::io::stdout()
        .write_all(b"r")
        .and_then(|_| std::io::stdout().flush())
        .expect("parent");
    let _ = std::io::stdin().read(&mut [0u8; 1]);
}

fn main() {
    if std::env::args().any(|a| a == "--list") {
        return; // cargo test --benches asks for a listing
    }
    let args: Vec<String> = std::env::args().collect();
    if let [_, flag, n] = &args[..] {
        if flag == "--sleeper-process" {
            return sleeper_process(n.parse().expect("thread count"));
        }
    }
    // `cargo bench --bench sampler -- ustack 10k` runs only those sections.
    let only: Vec<String> = std::env::args().skip(1).filter(|a| !a.starts_with('-')).collect();
    let sections: [(&str, fn()); 7] = [
        ("pass", pass_cost_table),
        ("files", file_name_cost),
        ("syscall", syscall_cost),
        ("switch", switch_cost),
        ("ustack", user_stack_cost),
        ("profile", profile_cost),
        ("10k", total_cpu_at_10k),
    ];
    for (name, run) in sections {
        if only.is_empty() || only.iter().any(|o| o == name) {
            run();
        }
    }
}

/// What the readers of `readers` are blocked on.
#[derive(Clone, Copy, PartialEq)]
enum Blocked {
    Pipes,
    /// FIFOs eight directories deep: a longer dentry walk.
    DeepFifos,
    /// The server ends of loopback TCP connections: the socket read too.
    Tcp,
}

/// Threads blocked reading, each on its own file. Dropping it unblocks and
/// joins them.
struct Readers {
    writers: Vec<Box<dyn Write + Send>>,
    handles: Vec<std::thread::JoinHandle<()>>,
    dir: Option<std::path::PathBuf>,
}

fn readers(n: usize, kind: Blocked) -> Readers {
    use std::os::fd::FromRawFd;
    let dir = (kind == Blocked::DeepFifos).then(|| {
        let d = std::env::temp_dir().join(format!("xtop-bench-{}/a/b/c/d/e/f/g", std::process::id()));
        std::fs::create_dir_all(&d).unwrap();
        d
    });
    let listener = (kind == Blocked::Tcp).then(|| std::net::TcpListener::bind("127.0.0.1:0").unwrap());
    let mut writers: Vec<Box<dyn Write + Send>> = Vec::new();
    let mut handles = Vec::new();
    for i in 0..n {
        let mut r: Box<dyn Read + Send> = match (&dir, &listener) {
            (Some(d), _) => {
                let p = d.join(format!("fifo-{i}"));
                let c = std::ffi::CString::new(p.to_str().unwrap()).unwrap();
                // SAFETY: a valid C string.
                assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0);
                let r = std::fs::OpenOptions::new()
                    .read(true)
                    .write(true)
                    .open(&p)
                    .unwrap();
                writers.push(Box::new(
                    std::fs::OpenOptions::new().write(true).open(&p).unwrap(),
                ));
                Box::new(r)
            }
            (None, Some(l)) => {
                writers.push(Box::new(
                    std::net::TcpStream::connect(l.local_addr().unwrap()).unwrap(),
                ));
                Box::new(l.accept().unwrap().0)
            }
            (None, None) => {
                let mut fds = [0; 2];
                // SAFETY: pipe fills two fds we then own.
                assert_eq!(unsafe { libc::pipe(fds.as_mut_ptr()) }, 0);
                writers.push(Box::new(unsafe { std::fs::File::from_raw_fd(fds[1]) }));
                Box::new(unsafe { std::fs::File::from_raw_fd(fds[0]) })
            }
        };
        handles.push(
            std::thread::Builder::new()
                .stack_size(64 * 1024)
                .spawn(move || {
                    let _ = r.read(&mut [0u8; 1]);
                })
                .unwrap(),
        );
    }
    Readers {
        writers,
        handles,
        dir,
    }
}

impl Drop for Readers {
    fn drop(&mut self) {
        for w in &mut self.writers {
            let _ = w.write_all(b"x");
        }
        for h in self.handles.drain(..) {
            let _ = h.join();
        }
        if let Some(d) = &self.dir {
            let top = d.ancestors().nth(7).unwrap();
            let _ = std::fs::remove_dir_all(top);
        }
    }
}

/// What naming the file of each thread's syscall costs: 1,000 threads blocked
/// in read, `--all`, with file names off and on.
fn file_name_cost() {
    println!("## File names and connections: 1,000 threads blocked in read, --all (median of 20 passes)");
    println!("| blocked on | file names | emitted | walk µs | decode µs | added µs per reader |");
    println!("|---|---|---:|---:|---:|---:|");
    let n = 1000;
    for kind in [Blocked::Pipes, Blocked::DeepFifos, Blocked::Tcp] {
        let _r = readers(n, kind);
        std::thread::sleep(Duration::from_millis(300));
        let mut off = 0;
        for names in [false, true] {
            let (walk, decode, emitted) = pass_cost_with(SamplerOptions {
                interval: Duration::from_millis(100),
                all: true,
                file_names: names,
                ..Default::default()
            });
            let added = if names {
                format!(
                    "{:.2}",
                    (walk + decode) as f64 / 1000.0 / n as f64 - off as f64 / 1000.0 / n as f64
                )
            } else {
                off = walk + decode;
                "-".into()
            };
            println!(
                "| {} | {} | {emitted} | {:.0} | {:.0} | {added} |",
                match kind {
                    Blocked::Pipes => "pipes",
                    Blocked::DeepFifos => "FIFOs 8 directories deep",
                    Blocked::Tcp => "TCP connections (loopback)",
                },
                if names { "on" } else { "off" },
                walk as f64 / 1000.0,
                decode as f64 / 1000.0
            );
        }
    }
}

fn pass_cost_table() {
    println!("## Sampling pass cost (median of 20 passes)");
    println!(
        "| extra sleeping threads | threads on box | mode | emitted | walk µs | decode µs | µs per thread |"
    );
    println!("|---:|---:|---|---:|---:|---:|---:|");
    for n in [100, 2_000, 10_000] {
        let _s = sleepers(n);
        std::thread::sleep(Duration::from_millis(300));
        let total = threads_on_system();
        for all in [false, true] {
            let (walk, decode, emitted) = pass_cost(all);
            let per = (walk + decode) as f64 / 1000.0 / total as f64;
            let mode = if all { "--all" } else { "active" };
            println!(
                "| {n} | {total} | {mode} | {emitted} | {:.0} | {:.0} | {per:.3} |",
                walk as f64 / 1000.0,
                decode as f64 / 1000.0
            );
        }
    }
}

fn syscall_cost() {
    println!("\n## Added cost per syscall (getppid loop, best of 5 × 2M calls)");
    let calls = 2_000_000;
    let base = getppid_ns(calls);
    let bare = with_xtop(no_stacks(), || getppid_ns(calls));
    let untracked = with_xtop(SamplerOptions::default(), || getppid_ns(calls));
    let tracked = with_xtop(
        SamplerOptions {
            track_syscalls: true,
            ..Default::default()
        },
        || getppid_ns(calls),
    );
    println!("| setup | ns per getppid | added ns |");
    println!("|---|---:|---:|");
    println!("| no xtop | {base:.1} | - |");
    println!(
        "| xtop --no-user-stacks --profile-hz 0 | {bare:.1} | {:.1} |",
        bare - base
    );
    println!(
        "| xtop (default: no syscall hooks, stacks on) | {untracked:.1} | {:.1} |",
        untracked - base
    );
    println!("| xtop --track-syscalls | {tracked:.1} | {:.1} |", tracked - base);
}

fn switch_cost() {
    println!("\n## Added cost per context switch (ping-pong on one CPU, best of 4, alternating)");
    let rounds = 200_000;
    let base = (0..3).map(|_| pingpong_ns(rounds)).fold(f64::MAX, f64::min);
    let best = || (0..3).map(|_| pingpong_ns(rounds)).fold(f64::MAX, f64::min);
    let bare = with_xtop(no_stacks(), best);
    let hooked = with_xtop(SamplerOptions::default(), best);
    println!("| setup | ns per message | added ns |");
    println!("|---|---:|---:|");
    println!("| no xtop | {base:.0} | - |");
    println!(
        "| xtop --no-user-stacks --profile-hz 0 | {bare:.0} | {:.0} |",
        bare - base
    );
    println!(
        "| xtop (default, stacks on) | {hooked:.0} | {:.0} |",
        hooked - base
    );
}

/// Threads that nap 50 ms: every 100 ms pass finds each of them run since the
/// previous one, so none can reuse its stacks and every one is walked.
fn nappers(
    n: usize,
) -> (
    Arc<std::sync::atomic::AtomicBool>,
    Vec<std::thread::JoinHandle<()>>,
) {
    let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let hs = (0..n)
        .map(|_| {
            let stop = stop.clone();
            std::thread::Builder::new()
                .stack_size(64 * 1024)
                .spawn(move || {
                    while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                        std::thread::sleep(Duration::from_millis(50));
                    }
                })
                .expect("spawn napper")
        })
        .collect();
    (stop, hs)
}

fn user_stack_cost() {
    println!("\n## User stacks: cost per walked thread (1,000 threads napping 50 ms, --all, 100 ms passes)");
    println!("| user stacks | emitted | walk µs | decode µs | (walk + decode) µs per thread |");
    println!("|---|---:|---:|---:|---:|");
    let (stop, hs) = nappers(1000);
    std::thread::sleep(Duration::from_millis(300));
    let modes = [(false, Unwind::Fp), (true, Unwind::Fp), (true, Unwind::Cfi)];
    let mut runs = Vec::new();
    for (user_stacks, unwind) in modes.iter().chain(modes.iter()) {
        let s = Sampler::start(SamplerOptions {
            interval: Duration::from_millis(100),
            all: true,
            user_stacks: *user_stacks,
            unwind: *unwind,
            ..Default::default()
        })
        .expect("BPF must load: run as root");
        let snaps: Vec<_> = (0..25).map(|_| s.receiver().recv().unwrap()).skip(5).collect();
        s.stop().unwrap();
        let walk = median(snaps.iter().map(|x| x.cost.walk_ns).collect());
        let decode = median(snaps.iter().map(|x| x.cost.decode_ns).collect());
        let emitted = snaps.iter().map(|x| x.samples.len()).max().unwrap_or(0);
        let name = match (user_stacks, unwind) {
            (false, _) => "off",
            (true, Unwind::Fp) => "frame pointers (`--unwind fp`)",
            (true, Unwind::Cfi) => "CFI (default)",
        };
        runs.push((name, walk + decode));
        println!(
            "| {name} | {emitted} | {:.0} | {:.0} | {:.3} |",
            walk as f64 / 1000.0,
            decode as f64 / 1000.0,
            (walk + decode) as f64 / 1000.0 / emitted.max(1) as f64
        );
    }
    let mean = |name: &str| {
        let v: Vec<_> = runs.iter().filter(|r| r.0 == name).collect();
        v.iter().map(|r| r.1 as f64).sum::<f64>() / v.len() as f64
    };
    for name in ["frame pointers (`--unwind fp`)", "CFI (default)"] {
        println!(
            "added by user stacks, {name}: {:.2} µs per walked thread",
            (mean(name) - mean("off")) / 1000.0 / 1000.0
        );
    }
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    for h in hs {
        let _ = h.join();
    }
}

/// Run count and total run time of every loaded BPF program named `name`
/// (BPF run-time statistics must be on), and how many there are: another
/// xtop running meanwhile would add its runs.
fn prog_stats(name: &str) -> (u64, u64, u32) {
    let (mut id, mut cnt, mut ns, mut progs) = (0u32, 0, 0, 0);
    // SAFETY: plain libbpf syscall wrappers on ids and fds we own and close.
    unsafe {
        while libbpf_sys::bpf_prog_get_next_id(id, &mut id) == 0 {
            let fd = libbpf_sys::bpf_prog_get_fd_by_id(id);
            if fd < 0 {
                continue;
            }
            let mut info: libbpf_sys::bpf_prog_info = std::mem::zeroed();
            let mut len = std::mem::size_of::<libbpf_sys::bpf_prog_info>() as u32;
            if libbpf_sys::bpf_prog_get_info_by_fd(fd, &mut info, &mut len) == 0 {
                let pname: Vec<u8> = info
                    .name
                    .iter()
                    .take_while(|&&c| c != 0)
                    .map(|&c| c as u8)
                    .collect();
                if pname == name.as_bytes() {
                    progs += 1;
                    cnt += info.run_cnt;
                    ns += info.run_time_ns;
                }
            }
            libc::close(fd);
        }
    }
    (cnt, ns, progs)
}

fn profile_cost() {
    println!("\n## On-CPU profile: BPF program cost with every CPU busy (10 s each)");
    println!("| profile Hz | user stacks | runs per CPU per s | ns per run | share of all CPUs |");
    println!("|---:|---|---:|---:|---:|");
    // SAFETY: returns an fd that keeps run-time statistics on until closed.
    let stats_fd = unsafe { libbpf_sys::bpf_enable_stats(libbpf_sys::BPF_STATS_RUN_TIME) };
    if stats_fd < 0 {
        println!("(cannot enable BPF statistics)");
        return;
    }
    let ncpus = std::thread::available_parallelism().map_or(1, |n| n.get());
    let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let spinners: Vec<_> = (0..ncpus)
        .map(|_| {
            let stop = stop.clone();
            std::thread::spawn(move || {
                let mut x = 0u64;
                while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                    x = std::hint::black_box(x.wrapping_mul(31).wrapping_add(1));
                }
            })
        })
        .collect();
    // `--unwind fp`: the frame-pointer walk alone (the profile before CFI);
    // cfi (default): the stack window copied as well.
    for (hz, unwind) in [
        (49, Unwind::Fp),
        (49, Unwind::Cfi),
        (99, Unwind::Fp),
        (99, Unwind::Cfi),
    ] {
        let secs = 10.0;
        // Read while loaded: the counters go with the program.
        let (before, after) = with_xtop(
            SamplerOptions {
                profile_hz: hz,
                unwind,
                ..Default::default()
            },
            || {
                let before = prog_stats("profile_cpu");
                std::thread::sleep(Duration::from_secs_f64(secs));
                (before, prog_stats("profile_cpu"))
            },
        );
        let (cnt, ns) = (after.0 - before.0, after.1 - before.1);
        if after.2 != 1 {
            println!(
                "({} programs named profile_cpu were loaded: figures include others)",
                after.2
            );
        }
        println!(
            "| {hz} | {unwind:?} | {:.1} | {:.0} | {:.4}% |",
            cnt as f64 / secs / ncpus as f64,
            ns as f64 / cnt.max(1) as f64,
            ns as f64 / (secs * 1e9 * ncpus as f64) * 100.0
        );
    }
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    for h in spinners {
        let _ = h.join();
    }
    // SAFETY: our fd.
    unsafe { libc::close(stats_fd) };
}

fn total_cpu_at_10k() {
    println!("\n## xtop CPU with 10,000 extra sleeping threads, 1 s interval (30 passes)");
    println!("| mode | stacks | emitted | xtop CPU, % of one CPU | walk µs | decode µs |");
    println!("|---|---|---:|---:|---:|---:|");
    // In another process: xtop's own CPU is read with getrusage(RUSAGE_SELF), which
    // would otherwise also sum (and pay for walking) the bench's 10,000 threads.
    let _s = SleeperProcess::start(10_000);
    std::thread::sleep(Duration::from_secs(2)); // let 10,000 thread starts settle
    for (all, stacks) in [(false, false), (false, true), (true, false), (true, true)] {
        let base = if stacks {
            SamplerOptions::default()
        } else {
            no_stacks()
        };
        let s = Sampler::start(SamplerOptions { all, ..base }).expect("BPF must load: run as root");
        // The first passes symbolize and fill caches; steady state is what runs all day.
        let snaps: Vec<_> = (0..33).map(|_| s.receiver().recv().unwrap()).skip(3).collect();
        s.stop().unwrap();
        let cpu: u64 = snaps.iter().map(|x| x.cost.cpu_ns).sum();
        let secs: f64 = snaps.iter().map(|x| x.interval.as_secs_f64()).sum();
        let emitted = snaps.iter().map(|x| x.samples.len()).max().unwrap_or(0);
        println!(
            "| {} | {} | {emitted} | {:.3}% | {:.0} | {:.0} |",
            if all { "--all" } else { "active" },
            if stacks { "on" } else { "off" },
            cpu as f64 / 1e9 / secs * 100.0,
            median(snaps.iter().map(|x| x.cost.walk_ns).collect()) as f64 / 1000.0,
            median(snaps.iter().map(|x| x.cost.decode_ns).collect()) as f64 / 1000.0,
        );
    }
}
