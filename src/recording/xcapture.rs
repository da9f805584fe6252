//! Export in xcapture v3's CSV layout, so its existing queries and tooling
//! read xtop recordings: hourly files in OUT named by local time.

use std::collections::HashSet;
use std::fs::{File, OpenOptions};
use std::io::{BufWriter, Write};
use std::os::unix::fs::OpenOptionsExt;
use std::path::Path;

use anyhow::{anyhow, Context, Result};

use super::timefmt;
use crate::dimensions::{self, Dimension};
use crate::model::{Snapshot, ThreadSample};
use crate::value::Value;

/// Where an xcapture column's value comes from.
#[derive(Clone, Copy)]
enum Src {
    /// A registry dimension, single-quoted when `quote` (xcapture's string fields).
    Dim(&'static str, bool),
    /// The snapshot's interval in microseconds: what each sample stands for.
    Weight,
    /// Something xtop does not capture (yet): left empty.
    Empty,
}

const SAMPLE_COLUMNS: &[(&str, Src)] = &[
    ("TIMESTAMP", Src::Dim("timestamp", false)),
    ("WEIGHT_US", Src::Weight),
    ("TID", Src::Dim("tid", false)),
    ("TGID", Src::Dim("tgid", false)),
    ("PIDNS", Src::Dim("pidns", false)),
    ("CGROUP_ID", Src::Dim("cgroup_id", false)),
    ("STATE", Src::Dim("state", false)),
    ("USERNAME", Src::Dim("username", true)),
    ("EXE", Src::Dim("exe", true)),
    ("COMM", Src::Dim("comm", true)),
    ("SYSCALL", Src::Dim("syscall", false)),
    ("SYSCALL_ACTIVE", Src::Dim("syscall_active", false)),
    ("SYSC_ENTRY_TIME", Src::Dim("sysc_entry_time", false)),
    ("SYSC_NS_SO_FAR", Src::Dim("sysc_ns_so_far", false)),
    ("SYSC_SEQ_NUM", Src::Dim("sysc_seq_num", false)),
    ("IORQ_SEQ_NUM", Src::Empty),
    ("SYSC_ARG1", Src::Dim("sysc_arg1", false)),
    ("SYSC_ARG2", Src::Dim("sysc_arg2", false)),
    ("SYSC_ARG3", Src::Dim("sysc_arg3", false)),
    ("SYSC_ARG4", Src::Dim("sysc_arg4", false)),
    ("SYSC_ARG5", Src::Dim("sysc_arg5", false)),
    ("SYSC_ARG6", Src::Dim("sysc_arg6", false)),
    ("FILENAME", Src::Dim("filename", true)),
    ("CONNECTION", Src::Dim("connection", true)),
    ("CONN_STATE", Src::Dim("conn_state", false)),
    ("EXTRA_INFO", Src::Empty),
    ("KSTACK_HASH", Src::Dim("kstack_hash", false)),
    ("USTACK_HASH", Src::Dim("ustack_hash", false)),
];

pub fn samples_header() -> String {
    SAMPLE_COLUMNS
        .iter()
        .map(|(n, _)| *n)
        .collect::<Vec<_>>()
        .join(",")
}

/// xcapture's quoting of free text: `'text'`, inner quotes doubled; empty stays empty.
fn quoted(v: &Value) -> String {
    if v.is_known() {
        format!("'{}'", v.plain().replace('\'', "''"))
    } else {
        String::new()
    }
}

fn dim(name: &str) -> Result<&'static Dimension> {
    dimensions::find(name).ok_or_else(|| anyhow!("dimension '{name}' missing from the registry"))
}

/// Columns resolved against the registry once, before any row.
struct Columns {
    samples: Vec<(Option<&'static Dimension>, Src)>,
    kstack_hash: &'static Dimension,
    kstack: &'static Dimension,
    ustack_hash: &'static Dimension,
    ustack: &'static Dimension,
    cgroup_id: &'static Dimension,
    cgroup: &'static Dimension,
}

impl Columns {
    fn resolve() -> Result<Columns> {
        let samples = SAMPLE_COLUMNS
            .iter()
            .map(|&(_, src)| {
                Ok((
                    if let Src::Dim(n, _) = src {
                        Some(dim(n)?)
                    } else {
                        None
                    },
                    src,
                ))
            })
            .collect::<Result<_>>()?;
        Ok(Columns {
            samples,
            kstack_hash: dim("kstack_hash")?,
            kstack: dim("kstack")?,
            ustack_hash: dim("ustack_hash")?,
            ustack: dim("ustack")?,
            cgroup_id: dim("cgroup_id")?,
            cgroup: dim("cgroup")?,
        })
    }

    fn sample_row(&self, snap: &Snapshot, s: &ThreadSample, line: &mut String) {
        line.clear();
        for (i, (d, src)) in self.samples.iter().enumerate() {
            if i > 0 {
                line.push(',');
            }
            match (d, src) {
                (Some(d), Src::Dim(_, true)) => line.push_str(&quoted(&d.value(snap, s))),
                (Some(d), _) => line.push_str(&d.value(snap, s).plain()),
                (None, Src::Weight) => line.push_str(&snap.interval.as_micros().to_string()),
                _ => {}
            }
        }
    }
}

/// The four files of one hour, and what the dictionary files already hold.
struct Hour {
    key: String,
    samples: BufWriter<File>,
    kstacks: BufWriter<File>,
    ustacks: BufWriter<File>,
    cgroups: BufWriter<File>,
    seen_kstacks: HashSet<u64>,
    seen_ustacks: HashSet<u64>,
    seen_cgroups: HashSet<u64>,
}

impl Hour {
    /// Opens the hour's files; `again` appends to files this export already began.
    fn open(dir: &Path, key: &str, again: bool) -> Result<Hour> {
        let file = |base: &str, header: &str| -> Result<BufWriter<File>> {
            let path = dir.join(format!("{base}_{key}.csv"));
            // Inside a private staging directory: nobody else can plant names here.
            let mut o = OpenOptions::new();
            o.create(true).mode(0o600).custom_flags(libc::O_NOFOLLOW);
            if again {
                o.append(true);
            } else {
                o.write(true).truncate(true);
            }
            let file = o
                .open(&path)
                .with_context(|| format!("cannot create {}", path.display()))?;
            let mut w = BufWriter::new(file);
            if !again {
                writeln!(w, "{header}").with_context(|| format!("writing {}", path.display()))?;
            }
            Ok(w)
        };
        Ok(Hour {
            key: key.to_string(),
            samples: file("xcapture_samples", &samples_header())?,
            kstacks: file("xcapture_kstacks", "KSTACK_HASH,KSTACK_SYMS")?,
            ustacks: file("xcapture_ustacks", "USTACK_HASH,USTACK_SYMS")?,
            cgroups: file("xcapture_cgroups", "CGROUP_ID,CGROUP_PATH")?,
            seen_kstacks: HashSet::new(),
            seen_ustacks: HashSet::new(),
            seen_cgroups: HashSet::new(),
        })
    }

    fn finish(self) -> std::io::Result<()> {
        for mut w in [self.samples, self.kstacks, self.ustacks, self.cgroups] {
            w.flush()?;
            w.get_ref().sync_all()?;
        }
        Ok(())
    }
}

/// Writes every sample into OUT/xcapture_*_YYYY-MM-DD.HH.csv files.
/// The files are built in a private staging directory and renamed into `dir`
/// only when all are whole: a killed export leaves no partial file there.
/// A failed snapshot (a recording that broke a limit) ends the export unpublished.
pub fn export(dir: &Path, snaps: impl IntoIterator<Item = Result<Snapshot>>) -> Result<()> {
    let staging = crate::atomic_file::StagingDir::create(dir)?;
    let out = staging.path().to_path_buf();
    let cols = Columns::resolve()?;
    let mut begun: HashSet<String> = HashSet::new();
    let mut hour: Option<Hour> = None;
    let mut line = String::new();
    let ctx = || format!("writing xcapture files in {}", dir.display());
    for snap in snaps {
        let snap = snap?;
        let key = timefmt::hour(snap.time_ns);
        if hour.as_ref().is_none_or(|h| h.key != key) {
            if let Some(h) = hour.take() {
                h.finish().with_context(ctx)?;
            }
            hour = Some(Hour::open(&out, &key, !begun.insert(key.clone()))?);
        }
        let Some(h) = hour.as_mut() else { continue };
        for s in &snap.samples {
            cols.sample_row(&snap, s, &mut line);
            writeln!(h.samples, "{line}").with_context(ctx)?;
            // Dictionary rows: each stack once per hour, as xcapture writes them.
            let stacks = [
                (
                    &s.kstack,
                    &mut h.seen_kstacks,
                    &mut h.kstacks,
                    cols.kstack_hash,
                    cols.kstack,
                ),
                (
                    &s.ustack,
                    &mut h.seen_ustacks,
                    &mut h.ustacks,
                    cols.ustack_hash,
                    cols.ustack,
                ),
            ];
            for (st, seen, file, hash, syms) in stacks {
                if st.as_ref().is_some_and(|st| seen.insert(st.hash)) {
                    let syms = quoted(&syms.value(&snap, s));
                    writeln!(file, "{},{syms}", hash.value(&snap, s).plain()).with_context(ctx)?;
                }
            }
            if h.seen_cgroups.insert(s.ident.cgroup_id) {
                let path = quoted(&cols.cgroup.value(&snap, s));
                writeln!(h.cgroups, "{},{path}", cols.cgroup_id.value(&snap, s).plain()).with_context(ctx)?;
            }
        }
    }
    if let Some(h) = hour {
        h.finish().with_context(ctx)?;
    }
    staging.publish()
}
