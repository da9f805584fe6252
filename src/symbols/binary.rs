//! Identity of the files processes map: captured while the process lives (its
//! `/proc/PID/map_files` link is the file actually mapped, even if replaced on
//! disk since), so a frame can later be symbolized from the file on disk only
//! if that file is still the same one.

use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use blazesym::helper::read_elf_build_id;

use super::cache::Bounded;
use super::stack_hash;

/// (dev, inode, size, mtime ns): which file, in which version.
type Stamp = (u64, u64, u64, i64);

fn stamp(meta: &std::fs::Metadata) -> Stamp {
    let mtime = meta
        .mtime()
        .wrapping_mul(1_000_000_000)
        .wrapping_add(meta.mtime_nsec());
    (meta.dev(), meta.ino(), meta.size(), mtime)
}

#[derive(Debug)]
pub struct Binary {
    /// Same for every process mapping this code: build-id, or else the file's stamp.
    pub key: u64,
    /// Path as the process named it (what is symbolized once it is gone).
    pub path: PathBuf,
    /// File name, for frames that cannot be named.
    pub name: Arc<str>,
    stamp: Stamp,
    build_id: Option<Vec<u8>>,
}

impl Binary {
    /// The file to symbolize this binary from: `path` if it is still the file
    /// that was mapped, else `mapped` (a map_files link, valid while the
    /// process lives), else None: better no name than another binary's.
    pub fn source(&self, mapped: &Path) -> Option<PathBuf> {
        let same = |p: &Path| {
            let Ok(meta) = std::fs::metadata(p) else {
                return false;
            };
            stamp(&meta) == self.stamp
                || self.build_id.is_some()
                    && read_elf_build_id(p).ok().flatten().as_deref() == self.build_id.as_deref()
        };
        if same(&self.path) {
            Some(self.path.clone())
        } else if same(mapped) {
            Some(mapped.to_path_buf())
        } else {
            None
        }
    }
}

/// Binaries already seen, by file stamp: each ELF's build-id is read once.
pub struct Binaries {
    by_stamp: Bounded<Stamp, Arc<Binary>>,
}

impl Binaries {
    pub fn new() -> Self {
        Binaries {
            by_stamp: Bounded::new(8192),
        }
    }

    /// The binary mapped at `mapped` (a map_files link), named `path` by the process.
    pub fn get(&mut self, mapped: &Path, path: &str) -> Option<Arc<Binary>> {
        // Without map_files access (no privilege), the path is the best guess.
        let (meta, file) = match std::fs::metadata(mapped) {
            Ok(m) => (m, mapped),
            Err(_) => (std::fs::metadata(path).ok()?, Path::new(path)),
        };
        let stamp = stamp(&meta);
        if let Some(b) = self.by_stamp.get(&stamp) {
            if b.path.as_os_str() == path {
                return Some(b);
            }
        }
        let build_id = read_elf_build_id(file).ok().flatten().map(|b| b.into_owned());
        let key = match &build_id {
            Some(id) => {
                let words: Vec<u64> = id.iter().map(|&b| u64::from(b)).collect();
                stack_hash(&words)
            }
            None => stack_hash(&[stamp.0, stamp.1, stamp.2, stamp.3 as u64]),
        };
        let name = Path::new(path)
            .file_name()
            .map_or_else(|| path.into(), |n| n.to_string_lossy().into());
        let b = Arc::new(Binary {
            key,
            path: PathBuf::from(path),
            name,
            stamp,
            build_id,
        });
        self.by_stamp.insert(stamp, b.clone());
        Some(b)
    }
}

#[cfg(test)]
mod tests {
    use std::process::Command;

    use super::super::maps::{self, MapKind};
    use super::*;

    #[test]
    fn a_replaced_file_is_not_used_a_deleted_one_only_while_mapped() {
        let path = format!("/tmp/xtop-symtest-{}", std::process::id());
        std::fs::copy("/bin/sleep", &path).expect("copy /bin/sleep");
        let mut child = Command::new(&path).arg("30").spawn().expect("spawn copy");
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
        let (mut maps, mut text) = (String::new(), None);
        // The exec may still be under way when spawn returns.
        while text.is_none() && std::time::Instant::now() < deadline {
            std::thread::sleep(std::time::Duration::from_millis(5));
            maps = std::fs::read_to_string(format!("/proc/{}/maps", child.id())).unwrap_or_default();
            text = maps::parse(&maps)
                .into_iter()
                .find(|m| matches!(&m.kind, MapKind::File { path: p, .. } if *p == path));
        }
        let Some(text) = text else {
            let _ = child.kill();
            let _ = child.wait();
            let _ = std::fs::remove_file(&path);
            panic!("{path} not mapped in {maps}");
        };
        let mapped = PathBuf::from(format!(
            "/proc/{}/map_files/{:x}-{:x}",
            child.id(),
            text.start,
            text.end
        ));
        let mut bins = Binaries::new();
        let bin = bins.get(&mapped, &path).expect("binary");
        let from_path = bin.source(&mapped);
        let _ = std::fs::remove_file(&path);
        let deleted = bin.source(&mapped);
        let _ = std::fs::copy("/bin/true", &path);
        let replaced_alive = bin.source(&mapped);
        let _ = child.kill();
        let _ = child.wait();
        let replaced_gone = bin.source(&mapped);
        let _ = std::fs::remove_file(&path);

        assert_eq!(from_path, Some(PathBuf::from(&path)));
        assert_eq!(
            deleted,
            Some(mapped.clone()),
            "deleted: only the mapping still has it"
        );
        assert_eq!(
            replaced_alive,
            Some(mapped),
            "replaced: the mapping, not the new file"
        );
        assert_eq!(
            replaced_gone, None,
            "replaced and exited: no name rather than a wrong one"
        );
    }
}
