//! End to end: a thread blocked on its own O_DIRECT read shows that read's
//! disk, operation and size (`device`, `io_op`, `io_bytes`,
//! `io_inflight_us`), at queue depth 1 (one reader) and 8 (eight readers at
//! once); a running thread shows none. Needs root; CI runs it as root.

mod common;

use std::alloc::{alloc_zeroed, dealloc, Layout};
use std::collections::BTreeMap;
use std::fs::File;
use std::os::unix::fs::{FileExt, MetadataExt};
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use common::observe::{live_bpf, next_snapshot, start_sampler};
use common::workload::direct_file;
use xtop::dimensions;
use xtop::sampler::SamplerOptions;

const BLOCK: usize = 16384;
const FILE_MB: usize = 32;

/// The whole disk under `path` (`vda` for `/dev/vda1` too), as sysfs names
/// it; None where the file system has no disk (tmpfs, overlay).
fn disk_of(path: &Path) -> Option<String> {
    let dev = std::fs::metadata(path).ok()?.dev();
    let (major, minor) = (libc::major(dev), libc::minor(dev));
    let sys = std::fs::canonicalize(format!("/sys/dev/block/{major}:{minor}")).ok()?;
    let disk = if sys.join("partition").exists() {
        sys.parent()?
    } else {
        &sys
    };
    Some(disk.file_name()?.to_string_lossy().into_owned())
}

/// `n` threads named `name` reading BLOCK bytes at a time with O_DIRECT,
/// each at its own offsets, until `stop`.
fn readers(
    name: &str,
    n: usize,
    file: &Arc<File>,
    stop: &Arc<AtomicBool>,
) -> Vec<std::thread::JoinHandle<()>> {
    (0..n)
        .map(|k| {
            let (file, stop) = (file.clone(), stop.clone());
            std::thread::Builder::new()
                .name(name.into())
                .spawn(move || {
                    let layout = Layout::from_size_align(BLOCK, 4096).unwrap();
                    // SAFETY: non-zero size; freed below.
                    let buf = unsafe { std::slice::from_raw_parts_mut(alloc_zeroed(layout), BLOCK) };
                    let blocks = (FILE_MB << 20) / BLOCK;
                    let mut i = k * 7;
                    while !stop.load(Ordering::Relaxed) {
                        let off = ((i * 7919) % blocks * BLOCK) as u64;
                        assert_eq!(file.read_at(buf, off).unwrap(), BLOCK, "O_DIRECT read");
                        i += 1;
                    }
                    unsafe { dealloc(buf.as_mut_ptr(), layout) };
                })
                .unwrap()
        })
        .collect()
}

/// What one reader looked like in one pass.
#[derive(Debug)]
struct Seen {
    pass: usize,
    state: String,
    io: [String; 4],
}

#[test]
fn a_thread_blocked_on_its_read_shows_the_request() {
    let Some(_serial) = live_bpf() else { return };
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR"));
    let Some(disk) = disk_of(dir) else {
        assert!(
            std::env::var("CI").as_deref() != Ok("true"),
            "CI=true but {} is on no disk: O_DIRECT reads would not reach the block layer",
            dir.display()
        );
        eprintln!("skipping: {} is on no disk", dir.display());
        return;
    };
    let path = dir.join(format!("xtop-blockio-{}.bin", std::process::id()));
    let file = Arc::new(direct_file(&path, FILE_MB));
    std::fs::remove_file(&path).unwrap();
    let stop = Arc::new(AtomicBool::new(false));
    let mut threads = readers("xt_qd1", 1, &file, &stop);
    threads.extend(readers("xt_qd8", 8, &file, &stop));

    let sampler = start_sampler(SamplerOptions {
        interval: std::time::Duration::from_millis(50),
        pids: vec![std::process::id()],
        ..Default::default()
    });
    let dims =
        ["state", "device", "io_op", "io_bytes", "io_inflight_us"].map(|d| dimensions::find(d).unwrap());
    let mut by_comm: BTreeMap<String, Vec<Seen>> = BTreeMap::new();
    for pass in 0..60 {
        let snap = next_snapshot(&sampler);
        for s in &snap.samples {
            let v = dims.each_ref().map(|d| d.value(&snap, s).to_string());
            let [state, io @ ..] = v;
            by_comm
                .entry(s.ident.comm.to_string())
                .or_default()
                .push(Seen { pass, state, io });
        }
    }
    sampler.stop().unwrap();
    stop.store(true, Ordering::Relaxed);
    threads.into_iter().for_each(|t| t.join().unwrap());

    for comm in ["xt_qd1", "xt_qd8"] {
        let seen = by_comm
            .get(comm)
            .unwrap_or_else(|| panic!("{comm} never sampled"));
        let disk_waits: Vec<&Seen> = seen.iter().filter(|o| o.state == "DISK").collect();
        let with_io: Vec<&Seen> = disk_waits.iter().copied().filter(|o| o.io[0] != "-").collect();
        assert!(disk_waits.len() >= 5, "{comm}: too few DISK samples: {seen:?}");
        // The rest fell between the completion and the thread's wakeup.
        assert!(
            with_io.len() * 2 >= disk_waits.len(),
            "{comm}: most DISK samples should show their request: {disk_waits:?}"
        );
        for o in &with_io {
            assert_eq!(o.io[..3], [disk.as_str(), "read", "16384"], "{comm}: {o:?}");
            let us: u64 = o.io[3].parse().unwrap_or_else(|_| panic!("{comm}: {o:?}"));
            assert!(us < 10_000_000, "{comm}: in flight for {us} µs: {o:?}");
        }
        for o in seen.iter().filter(|o| o.state == "RUN") {
            assert!(
                o.io.iter().all(|v| v == "-"),
                "{comm}: a running thread waits on no request: {o:?}"
            );
        }
    }
    // Eight readers at once: some pass caught several of their requests in flight.
    let mut per_pass = BTreeMap::<usize, usize>::new();
    for o in by_comm["xt_qd8"].iter().filter(|o| o.io[0] != "-") {
        *per_pass.entry(o.pass).or_default() += 1;
    }
    let most = per_pass.values().max().copied().unwrap_or(0);
    assert!(
        most >= 2,
        "at queue depth 8, at most {most} request(s) in flight in one pass"
    );
}

/// Without the completion hook every request would stay "in flight": neither
/// hook is used, both are named, and the columns are unknown, not '-'.
#[test]
fn without_the_completion_hook_the_columns_are_unknown() {
    let Some(_serial) = live_bpf() else { return };
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR"));
    let path = dir.join(format!("xtop-blockio-nohook-{}.bin", std::process::id()));
    let file = Arc::new(direct_file(&path, FILE_MB));
    std::fs::remove_file(&path).unwrap();
    let stop = Arc::new(AtomicBool::new(false));
    let threads = readers("xt_qd1", 1, &file, &stop);
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_xtop"))
        .args(["-b", "-n", "3", "-i", "100ms", "-g", "comm,device,io_op"])
        .args(["-p", &std::process::id().to_string()])
        .env("XTOP_DISABLE_HOOKS", "block_io_done")
        .output()
        .unwrap();
    stop.store(true, Ordering::Relaxed);
    threads.into_iter().for_each(|t| t.join().unwrap());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{err}");
    assert!(err.contains("warning: cannot attach block_io_done"), "{err}");
    assert!(err.contains("warning: not using block_io_start"), "{err}");
    let text = String::from_utf8(out.stdout).unwrap();
    let rows: Vec<Vec<&str>> = text
        .lines()
        .map(|l| l.split_whitespace().collect::<Vec<_>>())
        .filter(|f| f.len() == 6 && f[3] == "xt_qd1")
        .collect();
    assert!(!rows.is_empty(), "{text}");
    assert!(rows.iter().all(|f| f[4..] == ["?", "?"]), "{text}");
}
