//! End to end: real servers, as packaged, in their usual waits. A PostgreSQL
//! cluster of the test's own (a temporary data directory, a Unix socket and no
//! TCP port) and a JVM: every process's user stack, unwound from the stack
//! window with CFI, reaches its root, through signal frames where the server
//! started a child from a signal handler; a stack deeper than the window says
//! `[deeper]`. Needs root, and PostgreSQL and a JDK (`.ci/run` installs them).
#![cfg(target_arch = "x86_64")]

mod common;

use std::collections::{HashMap, HashSet};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use common::kid::{run_ok, Kid};
use common::observe::*;
use common::postgres::{need, Cluster, TempDir};
use xtop::model::{DEEPER, SIGNAL};
use xtop::sampler::SamplerOptions;

fn show(obs: &[StackObs]) -> String {
    obs.iter()
        .map(|o| format!("{} {} u={:?}\n", o.tid, o.state, o.uframes()))
        .collect()
}

/// A stack a test waits to see: its name, and the test on a stack.
type Wanted<'a> = (&'a str, &'a dyn Fn(&StackObs) -> bool);

/// Samples the processes `pids` until each of `wanted` (a name, a test on a
/// stack) is seen, or 30 s pass; returns what was seen, sleeping, by tid.
fn sample_until(pids: Vec<u32>, wanted: &[Wanted]) -> Vec<StackObs> {
    let sampler = start_sampler(SamplerOptions { pids, ..opts(true) });
    let mut seen: Vec<StackObs> = Vec::new();
    let mut missing: Vec<&str> = wanted.iter().map(|w| w.0).collect();
    let deadline = Instant::now() + Duration::from_secs(30);
    while !missing.is_empty() && Instant::now() < deadline {
        let by = read_stacks(&sampler, 1);
        let fresh: Vec<StackObs> = by
            .into_values()
            .flatten()
            .filter(|o| o.state == "SLEEP")
            .collect();
        missing.retain(|name| {
            let test = wanted.iter().find(|w| w.0 == *name).unwrap().1;
            !fresh.iter().any(test)
        });
        seen = fresh;
    }
    // Two passes more, everything settled: every sleeper is judged.
    let by = read_stacks(&sampler, 2);
    sampler.stop().unwrap();
    assert!(missing.is_empty(), "never seen: {missing:?} in\n{}", show(&seen));
    by.into_values()
        .flatten()
        .filter(|o| o.state == "SLEEP")
        .collect()
}

#[test]
fn postgresql_processes_reach_their_roots_in_their_usual_waits() {
    let Some(_serial) = live_bpf() else { return };
    let Some(mut pg) = Cluster::start() else { return };
    pg.run(
        "create table t(x int); insert into t select generate_series(1, 1000);
         create function nest(n int) returns int language plpgsql as $$
         begin
           if n = 0 then perform pg_sleep(600); return 0; end if;
           return nest(n - 1) + 1;
         end $$;",
    );
    pg.session(""); // idle: waits for its client's next query
    pg.session("select pg_sleep(600);\n");
    pg.session("begin; lock table t; select pg_sleep(600);\n");
    std::thread::sleep(Duration::from_millis(300));
    pg.session("select count(*) from t;\n"); // waits for the lock above
    pg.session("select nest(1);\n"); // two PL/pgSQL calls deep: within the window
    pg.session("select nest(12);\n"); // thirteen: deeper than the window
    std::thread::sleep(Duration::from_millis(500));

    let root = "_start";
    let main = ["PostgresMain", "PostmasterMain", "main", "__libc_start_main"];
    let chain =
        |leaf: &'static [&'static str]| -> Vec<&'static str> { leaf.iter().chain(&main).copied().collect() };
    let idle = chain(&["epoll_wait", "WaitEventSetWait", "secure_read"]);
    let sleep = chain(&["epoll_wait", "WaitLatch", "pg_sleep", "standard_ExecutorRun"]);
    let lock = chain(&["epoll_wait", "WaitLatch", "LockRelationOid"]);
    let nested = chain(&["pg_sleep", "plpgsql_call_handler", "plpgsql_call_handler"]);
    // Up to PostgreSQL 15 the postmaster starts it from its signal handler:
    // below the handler, the postmaster's own loop.
    let walwriter: &[&str] = if pg.version < 16 {
        &["WalWriterMain", SIGNAL, "PostmasterMain", "main"]
    } else {
        &["WalWriterMain", "PostmasterMain", "main"]
    };
    let wanted: [Wanted; 7] = [
        ("idle backend", &|o| o.whole_through(&idle, root)),
        ("pg_sleep", &|o| o.whole_through(&sleep, root)),
        ("lock wait", &|o| o.whole_through(&lock, root)),
        ("nested PL/pgSQL", &|o| o.whole_through(&nested, root)),
        ("walwriter", &|o| o.whole_through(walwriter, root)),
        ("checkpointer", &|o| {
            o.whole_through(&["CheckpointerMain", "PostmasterMain"], root)
        }),
        ("deep PL/pgSQL", &|o| {
            let u = o.uframes();
            u.last().is_some_and(|f| &**f == DEEPER)
                && u.iter().filter(|f| f.contains("plpgsql_call_handler")).count() >= 4
        }),
    ];
    let sleepers = sample_until(pg.pids(), &wanted);
    // Every sleeping PostgreSQL process, whatever it waits for, is whole, but
    // for the thirteen-deep one, which says it is deeper.
    let deep: HashSet<u32> = sleepers
        .iter()
        .filter(|o| wanted[6].1(o))
        .map(|o| o.tid)
        .collect();
    let bad: Vec<StackObs> = sleepers
        .iter()
        .filter(|o| !deep.contains(&o.tid) && o.ustack.as_ref().is_none_or(|s| s.cut_short()))
        .cloned()
        .collect();
    assert!(bad.is_empty(), "cut short:\n{}", show(&bad));
    assert!(sleepers.len() >= 10, "{}", show(&sleepers));
}

const JAVA_SOURCE: &str = r#"
public class XtSleep {
    static void leaf(int n) throws Exception {
        if (n == 0) Thread.sleep(600000); else leaf(n - 1);
    }
    static Thread start(String name, int depth) {
        Thread t = new Thread(() -> { try { leaf(depth); } catch (Exception e) {} }, name);
        t.start();
        return t;
    }
    public static void main(String[] a) throws Exception {
        start("xt-deep", 200);
        start("xt-sleeper", 5).join();
    }
}
"#;

fn which(tool: &str) -> Option<PathBuf> {
    std::env::split_paths(&std::env::var_os("PATH")?)
        .map(|d| d.join(tool))
        .find(|p| p.is_file())
}

#[test]
fn jvm_threads_reach_their_roots_through_interpreted_java() {
    let Some(_serial) = live_bpf() else { return };
    let Some(javac) = need("javac (a JDK)", which("javac")) else {
        return;
    };
    let dir = TempDir::new("jvm", (0, 0));
    std::fs::write(dir.0.join("XtSleep.java"), JAVA_SOURCE).unwrap();
    run_ok(
        Command::new(&javac).arg("XtSleep.java").current_dir(&dir.0),
        "javac",
    );
    let java = jdk_tool(&javac, "java");
    let jvm = Kid::spawn(
        Command::new(java)
            .args(["-Xint", "-cp"])
            .arg(&dir.0)
            .arg("XtSleep"),
    );
    jvm.wait_sleeping("xt-sleeper");
    jvm.wait_sleeping("xt-deep");
    let by: HashMap<String, Vec<StackObs>> = sample_stacks(
        SamplerOptions {
            pids: vec![jvm.pid()],
            ..opts(true)
        },
        3,
    );
    // Interpreted Java frames have no CFI (they are walked by frame pointer);
    // the JVM's own C++ frames around them have.
    let sleeper = by.get("xt-sleeper").cloned().unwrap_or_default();
    assert!(!sleeper.is_empty(), "xt-sleeper not reported");
    let chain = [
        "JVM_Sleep",
        "JavaCalls::call_helper",
        "thread_native_entry",
        "start_thread",
    ];
    assert!(
        sleeper.iter().all(|o| o.whole_through(&chain, "clone")),
        "{}",
        show(&sleeper)
    );
    let deep = by.get("xt-deep").cloned().unwrap_or_default();
    assert!(!deep.is_empty(), "xt-deep not reported");
    assert!(
        deep.iter()
            .all(|o| o.uframes().last().is_some_and(|f| &**f == DEEPER)),
        "{}",
        show(&deep)
    );
}

/// `tool` from the JDK that `javac` belongs to.
fn jdk_tool(javac: &Path, tool: &str) -> PathBuf {
    let javac = std::fs::canonicalize(javac).unwrap();
    javac
        .parent()
        .map_or_else(|| Path::new(tool).to_path_buf(), |d| d.join(tool))
}
