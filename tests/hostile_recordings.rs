//! Recordings crafted as an attacker would, fed to the real binary: huge
//! declared counts in every counted field, zstd bombs, frames that expand past
//! what their file allows, false frame starts, truncated and reordered frames.
//! Each run happens in a child with a 1 GiB address-space limit, so a
//! regression fails this test instead of starving the machine; each must end
//! within 5 s, peak under 256 MB, and (when it breaks a limit) say so in one
//! line, "FILE: corrupt at byte N: ...", with exit status 1 and no output file.
//!
//! The files are built here from the documented format (docs/recordings.md),
//! not with xtop's writer; bombs are compressed streaming from a small buffer.

use std::fs::{self, File};
use std::io::{Read, Write};
use std::os::fd::AsRawFd;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

mod common;

const MAGIC: &[u8; 8] = b"\x89XTOP\r\n\x1a";
const KIND_SESSION: u8 = 1;
const KIND_KEY: u8 = 2;
const KIND_DELTA: u8 = 3;
/// What a crafted file may cost the reader, at most.
const MAX_RSS_KB: i64 = 256 * 1024;
const MAX_WALL: Duration = Duration::from_secs(5);
/// The child's address-space limit: a regression dies here, not the machine.
const AS_LIMIT: u64 = 1 << 30;

fn uv(o: &mut Vec<u8>, mut v: u64) {
    while v >= 0x80 {
        o.push(v as u8 | 0x80);
        v >>= 7;
    }
    o.push(v as u8);
}

fn iv(o: &mut Vec<u8>, v: i64) {
    uv(o, ((v << 1) ^ (v >> 63)) as u64);
}

fn text(o: &mut Vec<u8>, s: &[u8]) {
    uv(o, s.len() as u64);
    o.extend_from_slice(s);
}

/// `SYNC LEN CRC body`, with a valid checksum: what is wrong is inside.
fn frame(kind: u8, codec_and_payload: &[u8]) -> Vec<u8> {
    let mut body = vec![kind];
    body.extend_from_slice(codec_and_payload);
    let len = (body.len() as u32).to_le_bytes();
    let mut crc = crc32fast::Hasher::new();
    crc.update(&len);
    crc.update(&body);
    let mut f = b"XTfr".to_vec();
    f.extend_from_slice(&len);
    f.extend_from_slice(&crc.finalize().to_le_bytes());
    f.extend_from_slice(&body);
    f
}

fn raw(kind: u8, payload: &[u8]) -> Vec<u8> {
    let mut b = vec![0u8];
    b.extend_from_slice(payload);
    frame(kind, &b)
}

/// A zstd frame declaring `declared` raw bytes, of `head` then `fill` repeated
/// `times` times: compressed as it is produced, never held whole.
fn zstd_frame(kind: u8, declared: u64, head: &[u8], fill: &[u8], times: u64) -> Vec<u8> {
    let mut b = vec![1u8];
    uv(&mut b, declared);
    let mut z = zstd::stream::Encoder::new(Vec::new(), 3).unwrap();
    z.write_all(head).unwrap();
    let chunk: Vec<u8> = fill.repeat((64 << 10) / fill.len().max(1));
    let per_chunk = (chunk.len() / fill.len().max(1)) as u64;
    let mut left = times;
    while left > 0 {
        let n = left.min(per_chunk);
        z.write_all(&chunk[..n as usize * fill.len()]).unwrap();
        left -= n;
    }
    b.extend_from_slice(&z.finish().unwrap());
    frame(kind, &b)
}

fn session() -> Vec<u8> {
    let mut p = Vec::new();
    uv(&mut p, 1);
    text(&mut p, b"host");
    text(&mut p, b"crafted");
    raw(KIND_SESSION, &p)
}

fn file(frames: &[Vec<u8>]) -> Vec<u8> {
    let mut f = MAGIC.to_vec();
    f.extend_from_slice(&2u16.to_le_bytes());
    f.extend_from_slice(&session());
    frames.iter().for_each(|fr| f.extend_from_slice(fr));
    f
}

/// Tables with one string and one process (tgid 1, all names string 0).
fn defs() -> Vec<u8> {
    let mut p = Vec::new();
    uv(&mut p, 1);
    text(&mut p, b"x");
    uv(&mut p, 1);
    [1, 0, 0, 0].iter().for_each(|&v| uv(&mut p, v));
    uv(&mut p, 0);
    p
}

/// A snapshot header declaring `n` samples, then the first sample, which
/// defines thread 7; every further `[0, 0]` repeats it (tid delta 0, nothing changed).
fn snapshot_head(n: u64) -> Vec<u8> {
    let mut p = Vec::new();
    iv(&mut p, 1_000_000_000);
    [0, 0, 0, 0].iter().for_each(|&v| uv(&mut p, v)); // flags, walk, decode, cpu
    uv(&mut p, n);
    iv(&mut p, 7);
    uv(&mut p, 1); // M_STATIC
    [1, 0, 0, 0].iter().for_each(|&v| uv(&mut p, v)); // tgid uid pidns cgroup_id
    p.push(0); // kthread
    [0, 0, 0, 0].iter().for_each(|&v| uv(&mut p, v)); // user comm cgroup process
    p
}

/// A key frame's payload: `defs`, one snapshot of `n` samples of which the
/// first `written` are present.
fn samples_payload(n: u64, written: u64) -> (Vec<u8>, u64) {
    let mut head = defs();
    uv(&mut head, 1);
    head.extend(snapshot_head(n));
    let repeats = written.saturating_sub(1);
    let size = head.len() as u64 + 2 * repeats;
    (head, size)
}

struct Run {
    ended: common::limited::Ended,
    out: String,
    err: String,
}

fn read_file(p: &Path) -> String {
    String::from_utf8_lossy(&fs::read(p).unwrap_or_default()).into_owned()
}

/// Runs xtop under the address-space limit; stdout and stderr to files, or
/// all three to a new pty (`tty`), so `replay` takes its interactive path.
fn run(dir: &Path, args: &[&str], tty: bool) -> Run {
    let (outp, errp) = (dir.join("stdout"), dir.join("stderr"));
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_xtop"));
    cmd.args(args).current_dir(dir).env("TERM", "xterm-256color");
    let mut master = None;
    if tty {
        let (m, s) = common::pty::open(100, 30);
        let io = || Stdio::from(s.try_clone().unwrap());
        cmd.stdin(io()).stdout(io()).stderr(io());
        master = Some((m, s));
    } else {
        cmd.stdin(Stdio::null())
            .stdout(File::create(&outp).unwrap())
            .stderr(File::create(&errp).unwrap());
    }
    common::limited::limit_address_space(&mut cmd, AS_LIMIT);
    if tty {
        // SAFETY: only async-signal-safe calls between fork and exec.
        unsafe {
            cmd.pre_exec(|| {
                if libc::setsid() < 0 || libc::ioctl(0, libc::TIOCSCTTY, 0) < 0 {
                    return Err(std::io::Error::last_os_error());
                }
                Ok(())
            });
        }
    }
    let t = Instant::now();
    // Reaped by `reap` (wait4), which also gives its peak RSS.
    #[allow(clippy::zombie_processes)]
    let child = cmd.spawn().expect("starting xtop");
    let ended = common::limited::reap(child, t, Duration::from_secs(30), &format!("xtop {args:?}"));
    let (out, err) = match master {
        Some((m, _s)) => {
            // SAFETY: fcntl on an fd we own: read what is buffered, then stop.
            unsafe { libc::fcntl(m.as_raw_fd(), libc::F_SETFL, libc::O_NONBLOCK) };
            let mut all = Vec::new();
            let _ = File::from(m).read_to_end(&mut all);
            (String::new(), String::from_utf8_lossy(&all).into_owned())
        }
        None => (read_file(&outp), read_file(&errp)),
    };
    Run { ended, out, err }
}

struct Case {
    name: &'static str,
    bytes: Vec<u8>,
    /// Words the one error line must hold (besides the file name).
    says: &'static str,
}

fn dir(name: &str) -> PathBuf {
    let d = Path::new(env!("CARGO_TARGET_TMPDIR")).join(format!("hostile-{name}-{}", std::process::id()));
    let _ = fs::remove_dir_all(&d);
    fs::create_dir_all(&d).unwrap();
    d
}

fn within_bounds(what: &str, r: &Run) {
    assert!(
        r.ended.signal.is_none(),
        "{what}: killed by signal {:?}; stderr: {}",
        r.ended.signal,
        r.err
    );
    assert!(
        r.ended.max_rss_kb < MAX_RSS_KB,
        "{what}: peak RSS {} MB (limit 256)",
        r.ended.max_rss_kb / 1024
    );
    assert!(r.ended.wall < MAX_WALL, "{what}: took {:?}", r.ended.wall);
    assert!(!r.err.contains("panicked"), "{what}: {}", r.err);
}

/// One line naming the file and the offset, exit 1, nothing exported.
fn refused(case: &Case, dir: &Path) {
    let path = dir.join(format!("{}.xtop", case.name));
    fs::write(&path, &case.bytes).unwrap();
    let p = path.to_str().unwrap();
    let csv = dir.join("out.csv");
    let xc = dir.join("xc");
    let runs = [
        ("report", vec!["report", p], false),
        (
            "export csv",
            vec!["export", p, "--format", "csv", "-o", csv.to_str().unwrap()],
            false,
        ),
        (
            "export folded",
            vec!["export", p, "--format", "folded", "-o", csv.to_str().unwrap()],
            false,
        ),
        (
            "export xcapture",
            vec![
                "export",
                p,
                "--format",
                "xcapture-csv",
                "-o",
                xc.to_str().unwrap(),
            ],
            false,
        ),
        ("replay", vec!["replay", p], true),
    ];
    for (cmd, args, tty) in runs {
        let what = format!("{} / {cmd}", case.name);
        let r = run(dir, &args, tty);
        within_bounds(&what, &r);
        assert_eq!(r.ended.code, Some(1), "{what}: exit status; stderr: {}", r.err);
        let lines: Vec<&str> = r.err.lines().filter(|l| !l.trim().is_empty()).collect();
        assert_eq!(lines.len(), 1, "{what}: one line, not {:?}", r.err);
        let line = lines[0];
        assert!(
            line.contains(p) && line.contains("corrupt at byte") && line.contains(case.says),
            "{what}: {line}"
        );
        // (The xcapture directory itself may exist: it is made before reading.)
        let published = fs::read_dir(&xc).map_or(0, |d| d.count());
        assert!(
            !csv.exists() && published == 0,
            "{what}: an export of a refused file was published"
        );
        if cmd == "report" {
            assert!(r.out.is_empty(), "{what}: printed a report: {}", r.out);
        }
        if tty {
            // The refusal comes before the screen: no alternate screen was entered.
            assert!(!r.err.contains("\x1b[?1049h"), "{what}: entered the screen");
        }
    }
}

fn counted_fields() -> Vec<Case> {
    let huge = 1u64 << 60;
    let mut cases = Vec::new();
    let mut key = |name, payload: Vec<u8>, says| {
        cases.push(Case {
            name,
            bytes: file(&[raw(KIND_KEY, &payload)]),
            says,
        })
    };
    let mut p = Vec::new();
    uv(&mut p, huge);
    key("string-count", p, "declares 1152921504606846976 strings");
    let mut p = Vec::new();
    uv(&mut p, 1);
    uv(&mut p, huge);
    key("string-length", p, "declares 1152921504606846976 bytes");
    let mut p = Vec::new();
    uv(&mut p, 0);
    uv(&mut p, huge);
    key("process-count", p, "declares 1152921504606846976 processes");
    let mut p = Vec::new();
    [0, 0].iter().for_each(|&v| uv(&mut p, v));
    uv(&mut p, huge);
    key("stack-count", p, "declares 1152921504606846976 stacks");
    let mut p = defs();
    p.pop(); // no stack count yet
    uv(&mut p, 1);
    p.extend_from_slice(&[0; 8]);
    uv(&mut p, 0);
    uv(&mut p, huge);
    key("stack-frames", p, "declares 1152921504606846976 stack frames");
    let mut p = defs();
    p.pop();
    uv(&mut p, 1);
    p.extend_from_slice(&[0; 8]);
    uv(&mut p, 0);
    uv(&mut p, 5000);
    p.extend(std::iter::repeat_n(0u8, 5000));
    key("stack-depth", p, "a stack of 5000 frames");
    let mut p = defs();
    uv(&mut p, huge);
    key("snapshot-count", p, "declares 1152921504606846976 snapshots");
    let mut p = defs();
    uv(&mut p, 1);
    p.extend(snapshot_head(250_000_000));
    key("sample-count", p, "declares 250000000 thread samples");
    let mut p = defs();
    p.truncate(0);
    uv(&mut p, 1);
    text(&mut p, &[b'c'; 100]);
    uv(&mut p, 1);
    [1, 0, 0, 0].iter().for_each(|&v| uv(&mut p, v));
    uv(&mut p, 0);
    key("comm-length", p, "100-byte string");
    // The session frame's own counts.
    let mut s = Vec::new();
    uv(&mut s, huge);
    let mut f = MAGIC.to_vec();
    f.extend_from_slice(&2u16.to_le_bytes());
    f.extend_from_slice(&raw(KIND_SESSION, &s));
    cases.push(Case {
        name: "session-pairs",
        bytes: f,
        says: "declares 1152921504606846976 session fields",
    });
    cases
}

#[test]
fn huge_declared_counts_are_refused_in_one_line() {
    let d = dir("counts");
    for case in counted_fields() {
        refused(&case, &d);
    }
    fs::remove_dir_all(&d).unwrap();
}

#[test]
fn zstd_bombs_stop_at_the_cap() {
    let d = dir("bombs");
    // 250 million samples, declared honestly: 500 MB once decompressed, ~16 KB on disk.
    let n = 250_000_000;
    let (head, size) = samples_payload(n, n);
    let bomb = zstd_frame(KIND_KEY, size, &head, &[0, 0], n - 1);
    assert!(bomb.len() < 64 << 10, "the bomb is small: {}", bomb.len());
    let honest = Case {
        name: "bomb-declared",
        bytes: file(std::slice::from_ref(&bomb)),
        says: "once decompressed",
    };
    // The same stream declaring 1 MB: decompression stops at 1 MB.
    let (head, _) = samples_payload(n, n);
    let lying = Case {
        name: "bomb-lying",
        bytes: file(&[zstd_frame(KIND_KEY, 1 << 20, &head, &[0, 0], n - 1)]),
        says: "does not decompress",
    };
    // Within the frame's expansion cap (8 MB), but 3 million samples: ~500 MB decoded.
    let n = 3_000_000;
    let (head, size) = samples_payload(n, n);
    let dense = Case {
        name: "bomb-decoded",
        bytes: file(&[zstd_frame(KIND_KEY, size, &head, &[0, 0], n - 1)]),
        says: "memory",
    };
    // More threads in one pass than any system has (uncompressed: 9 MB).
    let n = 4_500_000;
    let (mut p, size) = samples_payload(n, n);
    p.resize(size as usize, 0);
    let threads = Case {
        name: "too-many-threads",
        bytes: file(&[raw(KIND_KEY, &p)]),
        says: "threads",
    };
    // Frames each fine alone, too many together: the budget is the file's, not the frame's.
    let n = 60_000;
    let (head, size) = samples_payload(n, n);
    let one = zstd_frame(KIND_KEY, size, &head, &[0, 0], n - 1);
    let many = Case {
        name: "bomb-many-frames",
        bytes: file(&vec![one; 40]),
        says: "memory",
    };
    for case in [honest, lying, dense, threads, many] {
        refused(&case, &d);
    }
    fs::remove_dir_all(&d).unwrap();
}

/// Damage that is not a broken limit keeps the crash-safety contract: what is
/// intact is read, the rest is a warning, all within the same bounds.
#[test]
fn truncated_reordered_and_false_frames_stay_bounded() {
    let d = dir("damage");
    let good = {
        let (head, size) = samples_payload(1000, 1000);
        let mut p = head;
        p.extend(std::iter::repeat_n(0u8, (size - p.len() as u64) as usize));
        raw(KIND_KEY, &p)
    };
    let delta = {
        let mut p = vec![0, 0, 0, 1]; // no new definitions, one snapshot
        iv(&mut p, 1_000_000_000);
        [0, 0, 0, 0, 1].iter().for_each(|&v| uv(&mut p, v));
        iv(&mut p, 7);
        uv(&mut p, 0);
        raw(KIND_DELTA, &p)
    };
    // Torn in the middle of the last frame: the first reads back.
    let mut torn = file(&[good.clone(), good.clone()]);
    torn.truncate(torn.len() - good.len() / 2);
    // A delta before any key frame, then the key frame, then the delta.
    let reordered = file(&[delta.clone(), good.clone(), delta]);
    // False frame starts, each claiming to run to the end of the file with a
    // bad checksum: a search that checked each would read ~260 GB.
    let mut trap = file(&[]);
    let region = 2 << 20;
    let end = trap.len() + region;
    while trap.len() + 16 <= end {
        let at = trap.len();
        trap.extend_from_slice(b"XTfr");
        trap.extend_from_slice(&((end - at - 12) as u32).to_le_bytes());
        trap.extend_from_slice(&[0; 8]);
    }
    trap.resize(end, 0);
    // Half a million false starts with impossible lengths: each costs O(1).
    let mut syncs = file(&[]);
    for _ in 0..(2 << 20) / 8 {
        syncs.extend_from_slice(b"XTfr\xff\xff\xff\xff");
    }
    let cases = [
        ("torn", torn, "incomplete", 1000),
        ("reordered", reordered, "skipped", 1001),
        ("false-starts", trap, "false frame starts", 0),
        ("false-syncs", syncs, "damaged last", 0),
    ];
    for (name, bytes, warns, samples) in cases {
        let path = d.join(format!("{name}.xtop"));
        fs::write(&path, &bytes).unwrap();
        let p = path.to_str().unwrap();
        let r = run(&d, &["report", p, "-g", "comm"], false);
        within_bounds(name, &r);
        assert_eq!(r.ended.code, Some(0), "{name}: {}", r.err);
        assert!(r.err.contains(warns), "{name}: warnings {}", r.err);
        let counted = r
            .out
            .lines()
            .any(|l| l.split_whitespace().next() == Some(&samples.to_string()));
        assert!(
            samples == 0 || counted,
            "{name}: {samples} samples expected in\n{}",
            r.out
        );
    }
    fs::remove_dir_all(&d).unwrap();
}
