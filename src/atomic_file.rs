//! Files that appear whole or not at all, private from the first byte: written
//! to a 0600 temp file beside the target, synced, renamed over it, and the
//! directory synced. Every file xtop writes (recordings, exports) goes through here.

use std::fs::{self, File, OpenOptions};
use std::io::{self, BufWriter, Write};
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};

use anyhow::{Context, Result};

fn dir_of(path: &Path) -> &Path {
    path.parent()
        .filter(|d| !d.as_os_str().is_empty())
        .unwrap_or(Path::new("."))
}

/// A hidden temp name beside `path`, on the same filesystem so rename is atomic.
pub fn temp_beside(path: &Path) -> Result<PathBuf> {
    let name = path
        .file_name()
        .with_context(|| format!("{} is not a file name", path.display()))?;
    Ok(dir_of(path).join(format!(".{}.tmp{}", name.to_string_lossy(), std::process::id())))
}

/// Creates a new private file (mode 0600, never an existing one).
pub fn create_private(path: &Path) -> Result<File> {
    OpenOptions::new()
        .write(true)
        .read(true)
        .create_new(true)
        .mode(0o600)
        .open(path)
        .with_context(|| format!("cannot create {}", path.display()))
}

/// Moves a synced temp file to `path` and makes the rename durable.
pub fn publish(tmp: &Path, path: &Path) -> Result<()> {
    fs::rename(tmp, path)
        .with_context(|| format!("cannot rename {} to {}", tmp.display(), path.display()))?;
    let dir = dir_of(path);
    File::open(dir)
        .and_then(|d| d.sync_all())
        .with_context(|| format!("syncing {}", dir.display()))
}

/// A file being written; `commit` publishes it, dropping it removes the temp.
pub struct AtomicFile {
    tmp: PathBuf,
    path: PathBuf,
    out: Option<BufWriter<File>>,
}

impl AtomicFile {
    pub fn create(path: &Path) -> Result<AtomicFile> {
        let tmp = temp_beside(path)?;
        let out = Some(BufWriter::new(create_private(&tmp)?));
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
