//! What reading PostgreSQL's wait events costs (README, "Performance"):
//! the sampling pass with and without the read, over a cluster of this
//! bench's own with idle client sessions, per sampled server process; and
//! pgbench's throughput without xtop and with it (default options), in
//! alternating runs. Needs root and PostgreSQL (`.ci/run` installs it).
//!
//! `cargo bench --bench appwait`

#[path = "../tests/common/kid.rs"]
#[allow(dead_code)]
mod kid;
#[path = "common/pass.rs"]
mod pass;
#[path = "../tests/common/postgres.rs"]
#[allow(dead_code)]
mod postgres;

use std::time::{Duration, Instant};

use xtop::sampler::{Sampler, SamplerOptions};

/// Transactions per second of a pgbench run.
fn tps(pg: &postgres::Cluster, secs: u32) -> f64 {
    let out = kid::run_ok(
        pg.tool("pgbench")
            .args(["-n", "-c", "4", "-j", "2", "-T", &secs.to_string()])
            .stdout(std::process::Stdio::piped()),
        "pgbench",
    );
    let text = String::from_utf8_lossy(&out.stdout);
    text.lines()
        .find_map(|l| l.strip_prefix("tps = ")?.split_whitespace().next()?.parse().ok())
        .unwrap_or_else(|| panic!("no tps in {text}"))
}

fn main() {
    if std::env::args().any(|a| a == "--list") {
        return; // cargo test --benches asks for a listing
    }
    let Some(mut pg) = postgres::Cluster::start_with(&["max_connections=120"]) else {
        return;
    };
    let sessions = 100;
    for _ in 0..sessions {
        pg.session("");
    }
    let deadline = Instant::now() + Duration::from_secs(30);
    while pg.pids().len() < sessions + 5 && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(100));
    }
    let pids = pg.pids();
    println!(
        "## Reading PostgreSQL wait events: {} server processes ({sessions} idle sessions), --all -p (median of 20 passes)",
        pids.len()
    );
    println!("| app_wait | emitted | walk µs | decode µs | added µs per server process |");
    println!("|---|---:|---:|---:|---:|");
    let mut off = 0;
    for on in [false, true] {
        let (walk, decode, emitted) = pass::pass_cost_with(SamplerOptions {
            interval: Duration::from_millis(100),
            all: true,
            pids: pids.clone(),
            app_waits: on,
            ..Default::default()
        });
        let added = if on {
            format!(
                "{:.2}",
                (walk + decode).saturating_sub(off) as f64 / 1000.0 / emitted as f64
            )
        } else {
            off = walk + decode;
            "-".into()
        };
        println!(
            "| {} | {emitted} | {:.0} | {:.0} | {added} |",
            if on { "on" } else { "--no-app-wait" },
            walk as f64 / 1000.0,
            decode as f64 / 1000.0
        );
    }
    drop(pids);

    kid::run_ok(pg.tool("pgbench").args(["-i", "-q", "-s", "4"]), "pgbench -i");
    let secs = 10;
    println!("\n## pgbench -c 4 -j 2 (TPC-B-like, {secs} s runs, alternating), transactions per second");
    println!("| run | no xtop | xtop (defaults) |");
    println!("|---|---:|---:|");
    for run in 1..=3 {
        let without = tps(&pg, secs);
        let s = Sampler::start(SamplerOptions::default()).expect("BPF must load");
        let with = tps(&pg, secs);
        s.stop().unwrap();
        println!("| {run} | {without:.0} | {with:.0} |");
    }
}
