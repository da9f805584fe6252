//! `--rotate`: one recording file per period, named by the period's start.

use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::{bail, Result};

use super::timefmt;
use super::writer::{refuse, Claimed, Writer};
use crate::atomic_file::{lock_path, LockFile};
use crate::model::{Session, Snapshot};

/// Appends to one file, or to one file per period when `period` is set.
pub struct Rotating {
    base: PathBuf,
    period_ns: Option<u64>,
    session: Session,
    /// Index of the current period (time / period) and its writer.
    current: (u64, Writer),
    /// Files written to, in order.
    pub files: Vec<PathBuf>,
    /// With `--rotate`, the whole set's lock: two recorders on one base with
    /// different periods share no file, yet would interleave one set.
    _set: Option<LockFile>,
}

/// The recording's first file (and, rotating, its set) reserved before
/// sampling starts: a bad path or a second recorder fails before BPF loads.
pub struct Reserved {
    base: PathBuf,
    period_ns: Option<u64>,
    set: Option<LockFile>,
    first: (u64, Claimed),
}

/// `dir/stem-YYYYmmdd-HHMMSS.ext` for the period starting at `start_ns`.
pub fn rotated_path(base: &Path, start_ns: u64) -> PathBuf {
    with_suffix(base, &timefmt::compact(start_ns))
}

/// `dir/stem-*.ext`: how the set is named in messages.
fn set_pattern(base: &Path) -> PathBuf {
    with_suffix(base, "*")
}

fn with_suffix(base: &Path, suffix: &str) -> PathBuf {
    let stem = base.file_stem().unwrap_or(base.as_os_str());
    let mut name = OsString::from(stem);
    name.push(format!("-{suffix}"));
    if let Some(ext) = base.extension() {
        name.push(".");
        name.push(ext);
    }
    base.with_file_name(name)
}

impl Rotating {
    /// Reserves the set and the file for `now_ns`, for `Reserved::start`.
    pub fn reserve(base: &Path, period: Option<Duration>, now_ns: u64) -> Result<Reserved> {
        let period_ns = period.map(|p| p.as_nanos() as u64);
        if period_ns.is_some_and(|p| p < 1_000_000_000) {
            bail!("--rotate period must be at least 1s");
        }
        let set = match period_ns {
            None => None,
            Some(_) => match LockFile::acquire(&lock_path(base)?)? {
                Ok(lock) => Some(lock),
                Err(holder) => {
                    let what = format!("the rotation set {}", set_pattern(base).display());
                    return Err(refuse(&what, holder));
                }
            },
        };
        let (idx, path) = Self::target(base, period_ns, now_ns);
        Ok(Reserved {
            base: base.into(),
            period_ns,
            set,
            first: (idx, Claimed::take(&path)?),
        })
    }

    /// Opens the file for `now_ns` right away, so a bad path fails at once.
    pub fn open(base: &Path, period: Option<Duration>, session: &Session, now_ns: u64) -> Result<Rotating> {
        Self::reserve(base, period, now_ns)?.start(session)
    }

    fn target(base: &Path, period_ns: Option<u64>, t: u64) -> (u64, PathBuf) {
        match period_ns {
            None => (0, base.to_path_buf()),
            Some(p) => (t / p, rotated_path(base, t / p * p)),
        }
    }

    pub fn writer(&mut self) -> &mut Writer {
        &mut self.current.1
    }

    /// Writes a snapshot, first switching files if it belongs to a new period.
    pub fn write(&mut self, snap: &Snapshot) -> Result<()> {
        let (idx, path) = Self::target(&self.base, self.period_ns, snap.time_ns);
        if idx != self.current.0 {
            let next = Writer::append(&path, &self.session)?;
            let old = std::mem::replace(&mut self.current, (idx, next));
            self.files.push(path);
            old.1.finish()?;
        }
        self.current.1.write_snapshot(snap)
    }

    pub fn finish(self) -> Result<()> {
        self.current.1.finish()
    }
}

impl Reserved {
    /// Begins writing the reserved file with the sampler's session.
    pub fn start(self, session: &Session) -> Result<Rotating> {
        let (idx, claimed) = self.first;
        let path = claimed.path().to_path_buf();
        Ok(Rotating {
            base: self.base,
            period_ns: self.period_ns,
            session: session.clone(),
            current: (idx, claimed.into_writer(session)?),
            files: vec![path],
            _set: self.set,
        })
    }
}
