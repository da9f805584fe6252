//! Format-level tests: round trips, crash safety, damage, versions, rotation.

use std::fs;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use super::synth::{self, Rng};
use super::*;
use crate::model::fixture::{busy_snapshot, sample, snapshot, T0_NS};
use crate::model::{Arch, Stack, State, Syscall, ThreadIdent};

/// A fresh directory under the system temp dir, removed when dropped.
pub(crate) struct TempDir(pub PathBuf);

impl TempDir {
    pub fn new(tag: &str) -> TempDir {
        static N: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);
        let n = N.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let p = std::env::temp_dir().join(format!("xtop-test-{tag}-{}-{n}", std::process::id()));
        let _ = fs::remove_dir_all(&p);
        fs::create_dir_all(&p).unwrap();
        TempDir(p)
    }

    pub fn join(&self, name: &str) -> PathBuf {
        self.0.join(name)
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = fs::remove_dir_all(&self.0);
    }
}

/// Fixture snapshots exercising every field's edge cases.
pub(crate) fn varied() -> Vec<Snapshot> {
    use crate::model::{BlockIo, IoWait};
    let mut snaps = varied_v5();
    // Block I/O waited for (version 6): a request, the same one a pass later
    // (predicted), another, none, untracked.
    let read = BlockIo {
        device: "vda".into(),
        op: 0,
        bytes: 16384,
        inflight_ns: 70_000,
    };
    let dt = snaps[3].time_ns - snaps[2].time_ns;
    snaps[2].samples[0].io = IoWait::InFlight(read.clone());
    snaps[3].samples[0].io = IoWait::InFlight(BlockIo {
        inflight_ns: read.inflight_ns + dt,
        ..read.clone()
    });
    snaps[4].samples[0].io = IoWait::InFlight(BlockIo {
        device: "nvme0n1".into(),
        op: 1,
        bytes: u32::MAX,
        inflight_ns: 0,
    });
    snaps[5].samples[0].io = IoWait::Untracked;
    snaps[6].samples[1].io = IoWait::InFlight(read);
    snaps
}

/// `varied()` as it was in format version 5, before block I/O.
fn varied_v5() -> Vec<Snapshot> {
    use crate::model::AppWait;
    let mut snaps = varied_v4();
    // Programs' own wait states (version 5): a wait, the same again, not
    // waiting with an unknown backend type, unread, then none.
    let lwlock = Arc::new(AppWait::Known {
        class: "LWLock".into(),
        event: "WALWrite".into(),
        state: "client backend".into(),
    });
    snaps[2].samples[0].app = Some(lwlock.clone());
    snaps[3].samples[0].app = Some(lwlock);
    snaps[4].samples[0].app = Some(Arc::new(AppWait::Known {
        class: "".into(),
        event: "".into(),
        state: "".into(),
    }));
    snaps[5].samples[0].app = Some(Arc::new(AppWait::Unread));
    snaps[6].samples[1].app = Some(Arc::new(AppWait::Known {
        class: "IO".into(),
        event: "#999".into(),
        state: "walwriter".into(),
    }));
    snaps
}

/// `varied()` as it was in format version 4, before programs' wait states.
fn varied_v4() -> Vec<Snapshot> {
    use crate::model::Target;
    let mut snaps = varied_v3();
    // Sockets (version 4): connected, the same again, unread, UNIX.
    let tcp = Arc::new(Target::Socket {
        file: "socket:[4711]".into(),
        connection: Some("TCP [::1]:5432->[::1]:40000".into()),
        state: Some("ESTABLISHED".into()),
    });
    snaps[16].samples[0].target = Some(tcp.clone());
    snaps[17].samples[0].target = Some(tcp);
    snaps[18].samples[0].target = Some(Arc::new(Target::Socket {
        file: "socket:[4712]".into(),
        connection: None,
        state: None,
    }));
    snaps[19].samples[1].target = Some(Arc::new(Target::Socket {
        file: "socket:[4713]".into(),
        connection: Some("UNIX-DGRAM @ünï@x".into()),
        state: Some("".into()),
    }));
    snaps
}

/// `varied()` as it was in format version 3, before sockets.
fn varied_v3() -> Vec<Snapshot> {
    let mut snaps: Vec<Snapshot> = (0..20).map(busy_snapshot).collect();
    let s = &mut snaps[3].samples[0];
    s.syscall = Syscall::Unknown;
    s.runq_wait_ns = Some(7);
    s.waker_tid = None;
    s.voluntary = None;
    snaps[4].samples[1].syscall = Syscall::In {
        nr: 17,
        args: [u64::MAX, 0, 1, 2, 3, 4],
        ns_so_far: None,
        seq: None,
    };
    // Thread renamed itself: static fields change.
    Arc::make_mut(&mut snaps[5].samples[1].ident).comm = "renamed".into();
    snaps[6].samples[0].kstack = Some(Arc::new(Stack {
        hash: u64::MAX,
        frames: vec!["a".into(), "".into()],
        top: 9,
    }));
    snaps[6].samples[0].ustack = snaps[6].samples[0].kstack.clone(); // one table entry for both
    snaps[14].samples[1].ustack = None; // kernel half only
    snaps[15].samples[0].ustack = Some(Arc::new(Stack {
        hash: 0xbeef, // same hash as the fixture's ustack, other frames
        frames: vec!["spin".into(), crate::model::TRUNCATED.into()],
        top: 0,
    }));
    // Files: unresolved, then another name (renamed, deleted), then none.
    snaps[10].samples[1].target = Some(Arc::new(crate::model::Target::Unresolved));
    snaps[11].samples[1].target = Some(Arc::new(crate::model::Target::File(
        "/tmp/ünï code (deleted)".into(),
    )));
    snaps[12].samples[1].target = None;
    snaps[7].arch = Arch::Aarch64;
    snaps[7].interval = Duration::from_millis(250);
    snaps[8].dropped = 3;
    snaps[9].samples.clear();
    snaps[10].samples.reverse(); // tids need not be sorted
    snaps[11]
        .samples
        .push(sample(u32::MAX, 1, "kworker/0:1", State::Idle, None));
    Arc::make_mut(&mut snaps[11].samples[5].ident).kthread = true;
    snaps[12].time_ns -= 5; // clock steps are stored as they come
    snaps[13].samples[2].since_oncpu_ns = Some(u64::MAX);
    snaps
}

fn session() -> Session {
    synth::session(Duration::from_secs(1))
}

fn read_one(p: &Path) -> Recording {
    read_files(&[p.to_path_buf()]).unwrap()
}

#[test]
fn write_file_round_trips_fixture_snapshots() {
    let d = TempDir::new("rt");
    let p = d.join("a.xtop");
    let snaps = varied();
    write_file(&p, &session(), &snaps).unwrap();
    let r = read_one(&p);
    assert_eq!(r.session, session());
    assert_eq!(r.snapshots, snaps);
    let dropped = format!(
        "{}: the sampler dropped 3 snapshots while recording (xtop fell behind)",
        p.display()
    );
    assert_eq!(r.warnings, [dropped]);
    assert_eq!(fs::metadata(&p).unwrap().permissions().mode() & 0o777, 0o600);
    assert!(fs::read_dir(&d.0).unwrap().count() == 1, "temp file left behind");
}

/// The golden file of format `version`, regenerated from `varied()` with
/// `XTOP_REGEN_GOLDEN=1 cargo test golden` while `version` is the current one.
fn golden(version: u16) -> Recording {
    let golden =
        Path::new(env!("CARGO_MANIFEST_DIR")).join(format!("src/recording/testdata/v{version}.xtop"));
    if version == VERSION && std::env::var_os("XTOP_REGEN_GOLDEN").is_some() {
        write_file(&golden, &session(), &varied()).unwrap();
    }
    assert_eq!(
        fs::read(&golden).unwrap()[8..10],
        version.to_le_bytes(),
        "golden file must stay version {version}"
    );
    let r = read_one(&golden);
    assert!(
        r.warnings.iter().all(|w| w.contains("dropped 3")),
        "{:?}",
        r.warnings
    );
    assert_eq!(r.session.host, "synth");
    r
}

/// A version-1 file from the first release of the format, before user stacks:
/// every later xtop must still read it.
#[test]
fn reads_the_version_1_golden_file() {
    let mut want = varied();
    for s in want.iter_mut().flat_map(|n| n.samples.iter_mut()) {
        s.ustack = None;
        s.target = None;
        s.app = None;
    }
    assert_eq!(golden(1).snapshots, untracked_io(want));
}

/// Recordings made before block I/O was tracked read back with it unknown.
fn untracked_io(mut snaps: Vec<Snapshot>) -> Vec<Snapshot> {
    for s in snaps.iter_mut().flat_map(|n| n.samples.iter_mut()) {
        s.io = crate::model::IoWait::Untracked;
    }
    snaps
}

/// Recordings made before user stacks carried their program's own frame
/// (`ustack_app`) read back with it unknown, not as the C library's leaf.
fn without_app_frames(mut snaps: Vec<Snapshot>) -> Vec<Snapshot> {
    for s in snaps.iter_mut().flat_map(|n| n.samples.iter_mut()) {
        if let Some(u) = &mut s.ustack {
            Arc::make_mut(u).top = Stack::APP_UNKNOWN;
        }
    }
    snaps
}

/// Version 2 added user stacks.
#[test]
fn reads_the_version_2_golden_file() {
    let r = golden(2);
    assert!(r
        .snapshots
        .iter()
        .any(|n| n.samples.iter().any(|s| s.ustack.is_some())));
    let mut want = without_app_frames(varied());
    for s in want.iter_mut().flat_map(|n| n.samples.iter_mut()) {
        s.target = None;
        s.app = None;
    }
    assert_eq!(r.snapshots, untracked_io(want));
}

/// Version 3 added the file each syscall works on.
#[test]
fn reads_the_version_3_golden_file() {
    let r = golden(3);
    let named = |t: &crate::model::Target| matches!(t, crate::model::Target::File(_));
    assert!(r
        .snapshots
        .iter()
        .any(|n| n.samples.iter().any(|s| s.target.as_deref().is_some_and(named))));
    assert_eq!(r.snapshots, untracked_io(without_app_frames(varied_v3())));
}

/// Version 4 added what a socket connects.
#[test]
fn reads_the_version_4_golden_file() {
    let r = golden(4);
    let sock = |t: &crate::model::Target| matches!(t, crate::model::Target::Socket { .. });
    assert!(r
        .snapshots
        .iter()
        .any(|n| n.samples.iter().any(|s| s.target.as_deref().is_some_and(sock))));
    assert_eq!(r.snapshots, untracked_io(without_app_frames(varied_v4())));
}

/// Version 5 added the program's own wait state.
#[test]
fn reads_the_version_5_golden_file() {
    let r = golden(5);
    assert!(r
        .snapshots
        .iter()
        .any(|n| n.samples.iter().any(|s| s.app.is_some())));
    assert_eq!(r.snapshots, untracked_io(without_app_frames(varied_v5())));
}

/// Version 6 added the block I/O request waited for.
#[test]
fn reads_the_version_6_golden_file() {
    use crate::model::IoWait;
    let r = golden(6);
    let io = |n: &Snapshot| n.samples.iter().any(|s| matches!(s.io, IoWait::InFlight(_)));
    assert!(r.snapshots.iter().any(io));
    assert_eq!(r.snapshots, varied());
}

/// Appending to an older file writes the current codec, so the header must
/// say so; what was there before still reads.
#[test]
fn appending_to_a_version_1_file_upgrades_its_header() {
    let d = TempDir::new("upgrade");
    let p = d.join("old.xtop");
    let v1 = Path::new(env!("CARGO_MANIFEST_DIR")).join("src/recording/testdata/v1.xtop");
    fs::copy(&v1, &p).unwrap();
    let before = read_one(&p).snapshots;
    let more: Vec<Snapshot> = (30..33).map(busy_snapshot).collect();
    let mut w = Writer::append(&p, &session()).unwrap();
    more.iter().for_each(|s| w.write_snapshot(s).unwrap());
    w.finish().unwrap();
    assert_eq!(fs::read(&p).unwrap()[8..10], VERSION.to_le_bytes());
    let r = read_one(&p);
    assert_eq!(r.snapshots, [before, more].concat());
}

#[test]
fn writer_round_trips_across_key_frames() {
    let d = TempDir::new("key");
    let p = d.join("w.xtop");
    let snaps = synth::workload(30, 700, Duration::from_secs(1), 7);
    let mut w = Writer::create(&p, &session()).unwrap();
    snaps.iter().for_each(|s| w.write_snapshot(s).unwrap());
    w.finish().unwrap();
    let r = read_one(&p);
    assert!(r.warnings.is_empty(), "{:?}", r.warnings);
    assert_eq!(r.snapshots, snaps);
    assert_eq!(fs::metadata(&p).unwrap().permissions().mode() & 0o777, 0o600);
    // Key frames redefine every thread, yet a reader hands out one identity
    // per thread (the workload never changes them).
    let idents: std::collections::HashSet<*const ThreadIdent> = r
        .snapshots
        .iter()
        .flat_map(|n| n.samples.iter().map(|s| Arc::as_ptr(&s.ident)))
        .collect();
    assert_eq!(idents.len(), 30);
}

#[test]
fn torn_tail_is_skipped_with_a_warning() {
    let d = TempDir::new("torn");
    let p = d.join("t.xtop");
    let snaps: Vec<_> = (0..10).map(busy_snapshot).collect();
    let mut w = Writer::create(&p, &session()).unwrap();
    snaps.iter().for_each(|s| w.write_snapshot(s).unwrap());
    let whole = w.bytes();
    w.finish().unwrap();
    // Simulate a crash in the middle of the last frame's write.
    fs::OpenOptions::new()
        .write(true)
        .open(&p)
        .unwrap()
        .set_len(whole - 7)
        .unwrap();
    let r = read_one(&p);
    assert_eq!(r.snapshots, snaps[..9]);
    assert_eq!(r.warnings.len(), 1, "{:?}", r.warnings);
    assert!(
        r.warnings[0].contains("recording interrupted"),
        "{}",
        r.warnings[0]
    );

    // Appending cuts the torn frame and continues after the intact ones.
    let mut w = Writer::append(&p, &session()).unwrap();
    assert!(w.warnings[0].contains("cut"), "{:?}", w.warnings);
    w.write_snapshot(&busy_snapshot(10)).unwrap();
    w.finish().unwrap();
    let r = read_one(&p);
    assert!(r.warnings.is_empty(), "{:?}", r.warnings);
    assert_eq!(r.snapshots.len(), 10);
    assert_eq!(r.snapshots[9], busy_snapshot(10));
}

#[test]
fn flipped_byte_costs_frames_not_the_file() {
    let d = TempDir::new("flip");
    let p = d.join("f.xtop");
    let snaps = synth::workload(10, 800, Duration::from_secs(1), 3);
    let mut w = Writer::create(&p, &session()).unwrap();
    snaps.iter().for_each(|s| w.write_snapshot(s).unwrap());
    w.finish().unwrap();
    let mut bytes = fs::read(&p).unwrap();
    let mid = bytes.len() / 3;
    bytes[mid] ^= 0x10;
    fs::write(&p, &bytes).unwrap();
    let r = read_one(&p);
    // Lost: the damaged frame and the deltas up to the next key frame (at most 300).
    assert!(
        r.snapshots.len() >= 800 - 300 && r.snapshots.len() < 800,
        "{}",
        r.snapshots.len()
    );
    assert!(r.snapshots.iter().all(|s| snaps.contains(s)));
    assert!(r.snapshots.last() == snaps.last());
    assert!(
        r.warnings.iter().any(|w| w.contains("corrupt data at byte")),
        "{:?}",
        r.warnings
    );
}

#[test]
fn bad_files_get_one_line_errors() {
    let d = TempDir::new("bad");
    let p = d.join("x");
    let err = |content: &[u8]| {
        fs::write(&p, content).unwrap();
        format!("{:#}", read_files(std::slice::from_ref(&p)).unwrap_err())
    };
    assert!(err(b"").contains("empty file"));
    assert!(err(b"TIMESTAMP,TID\n1,2\n").contains("not an xtop recording"));
    assert!(err(&frame::MAGIC[..5]).contains("truncated recording header"));
    let mut future = frame::file_header().to_vec();
    future[8] = 0xff;
    let e = err(&future);
    let mut ancient = frame::file_header().to_vec();
    ancient[8] = 0;
    assert!(err(&ancient).contains("version 0 is no longer supported"));
    assert!(e.contains("version 255 is newer") && e.contains("upgrade"), "{e}");
    assert!(err(&frame::file_header()).contains("no intact session header"));
    let missing = format!("{:#}", read_files(&[d.join("nope")]).unwrap_err());
    assert!(
        missing.contains("cannot open") && missing.contains("nope"),
        "{missing}"
    );
    assert!(!e.contains('\n') && !missing.contains('\n'));
}

#[test]
fn rotation_names_files_by_period_and_reads_back_merged() {
    let d = TempDir::new("rot");
    let base = d.join("rec.xtop");
    let snaps: Vec<_> = (0..150)
        .map(|n| snapshot(n, vec![sample(1, 1, "a", State::Run, None)]))
        .collect();
    let period = Duration::from_secs(60);
    let mut r = Rotating::open(&base, Some(period), &session(), snaps[0].time_ns).unwrap();
    snaps.iter().for_each(|s| r.write(s).unwrap());
    let files = r.files.clone();
    r.finish().unwrap();
    // T0 is on a minute boundary: 150 s span three one-minute periods.
    let want: Vec<PathBuf> = (0..3)
        .map(|m| rotated_path(&base, T0_NS + m * 60_000_000_000))
        .collect();
    assert_eq!(files, want);
    let name = files[1].file_name().unwrap().to_str().unwrap().to_string();
    assert!(
        name.starts_with("rec-") && name.ends_with(".xtop") && name.len() == "rec-YYYYmmdd-HHMMSS.xtop".len()
    );
    for f in &files {
        assert_eq!(fs::metadata(f).unwrap().permissions().mode() & 0o777, 0o600);
    }
    let mut rev = files.clone();
    rev.reverse(); // order of arguments does not matter
    let rec = read_files(&rev).unwrap();
    assert_eq!(rec.snapshots, snaps);
    assert_eq!(read_one(&files[2]).snapshots.len(), 30);
}

#[test]
fn unwritable_target_is_a_clear_error() {
    let d = TempDir::new("unw");
    let e = format!(
        "{:#}",
        Writer::append(&d.join("no/such/dir/r.xtop"), &session())
            .err()
            .unwrap()
    );
    assert!(e.contains("cannot create") && e.contains("no/such/dir"), "{e}");
    let e = format!("{:#}", Writer::append(&d.0, &session()).err().unwrap());
    assert!(!e.is_empty());
    fs::write(d.join("notes.txt"), "hello world, not a recording").unwrap();
    let e = format!(
        "{:#}",
        Writer::append(&d.join("notes.txt"), &session()).err().unwrap()
    );
    assert!(
        e.contains("refusing to append") && e.contains("not an xtop recording"),
        "{e}"
    );
}

#[test]
fn disk_full_is_one_clear_error() {
    // /dev/full answers every write with ENOSPC (present on any Linux with devtmpfs).
    let full = Path::new("/dev/full");
    assert!(full.exists(), "/dev/full missing");
    let e = format!("{:#}", Writer::create(full, &session()).err().unwrap());
    assert_eq!(e, "writing /dev/full: No space left on device (os error 28)");
}

/// Random damage to a valid recording: never a panic or a hang, and whatever
/// comes back is exactly what was written (checksums let nothing wrong through).
#[test]
fn random_corruption_never_panics_or_invents_data() {
    let d = TempDir::new("fuzz");
    let p = d.join("z.xtop");
    let snaps = synth::workload(8, 40, Duration::from_secs(1), 11);
    let mut w = Writer::create(&p, &session()).unwrap();
    for (k, chunk) in snaps.chunks(3).enumerate() {
        w.write_snapshots(chunk).unwrap();
        if k == 6 {
            w.write_session(&session()).unwrap(); // key frames mid-file
        }
    }
    w.finish().unwrap();
    let good = fs::read(&p).unwrap();
    let mut rng = Rng::new(0x5eed);
    let started = Instant::now();
    for round in 0..400 {
        let mut b = good.clone();
        for _ in 0..1 + rng.below(4) {
            let at = rng.below(b.len() as u64) as usize;
            match rng.below(5) {
                0 => b[at] ^= 1 << rng.below(8),
                1 => b.truncate(at),
                2 => b[at] = rng.next_u64() as u8,
                3 => {
                    let junk: Vec<u8> = (0..rng.below(64)).map(|_| rng.next_u64() as u8).collect();
                    b.splice(at..at, junk);
                }
                _ => {
                    let end = (at + rng.below(200) as usize).min(b.len());
                    b.drain(at..end);
                }
            }
        }
        fs::write(&p, &b).unwrap();
        if let Ok(r) = read_files(std::slice::from_ref(&p)) {
            for s in &r.snapshots {
                assert!(
                    snaps.contains(s),
                    "round {round}: a snapshot that was never written"
                );
            }
        }
    }
    assert!(
        started.elapsed() < Duration::from_secs(60),
        "too slow: {:?}",
        started.elapsed()
    );
}

/// A sample field from a newer format must not be misread as the next field.
#[test]
fn decoder_refuses_unknown_sample_fields() {
    let payload = |mask: u64| {
        let mut o = varint::Out::default();
        [0, 0, 0, 1, 0, 0, 0, 0, 0, 1].iter().for_each(|&v| o.uv(v)); // no defs, 1 snapshot, 1 sample
        o.iv(7); // tid
        o.uv(mask);
        o.buf.extend_from_slice(&[0; 12]);
        o.buf
    };
    let mut out = Vec::new();
    let err = codec::Decoder::default()
        .decode(&payload(1 << 17), &mut out, &mut limits::Budget::new())
        .unwrap_err();
    assert!(err.to_string().contains("unknown"), "{err}");
    // The same bytes with a known bit get past the mask (and fail later, on
    // the undefined thread), so the refusal above is the mask check's.
    let err = codec::Decoder::default()
        .decode(&payload(1 << 14), &mut out, &mut limits::Budget::new())
        .unwrap_err();
    assert!(err.to_string().contains("thread 7 used before"), "{err}");
}

#[test]
fn a_second_recorder_on_the_same_file_is_refused_naming_the_first() {
    let d = TempDir::new("tworec");
    let p = d.join("same.xtop");
    let mut first = Writer::append(&p, &session()).unwrap();
    let e = format!("{:#}", Writer::append(&p, &session()).err().unwrap());
    assert_eq!(
        e,
        format!(
            "{} is being recorded by PID {}; refusing to write to it too",
            p.display(),
            std::process::id()
        )
    );
    first.write_snapshots(&varied()).unwrap();
    first.finish().unwrap();
    assert_eq!(
        read_files(std::slice::from_ref(&p)).unwrap().snapshots.len(),
        varied().len()
    );
}

#[test]
fn appending_to_a_public_recording_makes_it_private() {
    use std::os::unix::fs::PermissionsExt;
    let d = TempDir::new("public");
    let p = d.join("r.xtop");
    write_file(&p, &session(), &varied()).unwrap();
    fs::set_permissions(&p, fs::Permissions::from_mode(0o644)).unwrap();
    Writer::append(&p, &session()).unwrap().finish().unwrap();
    assert_eq!(fs::metadata(&p).unwrap().permissions().mode() & 0o777, 0o600);
}

#[test]
fn a_second_recorder_on_a_rotation_set_is_refused_whatever_its_period() {
    let d = TempDir::new("rotset");
    let base = d.join("rec.xtop");
    let hour = Some(Duration::from_secs(3600));
    let first = Rotating::reserve(&base, Some(Duration::from_secs(60)), T0_NS).unwrap();
    // Another period names other files, yet is the same set.
    let e = format!("{:#}", Rotating::reserve(&base, hour, T0_NS).err().unwrap());
    assert_eq!(
        e,
        format!(
            "the rotation set {} is being recorded by PID {}; refusing to write to it too",
            d.join("rec-*.xtop").display(),
            std::process::id()
        )
    );
    let mut r = first.start(&session()).unwrap();
    r.write(&snapshot(0, vec![sample(1, 1, "a", State::Run, None)]))
        .unwrap();
    r.finish().unwrap();
    let second = Rotating::reserve(&base, hour, T0_NS).unwrap();
    drop(second);
    let names: Vec<_> = fs::read_dir(d.join(""))
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .collect();
    assert_eq!(
        names,
        [rotated_path(&base, T0_NS).file_name().unwrap().to_str().unwrap()]
    );
}

#[test]
fn reserving_fails_before_sampling_and_leaves_no_empty_file() {
    let d = TempDir::new("reserve");
    let p = d.join("r.xtop");
    let held = Rotating::reserve(&p, None, 0).unwrap();
    // What `record` does before loading BPF: the second recorder stops here.
    let e = format!("{:#}", Rotating::reserve(&p, None, 0).err().unwrap());
    assert!(e.ends_with("refusing to write to it too"), "{e}");
    // Sampling never started: the file it made is gone again.
    drop(held);
    assert!(!p.exists());
    // An existing recording is kept as it was.
    write_file(&p, &session(), &varied()).unwrap();
    drop(Rotating::reserve(&p, None, 0).unwrap());
    assert_eq!(read_one(&p).snapshots, varied());
}

/// Real recordings must stay far inside the reader's memory budget, or a
/// legitimate file would be refused as corrupt: busy threads, and the
/// cheapest samples there are (sleeping threads where nothing changes, as
/// `--all` records them), as `record` and `write_file` write them.
#[test]
fn real_recordings_decode_well_inside_the_memory_budget() {
    let d = TempDir::new("budget");
    let interval = Duration::from_secs(1);
    let busy = synth::workload(300, 400, interval, 5);
    let idle: Vec<Snapshot> = (0..400u64)
        .map(|k| {
            let mut s = busy[0].clone();
            s.time_ns += k * 1_000_000_000;
            for (i, t) in s.samples.iter_mut().enumerate() {
                // A pool of threads created together: consecutive tids.
                let mut id = (*t.ident).clone();
                id.tid = 5000 + i as u32;
                t.ident = Arc::new(id);
                t.state = State::Sleep;
                t.syscall = Syscall::None;
                t.since_offcpu_ns = Some(5_000_000_000 + k * 1_000_000_000);
                t.since_oncpu_ns = t.since_offcpu_ns;
                t.runq_wait_ns = None;
            }
            s
        })
        .collect();
    for (name, snaps) in [("busy", &busy), ("idle", &idle)] {
        for one_per_frame in [true, false] {
            let p = d.join(&format!("{name}-{one_per_frame}.xtop"));
            if one_per_frame {
                let mut w = Writer::create(&p, &session()).unwrap();
                snaps.iter().for_each(|s| w.write_snapshot(s).unwrap());
                w.finish().unwrap();
            } else {
                write_file(&p, &session(), snaps).unwrap();
            }
            let mut r = Reader::open(&p).unwrap();
            assert_eq!(r.by_ref().count(), snaps.len());
            assert!(r.take_error().is_none());
            let len = fs::metadata(&p).unwrap().len();
            let per_byte = r.budget().used() / len;
            // A quarter of the allowance, or the ratio is too tight to trust.
            // The writer's promise, a quarter of what the reader allows.
            assert!(
                per_byte <= limits::WRITER_RATIO,
                "{name} (one per frame: {one_per_frame}): {per_byte} bytes of memory per byte of file"
            );
            eprintln!("{name}, one snapshot per frame {one_per_frame}: {per_byte} B/B, {len} bytes");
        }
    }
}
