//! Screen tests: fixture snapshots rendered on ratatui's TestBackend, and key
//! sequences applied to the app state without a terminal.

use std::time::Duration;

use crossterm::event::{KeyCode, KeyEvent, KeyModifiers};
use ratatui::backend::TestBackend;
use ratatui::Terminal;

use crate::model::fixture::busy_snapshot;
use crate::model::{Arch, Session};

use super::app::{App, UiOptions};
use super::render;

pub(crate) fn session() -> Session {
    Session {
        host: "db1".into(),
        kernel: "6.8.0".into(),
        arch: Arch::X86_64,
        ncpus: 2,
        interval: Duration::from_secs(1),
        xtop_version: "0.1.0".into(),
        options: String::new(),
    }
}

/// Rendered times are local: pin the zone so expected screens match anywhere.
pub(crate) fn utc() {
    static ONCE: std::sync::Once = std::sync::Once::new();
    ONCE.call_once(|| {
        std::env::set_var("TZ", "UTC");
        extern "C" {
            fn tzset();
        }
        // SAFETY: tzset only rereads TZ; done once, before any rendering.
        unsafe { tzset() };
    });
}

pub(crate) fn app(n: u64, live: bool) -> App {
    utc();
    let mut app = App::new(session(), &UiOptions::default(), live, false);
    for i in 0..n {
        app.push(busy_snapshot(i));
    }
    app
}

pub(crate) fn screen(app: &mut App, w: u16, h: u16) -> String {
    let (cols, page) = render::geometry(w, h);
    app.prepare(cols, page, None);
    drawn(app, w, h)
}

/// The screen as drawn from the app's state as it is (no `prepare`).
pub(crate) fn drawn(app: &App, w: u16, h: u16) -> String {
    let mut t = Terminal::new(TestBackend::new(w, h)).unwrap();
    t.draw(|f| render::draw(f, app)).unwrap();
    let buf = t.backend().buffer();
    let mut out = String::new();
    for y in 0..h {
        let line: String = (0..w).map(|x| buf[(x, y)].symbol()).collect();
        out.push_str(line.trim_end());
        out.push('\n');
    }
    out
}

pub(crate) fn key(app: &mut App, code: KeyCode) -> super::Effect {
    app.handle_key(&KeyEvent::new(code, KeyModifiers::NONE))
}

pub(crate) fn typed(app: &mut App, text: &str) {
    for c in text.chars() {
        key(app, KeyCode::Char(c));
    }
}

pub(crate) fn prepared(n: u64, live: bool) -> App {
    let mut a = app(n, live);
    screen(&mut a, 80, 24);
    a
}

/// Compares a rendered screen with the expected one (leading newline of the
/// literal ignored), showing both on mismatch.
pub(crate) fn assert_screen(got: &str, want: &str) {
    let want = want.strip_prefix('\n').unwrap_or(want);
    assert!(
        got == want,
        "screen differs\n--- got ---\n{got}--- want ---\n{want}"
    );
}

#[test]
fn main_view_screen() {
    let mut a = prepared(30, true);
    assert_screen(
        &screen(&mut a, 80, 24),
        r#"
xtop LIVE db1 · 6.8.0 · 2 CPUs · every 1s
11:59:29–12:00:29 (1m) · 165 samples in 30 snapshots · xtop CPU 0.0% · dropped 0
  6.6┤░░░░░░░░░░░░░░░░░░░░░░░░░░░░░░░░░░░░░▄  ▁ ▄ ▁▁ ▄ ▁  ▄ ▂  ▃ ▂  ▃ ▃  ▂ ▃  ▂
     ┤░░░░░░░░░░░░░░░░░░░░░░░░░░░░░░░░░░░░░█▆██▅█▆██▅█▅██▆█▅██▆█▄██▇█▄█▇▇█▄█▇██▄
     ┤░░░░░░░░░░░░░░░░░░░░░░░░░░░░░░░░░░░░░█████████████████████████████████████
     ┤░░░░░░░░░░░░░░░░░░░░░░░░░░░░░░░░░░░░░█████████████████████████████████████
 2cpu┤╌╌╌╌╌╌╌╌╌╌╌╌╌╌╌╌╌╌╌╌╌╌╌╌╌╌╌╌╌╌╌╌╌╌╌╌╌─────────────────────────────────────
    0┤░░░░░░░░░░░░░░░░░░░░░░░░░░░░░░░░░░░░░█████████████████████████████████████
      11:59:29     ╵11:59:40   ╵11:59:50    ╵12:00:00   ╵12:00:10       12:00:29
      ■ RUN  ■ DISK  ■ RUNQ  ■ SLEEP  ╌ 2 CPUs  ░ no snapshot
avg_thr▼ %     activity     state syscall comm
    1.00  18.2       ██████ DISK  pread64 postgres
    1.00  18.2       ██████ RUN   -       java
    1.00  18.2       ██████ RUN   -       postgres
    1.00  18.2       ██████ RUNQ  -       postgres
    1.00  18.2       ██████ SLEEP futex   java
    0.50   9.1       █▆█▆█▆ DISK  read    dd





filters: none
↑/k move Enter drill Bksp/Esc back g group / search \ filter < sort Space pause
"#,
    );
}

#[test]
fn thread_view_screen() {
    let mut a = prepared(30, true);
    key(&mut a, KeyCode::Enter);
    screen(&mut a, 100, 24);
    key(&mut a, KeyCode::Enter);
    assert_eq!(a.pinned_tid(), Some(101));
    assert_screen(
        &screen(&mut a, 100, 24),
        r#"
xtop LIVE db1 · 6.8.0 · 2 CPUs · every 1s
11:59:29–12:00:29 (1m) · 30 samples in 30 snapshots · xtop CPU 0.0% · dropped 0
tid 101  pid 100  comm postgres  user alice (1000)  cgroup /user.slice
exe /usr/bin/postgres  cmdline postgres --serve
state┤░░░░░░░░░░░░░░░░░░░░░░░░░░░░░░░░░░░░░░░░░░░░░░░███████████████████████████████████████████████
      ■ DISK  · not sampled (inactive or absent)  ░ no snapshot
now DISK pread64(fd=3, buf=0x7ffd0000, count=4096, pos=0) for 1.5ms, syscall #42
file   /var/lib/postgres/base/16384/2619
kstack __schedule ← schedule ← [pipe_read] ← vfs_read
ustack __libc_read ← [read_block] ← main
30 samples, newest first · ustacks to root 30/30 (100%) · export applies every filter
time     state syscall sysc_ns_so_far kstack_top ustack_app cpu switch    waker_tid
12:00:29 DISK  pread64        1500000 pipe_read  read_block   1 voluntary         1
12:00:28 DISK  pread64        1500000 pipe_read  read_block   1 voluntary         1
12:00:27 DISK  pread64        1500000 pipe_read  read_block   1 voluntary         1
12:00:26 DISK  pread64        1500000 pipe_read  read_block   1 voluntary         1
12:00:25 DISK  pread64        1500000 pipe_read  read_block   1 voluntary         1
12:00:24 DISK  pread64        1500000 pipe_read  read_block   1 voluntary         1
12:00:23 DISK  pread64        1500000 pipe_read  read_block   1 voluntary         1
12:00:22 DISK  pread64        1500000 pipe_read  read_block   1 voluntary         1
12:00:21 DISK  pread64        1500000 pipe_read  read_block   1 voluntary         1
12:00:20 DISK  pread64        1500000 pipe_read  read_block   1 voluntary         1
filters: state=DISK › syscall=pread64 › comm=postgres › kstack_top=pipe_read › tid=101
↑/k move Bksp/Esc back \ filter Space pause [ earlier ] later + widen - narrow a all e export ?/F1 h
"#,
    );
}

#[test]
fn thread_view_shows_the_connection_and_app_wait_of_a_socket() {
    let mut a = prepared(6, true);
    key(&mut a, KeyCode::Char('\\'));
    typed(&mut a, "tid=101");
    key(&mut a, KeyCode::Enter);
    screen(&mut a, 100, 20);
    a.thread.samples[0].1.target = Some(std::sync::Arc::new(crate::model::Target::Socket {
        file: "socket:[77]".into(),
        connection: Some("TCP 10.0.0.1:5432->10.0.0.2:39856".into()),
        state: Some("ESTABLISHED".into()),
    }));
    a.thread.samples[0].1.app = Some(std::sync::Arc::new(crate::model::AppWait::Known {
        class: "Client".into(),
        event: "ClientRead".into(),
        state: "client backend".into(),
    }));
    let s = screen(&mut a, 100, 20);
    assert!(
        s.contains(
            "\nfile   socket:[77]\nconn   TCP 10.0.0.1:5432->10.0.0.2:39856  ESTABLISHED\n\
             app    Client:ClientRead  (client backend)\nkstack "
        ),
        "{s}"
    );
    // Not a socket: no conn line; a program without a wait state: no app line.
    key(&mut a, KeyCode::Down);
    let s = screen(&mut a, 100, 20);
    assert!(
        s.contains("file   /var/lib/") && !s.contains("conn   ") && !s.contains("app    "),
        "{s}"
    );
}

#[test]
fn help_screen() {
    let mut a = prepared(30, true);
    key(&mut a, KeyCode::F(1));
    assert_screen(
        &screen(&mut a, 80, 24),
        r#"
xtop LIVE db1 · 6.8.0 · 2 CPUs · every 1s
┌ xtop keys (↑↓ scroll, Esc closes) ───────────────────────────────────────────┐
│Main view                                                                     │
│  ↑/k      Move the selection up                                              │
│  ↓/j      Move the selection down                                            │
│  PgUp     Move up one page                                                   │
│  PgDn     Move down one page                                                 │
│  Home     Go to the first row                                                │
│  End      Go to the last row                                                 │
│  Enter    Drill into the selected row: its values become filters, then regrou│
│  Bksp/Esc Go back one drill-down level                                       │
│  g        Pick the group-by dimensions                                       │
│  /        Show only rows containing a text (empty clears)                    │
│  \        Filter samples: DIM=VALUE, DIM!=VALUE or DIM~TEXT                  │
│  <        Sort by the column to the left                                     │
│  >        Sort by the column to the right                                    │
│  I        Invert the sort order                                              │
│  Space    Pause/resume the screen (sampling continues)                       │
│  [        Move the window back in time                                       │
│  ]        Move the window forward in time                                    │
│  +        Widen the window                                                   │
│  -        Narrow the window                                                  │
└──────────────────────────────────────────────────────────────────────────────┘
↑/k move q/F10 quit Esc/? close
"#,
    );
}

#[test]
fn group_by_picker_screen() {
    let mut a = prepared(30, true);
    key(&mut a, KeyCode::Char('g'));
    key(&mut a, KeyCode::Down);
    assert_screen(
        &screen(&mut a, 80, 16),
        r#"
xtop LIVE db1 · 6.8.0 · 2 CPUs · every 1s
11:59:29–12:00:29 (1m) · 165 samples in 30 snapshots · xtop CPU 0.0% · dropped 0
┌ group by: state, syscall, comm ──────────────────────────────────────────────┐
│[ ] timestamp        Time of the sampling pass (local time).                  │
│[ ] tid              Thread id.                                               │
│[ ] tgid             Process id (thread group id).                            │
│[ ] pidns            PID namespace inode: threads in the same container share │
│[ ] cgroup_id        cgroup v2 id of the thread.                              │
│[ ] cgroup           cgroup v2 path, e.g. /system.slice/nginx.service.        │
│[1] state            RUN on a CPU; RUNQ runnable but waiting for a CPU; DISK u│
│[ ] uid              Effective user id.                                       │
│[ ] username         Effective user name.                                     │
│[ ] exe              Executable path of the process.                          │
└──────────────────────────────────────────────────────────────────────────────┘
filters: none
↑/k move q/F10 quit Space add/remove < earlier > later Enter apply Esc cancel
"#,
    );
}

#[test]
fn replay_header_and_smallest_screen() {
    let mut a = prepared(8, false);
    assert_screen(
        &screen(&mut a, 40, 10),
        r#"
xtop REPLAY db1 · 6.8.0 · 2 CPUs · every
11:59:07–12:00:07 (1m) · 44 samples in 8
  6.6┤╌╌╌╌╌╌╌╌╌╌╌╌╌╌╌╌╌╌╌╌╌╌╌╌╌╌╌╌╌▇▇▇▇▇
      11:59:07     ╵11:59:30    12:00:07
      ■ RUN  ■ DISK  ■ RUNQ  ■ SLEEP  ╌
avg_thr▼ %     activity   state syscall
    1.00  18.2            DISK  pread64
    1.00  18.2            RUN   -
filters: none
↑/k move Enter drill Bksp/Esc back g gro
"#,
    );
}

#[test]
fn too_small_screen() {
    let mut a = prepared(8, false);
    assert_screen(
        &screen(&mut a, 39, 10),
        r#"
terminal too small: 39×10 (need 40×10)









"#,
    );
    let tiny = screen(&mut a, 12, 3);
    assert!(tiny.starts_with("terminal too"), "{tiny}");
}

fn row_keys(a: &App) -> Vec<String> {
    a.rows()
        .iter()
        .map(|&i| {
            a.view().agg.groups[i]
                .key
                .iter()
                .map(ToString::to_string)
                .collect::<Vec<_>>()
                .join("/")
        })
        .collect()
}

fn dims(a: &App) -> Vec<&'static str> {
    a.level.query.dims.iter().map(|d| d.name).collect()
}

fn filters(a: &App) -> Vec<String> {
    a.level.query.filters.iter().map(ToString::to_string).collect()
}

#[test]
fn drill_down_regroups_then_pops_back() {
    let mut a = prepared(10, true);
    key(&mut a, KeyCode::Down);
    screen(&mut a, 80, 24);
    assert_eq!(row_keys(&a)[1], "RUN/-/java");
    key(&mut a, KeyCode::Enter);
    assert_eq!(filters(&a), ["state=RUN", "syscall=-", "comm=java"]);
    assert_eq!(dims(&a), ["kstack_top", "tid"]);
    screen(&mut a, 80, 24);
    assert_eq!(row_keys(&a), ["-/200"]);
    key(&mut a, KeyCode::Enter);
    assert_eq!(a.pinned_tid(), Some(200));
    assert_eq!(a.mode(), super::keys::Mode::Thread);
    screen(&mut a, 80, 24);
    assert_eq!(a.thread.samples.len(), 10);
    key(&mut a, KeyCode::Backspace);
    key(&mut a, KeyCode::Esc);
    assert_eq!(dims(&a), ["state", "syscall", "comm"]);
    assert!(filters(&a).is_empty());
    assert_eq!(a.level.selected, 1, "the cursor comes back where it was");
    key(&mut a, KeyCode::Esc);
    assert!(
        a.stack.is_empty() && filters(&a).is_empty(),
        "popping the root is harmless"
    );
}

#[test]
fn picker_adds_reorders_and_removes_dimensions() {
    let mut a = prepared(4, true);
    key(&mut a, KeyCode::Char('g'));
    key(&mut a, KeyCode::Down); // tid
    key(&mut a, KeyCode::Char(' '));
    for _ in 0..3 {
        key(&mut a, KeyCode::Char('<'));
    }
    key(&mut a, KeyCode::Enter);
    assert_eq!(dims(&a), ["tid", "state", "syscall", "comm"]);
    screen(&mut a, 80, 24);
    assert_eq!(row_keys(&a)[0], "100/RUN/-/postgres");
    // Esc leaves the grouping alone; an empty choice is refused.
    key(&mut a, KeyCode::Char('g'));
    key(&mut a, KeyCode::Char(' '));
    key(&mut a, KeyCode::Esc);
    assert_eq!(dims(&a).len(), 4);
    key(&mut a, KeyCode::Char('g'));
    for d in ["tid", "state", "syscall", "comm"] {
        let i = crate::dimensions::DIMENSIONS
            .iter()
            .position(|x| x.name == d)
            .unwrap();
        key(&mut a, KeyCode::Home);
        for _ in 0..i {
            key(&mut a, KeyCode::Down);
        }
        key(&mut a, KeyCode::Char(' '));
    }
    key(&mut a, KeyCode::Enter);
    assert!(a.toast.as_ref().unwrap().error);
    assert_eq!(a.mode(), super::keys::Mode::Picker);
}

#[test]
fn sort_columns_and_invert() {
    let mut a = prepared(4, true);
    key(&mut a, KeyCode::Char('>'));
    screen(&mut a, 80, 24);
    assert_eq!(a.level.sort.col, 1);
    let rows = row_keys(&a);
    assert_eq!(
        rows[..2],
        ["DISK/pread64/postgres", "DISK/read/dd"],
        "by state, then heaviest"
    );
    key(&mut a, KeyCode::Char('I'));
    screen(&mut a, 80, 24);
    assert_eq!(row_keys(&a)[0], "SLEEP/futex/java");
    assert!(screen(&mut a, 80, 24).contains("state▼"));
    key(&mut a, KeyCode::Char('<'));
    key(&mut a, KeyCode::Char('<'));
    assert_eq!(a.level.sort.col, 3, "wraps to the last column");
    assert!(screen(&mut a, 80, 24).contains("comm▲"));
}

#[test]
fn pause_freezes_the_window_while_history_grows() {
    let mut a = prepared(10, true);
    key(&mut a, KeyCode::Char(' '));
    assert!(a.paused());
    let frozen = a.window().unwrap();
    a.push(busy_snapshot(10));
    a.push(busy_snapshot(11));
    assert_eq!(a.window().unwrap().end_ns, frozen.end_ns);
    assert_eq!(a.history.len(), 12);
    assert!(screen(&mut a, 80, 24).starts_with("xtop PAUSED"));
    key(&mut a, KeyCode::Char(' '));
    assert_eq!(a.window().unwrap().end_ns, busy_snapshot(11).time_ns);
}

#[test]
fn window_moves_widens_and_narrows() {
    let mut a = prepared(100, true);
    let latest = busy_snapshot(99).time_ns;
    assert_eq!(a.window().unwrap().hi - a.window().unwrap().lo, 60);
    key(&mut a, KeyCode::Char('['));
    assert_eq!(a.end, Some(latest - 30_000_000_000));
    key(&mut a, KeyCode::Char('['));
    key(&mut a, KeyCode::Char('['));
    key(&mut a, KeyCode::Char('['));
    assert_eq!(
        a.end,
        Some(busy_snapshot(0).time_ns),
        "stops at the oldest snapshot"
    );
    assert_eq!(a.window().unwrap().hi, 1);
    key(&mut a, KeyCode::Char(']'));
    assert_eq!(a.end, Some(busy_snapshot(30).time_ns));
    for _ in 0..3 {
        key(&mut a, KeyCode::Char(']'));
    }
    assert_eq!(a.end, None, "forward past the newest follows live data");
    key(&mut a, KeyCode::Char('+'));
    assert_eq!(a.span, Duration::from_secs(120));
    key(&mut a, KeyCode::Char('-'));
    key(&mut a, KeyCode::Char('-'));
    assert_eq!(a.span, Duration::from_secs(30));
    let out = screen(&mut a, 80, 24);
    assert!(out.contains("(30s) · 165 samples in 30 snapshots"), "{out}");
}

#[test]
fn filter_and_search_prompts() {
    let mut a = prepared(4, true);
    key(&mut a, KeyCode::Char('\\'));
    typed(&mut a, "nope=1");
    key(&mut a, KeyCode::Enter);
    assert_eq!(
        a.mode(),
        super::keys::Mode::Prompt,
        "a bad filter keeps the prompt open"
    );
    assert!(screen(&mut a, 80, 24).contains("unknown dimension 'nope'"));
    for _ in 0..6 {
        key(&mut a, KeyCode::Backspace);
    }
    typed(&mut a, "comm=java");
    key(&mut a, KeyCode::Enter);
    assert_eq!(filters(&a), ["comm=java"]);
    screen(&mut a, 80, 24);
    assert_eq!(row_keys(&a), ["RUN/-/java", "SLEEP/futex/java"]);
    key(&mut a, KeyCode::Backspace);
    key(&mut a, KeyCode::Char('/'));
    typed(&mut a, "PRE");
    key(&mut a, KeyCode::Enter);
    screen(&mut a, 80, 24);
    assert_eq!(row_keys(&a), ["DISK/pread64/postgres"]);
    key(&mut a, KeyCode::Char('\\'));
    typed(&mut a, "tid=102");
    key(&mut a, KeyCode::Enter);
    assert_eq!(a.mode(), super::keys::Mode::Thread);
}

#[test]
fn export_key_writes_private_files_and_failures_are_toasts() {
    use std::os::unix::fs::PermissionsExt;
    let dir = std::env::temp_dir().join(format!("xtop-ui-key-export-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let mut a = prepared(6, true);
    a.export_dir = dir.clone();
    key(&mut a, KeyCode::Enter); // drill: DISK/pread64/postgres
    key(&mut a, KeyCode::Char('e'));
    let toast = a.toast.clone().unwrap();
    assert!(!toast.error, "{}", toast.text);
    let mut files: Vec<_> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    files.sort();
    assert_eq!(files.len(), 2);
    assert!(toast.text.contains(&files[0].display().to_string()));
    for f in &files {
        let name = f.file_name().unwrap().to_string_lossy().to_string();
        assert!(name.starts_with("xtop-db1-"), "{name}");
        assert_eq!(std::fs::metadata(f).unwrap().permissions().mode() & 0o777, 0o600);
    }
    let text =
        std::fs::read_to_string(files.iter().find(|f| f.extension().unwrap() == "txt").unwrap()).unwrap();
    assert!(
        text.contains("filters: state=DISK syscall=pread64 comm=postgres"),
        "{text}"
    );
    assert!(
        text.contains("      6         1.00  100.0  pipe_read   101"),
        "{text}"
    );
    std::fs::remove_dir_all(&dir).unwrap();

    a.export_dir = dir.join("not/there");
    key(&mut a, KeyCode::Char('e'));
    let toast = a.toast.clone().unwrap();
    assert!(
        toast.error && toast.text.starts_with("export failed"),
        "{}",
        toast.text
    );
    assert!(screen(&mut a, 80, 24).contains("export failed"));
    key(&mut a, KeyCode::Backspace);
    assert!(filters(&a).is_empty(), "the UI goes on");
}

#[test]
fn all_threads_toggle_and_quit_keys() {
    use super::Effect;
    let mut a = prepared(2, true);
    assert_eq!(key(&mut a, KeyCode::Char('a')), Effect::SetAll(true));
    assert_eq!(key(&mut a, KeyCode::Char('a')), Effect::SetAll(false));
    let mut r = prepared(2, false);
    assert_eq!(
        key(&mut r, KeyCode::Char('a')),
        Effect::None,
        "replay has no sampler"
    );
    assert!(!screen(&mut r, 100, 24).contains("pause"));
    assert_eq!(key(&mut a, KeyCode::Char('q')), Effect::Quit);
    assert_eq!(key(&mut a, KeyCode::F(10)), Effect::Quit);
    key(&mut a, KeyCode::Char('/'));
    assert_eq!(
        key(&mut a, KeyCode::Char('q')),
        Effect::None,
        "q is text in a prompt"
    );
    let ctrl_c = KeyEvent::new(KeyCode::Char('c'), KeyModifiers::CONTROL);
    assert_eq!(a.handle_key(&ctrl_c), Effect::Quit);
}

#[test]
fn live_data_moves_the_view_and_history_stays_bounded() {
    let opts = UiOptions {
        history: Duration::from_secs(20),
        ..UiOptions::default()
    };
    let mut a = App::new(session(), &opts, true, false);
    for i in 0..50 {
        a.push(busy_snapshot(i));
        screen(&mut a, 80, 24);
    }
    assert_eq!(a.history.len(), 20);
    assert_eq!(a.view().snapshots, 20);
    // Even snapshots carry dd: 10 of the 20 kept.
    let dd = a
        .view()
        .agg
        .groups
        .iter()
        .find(|g| g.key[2].to_string() == "dd")
        .unwrap();
    assert_eq!(dd.samples, 10);
}

#[test]
fn replay_window_covers_the_recording() {
    let snaps: Vec<_> = (0..200).map(busy_snapshot).collect();
    let mut a = App::new(session(), &UiOptions::default(), false, false);
    a.start_replay(&snaps);
    assert_eq!(a.span, Duration::from_secs(300));
    assert!(screen(&mut a, 80, 24).contains("loading…"));
    for s in snaps {
        a.push(s);
    }
    a.loading = None;
    let out = screen(&mut a, 80, 24);
    assert!(out.starts_with("xtop REPLAY"), "{out}");
    assert!(out.contains("(5m) · 1100 samples in 200 snapshots"), "{out}");
}

#[test]
fn the_cursor_follows_its_group_when_rows_reorder() {
    let mut a = prepared(4, true);
    key(&mut a, KeyCode::Char('j'));
    key(&mut a, KeyCode::Char('j'));
    screen(&mut a, 80, 24);
    assert_eq!(row_keys(&a)[a.level.selected], "RUN/-/postgres");
    key(&mut a, KeyCode::Char('I'));
    screen(&mut a, 80, 24);
    assert_eq!(
        row_keys(&a)[a.level.selected],
        "RUN/-/postgres",
        "after inverting the sort"
    );
    // New data makes dd the heaviest group; the cursor stays on postgres.
    for i in 4..8 {
        let mut s = busy_snapshot(i);
        for t in 0..4 {
            s.samples.push(crate::model::fixture::sample(
                400 + t,
                300,
                "dd",
                crate::model::State::Disk,
                Some(0),
            ));
        }
        a.push(s);
    }
    screen(&mut a, 80, 24);
    assert_eq!(row_keys(&a)[a.level.selected], "RUN/-/postgres", "after new data");
    key(&mut a, KeyCode::Enter);
    assert_eq!(filters(&a), ["state=RUN", "syscall=-", "comm=postgres"]);
}

#[test]
fn every_screen_renders_at_every_size_without_panicking() {
    let mut screens = Vec::new();
    screens.push(prepared(30, true));
    let mut t = prepared(30, true);
    key(&mut t, KeyCode::Char('\\'));
    typed(&mut t, "tid=101");
    key(&mut t, KeyCode::Enter);
    screens.push(t);
    let mut h = prepared(30, true);
    key(&mut h, KeyCode::Char('?'));
    key(&mut h, KeyCode::End);
    screens.push(h);
    let mut g = prepared(30, true);
    key(&mut g, KeyCode::Char('g'));
    key(&mut g, KeyCode::End);
    screens.push(g);
    let mut p = prepared(30, false);
    key(&mut p, KeyCode::Char('/'));
    typed(
        &mut p,
        "a very long search text that does not fit anywhere at all",
    );
    screens.push(p);
    screens.push(app(0, true));
    let mut st = prepared(30, true);
    key(&mut st, KeyCode::Char('s'));
    key(&mut st, KeyCode::Enter);
    screens.push(st);
    for a in &mut screens {
        for w in (1..=130).step_by(9) {
            for h in (1..=45).step_by(5) {
                let out = screen(a, w, h);
                assert_eq!(out.lines().count(), h as usize);
            }
        }
    }
}

#[test]
fn many_first_dimension_values_fold_into_other_and_load_crosses_the_cpu_line() {
    let mut a = app(0, true);
    for i in 0..5 {
        let samples = (0..12)
            .map(|t| crate::model::fixture::sample(t, t, &format!("c{t}"), crate::model::State::Run, None))
            .collect();
        a.push(crate::model::fixture::snapshot(i, samples));
    }
    a.level.query.dims = crate::dimensions::parse_list("comm").unwrap();
    let out = screen(&mut a, 80, 24);
    let chart = &a.view().chart;
    assert_eq!(chart.bands.len(), super::view::MAX_BANDS - 1);
    assert!(chart.other);
    assert!(out.contains("■ other"), "{out}");
    // 12 running threads on 2 CPUs: the CPU line crosses the bars.
    let cpu_line = out.lines().find(|l| l.contains("2cpu┤")).unwrap();
    assert!(cpu_line.ends_with("─────"), "{cpu_line}");
}

/// Every sample of the window as (snapshot, tid) where `keep` holds.
fn samples_where(
    a: &App,
    keep: impl Fn(&crate::model::Snapshot, &crate::model::ThreadSample) -> bool,
) -> Vec<(usize, u32)> {
    let (h, win) = (&a.history, a.window().unwrap());
    let mut out = Vec::new();
    for i in win.lo..win.hi {
        for r in 0..h.rows(i) {
            let s = h.sample(i, r);
            if keep(h.meta(i), &s) {
                out.push((i, s.ident.tid));
            }
        }
    }
    out
}

#[test]
fn drilling_into_a_row_and_its_stacks_take_exactly_its_samples() {
    use crate::model::fixture::{sample, snapshot};
    use crate::model::State;
    utc();
    let mut a = App::new(session(), &UiOptions::default(), false, false);
    // Comms that differ only in case are different programs.
    for seq in 0..6u64 {
        let mut v = vec![
            sample(10, 10, "Foo", State::Disk, Some(17)),
            sample(11, 11, "foo", State::Disk, Some(17)),
            sample(12, 12, "FOO", State::Run, None),
        ];
        if seq % 3 == 0 {
            v.push(sample(13, 13, "foo", State::Run, None));
        }
        a.push(snapshot(seq, v));
    }
    screen(&mut a, 100, 30);
    let n = a.rows().len();
    assert_eq!(n, 4, "{:?}", row_keys(&a));
    for row in 0..n {
        key(&mut a, KeyCode::Home);
        for _ in 0..row {
            key(&mut a, KeyCode::Down);
        }
        screen(&mut a, 100, 30);
        let group = a.view().agg.groups[a.rows()[row]].clone();
        let (dims, want_key) = (a.level.query.dims.clone(), group.key.clone());
        let want = samples_where(&a, |snap, s| {
            dims.iter().zip(&want_key).all(|(d, v)| d.value(snap, s) == *v)
        });
        assert_eq!(want.len() as u64, group.samples);
        let sel = a.selection();
        assert_eq!(
            samples_where(&a, |snap, s| sel.matches(snap, s)),
            want,
            "s on row {row}"
        );
        key(&mut a, KeyCode::Enter);
        let filters = a.level.query.filters.clone();
        let drilled = samples_where(&a, |snap, s| crate::filter::matches_all(&filters, snap, s));
        assert_eq!(drilled, want, "Enter on row {row}: {filters:?}");
        screen(&mut a, 100, 30);
        let total: u64 = a.view().agg.groups.iter().map(|g| g.samples).sum();
        assert_eq!(total, group.samples, "the drilled view counts the row's samples");
        key(&mut a, KeyCode::Esc);
        screen(&mut a, 100, 30);
    }
}
