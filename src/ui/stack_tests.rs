//! Stack view, `f` and the thread view's stacks on the TestBackend.
//!
//! Key and file tests go through history with the fixture's stacks (off-CPU
//! samples have a user and a kernel stack, running ones none); screens that
//! need truncated or long frames put them in after the history scan.

use std::sync::Arc;

use crossterm::event::KeyCode;

use crate::model::{Stack, DEEPER, TRUNCATED};

use super::app::App;
use super::keys::Mode;
use super::stack_tree::StackTree;
use super::tests::{assert_screen, drawn, key, prepared, screen};

fn stack(hash: u64, frames: &[&str]) -> Arc<Stack> {
    Arc::new(Stack {
        hash,
        frames: frames.iter().map(|&f| f.into()).collect(),
        top: 0,
    })
}

/// A tree with user and kernel frames, a truncated user stack, one deeper
/// than its copy, a stackless sample and a very long frame name.
fn mixed_tree() -> StackTree {
    let k = stack(1, &["__schedule", "schedule", "pipe_read", "vfs_read"]);
    let u = stack(2, &["read", "ExecScan", "PostgresMain", "main"]);
    let long = "std::collections::hash::map::HashMap<alloc::string::String, alloc::vec::Vec<u8>>::insert";
    let u2 = stack(3, &[long, "flush", TRUNCATED]);
    let u3 = stack(4, &["epoll_wait", "plpgsql_exec_function", DEEPER]);
    StackTree::build([
        (Some(&*k), Some(&*u), 6),
        (None, Some(&*u2), 3),
        (None, Some(&*u3), 2),
        (None, None, 1),
    ])
}

/// The main view's first row (DISK/pread64/postgres) opened with `s`, its
/// counted tree swapped for `mixed_tree`.
fn mixed_view() -> App {
    let mut a = prepared(6, true);
    key(&mut a, KeyCode::Char('s'));
    screen(&mut a, 80, 24);
    a.stacks.as_mut().unwrap().set_tree(mixed_tree());
    a
}

#[test]
fn s_opens_the_selected_group_and_esc_returns() {
    let mut a = prepared(6, true);
    key(&mut a, KeyCode::Down); // RUN/-/java
    key(&mut a, KeyCode::Char('s'));
    assert_eq!(a.mode(), Mode::Stack);
    let out = screen(&mut a, 80, 24);
    assert!(
        out.contains("stacks of state=RUN syscall=- comm=java · 6 samples"),
        "{out}"
    );
    // A runnable thread has no stack in the fixture.
    assert!(out.contains("       6 100.0    [no stack]"), "{out}");
    key(&mut a, KeyCode::Esc);
    assert_eq!(a.mode(), Mode::Main);
    assert_eq!(a.level.selected, 1, "back where it was");
    key(&mut a, KeyCode::Char('s'));
    key(&mut a, KeyCode::Backspace);
    assert_eq!(
        a.mode(),
        Mode::Main,
        "Backspace on a closed outermost frame goes back"
    );
    // From the thread view the selection is the thread, and Esc returns there.
    key(&mut a, KeyCode::Char('\\'));
    super::tests::typed(&mut a, "tid=101");
    key(&mut a, KeyCode::Enter);
    screen(&mut a, 80, 24);
    key(&mut a, KeyCode::Char('s'));
    let out = screen(&mut a, 80, 24);
    assert!(out.contains("stacks of tid=101 · 6 samples"), "{out}");
    key(&mut a, KeyCode::Esc);
    assert_eq!(a.mode(), Mode::Thread);
}

#[test]
fn stack_view_keys_walk_the_tree() {
    let mut a = prepared(6, true);
    key(&mut a, KeyCode::Char('s')); // DISK/pread64/postgres: one stack pair
    screen(&mut a, 80, 24);
    let sv = a.stacks.as_ref().unwrap();
    assert_eq!(sv.tree.total(), 6);
    assert_eq!(sv.rows.len(), 1);
    key(&mut a, KeyCode::Enter);
    assert_eq!(
        a.stacks.as_ref().unwrap().rows.len(),
        7,
        "the chain opens at once"
    );
    key(&mut a, KeyCode::End);
    key(&mut a, KeyCode::PageUp);
    assert_eq!(a.stacks.as_ref().unwrap().selected, 0);
    key(&mut a, KeyCode::Down);
    key(&mut a, KeyCode::Left);
    assert_eq!(
        a.stacks.as_ref().unwrap().rows.len(),
        2,
        "Left closes an open frame"
    );
    key(&mut a, KeyCode::Left);
    assert_eq!(a.stacks.as_ref().unwrap().selected, 0, "then goes to the parent");
    key(&mut a, KeyCode::Left);
    assert_eq!(a.stacks.as_ref().unwrap().rows.len(), 1);
    key(&mut a, KeyCode::Right);
    key(&mut a, KeyCode::Backspace);
    key(&mut a, KeyCode::Backspace);
    assert_eq!(a.mode(), Mode::Main);
    // Window keys work in the stack view and recount.
    key(&mut a, KeyCode::Char('s'));
    key(&mut a, KeyCode::Char('-'));
    key(&mut a, KeyCode::Char('-'));
    screen(&mut a, 80, 24);
    assert_eq!(
        a.stacks.as_ref().unwrap().tree.total(),
        6,
        "10s still holds the 6 snapshots"
    );
    key(&mut a, KeyCode::Char('['));
    screen(&mut a, 80, 24);
    assert!(a.stacks.as_ref().unwrap().tree.total() < 6);
}

#[test]
fn stack_view_screen() {
    let mut a = mixed_view();
    key(&mut a, KeyCode::Enter); // main → ... → read, then two children
    key(&mut a, KeyCode::Down);
    assert_screen(
        &screen(&mut a, 80, 17),
        r#"
xtop LIVE db1 · 6.8.0 · 2 CPUs · every 1s
11:59:05–12:00:05 (1m) · 12 samples in 6 snapshots · xtop CPU 0.0% · dropped 0
stacks of state=DISK syscall=pread64 comm=postgres · 12 samples
 samples     %  call tree (root → leaf, user then kernel [k] frames)
       6  50.0  ▾ main
       6  50.0    ▾ PostgresMain
       6  50.0      ▾ ExecScan
       6  50.0        ▾ read
       6  50.0          ▾ vfs_read [k]
       6  50.0            ▾ pipe_read [k]
       6  50.0              ▾ schedule [k]
       6  50.0                  __schedule [k]
       3  25.0  ▸ [truncated] (unwind failed: no CFI or frame pointer)
       2  16.7  ▸ [deeper] (the stack goes on past the 16 KiB/128 frames copied)
       1   8.3    [no stack]
ustacks to root 6/11 (54%; 3 truncated, 2 deeper)  [truncated]: unwind failed: n
↑/k move Enter/→ open ← close Esc back f folded Space pause [ earlier ] later +
"#,
    );
    assert_eq!(a.stacks.as_ref().unwrap().selected, 1);
}

#[test]
fn stack_view_long_names_and_tiny_screen() {
    let mut a = mixed_view();
    key(&mut a, KeyCode::End);
    key(&mut a, KeyCode::Up);
    key(&mut a, KeyCode::Up);
    key(&mut a, KeyCode::Enter);
    let out = screen(&mut a, 60, 12);
    let long = out.lines().find(|l| l.contains("std::collections")).unwrap();
    assert!(long.ends_with('…') && long.chars().count() == 60, "{out}");
    assert_screen(
        &screen(&mut a, 40, 10),
        r#"
xtop LIVE db1 · 6.8.0 · 2 CPUs · every 1
11:59:05–12:00:05 (1m) · 12 samples in 6
stacks of state=DISK syscall=pread64 com
 samples     %  call tree (root → leaf,
       6  50.0  ▸ main
       3  25.0  ▾ [truncated] (unwind f…
       3  25.0    ▾ flush
       3  25.0        std::collections:…
ustacks to root 6/11 (54%; 3 truncated,
↑/k move Enter/→ open ← close Esc back f
"#,
    );
}

fn read_folded(path: &str) -> Vec<(String, u64)> {
    std::fs::read_to_string(path)
        .unwrap()
        .lines()
        .map(|l| {
            let (s, n) = l.rsplit_once(' ').unwrap();
            (s.to_string(), n.parse().unwrap())
        })
        .collect()
}

#[test]
fn f_writes_folded_stacks_of_the_selection() {
    use std::os::unix::fs::PermissionsExt;
    let dir = std::env::temp_dir().join(format!("xtop-ui-folded-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let mut a = prepared(6, true);
    a.export_dir = dir.clone();
    // Main view, first row DISK/pread64/postgres: 6 samples, one kernel stack.
    key(&mut a, KeyCode::Char('f'));
    let toast = a.toast.clone().unwrap();
    assert!(!toast.error, "{}", toast.text);
    let path = toast.text.rsplit_once(" to ").unwrap().1.to_string();
    assert!(path.ends_with(".folded") && path.contains("xtop-db1-"), "{path}");
    assert_eq!(
        std::fs::metadata(&path).unwrap().permissions().mode() & 0o777,
        0o600
    );
    assert_eq!(
        read_folded(&path),
        [(
            "main;read_block;__libc_read;vfs_read_[k];pipe_read_[k];schedule_[k];__schedule_[k]".to_string(),
            6
        )]
    );
    // From the stack view: the tree shown, counts summing to its total.
    let mut m = mixed_view();
    m.export_dir = dir.clone();
    key(&mut m, KeyCode::Char('f'));
    let text = m.toast.clone().unwrap().text;
    let path2 = text.rsplit_once(" to ").unwrap().1.to_string();
    assert_ne!(path, path2, "same-second exports do not overwrite");
    let lines = read_folded(&path2);
    assert_eq!(lines.iter().map(|(_, n)| n).sum::<u64>(), 12);
    assert!(lines.contains(&("[no stack]".into(), 1)), "{lines:?}");
    assert!(
        lines.contains(&("[deeper];plpgsql_exec_function;epoll_wait".into(), 2)),
        "{lines:?}"
    );
    assert!(lines.contains(&(
        "main;PostgresMain;ExecScan;read;vfs_read_[k];pipe_read_[k];schedule_[k];__schedule_[k]".into(),
        6
    )));
    std::fs::remove_dir_all(&dir).unwrap();
    // Failures are toasts; the view stays.
    m.export_dir = dir.join("not/there");
    key(&mut m, KeyCode::Char('f'));
    let t = m.toast.clone().unwrap();
    assert!(
        t.error && t.text.starts_with("folded export failed"),
        "{}",
        t.text
    );
    assert_eq!(m.mode(), Mode::Stack);
    // An empty selection writes nothing and says so.
    let mut e = prepared(6, true);
    e.export_dir = std::env::temp_dir();
    key(&mut e, KeyCode::Char('\\'));
    super::tests::typed(&mut e, "comm=nobody");
    key(&mut e, KeyCode::Enter);
    screen(&mut e, 80, 24);
    key(&mut e, KeyCode::Char('f'));
    let t = e.toast.clone().unwrap();
    assert!(t.error && t.text.contains("nothing written"), "{}", t.text);
}

#[test]
fn thread_view_shows_both_stacks_of_the_selected_sample() {
    let mut a = prepared(6, true);
    key(&mut a, KeyCode::Char('\\'));
    super::tests::typed(&mut a, "tid=101");
    key(&mut a, KeyCode::Enter);
    screen(&mut a, 100, 20);
    // A truncated user stack on the second newest sample.
    let mut cut = (*stack(9, &["pread64", "FileRead", "mdread", TRUNCATED])).clone();
    cut.top = 1; // the program's own frame, past the C library's pread64
    a.thread.samples[1].1.ustack = Some(Arc::new(cut));
    let before = screen(&mut a, 100, 20);
    assert!(
        before.contains("ustack __libc_read ← [read_block] ← main\n"),
        "{before}"
    );
    key(&mut a, KeyCode::Down);
    assert_screen(
        &screen(&mut a, 100, 15),
        r#"
xtop LIVE db1 · 6.8.0 · 2 CPUs · every 1s
11:59:05–12:00:05 (1m) · 6 samples in 6 snapshots · xtop CPU 0.0% · dropped 0
tid 101  pid 100  comm postgres  user alice (1000)  cgroup /user.slice
exe /usr/bin/postgres  cmdline postgres --serve
state┤░░░░░░░░░░░░░░░░░░░░░░░░░░░░░░░░░░░░░░░░░░░░░░░░░░░░░░░░░░░░░░░░░░░░░░░░░░░░░░░░░░░░██████████
      ■ DISK  · not sampled (inactive or absent)  ░ no snapshot
now DISK pread64(fd=3, buf=0x7ffd0000, count=4096, pos=0) for 1.5ms, syscall #42
file   /var/lib/postgres/base/16384/2619
kstack __schedule ← schedule ← [pipe_read] ← vfs_read
ustack pread64 ← [FileRead] ← mdread ← [truncated] (unwind failed: no CFI or frame pointer)
6 samples, newest first · ustacks to root 5/6 (83%; 1 truncated) · export applies every filter
time     state syscall sysc_ns_so_far kstack_top ustack_app cpu switch    waker_tid
12:00:04 DISK  pread64        1500000 pipe_read  FileRead     1 voluntary         1
filters: tid=101
↑/k move Bksp/Esc back \ filter Space pause [ earlier ] later + widen - narrow a all e export ?/F1 h
"#,
    );
    let small = screen(&mut a, 100, 12); // same width: same timeline, no rescan
    assert!(
        small.contains("ustack pread64 ← [FileRead] ← mdread ← "),
        "{small}"
    );
}

#[test]
fn stack_screens_render_at_every_size_without_panicking() {
    let mut t = prepared(6, true);
    key(&mut t, KeyCode::Char('\\'));
    super::tests::typed(&mut t, "tid=101");
    key(&mut t, KeyCode::Enter);
    let mut s = mixed_view();
    key(&mut s, KeyCode::Enter);
    let mut empty = prepared(6, true);
    key(&mut empty, KeyCode::Char('\\'));
    super::tests::typed(&mut empty, "comm=nobody");
    key(&mut empty, KeyCode::Enter);
    key(&mut empty, KeyCode::Char('s'));
    // The thread view rescans history when the width changes: put the
    // truncated user stack back after each prepare.
    for w in 1..=130 {
        for h in (1..=45).step_by(4) {
            screen(&mut t, w, h);
            for (_, x) in &mut t.thread.samples {
                x.ustack = Some(stack(
                    9,
                    &["pread64", "a_rather_long_user_function_name", TRUNCATED],
                ));
            }
            assert_eq!(drawn(&t, w, h).lines().count(), h as usize);
        }
    }
    for a in [&mut s, &mut empty] {
        for w in 1..=130 {
            for h in (1..=45).step_by(4) {
                let out = screen(a, w, h);
                assert_eq!(out.lines().count(), h as usize);
            }
        }
    }
    assert!(screen(&mut empty, 80, 24).contains("no samples in the selection"));
}
