//! `e`: the current window written to files the user can share, atomically and
//! private (0600): samples under the current filters, and the table as text.

use std::io::Write;
use std::path::{Path, PathBuf};

use anyhow::bail;

use crate::aggregation::{aggregate, matches_all};
use crate::model::{Session, Snapshot};
use crate::output;
use crate::value::format_local_time;

use super::history::History;
use super::stack_tree::StackTree;
use super::view::{Query, Window};

/// Extension of the samples file `write_recording` produces. Until the
/// recording format is wired in this is CSV, so the name does not promise a
/// format the file is not in.
pub const RECORDING_EXT: &str = "xtop";

/// Rebuilding samples costs ~250 bytes each; past this an export could take
/// the machine's memory, so it asks for a narrower window instead.
pub const MAX_EXPORT_SAMPLES: usize = 5_000_000;

/// Writes the samples of `snaps` to `path` as a recording (`xtop replay`
/// opens it), atomically, mode 0600.
pub fn write_recording(path: &Path, session: &Session, snaps: &[Snapshot]) -> anyhow::Result<()> {
    crate::recording::write_file(path, session, snaps)
}

/// Writes `bytes` atomically, mode 0600: readers never see a half-written export.
pub fn write_atomic(path: &Path, bytes: &[u8]) -> anyhow::Result<()> {
    crate::atomic_file::write(path, bytes)
}

/// `YYYYmmdd-HHMMSS`, local time.
fn stamp(ns: u64) -> String {
    let t = format_local_time(ns); // YYYY-MM-DDTHH:MM:SS.ffffff
    t.get(..19)
        .map_or(t.clone(), |s| s.replace(['-', ':'], "").replace('T', "-"))
}

/// Host names go into file names: keep them to safe characters.
fn safe(host: &str) -> String {
    let s: String = host
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || "-_.".contains(c) {
                c
            } else {
                '_'
            }
        })
        .collect();
    if s.is_empty() {
        "unknown".into()
    } else {
        s
    }
}

/// Exports window `win` of `h` under `query` into `dir` as
/// `xtop-<host>-<YYYYmmdd-HHMMSS>.{txt,xtop}`; returns the paths written.
/// `now_ns` (default: the clock) names the files.
pub fn export(
    dir: &Path,
    session: &Session,
    h: &History,
    win: Window,
    query: &Query,
    now_ns: Option<u64>,
) -> anyhow::Result<Vec<PathBuf>> {
    let total: usize = (win.lo..win.hi).map(|i| h.rows(i)).sum();
    if total > MAX_EXPORT_SAMPLES {
        bail!("window holds {total} samples (limit {MAX_EXPORT_SAMPLES}); narrow it with - or filter first");
    }
    let snaps: Vec<Snapshot> = (win.lo..win.hi)
        .map(|i| {
            let mut s = h.materialize(i);
            s.samples.retain(|t| matches_all(&query.filters, h.meta(i), t));
            s
        })
        .collect();
    let [txt, rec] = free_names(dir, session, now_ns, ["txt", RECORDING_EXT]);
    let mut text = Vec::new();
    write_text(&mut text, session, h, win, query, &snaps)?;
    write_atomic(&txt, &text)?;
    write_recording(&rec, session, &snaps)?;
    Ok(vec![txt, rec])
}

/// `xtop-<host>-<YYYYmmdd-HHMMSS>[-n].<ext>` for each of `exts`, none of which
/// exists yet: two exports in the same second get distinct names rather than
/// overwrite. `now_ns` (default: the clock) names the files.
fn free_names<const N: usize>(
    dir: &Path,
    session: &Session,
    now_ns: Option<u64>,
    exts: [&str; N],
) -> [PathBuf; N] {
    let now = now_ns.unwrap_or_else(|| {
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos() as u64)
    });
    let base = format!("xtop-{}-{}", safe(&session.host), stamp(now));
    (1..)
        .map(|n| {
            let b = if n == 1 {
                base.clone()
            } else {
                format!("{base}-{n}")
            };
            exts.map(|e| dir.join(format!("{b}.{e}")))
        })
        .find(|paths| paths.iter().all(|p| !p.exists()))
        .expect("some suffix is free")
}

/// `f`: writes `tree` as folded stacks to `xtop-<host>-<time>.folded` in
/// `dir`, atomically, mode 0600; returns the path.
pub fn export_folded(
    dir: &Path,
    session: &Session,
    tree: &StackTree,
    now_ns: Option<u64>,
) -> anyhow::Result<PathBuf> {
    let [path] = free_names(dir, session, now_ns, ["folded"]);
    write_atomic(&path, tree.folded().as_bytes())?;
    Ok(path)
}

fn write_text(
    out: &mut Vec<u8>,
    session: &Session,
    h: &History,
    win: Window,
    query: &Query,
    snaps: &[Snapshot],
) -> anyhow::Result<()> {
    let agg = aggregate(snaps, &query.dims, &[]);
    writeln!(
        out,
        "xtop {} export: host {} kernel {} cpus {} interval {}",
        session.xtop_version,
        session.host,
        session.kernel,
        session.ncpus,
        humantime::format_duration(session.interval)
    )?;
    let first = (win.lo < win.hi).then(|| h.meta(win.lo).time_ns);
    writeln!(
        out,
        "window: {} .. {} ({} snapshots, {:.0}s sampled)",
        first.map_or("-".into(), format_local_time),
        format_local_time(win.end_ns),
        agg.snapshots,
        agg.seconds
    )?;
    let filters: Vec<String> = query.filters.iter().map(ToString::to_string).collect();
    writeln!(
        out,
        "filters: {}",
        if filters.is_empty() {
            "none".into()
        } else {
            filters.join(" ")
        }
    )?;
    let dims: Vec<&str> = query.dims.iter().map(|d| d.name).collect();
    writeln!(
        out,
        "group by: {}  samples: {}\n",
        dims.join(","),
        agg.total_samples
    )?;
    output::write_table(out, &agg, &query.dims)?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::aggregation::Filter;
    use crate::dimensions::parse_list;
    use crate::model::fixture::busy_snapshot;
    use std::fs;
    use std::os::unix::fs::PermissionsExt;

    pub(crate) fn temp_dir(tag: &str) -> PathBuf {
        let d = std::env::temp_dir().join(format!("xtop-ui-{tag}-{}", std::process::id()));
        let _ = fs::remove_dir_all(&d);
        fs::create_dir_all(&d).unwrap();
        d
    }

    #[test]
    fn atomic_write_is_private_and_leaves_no_temp() {
        let d = temp_dir("atomic");
        let p = d.join("f.txt");
        write_atomic(&p, b"one").unwrap();
        write_atomic(&p, b"two").unwrap();
        assert_eq!(fs::read_to_string(&p).unwrap(), "two");
        assert_eq!(fs::metadata(&p).unwrap().permissions().mode() & 0o777, 0o600);
        assert_eq!(fs::read_dir(&d).unwrap().count(), 1);
        let err = write_atomic(&d.join("missing/f.txt"), b"x").unwrap_err();
        assert!(format!("{err:#}").contains("missing/f.txt"), "{err:#}");
        fs::remove_dir_all(&d).unwrap();
    }

    #[test]
    fn names_are_safe_and_stamped() {
        assert_eq!(safe("db-1.example/x y"), "db-1.example_x_y");
        assert_eq!(stamp(busy_snapshot(0).time_ns).len(), 15);
        assert_eq!(&stamp(busy_snapshot(0).time_ns)[8..9], "-");
    }

    #[test]
    fn export_writes_filtered_samples_and_table() {
        let d = temp_dir("export");
        let mut h = History::new(None);
        for i in 0..4 {
            h.push(busy_snapshot(i));
        }
        let win = Window {
            lo: 0,
            hi: 4,
            start_ns: 0,
            end_ns: h.latest().unwrap().time_ns,
        };
        let q = Query {
            dims: parse_list("comm").unwrap(),
            filters: vec![Filter::parse("state=DISK").unwrap()],
        };
        let session = crate::ui::tests::session();
        let paths = export(&d, &session, &h, win, &q, Some(busy_snapshot(0).time_ns)).unwrap();
        let again = export(&d, &session, &h, win, &q, Some(busy_snapshot(0).time_ns)).unwrap();
        assert_ne!(paths, again, "same-second exports do not overwrite");
        let text = fs::read_to_string(&paths[0]).unwrap();
        assert!(text.contains("filters: state=DISK"), "{text}");
        assert!(
            text.contains("samples  avg_threads     %  comm\n      4         1.00  66.7  postgres\n"),
            "{text}"
        );
        let rec = crate::recording::read_files(&paths[1..2]).unwrap();
        let samples: usize = rec.snapshots.iter().map(|s| s.samples.len()).sum();
        assert_eq!(
            samples, 6,
            "4 postgres + 2 dd DISK samples, in a recording xtop replay opens"
        );
        for p in &paths {
            assert_eq!(fs::metadata(p).unwrap().permissions().mode() & 0o777, 0o600);
        }
        fs::remove_dir_all(&d).unwrap();
    }
}
