//! `--rotate`: one recording file per period, named by the period's start.

use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::{bail, Result};

use super::timefmt;
use super::writer::Writer;
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
}

/// `dir/stem-YYYYmmdd-HHMMSS.ext` for the period starting at `start_ns`.
pub fn rotated_path(base: &Path, start_ns: u64) -> PathBuf {
    let stem = base.file_stem().unwrap_or(base.as_os_str());
    let mut name = OsString::from(stem);
    name.push(format!("-{}", timefmt::compact(start_ns)));
    if let Some(ext) = base.extension() {
        name.push(".");
        name.push(ext);
    }
    base.with_file_name(name)
}

impl Rotating {
    /// Opens the file for `now_ns` right away, so a bad path fails before sampling starts.
    pub fn open(base: &Path, period: Option<Duration>, session: &Session, now_ns: u64) -> Result<Rotating> {
        let period_ns = period.map(|p| p.as_nanos() as u64);
        if period_ns.is_some_and(|p| p < 1_000_000_000) {
            bail!("--rotate period must be at least 1s");
        }
        let (idx, path) = Self::target(base, period_ns, now_ns);
        let w = Writer::append(&path, session)?;
        Ok(Rotating {
            base: base.into(),
            period_ns,
            session: session.clone(),
            current: (idx, w),
            files: vec![path],
        })
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
