//! End to end: PostgreSQL's own wait events, with no configuration. A cluster
//! of the test's own (the distribution's packages, `.ci/run` installs them):
//! what xtop reads from each server process's memory agrees with what
//! PostgreSQL itself shows in pg_stat_activity; under pgbench, with more
//! clients than CPUs and synchronous commits, backends are seen between
//! statements in Client:ClientRead and during commits in IO or LWLock waits,
//! from the first sample of backends started after xtop; every thread of
//! every other program has app_wait '-'. Needs root.
#![cfg(target_arch = "x86_64")]

mod common;

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::time::{Duration, Instant};

use common::kid::{run_ok, Kid};
use common::observe::*;
use common::postgres::Cluster;
use xtop::dimensions;
use xtop::model::{Snapshot, ThreadSample};
use xtop::sampler::SamplerOptions;

fn dim(snap: &Snapshot, s: &ThreadSample, name: &str) -> String {
    dimensions::find(name).unwrap().value(snap, s).to_string()
}

/// pid -> (backend_type, "class:event" or "none") from pg_stat_activity.
fn activity(pg: &Cluster) -> HashMap<u32, (String, String)> {
    pg.query(
        "select pid, backend_type, coalesce(wait_event_type || ':' || wait_event, 'none')
         from pg_stat_activity where pid <> pg_backend_pid()",
    )
    .into_iter()
    .filter_map(|r| Some((r.first()?.parse().ok()?, (r.get(1)?.clone(), r.get(2)?.clone()))))
    .collect()
}

#[test]
fn postgresql_wait_events_as_postgresql_names_them() {
    let Some(_serial) = live_bpf() else { return };
    let Some(pg) = Cluster::start_with(&["fsync=on", "synchronous_commit=on"]) else {
        return;
    };
    let postmaster = pg.pids()[0];
    // The background processes settle in their main loops.
    std::thread::sleep(Duration::from_millis(1500));

    // Idle: xtop and pg_stat_activity agree on every process whose state
    // held still across xtop's pass (asked before and after it).
    let before = activity(&pg);
    let sampler = start_sampler(SamplerOptions {
        pids: pg.pids(),
        ..opts(true)
    });
    let snap = next_snapshot(&sampler);
    sampler.stop().unwrap();
    let after = activity(&pg);
    let mut compared = BTreeSet::new();
    for s in &snap.samples {
        let (Some(b), Some(a)) = (before.get(&s.ident.tgid), after.get(&s.ident.tgid)) else {
            continue;
        };
        // pg_stat_activity shows a background worker by the type it
        // registered (logical replication launcher); the process itself
        // only knows it is one.
        let state = dim(&snap, s, "app_state");
        if pg.version < 13 {
            assert_eq!(state, "?", "12 has no MyBackendType to read");
        } else if state != "background worker" {
            assert_eq!(state, a.0, "backend_type of {}", s.ident.tgid);
        }
        if a == b {
            assert_eq!(
                dim(&snap, s, "app_wait"),
                a.1,
                "wait event of {} ({})",
                s.ident.tgid,
                a.0
            );
            compared.insert(a.0.clone());
        }
    }
    for kind in ["checkpointer", "walwriter", "autovacuum launcher"] {
        assert!(compared.contains(kind), "{kind} not compared: {compared:?}");
    }

    // Under load: the sampler starts first, so every backend pgbench opens
    // is forked after xtop looked at the cluster.
    run_ok(pg.tool("pgbench").args(["-i", "-q", "-s", "1"]), "pgbench -i");
    let sampler = start_sampler(SamplerOptions {
        interval: Duration::from_millis(200),
        ..opts(true)
    });
    let _ = next_snapshot(&sampler);
    let _bench = Kid::spawn(pg.tool("pgbench").args(["-n", "-c", "6", "-j", "2", "-T", "60"]));
    let mut waits: BTreeMap<String, usize> = BTreeMap::new();
    let mut others = BTreeSet::new();
    let deadline = Instant::now() + Duration::from_secs(30);
    let commit_wait =
        |w: &BTreeMap<String, usize>| w.keys().any(|k| k.starts_with("IO:") || k.starts_with("LWLock:"));
    while Instant::now() < deadline && !(waits.contains_key("Client:ClientRead") && commit_wait(&waits)) {
        let snap = next_snapshot(&sampler);
        for s in &snap.samples {
            let server = s.ident.process.exe.ends_with("/postgres");
            let wait = dim(&snap, s, "app_wait");
            if !server {
                others.insert((s.ident.process.comm.to_string(), wait));
                continue;
            }
            assert_ne!(
                wait,
                "?",
                "{} {} unread",
                s.ident.tgid,
                dim(&snap, s, "app_state")
            );
            // 12 does not say which processes are client backends; the
            // others' waits (Activity:WalWriterMain ...) do not satisfy
            // the checks below.
            let backend = dim(&snap, s, "app_state") == "client backend" || pg.version < 13;
            if s.ident.tgid != postmaster && backend {
                *waits.entry(wait).or_default() += 1;
            }
        }
    }
    sampler.stop().unwrap();
    eprintln!("compared {compared:?}\nwaits {waits:?}");
    assert!(waits.contains_key("Client:ClientRead"), "{waits:?}");
    assert!(commit_wait(&waits), "no IO or LWLock wait seen: {waits:?}");
    let wrong: Vec<_> = others.iter().filter(|(_, w)| w != "-").collect();
    assert!(wrong.is_empty(), "other programs with an app_wait: {wrong:?}");
    assert!(others.iter().any(|(c, _)| c == "pgbench"), "pgbench sampled too");
}

/// A server xtop cannot read (here: a program named postgres that exports
/// neither symbol, as a stripped or static build would), started after
/// xtop by a shell that xtop saw first and that then execs it: one warning
/// while sampling, its exe is the new program's, and its app_wait is '?'.
#[test]
fn a_server_found_later_that_cannot_be_read_is_told_once() {
    let Some(_serial) = live_bpf() else { return };
    let dir = common::postgres::TempDir::new("fakepg", (0, 0));
    let fake = dir.0.join("postgres");
    std::fs::copy("/bin/sleep", &fake).unwrap();
    let sampler = start_sampler(opts(true));
    let _ = next_snapshot(&sampler);
    assert!(
        sampler.take_notices().is_empty(),
        "nothing to say before it starts"
    );
    let script = format!("sleep 1; exec '{}' 30", fake.display());
    let kid = Kid::spawn(std::process::Command::new("/bin/sh").args(["-c", &script]));
    let (mut before, mut seen) = (Vec::new(), Vec::new());
    let deadline = Instant::now() + Duration::from_secs(20);
    while seen.len() < 3 && Instant::now() < deadline {
        let snap = next_snapshot(&sampler);
        for s in snap.samples.iter().filter(|s| s.ident.tgid == kid.pid()) {
            let exe = s.ident.process.exe.to_string();
            let wait = dim(&snap, s, "app_wait");
            if exe == fake.to_string_lossy() {
                seen.push(wait);
            } else {
                before.push((exe, wait));
            }
        }
    }
    assert!(
        !before.is_empty() && before.iter().all(|(_, w)| w == "-"),
        "the shell sampled before its exec: {before:?}"
    );
    assert!(seen.len() >= 3, "the fake server was not sampled after the exec");
    assert!(seen.iter().all(|w| w == "?"), "{seen:?}");
    let notices = sampler.take_notices();
    sampler.stop().unwrap();
    assert_eq!(notices.len(), 1, "one warning per binary: {notices:?}");
    assert!(
        notices[0].contains(&*fake.to_string_lossy()) && notices[0].contains("app_wait is '?'"),
        "{notices:?}"
    );
}
