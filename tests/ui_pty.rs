//! The real binary in a pseudo-terminal: `xtop replay` on a fixture recording
//! (and live `xtop` as root), driven by key presses, asserting what the screen
//! shows, the exported files, the exit code and that the terminal was restored.
//!
//! The output is fed through a small terminal emulator (cursor moves, clears,
//! text), because ratatui redraws only the cells that changed: searching the raw
//! bytes for a phrase would find stale text, or miss text drawn in pieces.

mod common;

use std::fs::File;
use std::io::{Read, Write};
use std::os::fd::{AsRawFd, OwnedFd};
use std::os::unix::fs::PermissionsExt;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use xtop::model::fixture::{busy_snapshot, sample};
use xtop::model::{Arch, Session, Snapshot, State};

const TIMEOUT: Duration = Duration::from_secs(10);
const ENTER_ALT: &[u8] = b"\x1b[?1049h";
const LEAVE_ALT: &[u8] = b"\x1b[?1049l";
const CURSOR_QUERY: &[u8] = b"\x1b[6n";

/// A fresh, empty directory for one test.
fn temp_dir(name: &str) -> PathBuf {
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join(format!("ui_pty-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// A recording of 30 one-second snapshots in which DISK/pread64/postgres is
/// clearly the top group (two threads in every snapshot).
fn fixture_recording(dir: &Path) -> PathBuf {
    let session = Session {
        host: "ptyhost".into(),
        kernel: "6.1.0-test".into(),
        arch: Arch::X86_64,
        ncpus: 2,
        interval: Duration::from_secs(1),
        xtop_version: env!("CARGO_PKG_VERSION").into(),
        options: String::new(),
    };
    let snaps: Vec<Snapshot> = (0..30)
        .map(|i| {
            let mut s = busy_snapshot(i);
            s.samples
                .push(sample(103, 100, "postgres", State::Disk, Some(17)));
            s
        })
        .collect();
    let path = dir.join("fixture.xtop");
    xtop::recording::write_file(&path, &session, &snaps).unwrap();
    path
}

// ---------------------------------------------------------------------------
// A minimal terminal emulator: enough for what crossterm/ratatui emit.

struct Screen {
    cols: usize,
    rows: usize,
    grid: Vec<Vec<char>>,
    row: usize,
    col: usize,
}

impl Screen {
    fn new(cols: usize, rows: usize) -> Screen {
        Screen {
            cols,
            rows,
            grid: vec![vec![' '; cols]; rows],
            row: 0,
            col: 0,
        }
    }

    fn clear(&mut self, from: (usize, usize), to: (usize, usize)) {
        for r in from.0..=to.0.min(self.rows - 1) {
            let (c0, c1) = (
                if r == from.0 { from.1 } else { 0 },
                if r == to.0 { to.1 } else { self.cols - 1 },
            );
            for c in c0..=c1.min(self.cols - 1) {
                self.grid[r][c] = ' ';
            }
        }
    }

    fn newline(&mut self) {
        if self.row + 1 >= self.rows {
            self.grid.remove(0);
            self.grid.push(vec![' '; self.cols]);
        } else {
            self.row += 1;
        }
    }

    fn put(&mut self, ch: char) {
        if self.col >= self.cols {
            self.col = 0;
            self.newline();
        }
        self.grid[self.row][self.col] = ch;
        self.col += 1;
    }

    fn csi(&mut self, params: &str, fin: char) {
        let nums: Vec<usize> = params
            .trim_start_matches('?')
            .split(';')
            .map(|p| p.parse().unwrap_or(0))
            .collect();
        let n = |i: usize, default: usize| nums.get(i).copied().filter(|&v| v != 0).unwrap_or(default);
        let (last_r, last_c) = (self.rows - 1, self.cols - 1);
        match fin {
            'H' | 'f' => {
                self.row = (n(0, 1) - 1).min(last_r);
                self.col = (n(1, 1) - 1).min(last_c);
            }
            'A' => self.row = self.row.saturating_sub(n(0, 1)),
            'B' => self.row = (self.row + n(0, 1)).min(last_r),
            'C' => self.col = (self.col + n(0, 1)).min(last_c),
            'D' => self.col = self.col.saturating_sub(n(0, 1)),
            'G' => self.col = (n(0, 1) - 1).min(last_c),
            'd' => self.row = (n(0, 1) - 1).min(last_r),
            'J' => match nums[0] {
                0 => self.clear((self.row, self.col), (last_r, last_c)),
                1 => self.clear((0, 0), (self.row, self.col)),
                _ => self.clear((0, 0), (last_r, last_c)),
            },
            'K' => match nums[0] {
                0 => self.clear((self.row, self.col), (self.row, last_c)),
                1 => self.clear((self.row, 0), (self.row, self.col)),
                _ => self.clear((self.row, 0), (self.row, last_c)),
            },
            // Entering or leaving the alternate screen: a blank one either way
            // (what the main screen held before is not ours to know).
            'h' | 'l' if params == "?1049" => {
                self.clear((0, 0), (last_r, last_c));
                (self.row, self.col) = (0, 0);
            }
            _ => {}
        }
    }

    /// The screen after `bytes` were written to a `cols`×`rows` terminal.
    fn render(bytes: &[u8], cols: usize, rows: usize) -> String {
        Screen::run(bytes, cols, rows).text()
    }

    fn text(&self) -> String {
        self.grid
            .iter()
            .map(|r| r.iter().collect::<String>().trim_end().to_string())
            .collect::<Vec<_>>()
            .join("\n")
    }

    fn run(bytes: &[u8], cols: usize, rows: usize) -> Screen {
        let mut s = Screen::new(cols, rows);
        let text = String::from_utf8_lossy(bytes);
        let mut it = text.chars();
        while let Some(c) = it.next() {
            match c {
                '\x1b' => match it.next() {
                    Some('[') => {
                        let mut params = String::new();
                        for ch in it.by_ref() {
                            if ('\x40'..='\x7e').contains(&ch) {
                                s.csi(&params, ch);
                                break;
                            }
                            params.push(ch);
                        }
                    }
                    // OSC (window title and such): up to BEL or ST.
                    Some(']') => {
                        while let Some(ch) = it.next() {
                            if ch == '\x07' {
                                break;
                            }
                            if ch == '\x1b' {
                                it.next();
                                break;
                            }
                        }
                    }
                    _ => {}
                },
                '\r' => s.col = 0,
                '\n' => s.newline(),
                '\x08' => s.col = s.col.saturating_sub(1),
                c if c < ' ' || c == '\x7f' => {}
                c => s.put(c),
            }
        }
        s
    }
}

#[test]
fn emulator_follows_cursor_moves_and_clears() {
    let out = b"\x1b[?1049h\x1b[2J\x1b[1;1Hfilters: none\x1b[2;3H\x1b[38;5;2mab\x1b[0m\x1b[1;10Hstate=DISK";
    let screen = Screen::render(out, 20, 3);
    assert_eq!(screen, "filters: state=DISK\n  ab\n");
    let screen = Screen::render(b"\x1b[1;1Hxyz\x1b[1;2H\x1b[K", 5, 1);
    assert_eq!(screen, "x");
}

/// Whether one row of the screen holds all of `words`.
fn row_with(screen: &str, words: &[&str]) -> bool {
    screen.lines().any(|l| words.iter().all(|w| l.contains(w)))
}

// ---------------------------------------------------------------------------
// The binary in a pty.

fn termios(fd: &OwnedFd) -> libc::termios {
    // SAFETY: tcgetattr fills a plain-data struct.
    unsafe {
        let mut t: libc::termios = std::mem::zeroed();
        assert_eq!(libc::tcgetattr(fd.as_raw_fd(), &mut t), 0, "tcgetattr");
        t
    }
}

fn cooked(t: &libc::termios) -> bool {
    t.c_lflag & libc::ICANON != 0 && t.c_lflag & libc::ECHO != 0
}

struct Tui {
    child: Child,
    /// Kept open so the slave's termios can be read after the child exits.
    slave: OwnedFd,
    master: File,
    size: Arc<Mutex<(usize, usize)>>,
    out: Arc<Mutex<Vec<u8>>>,
    stop: Arc<AtomicBool>,
    reader: Option<JoinHandle<()>>,
    /// The slave's termios before the child started.
    before: libc::termios,
}

impl Tui {
    fn spawn(args: &[&str], cwd: &Path, cols: u16, rows: u16) -> Tui {
        let (master, slave) = common::pty::open(cols, rows);
        let (m, s) = (master.as_raw_fd(), slave.as_raw_fd());
        // SAFETY: fcntl on an fd we own. Non-blocking so the reader can stop.
        unsafe {
            let fl = libc::fcntl(m, libc::F_GETFL);
            libc::fcntl(m, libc::F_SETFL, fl | libc::O_NONBLOCK);
            libc::fcntl(m, libc::F_SETFD, libc::FD_CLOEXEC);
            libc::fcntl(s, libc::F_SETFD, libc::FD_CLOEXEC);
        }
        let before = termios(&slave);
        assert!(cooked(&before), "a new pty starts in canonical mode with echo");

        let stdio = || Stdio::from(slave.try_clone().unwrap());
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_xtop"));
        cmd.args(args)
            .current_dir(cwd)
            .env("TERM", "xterm-256color")
            .stdin(stdio())
            .stdout(stdio())
            .stderr(stdio());
        // SAFETY: only async-signal-safe calls between fork and exec.
        unsafe {
            cmd.pre_exec(|| {
                if libc::setsid() < 0 || libc::ioctl(0, libc::TIOCSCTTY, 0) < 0 {
                    return Err(std::io::Error::last_os_error());
                }
                Ok(())
            });
        }
        let child = cmd.spawn().expect("starting xtop");

        let out = Arc::new(Mutex::new(Vec::new()));
        let size = Arc::new(Mutex::new((cols as usize, rows as usize)));
        let stop = Arc::new(AtomicBool::new(false));
        let mut rd = File::from(master.try_clone().unwrap());
        let reader = {
            let (out, size, stop) = (out.clone(), size.clone(), stop.clone());
            std::thread::spawn(move || {
                let mut buf = [0u8; 8192];
                let mut answered = 0;
                loop {
                    match rd.read(&mut buf) {
                        Ok(n) if n > 0 => {
                            let mut out = out.lock().unwrap();
                            out.extend_from_slice(&buf[..n]);
                            // Answer cursor position requests, as a terminal does
                            // (ratatui asks when it clears the screen).
                            while let Some(i) = find(&out[answered..], CURSOR_QUERY) {
                                answered += i + CURSOR_QUERY.len();
                                let (cols, rows) = *size.lock().unwrap();
                                let s = Screen::run(&out[..answered], cols, rows);
                                let reply = format!("\x1b[{};{}R", s.row + 1, s.col.min(cols - 1) + 1);
                                let _ = rd.write_all(reply.as_bytes());
                            }
                        }
                        _ => {
                            if stop.load(Ordering::Relaxed) {
                                break;
                            }
                            std::thread::sleep(Duration::from_millis(10));
                        }
                    }
                }
            })
        };
        Tui {
            child,
            slave,
            master: File::from(master),
            size,
            out,
            stop,
            reader: Some(reader),
            before,
        }
    }

    fn send(&mut self, keys: &[u8]) {
        self.master.write_all(keys).unwrap();
    }

    fn resize(&mut self, cols: u16, rows: u16) {
        *self.size.lock().unwrap() = (cols as usize, rows as usize);
        let fd = OwnedFd::from(self.master.try_clone().unwrap());
        common::pty::set_size(&fd, cols, rows);
    }

    fn raw(&self) -> Vec<u8> {
        self.out.lock().unwrap().clone()
    }

    fn screen(&self) -> String {
        let (cols, rows) = *self.size.lock().unwrap();
        Screen::render(&self.raw(), cols, rows)
    }

    /// Polls the screen until `ok` holds; fails with the screen otherwise.
    fn wait_for(&self, what: &str, ok: impl Fn(&str) -> bool) -> String {
        let deadline = Instant::now() + TIMEOUT;
        loop {
            let screen = self.screen();
            if ok(&screen) {
                return screen;
            }
            assert!(
                Instant::now() < deadline,
                "timed out waiting for {what}; screen:\n{screen}"
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// Polls the raw output until it holds `needle`.
    fn wait_for_raw(&self, needle: &[u8]) -> Vec<u8> {
        let deadline = Instant::now() + TIMEOUT;
        loop {
            let raw = self.raw();
            if find(&raw, needle).is_some() {
                return raw;
            }
            assert!(
                Instant::now() < deadline,
                "timed out waiting for {:?} in the output, which ends {:?}; screen:\n{}",
                String::from_utf8_lossy(needle),
                String::from_utf8_lossy(&raw[raw.len().saturating_sub(300)..]),
                self.screen()
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    fn wait_exit(&mut self) -> ExitStatus {
        let deadline = Instant::now() + TIMEOUT;
        loop {
            if let Some(st) = self.child.try_wait().unwrap() {
                return st;
            }
            assert!(
                Instant::now() < deadline,
                "xtop did not exit; screen:\n{}",
                self.screen()
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// Closes the terminal's master side, as when an ssh session or tmux dies.
    fn hang_up(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(r) = self.reader.take() {
            let _ = r.join();
        }
        drop(std::mem::replace(
            &mut self.master,
            File::open("/dev/null").unwrap(),
        ));
    }

    /// Raw mode is on while the UI runs (so the check after exit means something).
    fn assert_raw_mode(&self) {
        let t = termios(&self.slave);
        assert!(
            t.c_lflag & (libc::ICANON | libc::ECHO) == 0,
            "the UI runs in raw mode"
        );
    }

    /// Quits with `q` and checks the exit code and that the terminal is as before.
    fn quit_and_check_restored(&mut self) {
        self.send(b"q");
        let st = self.wait_exit();
        assert!(st.success(), "xtop exited with {st}; screen:\n{}", self.screen());
        let raw = self.wait_for_raw(LEAVE_ALT);
        let entered = find(&raw, ENTER_ALT).expect("entered the alternate screen");
        let left = rfind(&raw, LEAVE_ALT).unwrap();
        assert!(left > entered, "left the alternate screen after entering it");
        let after = termios(&self.slave);
        assert!(cooked(&after), "canonical mode and echo are back");
        let b = &self.before;
        assert_eq!(
            (after.c_iflag, after.c_oflag, after.c_cflag, after.c_lflag),
            (b.c_iflag, b.c_oflag, b.c_cflag, b.c_lflag),
            "termios restored exactly"
        );
        // The cursor was hidden while drawing: it is shown again after.
        let shown = rfind(&raw, b"\x1b[?25h").expect("cursor shown again");
        assert!(shown > rfind(&raw, b"\x1b[?25l").unwrap_or(0));
    }
}

impl Drop for Tui {
    fn drop(&mut self) {
        if let Ok(None) = self.child.try_wait() {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
        self.stop.store(true, Ordering::Relaxed);
        if let Some(r) = self.reader.take() {
            let _ = r.join();
        }
    }
}

fn find(hay: &[u8], needle: &[u8]) -> Option<usize> {
    hay.windows(needle.len()).position(|w| w == needle)
}

fn rfind(hay: &[u8], needle: &[u8]) -> Option<usize> {
    hay.windows(needle.len()).rposition(|w| w == needle)
}

/// Dangling links at `dir/xtop-HOST-STAMP.EXT` for each second from now to
/// 30 s on, into an empty `ghosts` directory: a write that follows one would
/// create a file there. Returns the links.
fn plant_export_traps(dir: &Path, ghosts: &Path, host: &str, exts: &[&str]) -> Vec<PathBuf> {
    std::fs::create_dir(ghosts).unwrap();
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs();
    let mut links = Vec::new();
    for sec in now.saturating_sub(1)..now + 30 {
        // YYYY-MM-DDTHH:MM:SS… local, as the screen names its files.
        let t = xtop::value::format_local_time(sec * 1_000_000_000);
        let stamp = t[..19].replace(['-', ':'], "").replace('T', "-");
        for ext in exts {
            let name = format!("xtop-{host}-{stamp}.{ext}");
            let link = dir.join(&name);
            std::os::unix::fs::symlink(ghosts.join(&name), &link).unwrap();
            links.push(link);
        }
    }
    links
}

/// The regular files in `dir` (planted links left out), sorted.
fn regular_files(dir: &Path) -> Vec<PathBuf> {
    let mut files: Vec<PathBuf> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| std::fs::symlink_metadata(p).unwrap().is_file())
        .collect();
    files.sort();
    files
}

// ---------------------------------------------------------------------------

#[test]
fn replay_drill_back_export_quit() {
    let dir = temp_dir("replay");
    let rec = fixture_recording(&dir);
    let exports = dir.join("exports");
    std::fs::create_dir(&exports).unwrap();
    let mut tui = Tui::spawn(
        &[
            "replay",
            "--export-dir",
            exports.to_str().unwrap(),
            rec.to_str().unwrap(),
        ],
        &dir,
        100,
        30,
    );

    let screen = tui.wait_for("the replay table", |s| {
        s.contains("REPLAY")
            && row_with(s, &["avg_thr", "state", "syscall", "comm"])
            && row_with(s, &["DISK", "pread64", "postgres"])
            && !s.contains("loading")
    });
    assert!(screen.contains("filters: none"), "{screen}");
    tui.assert_raw_mode();

    // Enter drills into the top row: its values become filters, the rest regroups.
    tui.send(b"\r");
    let screen = tui.wait_for("the drilled-down view", |s| {
        s.contains("filters: state=DISK › syscall=pread64 › comm=postgres")
            && row_with(s, &["avg_thr", "kstack_top", "tid"])
    });
    assert!(row_with(&screen, &["pipe_read", "101"]), "{screen}");
    assert!(row_with(&screen, &["pipe_read", "103"]), "{screen}");
    assert!(!row_with(&screen, &["java"]), "only the drilled group: {screen}");

    // Backspace goes back up: no filters, the default columns again.
    tui.send(b"\x7f");
    let screen = tui.wait_for("the top level again", |s| {
        s.contains("filters: none") && row_with(s, &["avg_thr", "state", "syscall", "comm"])
    });
    assert!(!screen.contains("kstack_top"), "{screen}");
    assert!(row_with(&screen, &["SLEEP", "java"]), "{screen}");

    // Links planted (as a local user would in /tmp) at every name e and f could
    // pick in the next half minute, pointing where root must never write.
    let ghosts = dir.join("ghosts");
    let traps = plant_export_traps(&exports, &ghosts, "ptyhost", &["txt", "xtop", "folded"]);

    // e exports the window: a toast, two private files, a recording that reopens.
    tui.send(b"e");
    tui.wait_for("the export toast", |s| s.contains(" exported "));
    let mut files = regular_files(&exports);
    files.sort();
    assert_eq!(files.len(), 2, "{files:?}");
    for f in &files {
        let name = f.file_name().unwrap().to_string_lossy();
        assert!(name.starts_with("xtop-ptyhost-"), "{name}");
        let mode = std::fs::metadata(f).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o600, "{name}");
    }
    let ext = |e: &str| files.iter().find(|f| f.extension().unwrap() == e).unwrap();
    let text = std::fs::read_to_string(ext("txt")).unwrap();
    assert!(text.contains("filters: none"), "{text}");
    assert!(text.contains("postgres") && text.contains("pread64"), "{text}");
    let back = xtop::recording::read_files(&[ext("xtop").clone()]).unwrap();
    assert_eq!(back.session.host, "ptyhost");
    assert_eq!(back.snapshots.len(), 30, "the whole recording was in the window");

    // s opens the highlighted row's call tree; Enter opens the chain; f writes it folded.
    tui.send(b"s");
    tui.wait_for("the stack view", |s| {
        s.contains("stacks of state=DISK syscall=pread64 comm=postgres · 60 samples")
            && row_with(s, &["60", "100.0", "main"])
    });
    tui.send(b"\r");
    tui.wait_for("the opened chain", |s| row_with(s, &["60", "__schedule", "[k]"]));
    tui.send(b"f");
    let screen = tui.wait_for("the folded toast", |s| s.contains(" wrote 60 samples to "));
    let folded: Vec<PathBuf> = regular_files(&exports)
        .into_iter()
        .filter(|p| p.extension().is_some_and(|e| e == "folded"))
        .collect();
    assert_eq!(folded.len(), 1, "{screen}");
    // Every written name replaced its link; no link was followed.
    assert_eq!(
        std::fs::read_dir(&ghosts).unwrap().count(),
        0,
        "root wrote through a link"
    );
    assert!(
        traps.iter().filter(|t| t.is_file()).count() == 3,
        "the exports took the trapped names (links replaced by renames)"
    );
    assert_eq!(
        std::fs::read_to_string(&folded[0]).unwrap(),
        "main;read_block;__libc_read;vfs_read_[k];pipe_read_[k];schedule_[k];__schedule_[k] 60\n"
    );
    // Backspace closes the frame, then goes back to the table.
    tui.send(b"\x7f\x7f");
    tui.wait_for("the table after the stack view", |s| {
        row_with(s, &["avg_thr", "state", "syscall", "comm"]) && !s.contains("stacks of")
    });

    tui.quit_and_check_restored();
    drop(tui);
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn a_hung_up_terminal_ends_xtop() {
    // The terminal going away must end xtop, not leave it spinning on a dead tty.
    let dir = temp_dir("hangup");
    let rec = fixture_recording(&dir);
    let mut tui = Tui::spawn(&["replay", rec.to_str().unwrap()], &dir, 100, 30);
    tui.wait_for("the replay screen", |s| s.contains("REPLAY"));
    tui.hang_up();
    let st = tui.wait_exit();
    assert!(!st.success(), "a hangup is not a clean quit: {st}");
    drop(tui);
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn tiny_terminal_says_too_small_then_recovers_on_resize() {
    let dir = temp_dir("tiny");
    let rec = fixture_recording(&dir);
    let mut tui = Tui::spawn(&["replay", rec.to_str().unwrap()], &dir, 20, 5);
    let screen = tui.wait_for("the too-small message", |s| s.contains("too small"));
    assert!(!screen.contains("REPLAY"), "{screen}");

    tui.resize(100, 30);
    tui.wait_for("the full screen after a resize", |s| {
        s.contains("REPLAY") && row_with(s, &["state", "syscall", "comm"])
    });

    tui.resize(20, 5);
    tui.wait_for("the too-small message again", |s| s.contains("too small"));
    tui.quit_and_check_restored();
    drop(tui);
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn live_screen_starts_and_quits() {
    if !common::workload::can_run_bpf() {
        return;
    }
    let dir = temp_dir("live");
    let mut tui = Tui::spawn(&["-i", "200ms"], &dir, 100, 30);
    tui.wait_for("the live table", |s| {
        s.contains("LIVE") && row_with(s, &["avg_thr", "state", "syscall", "comm"])
    });
    tui.assert_raw_mode();
    tui.quit_and_check_restored();
    drop(tui);
    std::fs::remove_dir_all(&dir).unwrap();
}
