//! Recording figures: bytes on disk per thread sample, writer CPU per
//! snapshot, and the time to open and report one hour of 100 threads at 1 s.
//! `cargo bench --bench recording` (prints figures; no thresholds enforced).

use std::path::PathBuf;
use std::time::{Duration, Instant};

use xtop::aggregation::aggregate;
use xtop::dimensions::{parse_list, DEFAULT_GROUP_BY};
use xtop::output::write_table;
use xtop::recording::{read_files, synth, write_file, Writer};

fn cpu_time() -> Duration {
    // SAFETY: clock_gettime writes only into the timespec we own.
    let mut ts: libc::timespec = unsafe { std::mem::zeroed() };
    unsafe { libc::clock_gettime(libc::CLOCK_PROCESS_CPUTIME_ID, &mut ts) };
    Duration::new(ts.tv_sec as u64, ts.tv_nsec as u32)
}

fn main() -> anyhow::Result<()> {
    let (threads, snapshots) = (100, 3600);
    let interval = Duration::from_secs(1);
    let snaps = synth::workload(threads, snapshots, interval, 42);
    let samples: usize = snaps.iter().map(|s| s.samples.len()).sum();
    let session = synth::session(interval);
    let dir = std::env::temp_dir().join(format!("xtop-bench-{}", std::process::id()));
    std::fs::create_dir_all(&dir)?;
    println!("workload: {threads} threads x {snapshots} snapshots at 1 s = {samples} thread samples");

    // As `xtop record` writes: one frame per snapshot, fsync at the end.
    let live = dir.join("live.xtop");
    let (c0, t0) = (cpu_time(), Instant::now());
    let mut w = Writer::create(&live, &session)?;
    for s in &snaps {
        w.write_snapshot(s)?;
    }
    w.finish()?;
    let (cpu, wall) = (cpu_time() - c0, t0.elapsed());
    let live_bytes = std::fs::metadata(&live)?.len();
    println!(
        "record (1 frame/snapshot): {live_bytes} bytes, {:.2} bytes/sample; writer {:.1} us CPU/snapshot ({:.0} us wall)",
        live_bytes as f64 / samples as f64,
        cpu.as_secs_f64() * 1e6 / snapshots as f64,
        wall.as_secs_f64() * 1e6 / snapshots as f64,
    );

    // As write_file writes (the TUI's "save"): 60 snapshots per frame.
    let saved = dir.join("saved.xtop");
    write_file(&saved, &session, &snaps)?;
    let saved_bytes = std::fs::metadata(&saved)?.len();
    println!(
        "write_file (60/frame): {saved_bytes} bytes, {:.2} bytes/sample",
        saved_bytes as f64 / samples as f64
    );

    for (name, path) in [("record", &live), ("write_file", &saved)] {
        let t0 = Instant::now();
        let rec = read_files(&[PathBuf::from(path)])?;
        let read = t0.elapsed();
        let dims = parse_list(DEFAULT_GROUP_BY).map_err(anyhow::Error::msg)?;
        let agg = aggregate(&rec.snapshots, &dims, &[]);
        let mut out = Vec::new();
        write_table(&mut out, &agg, &dims)?;
        assert_eq!(rec.snapshots, snaps, "round trip");
        println!(
            "open+report one hour ({name} file): {:.0} ms (read {:.0} ms, aggregate+table {:.0} ms), {} groups",
            t0.elapsed().as_secs_f64() * 1e3,
            read.as_secs_f64() * 1e3,
            (t0.elapsed() - read).as_secs_f64() * 1e3,
            agg.groups.len()
        );
    }
    std::fs::remove_dir_all(&dir)?;
    Ok(())
}
