//! The real binary against a hostile filesystem, no BPF needed: links planted
//! at every name a writer uses, inputs that are not files, a recorder that
//! finds its rotation set taken, and exports killed with SIGKILL mid-way.
//! Every victim is a file this test made, in its own temp directory.

use std::fs;
use std::os::unix::fs::{symlink, PermissionsExt};
use std::os::unix::process::ExitStatusExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use xtop::recording::{rotated_path, synth, write_file};

const FORMATS: [&str; 4] = ["csv", "json", "folded", "xcapture-csv"];

fn fresh_dir(name: &str) -> PathBuf {
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join(format!("files-{name}-{}", std::process::id()));
    let _ = fs::remove_dir_all(&dir);
    fs::create_dir_all(&dir).unwrap();
    dir
}

fn xtop(args: &[&str]) -> (Output, Duration) {
    let t = Instant::now();
    let out = Command::new(env!("CARGO_BIN_EXE_xtop"))
        .args(args)
        .output()
        .unwrap();
    (out, t.elapsed())
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

/// A recording of `threads` × `snaps` synthetic samples (made at test time).
fn recording(path: &Path, threads: u32, snaps: u64) -> PathBuf {
    let interval = Duration::from_secs(1);
    let s = synth::workload(threads, snaps, interval, 7);
    write_file(path, &synth::session(interval), &s).unwrap();
    path.to_path_buf()
}

/// A file the test made, public, that nothing may change.
fn victim(dir: &Path, name: &str) -> PathBuf {
    let v = dir.join(name);
    fs::write(&v, "precious").unwrap();
    fs::set_permissions(&v, fs::Permissions::from_mode(0o644)).unwrap();
    v
}

fn untouched(v: &Path) {
    assert_eq!(fs::read_to_string(v).unwrap(), "precious", "{v:?} was written");
    assert_eq!(
        fs::metadata(v).unwrap().permissions().mode() & 0o777,
        0o644,
        "{v:?} chmodded"
    );
}

fn mkfifo(p: &Path) {
    let c = std::ffi::CString::new(p.as_os_str().as_encoded_bytes()).unwrap();
    // SAFETY: a valid NUL-terminated path.
    assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0);
}

fn names(dir: &Path) -> Vec<String> {
    let mut n: Vec<String> = fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .collect();
    n.sort();
    n
}

fn export_args<'a>(rec: &'a str, format: &'a str, out: &'a str) -> [&'a str; 6] {
    ["export", rec, "--format", format, "-o", out]
}

#[test]
fn inputs_that_are_not_regular_files_are_refused_at_once() {
    let d = fresh_dir("inputs");
    let fifo = d.join("rec.fifo");
    mkfifo(&fifo);
    let out = d.join("out.csv");
    for (input, kind) in [
        (fifo.as_path(), "a FIFO"),
        (Path::new("/dev/null"), "a device"),
        (d.as_path(), "a directory"),
    ] {
        let i = input.to_str().unwrap();
        for args in [
            vec!["report", i],
            export_args(i, "csv", out.to_str().unwrap()).to_vec(),
            vec!["replay", i],
        ] {
            let (o, took) = xtop(&args);
            let err = stderr(&o);
            assert!(!o.status.success(), "{args:?}");
            assert_eq!(
                err,
                format!("xtop: {i} is {kind}, not a recording file\n"),
                "{args:?}"
            );
            assert!(took < Duration::from_secs(1), "{args:?} took {took:?}");
        }
    }
    assert!(!out.exists(), "a refused input makes no output");
    fs::remove_dir_all(&d).unwrap();
}

#[test]
fn no_export_format_writes_through_a_link_at_its_output() {
    let d = fresh_dir("export-links");
    let rec = recording(&d.join("small.xtop"), 20, 10);
    let rec = rec.to_str().unwrap();
    for format in ["csv", "json", "folded"] {
        let out = d.join(format!("out.{format}"));
        let v = victim(&d, &format!("victim-{format}"));
        symlink(&v, &out).unwrap();
        let (o, _) = xtop(&export_args(rec, format, out.to_str().unwrap()));
        assert!(o.status.success(), "{format}: {}", stderr(&o));
        untouched(&v);
        let m = fs::symlink_metadata(&out).unwrap();
        assert!(m.is_file() && m.permissions().mode() & 0o777 == 0o600, "{format}");
    }
    // xcapture's hourly files: learn their names, then trap each of them.
    let scratch = d.join("scratch");
    let (o, _) = xtop(&export_args(rec, "xcapture-csv", scratch.to_str().unwrap()));
    assert!(o.status.success(), "{}", stderr(&o));
    let hourly = names(&scratch);
    assert!(hourly.len() >= 4, "{hourly:?}");
    let trapped = d.join("xcapture");
    fs::create_dir(&trapped).unwrap();
    let victims: Vec<PathBuf> = hourly
        .iter()
        .map(|n| {
            let v = victim(&d, &format!("victim-{n}"));
            symlink(&v, trapped.join(n)).unwrap();
            v
        })
        .collect();
    let (o, _) = xtop(&export_args(rec, "xcapture-csv", trapped.to_str().unwrap()));
    assert!(o.status.success(), "{}", stderr(&o));
    victims.iter().for_each(|v| untouched(v));
    assert_eq!(
        names(&trapped),
        hourly,
        "each name holds a file, nothing else is left"
    );
    for n in &hourly {
        let m = fs::symlink_metadata(trapped.join(n)).unwrap();
        assert!(m.is_file() && m.permissions().mode() & 0o777 == 0o600, "{n}");
        assert_eq!(
            fs::read(trapped.join(n)).unwrap(),
            fs::read(scratch.join(n)).unwrap(),
            "{n}"
        );
    }
}

#[test]
fn record_refuses_links_fifos_and_a_taken_rotation_set_before_sampling() {
    let d = fresh_dir("record-links");
    let refused = |args: &[&str], want: &str| {
        let (o, took) = xtop(args);
        let err = stderr(&o);
        assert!(!o.status.success(), "{args:?}: {err}");
        assert!(err.lines().count() == 1 && err.contains(want), "{args:?}: {err}");
        // No root, no BPF, no waiting: these fail before the sampler starts.
        assert!(took < Duration::from_secs(1), "{args:?} took {took:?}");
    };
    let link = d.join("rec.xtop");
    let v = victim(&d, "victim");
    symlink(&v, &link).unwrap();
    refused(&["record", "-o", link.to_str().unwrap()], "it is a symbolic link");
    let fifo = d.join("rec.fifo");
    mkfifo(&fifo);
    refused(&["record", "-o", fifo.to_str().unwrap()], "is a FIFO");

    // Rotating: a link at this hour's (or the next hour's) file, and at the set's lock.
    let base = d.join("set.xtop");
    let now = SystemTime::now().duration_since(UNIX_EPOCH).unwrap().as_nanos() as u64;
    let hour = 3_600_000_000_000;
    for h in [now / hour, now / hour + 1] {
        symlink(&v, rotated_path(&base, h * hour)).unwrap();
    }
    refused(
        &["record", "-o", base.to_str().unwrap(), "--rotate", "1h"],
        "it is a symbolic link",
    );
    let lock = xtop::atomic_file::lock_path(&base).unwrap();
    assert!(!lock.exists(), "a refused recorder releases the set");
    symlink(&v, &lock).unwrap();
    refused(
        &["record", "-o", base.to_str().unwrap(), "--rotate", "1m"],
        "cannot open",
    );
    untouched(&v);

    // A set held by a live recorder (this process, standing in for one) is refused
    // whatever the period, naming the holder.
    fs::remove_file(&lock).unwrap();
    let other = d.join("other.xtop");
    let held = xtop::atomic_file::LockFile::acquire(&xtop::atomic_file::lock_path(&other).unwrap())
        .unwrap()
        .ok()
        .unwrap();
    let want = format!(
        "the rotation set {} is being recorded by PID {}",
        d.join("other-*.xtop").display(),
        std::process::id()
    );
    refused(
        &["record", "-o", other.to_str().unwrap(), "--rotate", "10m"],
        &want,
    );
    drop(held);
    untouched(&v);
    fs::remove_dir_all(&d).unwrap();
}

/// Is this directory entry one of our temporaries (a file or a staging directory)?
fn is_temp(name: &str) -> bool {
    name.starts_with('.') && name.contains(".xtop-tmp.")
}

#[test]
fn a_killed_export_leaves_no_partial_file_and_the_next_run_cleans_up() {
    let d = fresh_dir("killed");
    // Big enough that every format is still writing when it is killed.
    let big = recording(&d.join("big.xtop"), 2_000, 200);
    let small = recording(&d.join("small.xtop"), 5, 5);
    for format in FORMATS {
        let out_dir = d.join(format!("out-{format}"));
        fs::create_dir(&out_dir).unwrap();
        let out = if format == "xcapture-csv" {
            out_dir.clone()
        } else {
            out_dir.join(format!("out.{format}"))
        };
        let mut child = Command::new(env!("CARGO_BIN_EXE_xtop"))
            .args(export_args(big.to_str().unwrap(), format, out.to_str().unwrap()))
            .spawn()
            .unwrap();
        let deadline = Instant::now() + Duration::from_secs(20);
        let temp = loop {
            if let Some(t) = names(&out_dir).into_iter().find(|n| is_temp(n)) {
                break out_dir.join(t);
            }
            assert!(
                child.try_wait().unwrap().is_none(),
                "{format}: finished before it was killed"
            );
            assert!(Instant::now() < deadline, "{format}: no temporary appeared");
            std::thread::sleep(Duration::from_millis(2));
        };
        std::thread::sleep(Duration::from_millis(50)); // partly written
        child.kill().unwrap(); // SIGKILL to our own child
        let status = child.wait().unwrap();
        assert_eq!(status.signal(), Some(libc::SIGKILL), "{format}: it ended first");
        let left = names(&out_dir);
        assert!(
            left.iter().all(|n| is_temp(n)),
            "{format}: partial output under a final name: {left:?}"
        );

        // Minutes later, the next export there removes what the killed one left.
        let old = SystemTime::now() - Duration::from_secs(600);
        fs::File::open(&temp).unwrap().set_modified(old).unwrap();
        let (o, _) = xtop(&export_args(
            small.to_str().unwrap(),
            format,
            out.to_str().unwrap(),
        ));
        assert!(o.status.success(), "{format}: {}", stderr(&o));
        let after = names(&out_dir);
        assert!(
            !after.iter().any(|n| is_temp(n)),
            "{format}: stale temporary kept: {after:?}"
        );
        assert!(!after.is_empty(), "{format}: the second export wrote nothing");
    }
    fs::remove_dir_all(&d).unwrap();
}
