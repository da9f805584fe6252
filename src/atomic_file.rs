//! The one way xtop creates files. Every writer (recordings, exports, `e`, `f`)
//! goes through here, because xtop runs as root in directories other users can
//! write to (`/tmp`): a name they can guess or a link they plant must never make
//! root write somewhere else.
//!
//! A file is written to a temporary created exclusively (`O_EXCL | O_NOFOLLOW`,
//! an unpredictable name, mode 0600) beside its final name, synced, renamed over
//! it, and the directory synced: it appears whole or not at all. The temporary
//! is `flock`ed while written, so the stale ones a killed xtop left behind can
//! be told from live ones and removed at the next run in that directory.

use std::fs::{self, File, OpenOptions};
use std::hash::{BuildHasher, Hasher};
use std::io::{self, BufWriter, Read, Write};
use std::os::fd::AsRawFd;
use std::os::unix::fs::{FileTypeExt, MetadataExt, OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime};

use anyhow::{bail, Context, Result};

/// Every temporary xtop makes has this in its name, and nothing else does.
const TEMP_MARK: &str = ".xtop-tmp.";
/// A temporary this old and unlocked belongs to a writer that died.
const STALE_AFTER: Duration = Duration::from_secs(5 * 60);

fn dir_of(path: &Path) -> &Path {
    path.parent()
        .filter(|d| !d.as_os_str().is_empty())
        .unwrap_or(Path::new("."))
}

/// 64 bits nobody else can predict: `RandomState` is seeded from the OS.
fn unpredictable() -> u64 {
    let mut h = std::collections::hash_map::RandomState::new().build_hasher();
    h.write_u32(std::process::id());
    h.write_u128(
        SystemTime::now()
            .duration_since(SystemTime::UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos()),
    );
    h.finish()
}

/// A hidden, unpredictable temp name beside `path`, on the same filesystem so
/// rename is atomic: `.NAME.xtop-tmp.RANDOM`.
pub fn temp_beside(path: &Path) -> Result<PathBuf> {
    let name = path
        .file_name()
        .with_context(|| format!("{} is not a file name", path.display()))?;
    Ok(dir_of(path).join(format!(
        ".{}{TEMP_MARK}{:016x}",
        name.to_string_lossy(),
        unpredictable()
    )))
}

fn is_temp_name(name: &str) -> bool {
    name.starts_with('.')
        && name
            .rsplit_once(TEMP_MARK)
            .is_some_and(|(_, r)| r.len() == 16 && r.bytes().all(|b| b.is_ascii_hexdigit()))
}

/// Creates a new private file (mode 0600): never an existing file, never
/// through a symlink.
pub fn create_private(path: &Path) -> Result<File> {
    OpenOptions::new()
        .write(true)
        .read(true)
        .create_new(true)
        .mode(0o600)
        .custom_flags(libc::O_NOFOLLOW | libc::O_CLOEXEC)
        .open(path)
        .with_context(|| format!("cannot create {}", path.display()))
}

/// Takes `file`'s exclusive lock without waiting; false if someone holds it.
pub fn try_lock(file: &File) -> io::Result<bool> {
    // SAFETY: flock on a descriptor we own; no memory is passed.
    if unsafe { libc::flock(file.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) } == 0 {
        return Ok(true);
    }
    let e = io::Error::last_os_error();
    if e.raw_os_error() == Some(libc::EWOULDBLOCK) {
        Ok(false)
    } else {
        Err(e)
    }
}

/// A new temporary beside `path`, created exclusively and locked. Stale
/// temporaries in that directory are removed first.
pub fn create_temp(path: &Path) -> Result<(PathBuf, File)> {
    remove_stale(dir_of(path));
    let tmp = temp_beside(path)?;
    let file = create_private(&tmp)?;
    try_lock(&file).with_context(|| format!("cannot lock {}", tmp.display()))?;
    Ok((tmp, file))
}

/// Removes our temporaries in `dir` that are old, ours and unlocked: what a
/// killed writer left. Only our name pattern, only this directory's entries.
pub fn remove_stale(dir: &Path) -> usize {
    let Ok(entries) = fs::read_dir(dir) else { return 0 };
    // SAFETY: geteuid has no preconditions.
    let me = unsafe { libc::geteuid() };
    let mut removed = 0;
    for e in entries.flatten() {
        if !e.file_name().to_str().is_some_and(is_temp_name) {
            continue;
        }
        let path = e.path();
        // O_NONBLOCK: a FIFO planted under our pattern must not hang us.
        let Ok(f) = OpenOptions::new()
            .read(true)
            .custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK | libc::O_CLOEXEC)
            .open(&path)
        else {
            continue;
        };
        let Ok(m) = f.metadata() else { continue };
        let old = m.modified().ok().and_then(|t| t.elapsed().ok()) >= Some(STALE_AFTER);
        if m.uid() != me || !old || !try_lock(&f).unwrap_or(false) {
            continue;
        }
        let gone = if m.is_file() {
            fs::remove_file(&path)
        } else if m.is_dir() {
            fs::remove_dir_all(&path) // symlinks inside are removed, never followed
        } else {
            continue;
        };
        removed += gone.is_ok() as usize;
    }
    removed
}

/// A directory output built in a fresh private directory beside it (mode
/// 0700, locked while in use), whose files are renamed into the destination
/// only when all are whole. Dropped unpublished, it is removed.
pub struct StagingDir {
    path: PathBuf,
    dest: PathBuf,
    _lock: File,
    published: bool,
}

impl StagingDir {
    pub fn create(dest: &Path) -> Result<StagingDir> {
        fs::create_dir_all(dest).with_context(|| format!("cannot create directory {}", dest.display()))?;
        remove_stale(dest);
        let path = dest.join(format!(".xtop-export{TEMP_MARK}{:016x}", unpredictable()));
        // mkdir fails on anything already there, a planted symlink included.
        std::os::unix::fs::DirBuilderExt::mode(&mut fs::DirBuilder::new(), 0o700)
            .create(&path)
            .with_context(|| format!("cannot create {}", path.display()))?;
        let lock = File::open(&path).with_context(|| format!("cannot open {}", path.display()))?;
        try_lock(&lock).with_context(|| format!("cannot lock {}", path.display()))?;
        Ok(StagingDir {
            path,
            dest: dest.to_path_buf(),
            _lock: lock,
            published: false,
        })
    }

    /// Where to write: nobody but us can make entries here.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Renames every file written into the destination, then removes the
    /// staging directory. Each final name gets a whole, synced file.
    pub fn publish(mut self) -> Result<()> {
        let entries = fs::read_dir(&self.path).with_context(|| format!("reading {}", self.path.display()))?;
        let mut names: Vec<_> = entries
            .map(|e| e.map(|e| e.file_name()))
            .collect::<io::Result<_>>()?;
        names.sort();
        for n in &names {
            let from = self.path.join(n);
            File::open(&from)
                .and_then(|f| f.sync_all())
                .with_context(|| format!("syncing {}", from.display()))?;
            let to = self.dest.join(n);
            fs::rename(&from, &to)
                .with_context(|| format!("cannot rename {} to {}", from.display(), to.display()))?;
        }
        sync_dir(&self.dest)?;
        self.published = true;
        fs::remove_dir(&self.path).with_context(|| format!("cannot remove {}", self.path.display()))
    }
}

impl Drop for StagingDir {
    fn drop(&mut self) {
        if !self.published {
            let _ = fs::remove_dir_all(&self.path);
        }
    }
}

/// Moves a synced temp file to `path` and makes the rename durable.
/// rename(2) replaces a symlink at `path` itself, never what it points to.
pub fn publish(tmp: &Path, path: &Path) -> Result<()> {
    fs::rename(tmp, path)
        .with_context(|| format!("cannot rename {} to {}", tmp.display(), path.display()))?;
    sync_parent(path)
}

/// Makes a new or renamed directory entry for `path` durable.
pub fn sync_parent(path: &Path) -> Result<()> {
    sync_dir(dir_of(path))
}

pub fn sync_dir(dir: &Path) -> Result<()> {
    File::open(dir)
        .and_then(|d| d.sync_all())
        .with_context(|| format!("syncing {}", dir.display()))
}

/// What a path that should be a recording is instead, in words.
fn kind_of(ft: fs::FileType) -> &'static str {
    if ft.is_dir() {
        "a directory"
    } else if ft.is_fifo() {
        "a FIFO"
    } else if ft.is_char_device() || ft.is_block_device() {
        "a device"
    } else if ft.is_socket() {
        "a socket"
    } else if ft.is_symlink() {
        "a symbolic link"
    } else {
        "not a regular file"
    }
}

/// Opens an input for reading only if it is a regular file. Opened
/// non-blocking and checked with fstat, so a FIFO or device is refused at once
/// instead of hanging the reader.
pub fn open_regular(path: &Path) -> Result<File> {
    let file = OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NONBLOCK | libc::O_NOCTTY | libc::O_CLOEXEC)
        .open(path)
        .with_context(|| format!("cannot open {}", path.display()))?;
    check_regular(&file, path)?;
    clear_nonblock(&file);
    Ok(file)
}

/// Opens an existing recording to append to: a regular file reached without a
/// symlink, made private (0600) whatever its mode was.
pub fn open_for_append(path: &Path) -> Result<File> {
    let file = OpenOptions::new()
        .read(true)
        .write(true)
        .custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK | libc::O_NOCTTY | libc::O_CLOEXEC)
        .open(path)
        .map_err(|e| {
            if e.raw_os_error() == Some(libc::ELOOP) {
                anyhow::anyhow!("refusing to append to {}: it is a symbolic link", path.display())
            } else {
                anyhow::Error::new(e).context(format!("cannot open {} for writing", path.display()))
            }
        })?;
    check_regular(&file, path)?;
    clear_nonblock(&file);
    Ok(file)
}

/// Makes an existing file private (a recording appended to may have been 0644).
pub fn make_private(file: &File, path: &Path) -> Result<()> {
    if file.metadata()?.mode() & 0o7777 != 0o600 {
        file.set_permissions(fs::Permissions::from_mode(0o600))
            .with_context(|| format!("cannot make {} private", path.display()))?;
    }
    Ok(())
}

fn check_regular(file: &File, path: &Path) -> Result<()> {
    let ft = file
        .metadata()
        .with_context(|| format!("cannot stat {}", path.display()))?
        .file_type();
    if !ft.is_file() {
        bail!("{} is {}, not a recording file", path.display(), kind_of(ft));
    }
    Ok(())
}

/// Regular files ignore O_NONBLOCK, but clear it so nothing later depends on that.
fn clear_nonblock(file: &File) {
    let fd = file.as_raw_fd();
    // SAFETY: fcntl flag calls on a descriptor we own.
    unsafe {
        let fl = libc::fcntl(fd, libc::F_GETFL);
        if fl >= 0 {
            libc::fcntl(fd, libc::F_SETFL, fl & !libc::O_NONBLOCK);
        }
    }
}

/// The PID holding a lock on `file`, from /proc/locks (matched by inode).
pub fn lock_holder(file: &File) -> Option<u32> {
    let m = file.metadata().ok()?;
    let dev = m.dev();
    let (major, minor) = (libc::major(dev), libc::minor(dev));
    let want = format!("{major:02x}:{minor:02x}:{}", m.ino());
    // /proc/locks is a seq_file walked by position: a lock released by anyone
    // between two read() calls shifts the list and can hide ours (std's reader
    // starts with a 32-byte probe, so every line was its own call). Read in
    // large calls, and look again a few times before saying "unknown".
    (0..8).find_map(|_| holder_in(&read_proc_locks()?, &want))
}

fn read_proc_locks() -> Option<String> {
    let mut f = File::open("/proc/locks").ok()?;
    let mut buf = vec![0u8; 64 << 10];
    let mut len = 0;
    loop {
        if len == buf.len() {
            buf.resize(buf.len() * 2, 0);
        }
        match f.read(&mut buf[len..]) {
            Ok(0) => break,
            Ok(n) => len += n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(_) => return None,
        }
    }
    buf.truncate(len);
    String::from_utf8(buf).ok()
}

fn holder_in(locks: &str, want: &str) -> Option<u32> {
    locks.lines().find_map(|l| {
        let f: Vec<&str> = l.split_whitespace().collect();
        // "1: FLOCK  ADVISORY  WRITE 1234 fd:01:5678 0 EOF"; blocked waiters have "->".
        if f.get(1) == Some(&"->") {
            return None;
        }
        let i = f.iter().position(|x| x.matches(':').count() == 2)?;
        (f[i].eq_ignore_ascii_case(want)).then(|| f.get(i - 1)?.parse().ok())?
    })
}

/// Where the lock of a set of files named after `path` lives: `.NAME.xtop-lock`.
pub fn lock_path(path: &Path) -> Result<PathBuf> {
    let name = path
        .file_name()
        .with_context(|| format!("{} is not a file name", path.display()))?;
    Ok(dir_of(path).join(format!(".{}.xtop-lock", name.to_string_lossy())))
}

/// A file that exists only to be locked: it guards something no single file
/// stands for (a rotation set, whose files change every period). Held until
/// dropped, then removed.
pub struct LockFile {
    path: PathBuf,
    _lock: File,
}

impl LockFile {
    /// Takes the lock at `path` (creating the file, mode 0600, never through a
    /// symlink). `Ok(Err(holder))` when another process holds it.
    pub fn acquire(path: &Path) -> Result<std::result::Result<LockFile, Option<u32>>> {
        loop {
            let file = match create_private(path) {
                Ok(f) => f,
                Err(e) if is_exists(&e) => {
                    let f = OpenOptions::new()
                        .read(true)
                        .custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK | libc::O_NOCTTY | libc::O_CLOEXEC)
                        .open(path);
                    match f {
                        Ok(f) => f,
                        // Its holder removed it between our two opens: try again.
                        Err(e) if e.kind() == io::ErrorKind::NotFound => continue,
                        Err(e) => return Err(e).with_context(|| format!("cannot open {}", path.display())),
                    }
                }
                Err(e) => return Err(e),
            };
            let m = file.metadata()?;
            if !m.is_file() {
                bail!(
                    "{} is {}, not a lock file",
                    path.display(),
                    kind_of(m.file_type())
                );
            }
            if !try_lock(&file).with_context(|| format!("cannot lock {}", path.display()))? {
                return Ok(Err(lock_holder(&file)));
            }
            // The previous holder may have removed the file after we opened it:
            // a lock on a name-less file guards nothing, so start over.
            let same = fs::symlink_metadata(path).is_ok_and(|n| n.dev() == m.dev() && n.ino() == m.ino());
            if same {
                return Ok(Ok(LockFile {
                    path: path.to_path_buf(),
                    _lock: file,
                }));
            }
        }
    }
}

impl Drop for LockFile {
    fn drop(&mut self) {
        // Removed while still locked, so whoever opened it meanwhile sees the
        // name gone and starts over (see acquire).
        let _ = fs::remove_file(&self.path);
    }
}

/// Whether creating failed because the name is taken.
pub fn is_exists(e: &anyhow::Error) -> bool {
    e.downcast_ref::<io::Error>()
        .is_some_and(|e| e.kind() == io::ErrorKind::AlreadyExists)
}

/// A file being written; `commit` publishes it, dropping it removes the temp.
pub struct AtomicFile {
    tmp: PathBuf,
    path: PathBuf,
    out: Option<BufWriter<File>>,
}

impl AtomicFile {
    pub fn create(path: &Path) -> Result<AtomicFile> {
        let (tmp, file) = create_temp(path)?;
        let out = Some(BufWriter::new(file));
        Ok(AtomicFile {
            tmp,
            path: path.to_path_buf(),
            out,
        })
    }

    pub fn commit(mut self) -> Result<()> {
        let out = self.out.take().expect("not yet committed");
        let file = out
            .into_inner()
            .map_err(|e| e.into_error())
            .with_context(|| self.context())?;
        file.sync_all().with_context(|| self.context())?;
        publish(&self.tmp, &self.path)
    }

    fn context(&self) -> String {
        format!("writing {}", self.path.display())
    }
}

impl Write for AtomicFile {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        self.out.as_mut().expect("not yet committed").write(buf)
    }

    fn flush(&mut self) -> io::Result<()> {
        self.out.as_mut().expect("not yet committed").flush()
    }
}

impl Drop for AtomicFile {
    fn drop(&mut self) {
        if self.out.is_some() {
            let _ = fs::remove_file(&self.tmp);
        }
    }
}

/// Writes `bytes` to `path` atomically, mode 0600.
pub fn write(path: &Path, bytes: &[u8]) -> Result<()> {
    let context = || format!("writing {}", path.display());
    let mut f = AtomicFile::create(path).with_context(context)?;
    f.write_all(bytes).with_context(context)?;
    f.commit()
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    fn dir(name: &str) -> PathBuf {
        let d = std::env::temp_dir().join(format!("xtop-atomic-{name}-{}", std::process::id()));
        let _ = fs::remove_dir_all(&d);
        fs::create_dir_all(&d).unwrap();
        d
    }

    #[test]
    fn replaces_whole_and_private_even_over_a_public_file() {
        let d = dir("replace");
        let p = d.join("out.csv");
        fs::write(&p, "old").unwrap();
        fs::set_permissions(&p, fs::Permissions::from_mode(0o644)).unwrap();
        write(&p, b"new").unwrap();
        assert_eq!(fs::read_to_string(&p).unwrap(), "new");
        assert_eq!(fs::metadata(&p).unwrap().permissions().mode() & 0o777, 0o600);
        assert_eq!(fs::read_dir(&d).unwrap().count(), 1, "no temp left behind");
    }

    #[test]
    fn an_abandoned_file_leaves_nothing() {
        let d = dir("abandon");
        let p = d.join("out.csv");
        let mut f = AtomicFile::create(&p).unwrap();
        f.write_all(b"partial").unwrap();
        drop(f);
        assert_eq!(fs::read_dir(&d).unwrap().count(), 0);
        let err = format!("{:#}", write(Path::new("/nonexistent-dir/x"), b"x").unwrap_err());
        assert!(
            err.starts_with("writing /nonexistent-dir/x: cannot create"),
            "{err}"
        );
    }
}

#[cfg(test)]
#[path = "atomic_file_tests.rs"]
mod hostile_tests;
