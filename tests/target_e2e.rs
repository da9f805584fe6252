//! End to end: the file each thread's syscall works on (`filename`), resolved
//! by the real BPF sampler from the thread's own file table, and what its
//! socket connects (`connection`, `conn_state`), for threads blocked on known
//! files and sockets. Needs root; CI runs it as root.

mod common;

use std::alloc::{alloc_zeroed, dealloc, Layout};
use std::collections::HashMap;
use std::ffi::CString;
use std::fs::{File, OpenOptions};
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::os::fd::{AsRawFd, FromRawFd};
use std::os::linux::net::SocketAddrExt;
use std::os::unix::fs::{MetadataExt, OpenOptionsExt};
use std::os::unix::net::{SocketAddr as UnixAddr, UnixDatagram, UnixListener, UnixStream};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use common::observe::{live_bpf, next_snapshot, opts, start_sampler};
use xtop::dimensions;
use xtop::sampler::Sampler;

const DIO: &str = "xt_f_dio";
const PIPE: &str = "xt_f_pipe";
const UNIX: &str = "xt_f_unix";
const FIFO: &str = "xt_f_fifo";
const OPEN: &str = "xt_f_open";
// Both ends of a TCP connection over 127.0.0.1 and ::1, each blocked reading.
const TCP4_C: &str = "xt_c_tcp4c";
const TCP4_S: &str = "xt_c_tcp4s";
const TCP6_C: &str = "xt_c_tcp6c";
const TCP6_S: &str = "xt_c_tcp6s";
const ACCEPT: &str = "xt_c_accept";
const UNIX_C: &str = "xt_c_unixc";
const UNIX_S: &str = "xt_c_unixs";
const DGRAM: &str = "xt_c_dgram";

const DIO_MB: usize = 16;
const CHUNK: usize = 1 << 20;

/// A directory of the test's own on a real disk (O_DIRECT needs one), removed at the end.
struct Dir(PathBuf);

/// Scenes started so far: names of their own, since a failed test's threads
/// may still hold the previous scene's.
static SCENES: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);

impl Dir {
    fn new(n: u32) -> Dir {
        let base = Path::new(env!("CARGO_TARGET_TMPDIR"));
        let p = base.join(format!("xtop-target-e2e-{}-{n}", std::process::id()));
        std::fs::create_dir_all(&p).unwrap();
        Dir(p.canonicalize().unwrap())
    }
}

impl Drop for Dir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

fn mkfifo(p: &Path) {
    let c = CString::new(p.as_os_str().as_encoded_bytes()).unwrap();
    // SAFETY: a valid C string.
    assert_eq!(
        unsafe { libc::mkfifo(c.as_ptr(), 0o600) },
        0,
        "mkfifo {}",
        p.display()
    );
}

/// The inode number of an open descriptor (what /proc/PID/fd shows in brackets).
fn fd_ino(fd: i32) -> u64 {
    // SAFETY: fstat fills a plain struct.
    let mut st: libc::stat = unsafe { std::mem::zeroed() };
    assert_eq!(unsafe { libc::fstat(fd, &mut st) }, 0);
    st.st_ino
}

fn spawn(name: &str, f: impl FnOnce() + Send + 'static) -> JoinHandle<()> {
    std::thread::Builder::new().name(name.into()).spawn(f).unwrap()
}

/// Threads blocked on known files, and what unblocks them.
struct Scene {
    dir: Dir,
    stop: Arc<AtomicBool>,
    threads: Vec<JoinHandle<()>>,
    dio_path: PathBuf,
    pipe_ino: u64,
    pipe_w: File,
    unix_ino: u64,
    unix_w: UnixStream,
    fifo_w: File,
    open_fifo: PathBuf,
    /// The other ends of the blocked socket readers: a byte to each wakes them.
    wake: Vec<Box<dyn Write + Send>>,
    /// (client, server) local addresses of the TCP connections.
    tcp4: (SocketAddr, SocketAddr),
    tcp6: (SocketAddr, SocketAddr),
    accept_at: SocketAddr,
    unix_path: PathBuf,
    dgram_name: String,
}

/// A thread blocked reading `stream` (a byte from its peer ends it).
fn reader(name: &str, mut stream: impl Read + Send + 'static) -> JoinHandle<()> {
    spawn(name, move || {
        let _ = stream.read(&mut [0u8; 1]);
    })
}

/// A connected TCP pair on `at`: threads blocked reading each end, the
/// writers that wake them, and (client, server) local addresses.
fn tcp_pair(
    at: &str,
    names: (&str, &str),
    threads: &mut Vec<JoinHandle<()>>,
    wake: &mut Vec<Box<dyn Write + Send>>,
) -> (SocketAddr, SocketAddr) {
    let l = TcpListener::bind(at).unwrap();
    let c = TcpStream::connect(l.local_addr().unwrap()).unwrap();
    let (s, _) = l.accept().unwrap();
    let addrs = (c.local_addr().unwrap(), s.local_addr().unwrap());
    wake.push(Box::new(c.try_clone().unwrap()));
    wake.push(Box::new(s.try_clone().unwrap()));
    threads.push(reader(names.0, c));
    threads.push(reader(names.1, s));
    addrs
}

impl Scene {
    fn start() -> Scene {
        let n = SCENES.fetch_add(1, Ordering::Relaxed);
        let dir = Dir::new(n);
        let stop = Arc::new(AtomicBool::new(false));
        let mut threads = Vec::new();

        // O_DIRECT reads of a known file: DISK, the file's path.
        let dio_path = dir.0.join("table-16384.dat");
        let dio = common::workload::direct_file(&dio_path, DIO_MB);
        let s = stop.clone();
        threads.push(spawn(DIO, move || {
            let layout = Layout::from_size_align(CHUNK, 4096).unwrap();
            // SAFETY: non-zero size; freed below.
            let buf = unsafe { alloc_zeroed(layout) };
            let mut i = 0usize;
            while !s.load(Ordering::Relaxed) {
                let off = ((i * 7) % DIO_MB * CHUNK) as i64;
                // SAFETY: buf holds CHUNK bytes.
                let n = unsafe { libc::pread(dio.as_raw_fd(), buf.cast(), CHUNK, off) };
                assert_eq!(n, CHUNK as isize, "O_DIRECT read");
                i += 1;
            }
            unsafe { dealloc(buf, layout) };
        }));

        // A read on an empty pipe.
        let mut fds = [0; 2];
        // SAFETY: pipe fills two fds we then own.
        assert_eq!(unsafe { libc::pipe(fds.as_mut_ptr()) }, 0);
        let (mut pipe_r, pipe_w) = unsafe { (File::from_raw_fd(fds[0]), File::from_raw_fd(fds[1])) };
        let pipe_ino = pipe_r.metadata().unwrap().ino();
        threads.push(spawn(PIPE, move || {
            let _ = pipe_r.read(&mut [0u8; 1]);
        }));

        // A read on a UNIX socket.
        let (mut unix_r, unix_w) = UnixStream::pair().unwrap();
        let unix_ino = fd_ino(unix_r.as_raw_fd());
        threads.push(spawn(UNIX, move || {
            let _ = unix_r.read(&mut [0u8; 1]);
        }));

        // A read on a FIFO that the test renames, then replaces.
        let fifo = dir.0.join("queue.fifo");
        mkfifo(&fifo);
        // Read-write: opening does not wait for a writer; reading does.
        let mut fifo_r = OpenOptions::new().read(true).write(true).open(&fifo).unwrap();
        let fifo_w = OpenOptions::new().write(true).open(&fifo).unwrap();
        threads.push(spawn(FIFO, move || {
            let _ = fifo_r.read(&mut [0u8; 1]);
        }));

        // An open() of a FIFO nobody writes: it waits in openat, on its path argument.
        let open_fifo = dir.0.join("inbox.fifo");
        mkfifo(&open_fifo);
        let p = open_fifo.clone();
        threads.push(spawn(OPEN, move || {
            let _ = File::open(&p);
        }));

        // Sockets: TCP over IPv4 and IPv6, a listener waiting in accept, a
        // named UNIX socket's client and server, an abstract datagram socket.
        let mut wake: Vec<Box<dyn Write + Send>> = Vec::new();
        let tcp4 = tcp_pair("127.0.0.1:0", (TCP4_C, TCP4_S), &mut threads, &mut wake);
        let tcp6 = tcp_pair("[::1]:0", (TCP6_C, TCP6_S), &mut threads, &mut wake);
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        let accept_at = l.local_addr().unwrap();
        threads.push(spawn(ACCEPT, move || {
            let _ = l.accept();
        }));
        let unix_path = dir.0.join("pg.sock");
        let l = UnixListener::bind(&unix_path).unwrap();
        let c = UnixStream::connect(&unix_path).unwrap();
        let (srv, _) = l.accept().unwrap();
        wake.push(Box::new(c.try_clone().unwrap()));
        wake.push(Box::new(srv.try_clone().unwrap()));
        threads.push(reader(UNIX_C, c));
        threads.push(reader(UNIX_S, srv));
        let dgram_name = format!("xtop-test-{}-{n}", std::process::id());
        let name = UnixAddr::from_abstract_name(dgram_name.as_bytes()).unwrap();
        let d = UnixDatagram::bind_addr(&name).unwrap();
        threads.push(spawn(DGRAM, move || {
            let _ = d.recv(&mut [0u8; 1]);
        }));

        let scene = Scene {
            wake,
            tcp4,
            tcp6,
            accept_at,
            unix_path,
            dgram_name,
            dir,
            stop,
            threads,
            dio_path,
            pipe_ino,
            pipe_w,
            unix_ino,
            unix_w,
            fifo_w,
            open_fifo,
        };
        std::thread::sleep(Duration::from_millis(300)); // let every thread block
        scene
    }

    /// Unblocks every thread of the scene.
    fn wake(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        let _ = self.pipe_w.write_all(b"x");
        let _ = self.unix_w.write_all(b"x");
        let _ = self.fifo_w.write_all(b"x");
        for w in &mut self.wake {
            let _ = w.write_all(b"x");
        }
        let _ = TcpStream::connect(self.accept_at);
        let name = UnixAddr::from_abstract_name(self.dgram_name.as_bytes()).unwrap();
        let _ = UnixDatagram::unbound().unwrap().send_to_addr(b"x", &name);
        // Opening for writing completes the reader's open.
        let _ = OpenOptions::new()
            .write(true)
            .custom_flags(libc::O_NONBLOCK)
            .open(&self.open_fifo);
    }

    /// Unblocks and joins every thread: each must end.
    fn finish(mut self) {
        self.wake();
        let deadline = Instant::now() + Duration::from_secs(10);
        for t in self.threads.drain(..) {
            while !t.is_finished() && Instant::now() < deadline {
                std::thread::sleep(Duration::from_millis(10));
            }
            assert!(t.is_finished(), "a test thread did not unblock");
            t.join().unwrap();
        }
    }
}

/// A failed test still ends its threads, which would otherwise hold files and
/// names the next test's scene expects to be its own.
impl Drop for Scene {
    fn drop(&mut self) {
        if !self.threads.is_empty() {
            self.wake();
        }
    }
}

/// (state, syscall, filename, connection, conn_state) of a sample.
type Seen = (String, String, String, String, String);

/// What this process's threads were seen doing in each of the next `passes`
/// snapshots, by thread name.
fn observe(sampler: &Sampler, passes: usize) -> HashMap<String, Vec<Seen>> {
    let me = std::process::id().to_string();
    let get = |n: &str| dimensions::find(n).unwrap();
    let mut by: HashMap<String, Vec<Seen>> = HashMap::new();
    for _ in 0..passes {
        let snap = next_snapshot(sampler);
        for s in &snap.samples {
            let v = |n: &str| get(n).value(&snap, s).to_string();
            if v("tgid") != me {
                continue;
            }
            by.entry(v("comm")).or_default().push((
                v("state"),
                v("syscall"),
                v("filename"),
                v("connection"),
                v("conn_state"),
            ));
        }
    }
    by
}

/// Every sample of `comm` inside `syscall` names `want`; there is one at least.
fn assert_named(by: &HashMap<String, Vec<Seen>>, comm: &str, syscall: &str, want: &str) {
    let seen = by.get(comm).map(Vec::as_slice).unwrap_or_default();
    let inside: Vec<_> = seen.iter().filter(|o| o.1 == syscall).collect();
    assert!(!inside.is_empty(), "{comm}: never seen in {syscall}: {seen:?}");
    assert!(
        inside.iter().all(|o| o.2 == want),
        "{comm}: want {want}: {seen:?}"
    );
}

/// Every sample of `comm` inside a syscall names the connection `want`
/// in `state`; there is one at least.
fn assert_connected(by: &HashMap<String, Vec<Seen>>, comm: &str, want: &str, state: &str) {
    let seen = by.get(comm).map(Vec::as_slice).unwrap_or_default();
    let inside: Vec<_> = seen.iter().filter(|o| o.1 != "-").collect();
    assert!(!inside.is_empty(), "{comm}: never seen in a syscall: {seen:?}");
    assert!(
        inside
            .iter()
            .all(|o| o.2.starts_with("socket:[") && o.3 == want && o.4 == state),
        "{comm}: want {want} {state}: {seen:?}"
    );
}

/// `TCP local->remote` as the connection dimension names it.
fn tcp(local: SocketAddr, remote: SocketAddr) -> String {
    format!("TCP {local}->{remote}")
}

#[test]
fn connections_of_blocked_threads_are_named_from_their_sockets() {
    let Some(_serial) = live_bpf() else { return };
    let scene = Scene::start();
    let sampler = start_sampler(opts(true));
    let by = observe(&sampler, 10);

    // The 4-tuple both ways, over IPv4 and IPv6 (brackets, as `ss` writes them).
    for ((c, s), names) in [(scene.tcp4, (TCP4_C, TCP4_S)), (scene.tcp6, (TCP6_C, TCP6_S))] {
        assert_connected(&by, names.0, &tcp(c, s), "ESTABLISHED");
        assert_connected(&by, names.1, &tcp(s, c), "ESTABLISHED");
    }
    assert!(tcp(scene.tcp6.0, scene.tcp6.1).starts_with("TCP [::1]:"));
    assert_connected(&by, ACCEPT, &format!("TCP {}", scene.accept_at), "LISTEN");
    // A client names the server's path; the server's socket carries it.
    let path = scene.unix_path.to_str().unwrap();
    assert_connected(&by, UNIX_C, &format!("UNIX ->{path}"), "CONNECTED");
    assert_connected(&by, UNIX_S, &format!("UNIX {path}"), "CONNECTED");
    assert_connected(&by, UNIX, "UNIX (unnamed)", "CONNECTED");
    let abstract_name = format!("UNIX-DGRAM @{}", scene.dgram_name);
    assert_connected(&by, DGRAM, &abstract_name, "UNCONNECTED");
    // Files are no connections.
    assert!(
        by[PIPE].iter().all(|o| o.3 == "-" && o.4 == "-"),
        "{:?}",
        by[PIPE]
    );

    sampler.stop().unwrap();
    scene.finish();
}

#[test]
fn files_of_blocked_threads_are_named_from_their_descriptors() {
    let Some(_serial) = live_bpf() else { return };
    let scene = Scene::start();
    let sampler = start_sampler(opts(true));
    let by = observe(&sampler, 20);

    let dio = scene.dio_path.to_str().unwrap();
    assert_named(&by, DIO, "pread64", dio);
    assert!(
        by[DIO].iter().any(|o| o.0 == "DISK" && o.2 == dio),
        "O_DIRECT reader never seen in DISK on its file: {:?}",
        by[DIO]
    );
    assert_named(&by, PIPE, "read", &format!("pipe:[{}]", scene.pipe_ino));
    let unix = format!("socket:[{}]", scene.unix_ino);
    let unix_calls: Vec<_> = by[UNIX].iter().filter(|o| o.1 != "-").collect();
    assert!(
        !unix_calls.is_empty() && unix_calls.iter().all(|o| o.2 == unix),
        "{:?}",
        by[UNIX]
    );
    let fifo = scene.dir.0.join("queue.fifo");
    assert_named(&by, FIFO, "read", fifo.to_str().unwrap());
    // The path argument, as passed.
    assert_named(&by, OPEN, "openat", scene.open_fifo.to_str().unwrap());

    // Renamed while the reader waits: the name is the descriptor's, now.
    let moved = scene.dir.0.join("renamed.fifo");
    std::fs::rename(&fifo, &moved).unwrap();
    let by = observe(&sampler, 3);
    assert_named(&by, FIFO, "read", moved.to_str().unwrap());
    // Replaced by another file: the path names that one; the descriptor's is gone.
    let other = scene.dir.0.join("other.fifo");
    mkfifo(&other);
    std::fs::rename(&other, &moved).unwrap();
    let by = observe(&sampler, 3);
    assert_named(&by, FIFO, "read", &format!("{} (deleted)", moved.display()));

    sampler.stop().unwrap();
    scene.finish();
}

/// `xtop -b` for three passes over this process's threads, with `args`: its
/// output.
fn batch(args: &[&str]) -> String {
    let pid = std::process::id().to_string();
    let out = common::observe::on_cpu0(|| {
        std::process::Command::new(env!("CARGO_BIN_EXE_xtop"))
            .args(["-b", "-n", "3", "-i", "200ms", "-a", "-p", &pid])
            .args(args)
            .output()
            .unwrap()
    });
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    String::from_utf8(out.stdout).unwrap()
}

/// A row of `text` whose last two columns are these.
fn row(text: &str, a: &str, b: &str) -> bool {
    text.lines().any(|l| {
        let cols: Vec<&str> = l.split_whitespace().collect();
        cols.len() >= 2 && cols[cols.len() - 2] == a && cols[cols.len() - 1] == b
    })
}

#[test]
fn batch_groups_by_filename_and_connection() {
    let Some(_serial) = live_bpf() else { return };
    let scene = Scene::start();
    let text = batch(&["-g", "filename,comm"]);
    let pipe = format!("pipe:[{}]", scene.pipe_ino);
    assert!(row(&text, &pipe, PIPE), "no {pipe} group:\n{text}");
    assert!(
        row(&text, scene.open_fifo.to_str().unwrap(), OPEN),
        "no inbox group:\n{text}"
    );
    assert!(
        text.lines()
            .any(|l| l.starts_with("samples") && l.contains("filename")),
        "{text}"
    );

    // Grouped by connection state, filtered on the connection.
    let text = batch(&["-g", "conn_state,comm", "-w", "connection~TCP "]);
    for (state, comm) in [
        ("ESTABLISHED", TCP4_C),
        ("ESTABLISHED", TCP6_S),
        ("LISTEN", ACCEPT),
    ] {
        assert!(row(&text, state, comm), "no {state} {comm} group:\n{text}");
    }
    assert!(!text.contains(UNIX_C) && !text.contains(PIPE), "{text}");
    scene.finish();
}
