//! Symlink traps, non-regular inputs, stale temporaries and recorder locks.

use std::fs;
use std::os::unix::fs::{symlink, PermissionsExt};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use super::*;

fn dir(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("xtop-af-{name}-{}", std::process::id()));
    let _ = fs::remove_dir_all(&d);
    fs::create_dir_all(&d).unwrap();
    d
}

/// A victim file the test made, and a link to it planted at `at`.
fn trap(d: &Path, at: &Path) -> PathBuf {
    let victim = d.join("victim");
    fs::write(&victim, "precious").unwrap();
    fs::set_permissions(&victim, fs::Permissions::from_mode(0o644)).unwrap();
    symlink(&victim, at).unwrap();
    victim
}

fn untouched(victim: &Path) {
    assert_eq!(fs::read_to_string(victim).unwrap(), "precious");
    assert_eq!(fs::metadata(victim).unwrap().permissions().mode() & 0o777, 0o644);
}

fn mkfifo(p: &Path) {
    let c = std::ffi::CString::new(p.as_os_str().as_encoded_bytes()).unwrap();
    // SAFETY: a valid NUL-terminated path.
    assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0);
}

/// Sets a file's modification time `ago` into the past, as a killed writer's would be.
fn age(p: &Path, ago: Duration) {
    let t = std::time::SystemTime::now() - ago;
    fs::File::options()
        .read(true)
        .open(p)
        .unwrap()
        .set_modified(t)
        .unwrap();
}

#[test]
fn a_link_at_the_final_name_is_replaced_never_followed() {
    let d = dir("final");
    let out = d.join("out.csv");
    let victim = trap(&d, &out);
    write(&out, b"export").unwrap();
    untouched(&victim);
    assert!(fs::symlink_metadata(&out).unwrap().is_file());
    assert_eq!(fs::read_to_string(&out).unwrap(), "export");
}

#[test]
fn temporaries_are_unpredictable_and_never_through_links() {
    let d = dir("temp");
    let out = d.join("out.csv");
    let (a, b) = (temp_beside(&out).unwrap(), temp_beside(&out).unwrap());
    assert_ne!(a, b);
    assert!(is_temp_name(a.file_name().unwrap().to_str().unwrap()), "{a:?}");
    // Even a planted link under exactly the name we would pick is refused, not followed.
    let victim = trap(&d, &a);
    assert!(create_private(&a).is_err());
    untouched(&victim);
}

#[test]
fn stale_temporaries_go_live_and_foreign_ones_stay() {
    let d = dir("stale");
    let out = d.join("out.csv");
    let stale = temp_beside(&out).unwrap();
    fs::write(&stale, "left by a kill -9").unwrap();
    age(&stale, Duration::from_secs(600));
    let (live, _held) = create_temp(&d.join("other.csv")).unwrap();
    age(&live, Duration::from_secs(600));
    let fresh = temp_beside(&out).unwrap();
    fs::write(&fresh, "being written right now").unwrap();
    let fifo = temp_beside(&out).unwrap();
    mkfifo(&fifo);
    let mine = d.join("out.csv.tmp123"); // not our pattern
    fs::write(&mine, "user data").unwrap();
    age(&mine, Duration::from_secs(600));
    write(&out, b"x").unwrap();
    assert!(!stale.exists(), "the stale temporary is removed");
    for kept in [&live, &fresh, &fifo, &mine] {
        assert!(fs::symlink_metadata(kept).is_ok(), "{kept:?} must stay");
    }
}

#[test]
fn only_regular_files_are_read_and_at_once() {
    let d = dir("inputs");
    let fifo = d.join("rec.fifo");
    mkfifo(&fifo);
    for (p, kind) in [
        (fifo.as_path(), "a FIFO"),
        (Path::new("/dev/null"), "a device"),
        (d.as_path(), "a directory"),
    ] {
        let t = Instant::now();
        let e = format!("{:#}", open_regular(p).unwrap_err());
        assert!(t.elapsed() < Duration::from_secs(1));
        assert_eq!(e, format!("{} is {kind}, not a recording file", p.display()));
    }
    let f = d.join("ok");
    fs::write(&f, "x").unwrap();
    assert!(open_regular(&f).is_ok());
}

#[test]
fn appending_refuses_links_and_fifos_and_makes_the_file_private() {
    let d = dir("append");
    let link = d.join("rec.xtop");
    let victim = trap(&d, &link);
    let e = format!("{:#}", open_for_append(&link).unwrap_err());
    assert!(e.contains("symbolic link"), "{e}");
    untouched(&victim);
    let fifo = d.join("rec.fifo");
    mkfifo(&fifo);
    assert!(format!("{:#}", open_for_append(&fifo).unwrap_err()).contains("a FIFO"));
    let public = d.join("public.xtop");
    fs::write(&public, "").unwrap();
    fs::set_permissions(&public, fs::Permissions::from_mode(0o644)).unwrap();
    let f = open_for_append(&public).unwrap();
    make_private(&f, &public).unwrap();
    assert_eq!(fs::metadata(&public).unwrap().permissions().mode() & 0o777, 0o600);
}

#[test]
fn a_held_lock_names_its_holder() {
    let d = dir("lock");
    let p = d.join("rec.xtop");
    fs::write(&p, "").unwrap();
    let first = fs::File::open(&p).unwrap();
    assert!(try_lock(&first).unwrap());
    let second = fs::File::open(&p).unwrap();
    assert!(!try_lock(&second).unwrap());
    assert_eq!(lock_holder(&second), Some(std::process::id()));
}

#[test]
fn a_holder_is_found_while_other_locks_come_and_go() {
    // Locks taken and dropped elsewhere shift /proc/locks under a reader; the
    // holder must still be named (this failed CI once, in a parallel test run).
    let d = dir("lock-churn");
    let p = d.join("rec.xtop");
    fs::write(&p, "").unwrap();
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let churn = {
        let (d, stop) = (d.clone(), stop.clone());
        std::thread::spawn(move || {
            let files: Vec<_> = (0..100)
                .map(|i| {
                    let f = d.join(format!("churn{i}"));
                    fs::write(&f, "").unwrap();
                    fs::File::open(f).unwrap()
                })
                .collect();
            while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                for f in &files {
                    assert!(try_lock(f).unwrap());
                }
                for f in &files {
                    // SAFETY: unlocking a descriptor this thread owns.
                    unsafe { libc::flock(std::os::fd::AsRawFd::as_raw_fd(f), libc::LOCK_UN) };
                }
            }
        })
    };
    let first = fs::File::open(&p).unwrap();
    assert!(try_lock(&first).unwrap());
    let second = fs::File::open(&p).unwrap();
    let misses = (0..300)
        .filter(|_| lock_holder(&second) != Some(std::process::id()))
        .count();
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    churn.join().unwrap();
    assert_eq!(misses, 0, "holder not found in {misses} of 300 looks");
}

#[test]
fn a_directory_output_appears_whole_or_not_at_all() {
    let d = dir("staging");
    let victim = trap(&d, &d.join("a.csv"));
    let s = StagingDir::create(&d).unwrap();
    fs::write(s.path().join("a.csv"), "A").unwrap();
    fs::write(s.path().join("b.csv"), "B").unwrap();
    let abandoned = StagingDir::create(&d).unwrap();
    fs::write(abandoned.path().join("c.csv"), "C").unwrap();
    drop(abandoned);
    s.publish().unwrap();
    untouched(&victim);
    let mut names: Vec<_> = fs::read_dir(&d)
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .collect();
    names.sort();
    assert_eq!(names, ["a.csv", "b.csv", "victim"]);
    assert_eq!(fs::read_to_string(d.join("a.csv")).unwrap(), "A");
}

#[test]
fn a_killed_exports_staging_directory_is_removed_and_a_live_one_kept() {
    let d = dir("stale-staging");
    let victim = trap(&d, &d.join("planted"));
    // What a kill -9 during an xcapture export leaves: our pattern, unlocked, old,
    // holding partial files and (planted by someone) a link out.
    let dead = d.join(format!(".xtop-export{TEMP_MARK}{:016x}", 0x5eed));
    fs::create_dir(&dead).unwrap();
    fs::write(dead.join("xcapture_samples_2026-12-02.21.csv"), "TIMESTAMP,").unwrap();
    symlink(&victim, dead.join("link")).unwrap();
    age(&dead, Duration::from_secs(600));
    let live = StagingDir::create(&d).unwrap();
    age(live.path(), Duration::from_secs(600));
    let next = StagingDir::create(&d).unwrap();
    assert!(!dead.exists(), "the dead export's directory is removed");
    assert!(live.path().is_dir(), "a running export's directory stays");
    untouched(&victim);
    drop((live, next));
}

#[test]
fn a_lock_file_is_held_once_named_and_removed() {
    let d = dir("lockfile");
    let p = lock_path(&d.join("rec.xtop")).unwrap();
    assert_eq!(p.file_name().unwrap(), ".rec.xtop.xtop-lock");
    let first = LockFile::acquire(&p).unwrap().ok().unwrap();
    assert_eq!(fs::metadata(&p).unwrap().permissions().mode() & 0o777, 0o600);
    let second = LockFile::acquire(&p).unwrap();
    assert_eq!(second.err(), Some(Some(std::process::id())));
    drop(first);
    assert!(!p.exists(), "released locks leave no file");
    let again = LockFile::acquire(&p).unwrap();
    assert!(again.is_ok());
    drop(again);
    // A link planted at the lock's name is never followed.
    let victim = trap(&d, &p);
    assert!(LockFile::acquire(&p).is_err());
    untouched(&victim);
}
