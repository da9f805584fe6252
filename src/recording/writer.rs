//! Appending snapshots to a recording file, one frame per write.

use std::fs::{self, File, OpenOptions};
use std::io::Write;
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};

use anyhow::{Context, Result};

use super::codec::Encoder;
use super::frame::{self, FrameEncoder, FrameReader, KIND_DELTA, KIND_KEY, KIND_SESSION};
use super::session;
use crate::model::{Session, Snapshot};

/// Snapshots between key frames: bounds both the tables' memory and what one
/// damaged frame can take with it (at 1 s, five minutes).
const KEY_EVERY: usize = 300;

pub struct Writer {
    file: File,
    path: PathBuf,
    enc: Encoder,
    frames: FrameEncoder,
    /// Snapshots written since the last key frame.
    since_key: usize,
    bytes: u64,
    /// Things the user should know, e.g. a torn tail cut off before appending.
    pub warnings: Vec<String>,
}

/// Opens for writing with mode 0600: command lines in samples can hold secrets.
/// Never through a symlink: xtop runs as root in directories others can write.
fn open_private(path: &Path, opts: &mut OpenOptions) -> Result<File> {
    opts.mode(0o600)
        .custom_flags(libc::O_NOFOLLOW | libc::O_CLOEXEC)
        .open(path)
        .with_context(|| format!("cannot open {} for writing", path.display()))
}

impl Writer {
    /// Starts a new recording at `path`, replacing any file there.
    pub fn create(path: &Path, session: &Session) -> Result<Writer> {
        let file = open_private(path, OpenOptions::new().write(true).create(true).truncate(true))?;
        let w = Writer::start(file, path, session)?;
        crate::atomic_file::sync_parent(path)?;
        Ok(w)
    }

    /// Continues the recording at `path` (creating it if absent). A torn last
    /// frame left by a crash is cut off first, so the new frames follow intact ones.
    pub fn append(path: &Path, session: &Session) -> Result<Writer> {
        Claimed::take(path)?.into_writer(session)
    }

    /// Begins a new, empty file.
    fn start(file: File, path: &Path, session: &Session) -> Result<Writer> {
        let mut w = Writer::on(file, path, 0)?;
        w.put(&frame::file_header())?;
        w.write_session(session)?;
        Ok(w)
    }

    fn reopen(file: File, path: &Path, session: &Session) -> Result<Writer> {
        let mut warnings = Vec::new();
        let len = file.metadata()?.len();
        let good = if len == 0 {
            0
        } else {
            let (mut r, version) = FrameReader::open(&file)
                .with_context(|| format!("refusing to append to {}", path.display()))?;
            if version < frame::VERSION {
                // New frames use the current codec: say so, so older xtops refuse
                // the file instead of misreading it. Older frames still decode.
                use std::os::unix::fs::FileExt;
                file.write_all_at(&frame::file_header()[8..], 8)
                    .with_context(|| format!("cannot upgrade the header of {}", path.display()))?;
            }
            let mut good = r.position();
            // A frame that breaks a limit was not torn by a crash: refuse, cut nothing.
            while r
                .next_frame()
                .with_context(|| format!("refusing to append to {}", path.display()))?
                .is_some()
            {
                good = r.position();
            }
            good
        };
        if good < len && len > 0 {
            warnings.push(format!(
                "{}: cut {} damaged bytes at the end before appending",
                path.display(),
                len - good
            ));
        }
        file.set_len(good)
            .with_context(|| format!("cannot truncate {}", path.display()))?;
        let mut w = Writer::on(file, path, good)?;
        w.warnings = warnings;
        if good == 0 {
            w.put(&frame::file_header())?;
        }
        w.write_session(session)?;
        Ok(w)
    }

    fn on(file: File, path: &Path, at: u64) -> Result<Writer> {
        use std::io::{Seek, SeekFrom};
        let mut file = file;
        file.seek(SeekFrom::Start(at))?;
        Ok(Writer {
            file,
            path: path.to_path_buf(),
            enc: Encoder::default(),
            frames: FrameEncoder::new()?,
            since_key: KEY_EVERY,
            bytes: at,
            warnings: Vec::new(),
        })
    }

    fn put(&mut self, data: &[u8]) -> Result<()> {
        self.file
            .write_all(data)
            .with_context(|| format!("writing {}", self.path.display()))?;
        self.bytes += data.len() as u64;
        Ok(())
    }

    pub(super) fn write_session(&mut self, s: &Session) -> Result<()> {
        let f = self.frames.frame(KIND_SESSION, &session::encode(s), 0)?;
        self.put(&f)?;
        self.since_key = KEY_EVERY; // the next snapshots start from fresh tables
        Ok(())
    }

    pub fn write_snapshot(&mut self, snap: &Snapshot) -> Result<()> {
        self.write_snapshots(std::slice::from_ref(snap))
    }

    /// Writes snapshots as one frame (fewer, larger frames compress better;
    /// the live recorder writes one per pass so a crash loses at most one).
    pub fn write_snapshots(&mut self, snaps: &[Snapshot]) -> Result<()> {
        if snaps.is_empty() {
            return Ok(());
        }
        let key = self.since_key >= KEY_EVERY;
        let (payload, cost) = self.enc.encode(snaps, key);
        let f = self
            .frames
            .frame(if key { KIND_KEY } else { KIND_DELTA }, &payload, cost)?;
        self.since_key = if key {
            snaps.len()
        } else {
            self.since_key + snaps.len()
        };
        if let Err(e) = self.put(&f) {
            // The tables now hold entries the file lacks: start over at a key frame.
            self.since_key = KEY_EVERY;
            return Err(e);
        }
        Ok(())
    }

    /// Forces written frames to stable storage.
    pub fn flush(&mut self) -> Result<()> {
        self.file
            .sync_data()
            .with_context(|| format!("syncing {}", self.path.display()))
    }

    pub fn finish(mut self) -> Result<()> {
        self.flush()
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Size of the file so far.
    pub fn bytes(&self) -> u64 {
        self.bytes
    }
}

/// Writes a whole recording atomically: a private temp file, fsync, rename,
/// fsync of the directory. Readers never see a half-written file at `path`.
pub fn write_file(path: &Path, session: &Session, snaps: &[Snapshot]) -> Result<()> {
    let (tmp, file) = crate::atomic_file::create_temp(path)?;
    let result = (|| {
        let mut w = Writer::start(file, &tmp, session)?;
        for chunk in batches(snaps) {
            w.write_snapshots(chunk)?;
        }
        w.file
            .sync_all()
            .with_context(|| format!("syncing {}", tmp.display()))?;
        crate::atomic_file::publish(&tmp, path)
    })();
    if result.is_err() {
        let _ = fs::remove_file(&tmp);
    }
    result
}

/// Up to 60 snapshots per frame (better compression, still small frames), and
/// no more than `BATCH_SAMPLES` samples, so a big box's frames stay far below
/// the size a reader accepts (`limits::MAX_RAW`).
fn batches(snaps: &[Snapshot]) -> impl Iterator<Item = &[Snapshot]> {
    const BATCH_SNAPSHOTS: usize = 60;
    const BATCH_SAMPLES: usize = 200_000;
    let mut rest = snaps;
    std::iter::from_fn(move || {
        if rest.is_empty() {
            return None;
        }
        let mut samples = 0;
        let n = rest
            .iter()
            .take(BATCH_SNAPSHOTS)
            .take_while(|s| {
                samples += s.samples.len();
                samples <= BATCH_SAMPLES
            })
            .count()
            .max(1);
        let (batch, tail) = rest.split_at(n);
        rest = tail;
        Some(batch)
    })
}

/// A recording file reserved for appending before anything is written to it:
/// a regular file (created 0600 if absent, else made 0600), reached without a
/// symlink, held under an exclusive lock. So `record` can fail at once, before
/// sampling starts, when a second recorder targets the same file.
pub struct Claimed {
    file: Option<File>,
    path: PathBuf,
    /// We created the file: if it is never written, it is removed again.
    new: bool,
}

impl Claimed {
    pub fn take(path: &Path) -> Result<Claimed> {
        let (file, new) = match crate::atomic_file::create_private(path) {
            Ok(f) => (f, true),
            Err(e) if crate::atomic_file::is_exists(&e) => {
                (crate::atomic_file::open_for_append(path)?, false)
            }
            Err(e) => return Err(e),
        };
        let claimed = Claimed {
            file: Some(file),
            path: path.to_path_buf(),
            new,
        };
        let file = claimed.file.as_ref().expect("just opened");
        claim(file, &path.display().to_string())?;
        if !new {
            crate::atomic_file::make_private(file, path)?;
        }
        Ok(claimed)
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Starts writing: a new file gets its header, an existing one is
    /// checked and its torn tail cut; then the session frame.
    pub fn into_writer(mut self, session: &Session) -> Result<Writer> {
        let file = self.file.take().expect("claimed once");
        if self.new {
            let w = Writer::start(file, &self.path, session)?;
            // A power loss must not take the new file's name with it (write_file
            // syncs its directory when it renames instead).
            crate::atomic_file::sync_parent(&self.path)?;
            Ok(w)
        } else {
            Writer::reopen(file, &self.path, session)
        }
    }
}

impl Drop for Claimed {
    fn drop(&mut self) {
        // Never started (sampling failed to start): leave no empty file behind.
        // Only if the name is still the file we made.
        if let (Some(f), true) = (&self.file, self.new) {
            use std::os::unix::fs::MetadataExt;
            let ours = |m: fs::Metadata| (m.dev(), m.ino());
            if f.metadata().ok().map(ours) == fs::symlink_metadata(&self.path).ok().map(ours) {
                let _ = fs::remove_file(&self.path);
            }
        }
    }
}

/// Takes `file`'s exclusive lock, or says who holds it: "{what} is being
/// recorded by PID N; refusing to write to it too".
pub(super) fn claim(file: &File, what: &str) -> Result<()> {
    let locked = crate::atomic_file::try_lock(file).with_context(|| format!("cannot lock {what}"))?;
    if !locked {
        return Err(refuse(what, crate::atomic_file::lock_holder(file)));
    }
    Ok(())
}

/// The one line a second recorder gets.
pub(super) fn refuse(what: &str, holder: Option<u32>) -> anyhow::Error {
    let who = holder.map_or("another process".to_string(), |p| format!("PID {p}"));
    anyhow::anyhow!("{what} is being recorded by {who}; refusing to write to it too")
}
