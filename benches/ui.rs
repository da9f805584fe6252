//! UI cost with a full hour of history of 10,000 threads per snapshot
//! (36M thread samples): memory per stored sample, frame time, live-update
//! time and key-to-redraw latency. Prints figures; `cargo bench --bench ui`.

use std::sync::Arc;
use std::time::{Duration, Instant};

use crossterm::event::{KeyCode, KeyEvent, KeyModifiers};
use ratatui::backend::TestBackend;
use ratatui::Terminal;

use xtop::model::fixture::{sample, snapshot};
use xtop::model::{Arch, Session, Stack, State, Syscall, ThreadSample};
use xtop::ui::{render, App, UiOptions};

const THREADS: u32 = 10_000;
const SNAPSHOTS: u64 = 3600;
const W: u16 = 200;
const H: u16 = 50;

/// A busy database-like host sampled with --all: 80% sleepers in long futex /
/// epoll waits, 10% on CPU, 3% in the run queue, 7% in short disk reads,
/// 200 processes, 20 kernel stacks.
fn threads() -> Vec<ThreadSample> {
    let stacks: Vec<Arc<Stack>> = (0..20)
        .map(|i| {
            Arc::new(Stack {
                hash: i,
                frames: vec![
                    "__schedule".into(),
                    "schedule".into(),
                    format!("wait_fn_{i}").into(),
                    "do_syscall_64".into(),
                ],
                top: 2,
            })
        })
        .collect();
    (0..THREADS)
        .map(|i| {
            let tgid = 1000 + i % 200;
            let comm = format!("proc{}", i % 200);
            let (state, nr) = match i % 100 {
                0..=79 => (State::Sleep, Some(if i % 2 == 0 { 202 } else { 232 })),
                80..=89 => (State::Run, None),
                90..=92 => (State::Runq, None),
                _ => (State::Disk, Some(17)),
            };
            let mut s = sample(10_000 + i, tgid, &comm, state, nr);
            s.kstack = s.kstack.as_ref().map(|_| stacks[(i % 20) as usize].clone());
            s
        })
        .collect()
}

/// Snapshot `seq` (1 s apart). Times since events grow with the clock while a
/// thread stays put, as the sampler reports them; what changes, changes.
fn snap(templates: &[ThreadSample], seq: u64) -> xtop::model::Snapshot {
    const S: u64 = 1_000_000_000;
    let mut samples = templates.to_vec();
    for (i, s) in samples.iter_mut().enumerate() {
        let i = i as u64;
        // (seconds since the thread's current episode began, syscall seq)
        let (age, nseq) = match s.state {
            // Long futex/epoll waits: one invocation per 30 s.
            State::Sleep => ((seq + i) % 30, (seq + i) / 30),
            // On CPU for 10 s stretches.
            State::Run => ((seq + i) % 10, (seq + i) / 10),
            // Run queue and short disk reads: something new every sample.
            _ => (0, seq * 10_000 + i),
        };
        let jitter = (seq * 7919 + i * 104_729) % 1_000_000;
        let base = age * S + if age == 0 { jitter } else { 1_500_000 };
        s.since_offcpu_ns = Some(base);
        s.since_oncpu_ns = Some(base + 3_000_000);
        s.runq_wait_ns = Some(base + 500_000);
        if let Syscall::In {
            args,
            ns_so_far,
            seq: n,
            ..
        } = &mut s.syscall
        {
            *n = Some(nseq);
            *ns_so_far = Some(base);
            if s.state == State::Disk {
                args[3] = nseq * 8192;
            }
        }
    }
    snapshot(seq, samples)
}

fn session() -> Session {
    Session {
        host: "bench".into(),
        kernel: "6.8.0".into(),
        arch: Arch::X86_64,
        ncpus: 64,
        interval: Duration::from_secs(1),
        xtop_version: "bench".into(),
        options: "--all".into(),
    }
}

fn rss_bytes() -> usize {
    let statm = std::fs::read_to_string("/proc/self/statm").unwrap_or_default();
    let pages: usize = statm
        .split_whitespace()
        .nth(1)
        .and_then(|v| v.parse().ok())
        .unwrap_or(0);
    pages * 4096
}

/// One redraw as the event loop does it: prepare within the frame budget, draw.
fn frame(app: &mut App, term: &mut Terminal<TestBackend>) -> Duration {
    let t = Instant::now();
    let (cols, page) = render::geometry(W, H);
    app.prepare(cols, page, Some(Duration::from_millis(25)));
    term.draw(|f| render::draw(f, app)).unwrap();
    t.elapsed()
}

fn median(mut v: Vec<Duration>) -> Duration {
    v.sort();
    v[v.len() / 2]
}

fn ms(d: Duration) -> String {
    format!("{:.2} ms", d.as_secs_f64() * 1e3)
}

fn key(app: &mut App, code: KeyCode) {
    app.handle_key(&KeyEvent::new(code, KeyModifiers::NONE));
}

/// A new snapshot while following live data: taking it into history, then
/// the redraw (grouping it, re-summing the window, drawing).
fn live_tick(
    app: &mut App,
    term: &mut Terminal<TestBackend>,
    templates: &[ThreadSample],
    n: &mut u64,
    what: &str,
) {
    let (mut push, mut draw) = (Vec::new(), Vec::new());
    for _ in 0..15 {
        let s = snap(templates, *n);
        *n += 1;
        let t = Instant::now();
        app.push(s);
        push.push(t.elapsed());
        draw.push(frame(app, term));
    }
    println!(
        "live tick ({what} window): ingest {}, redraw {}",
        ms(median(push)),
        ms(median(draw))
    );
}

/// Key press to the first complete redraw, and to the frame where grouping has
/// caught up with the whole window (frames in between say "grouping N%").
fn key_latency(app: &mut App, term: &mut Terminal<TestBackend>, code: KeyCode, what: &str) {
    let t = Instant::now();
    key(app, code);
    let first = frame(app, term);
    let mut frames = 1;
    while app.pending() {
        frame(app, term);
        frames += 1;
    }
    println!(
        "key {what:<34} first redraw {:>10}   complete {:>10} ({frames} frames)",
        ms(first),
        ms(t.elapsed())
    );
}

/// The stack view's work for a wide selection: 10,000 distinct stack pairs of
/// 20 user + 20 kernel frames sharing prefixes, built into a tree, then folded.
fn stack_tree_cost() {
    use xtop::ui::stack_tree::StackTree;
    let frames = |n: usize, tag: &str| -> Vec<Arc<str>> {
        (0..20)
            .map(|d| Arc::from(format!("{tag}_{}_{d}", (n >> (d / 4)) % 7).as_str()))
            .collect()
    };
    let pairs: Vec<(Stack, Stack)> = (0..10_000)
        .map(|n| {
            let k = Stack {
                hash: n as u64,
                frames: frames(n, "k"),
                top: 0,
            };
            let u = Stack {
                hash: n as u64,
                frames: frames(n, "u"),
                top: 0,
            };
            (k, u)
        })
        .collect();
    let t = Instant::now();
    let tree = StackTree::build(pairs.iter().map(|(k, u)| (Some(k), Some(u), 3)));
    let build = t.elapsed();
    let t = Instant::now();
    let folded = tree.folded();
    println!(
        "stack view: tree of 10000 distinct 40-frame stacks ({} nodes) built in {}, folded ({} KB) in {}",
        tree.nodes.len(),
        ms(build),
        folded.len() / 1024,
        ms(t.elapsed())
    );
}

fn main() {
    stack_tree_cost();
    let templates = threads();
    let rss0 = rss_bytes();
    let mut app = App::new(session(), &UiOptions::default(), true, true);
    let t = Instant::now();
    for i in 0..SNAPSHOTS {
        app.push(snap(&templates, i));
    }
    let ingest = t.elapsed();
    let h = &app.history;
    let (threads, syscalls, stacks) = h.interned();
    println!("history: {} snapshots, {} thread samples", h.len(), h.samples());
    println!(
        "ingest: {} per snapshot of {THREADS} threads (building the sample Vec included)",
        ms(ingest / SNAPSHOTS as u32)
    );
    println!(
        "memory: {:.1} bytes per thread sample held ({} rows of 16 bytes, {syscalls} episodes of 112 bytes, {threads} threads, {stacks} stacks); RSS growth {:.1} bytes/sample",
        h.bytes() as f64 / h.samples() as f64,
        h.samples(),
        (rss_bytes() - rss0) as f64 / h.samples() as f64
    );

    // Where regrouping time goes, per 10k-thread snapshot.
    let dims = xtop::dimensions::parse_list(xtop::dimensions::DEFAULT_GROUP_BY).unwrap();
    let (mut rebuild, mut group) = (Vec::new(), Vec::new());
    for i in 0..20 {
        let t = Instant::now();
        let s = app.history.materialize(i);
        rebuild.push(t.elapsed());
        let t = Instant::now();
        std::hint::black_box(xtop::aggregation::aggregate([&s], &dims, &[]));
        group.push(t.elapsed());
    }
    println!(
        "regroup cost per snapshot: rebuild samples {}, aggregate {}",
        ms(median(rebuild)),
        ms(median(group))
    );

    let mut term = Terminal::new(TestBackend::new(W, H)).unwrap();
    // First frame: the default 1-minute window is grouped from scratch.
    let t = Instant::now();
    while {
        frame(&mut app, &mut term);
        app.pending()
    } {}
    println!("first full view (60 s window, 600k samples): {}", ms(t.elapsed()));
    let steady = median((0..50).map(|_| frame(&mut app, &mut term)).collect());
    println!("redraw, nothing new (60 s window):              {}", ms(steady));
    let mut n = SNAPSHOTS;
    live_tick(&mut app, &mut term, &templates, &mut n, "60 s");
    key_latency(&mut app, &mut term, KeyCode::Down, "↓ (move selection)");
    key_latency(&mut app, &mut term, KeyCode::Char('>'), "> (sort by state)");
    key_latency(&mut app, &mut term, KeyCode::Enter, "Enter (drill, regroup 60 s)");
    key_latency(
        &mut app,
        &mut term,
        KeyCode::Backspace,
        "Backspace (pop, regroup 60 s)",
    );
    for _ in 0..4 {
        key(&mut app, KeyCode::Char('+'));
    }
    key_latency(
        &mut app,
        &mut term,
        KeyCode::Char('+'),
        "+ (widen to 1 h: 36M samples)",
    );
    let steady = median((0..50).map(|_| frame(&mut app, &mut term)).collect());
    println!("redraw, nothing new (1 h window):               {}", ms(steady));
    live_tick(&mut app, &mut term, &templates, &mut n, "1 h");
    // Re-summing the window alone (no regroup): alternate the chart width.
    let (cols, page) = render::geometry(W, H);
    let resum = median(
        (0..20)
            .map(|i| {
                let t = Instant::now();
                app.prepare(cols - i % 2, page, None);
                t.elapsed()
            })
            .collect(),
    );
    println!("re-sum of the 1 h window (3600 summaries): {}", ms(resum));
    key_latency(&mut app, &mut term, KeyCode::Char('I'), "I (invert sort, 1 h)");
    key_latency(&mut app, &mut term, KeyCode::Char('['), "[ (move window, 1 h)");
}
