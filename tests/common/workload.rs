//! Threads and child processes in known states, each with a distinctive name,
//! so end-to-end tests can assert what xtop reports for them.

use std::alloc::{alloc_zeroed, dealloc, Layout};
use std::fs::{File, OpenOptions};
use std::io::{Read, Write};
use std::os::fd::AsRawFd;
use std::os::unix::fs::OpenOptionsExt;
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc;
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// Thread (comm) names; at most 15 bytes, the kernel's limit.
pub const SPIN: &str = "xt_spin";
pub const RUNQ: &str = "xt_runq";
pub const SLEEP: &str = "xt_sleep";
/// Sleeps 200 ms at a time: re-enters its syscall while sampled.
pub const NAP: &str = "xt_nap";
pub const PIPE: &str = "xt_pipe";
pub const DIO: &str = "xt_dio";
pub const STOPPED: &str = "xt_stopped";
pub const ZOMBIE: &str = "xt_zombie";
/// Asleep with a garbage frame pointer (see `markers::xt_badfp_marker`).
pub const BADFP: &str = "xt_badfp";

const DIO_FILE_MB: usize = 64;
const DIO_CHUNK: usize = 1 << 20;

pub struct Workload {
    stop: Arc<AtomicBool>,
    threads: Vec<JoinHandle<()>>,
    children: Vec<libc::pid_t>,
    pipe_writer: Option<File>,
}

pub fn pin_to_cpu(cpu: usize) {
    // SAFETY: cpu_set_t is plain data; we pin the calling thread only.
    unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        libc::CPU_SET(cpu, &mut set);
        libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &set);
    }
}

fn spin_until(stop: &AtomicBool) {
    let mut x = 0u64;
    while !stop.load(Ordering::Relaxed) {
        for _ in 0..10_000 {
            x = std::hint::black_box(x.wrapping_mul(6364136223846793005).wrapping_add(1));
        }
    }
}

/// A child process named `name` that runs `then` (async-signal-safe calls only).
fn fork_child(name: &str, then: fn()) -> libc::pid_t {
    let cname = std::ffi::CString::new(name).unwrap();
    // SAFETY: the child only calls prctl and the async-signal-safe `then`.
    unsafe {
        let pid = libc::fork();
        assert!(pid >= 0, "fork failed");
        if pid == 0 {
            libc::prctl(libc::PR_SET_NAME, cname.as_ptr());
            then();
            libc::_exit(0);
        }
        pid
    }
}

fn proc_state(pid: libc::pid_t) -> Option<char> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    stat.rsplit_once(") ")?.1.chars().next()
}

fn wait_for_state(pid: libc::pid_t, want: char) {
    let deadline = Instant::now() + Duration::from_secs(5);
    while proc_state(pid) != Some(want) {
        assert!(
            Instant::now() < deadline,
            "child {pid} never reached state {want}"
        );
        std::thread::sleep(Duration::from_millis(5));
    }
}

/// A file on a real disk (not tmpfs), so O_DIRECT reads wait for the device.
/// A file of this workload's own, opened for O_DIRECT and already unlinked:
/// no other workload (a later test, another test binary) can truncate it
/// under our reader, and nothing is left behind.
fn make_dio_file(dir: &Path) -> File {
    static NEXT: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);
    let n = NEXT.fetch_add(1, Ordering::Relaxed);
    let path = dir.join(format!("xtop-dio-{}-{n}.bin", std::process::id()));
    let direct = direct_file(&path, DIO_FILE_MB);
    std::fs::remove_file(&path).unwrap();
    direct
}

/// A new file of `mb` MiB at `path`, written through to the disk and opened
/// for O_DIRECT reads, which then wait for the device.
pub fn direct_file(path: &Path, mb: usize) -> File {
    let mut f = File::create(path).unwrap();
    let block = vec![0x5au8; DIO_CHUNK];
    for _ in 0..mb {
        f.write_all(&block).unwrap();
    }
    f.sync_all().unwrap();
    OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_DIRECT)
        .open(path)
        .unwrap()
}

fn dio_reader(f: &File, stop: &AtomicBool) {
    let layout = Layout::from_size_align(DIO_CHUNK, 4096).unwrap();
    // SAFETY: the layout is non-zero-sized; freed below.
    let buf = unsafe { alloc_zeroed(layout) };
    let mut i = 0;
    while !stop.load(Ordering::Relaxed) {
        let off = ((i * 7919) % DIO_FILE_MB * DIO_CHUNK) as u64;
        let n = super::markers::xt_dio_marker(f.as_raw_fd(), buf, DIO_CHUNK, off);
        assert_eq!(n, DIO_CHUNK as i64, "O_DIRECT read");
        i += 1;
    }
    unsafe { dealloc(buf, layout) };
}

impl Workload {
    /// Starts every kind of thread; returns once each is in its state.
    pub fn start(dir: &Path) -> Workload {
        let stop = Arc::new(AtomicBool::new(false));
        let mut threads = Vec::new();
        let (ready_tx, ready_rx) = mpsc::channel::<()>();
        let mut spawn = |name: &str, f: Box<dyn FnOnce(&AtomicBool) + Send>| {
            let (stop, ready) = (stop.clone(), ready_tx.clone());
            let h = std::thread::Builder::new()
                .name(name.into())
                .spawn(move || {
                    ready.send(()).unwrap();
                    f(&stop)
                })
                .unwrap();
            threads.push(h);
        };
        let ncpus = std::thread::available_parallelism().map_or(1, |n| n.get());
        // One spinner alone on the last CPU; three fighting for CPU 0: runnable, waiting.
        spawn(
            SPIN,
            Box::new(move |s| {
                pin_to_cpu(ncpus - 1);
                super::markers::xt_spin_marker(s)
            }),
        );
        for _ in 0..3 {
            spawn(
                RUNQ,
                Box::new(|s| {
                    pin_to_cpu(0);
                    spin_until(s)
                }),
            );
        }
        spawn(
            NAP,
            Box::new(|s| {
                while !s.load(Ordering::Relaxed) {
                    std::thread::sleep(Duration::from_millis(200));
                }
            }),
        );
        // Never wakes while sampled (a napper can be caught runnable); left
        // running when the workload stops, like any idle thread of a process.
        for (name, f) in [
            (SLEEP, super::markers::xt_sleep_marker as extern "C" fn()),
            (BADFP, super::markers::xt_badfp_marker),
        ] {
            let ready = ready_tx.clone();
            std::thread::Builder::new()
                .name(name.into())
                .spawn(move || {
                    ready.send(()).unwrap();
                    f()
                })
                .unwrap();
        }
        let (mut reader, writer) = pipe();
        spawn(
            PIPE,
            Box::new(move |_| {
                let mut b = [0u8; 1];
                let _ = reader.read(&mut b); // returns when the writer closes
            }),
        );
        let dio = make_dio_file(dir);
        spawn(DIO, Box::new(move |s| dio_reader(&dio, s)));
        for _ in 0..threads.len() + 2 {
            ready_rx
                .recv_timeout(Duration::from_secs(30))
                .expect("workload thread did not start");
        }

        let stopped = fork_child(STOPPED, || unsafe {
            libc::raise(libc::SIGSTOP);
        });
        wait_for_state(stopped, 'T');
        let zombie = fork_child(ZOMBIE, || {});
        wait_for_state(zombie, 'Z');
        // Let the blocking threads reach their syscalls.
        std::thread::sleep(Duration::from_millis(300));
        Workload {
            stop,
            threads,
            children: vec![stopped, zombie],
            pipe_writer: Some(writer),
        }
    }
}

fn pipe() -> (File, File) {
    let mut fds = [0; 2];
    // SAFETY: pipe fills two fds that we then own.
    assert_eq!(unsafe { libc::pipe(fds.as_mut_ptr()) }, 0);
    use std::os::fd::FromRawFd;
    unsafe { (File::from_raw_fd(fds[0]), File::from_raw_fd(fds[1])) }
}

impl Drop for Workload {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        self.pipe_writer.take();
        for pid in self.children.drain(..) {
            // SAFETY: our own children; kill then reap.
            unsafe {
                libc::kill(pid, libc::SIGKILL);
                libc::waitpid(pid, std::ptr::null_mut(), 0);
            }
        }
        for t in self.threads.drain(..) {
            let _ = t.join();
        }
    }
}

/// Live BPF tests need root. Outside CI they are skipped with a note when not
/// root; in CI (CI=true, running as root) a failure to load BPF fails the test.
pub fn can_run_bpf() -> bool {
    let root = unsafe { libc::geteuid() } == 0;
    if root {
        return true;
    }
    assert!(
        std::env::var("CI").as_deref() != Ok("true"),
        "CI=true but not root: BPF tests must run in CI"
    );
    eprintln!("skipping: live BPF tests need root");
    false
}
