//! Disk names by dev_t, as the kernel gives them (`vda`, `nvme0n1`), read
//! once per disk from sysfs.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use super::split_dev;

pub struct DeviceNames {
    sysfs: PathBuf,
    names: HashMap<u32, Arc<str>>,
}

impl Default for DeviceNames {
    fn default() -> Self {
        DeviceNames::new("/sys/dev/block")
    }
}

impl DeviceNames {
    /// Names read under `sysfs` (`/sys/dev/block`, or a test's own tree).
    pub fn new(sysfs: impl Into<PathBuf>) -> Self {
        DeviceNames {
            sysfs: sysfs.into(),
            names: HashMap::new(),
        }
    }

    /// The disk's name; `MAJ:MIN` when sysfs has none (a disk removed since,
    /// or sysfs not mounted), so two disks never share a name. A disk added
    /// later under a reused number keeps the first name until xtop restarts:
    /// dev_t numbers of live disks are not reused.
    pub fn name(&mut self, dev: u32) -> Arc<str> {
        let sysfs = &self.sysfs;
        self.names
            .entry(dev)
            .or_insert_with(|| {
                let (major, minor) = split_dev(dev);
                read_name(&sysfs.join(format!("{major}:{minor}")))
                    .unwrap_or_else(|| format!("{major}:{minor}"))
                    .into()
            })
            .clone()
    }
}

/// DEVNAME from the device's uevent file (its name under /dev, which may
/// hold a slash: `mapper/...` is not, but `cciss/c0d0` is), else the name of
/// the directory the sysfs link points to.
fn read_name(dir: &Path) -> Option<String> {
    let uevent = std::fs::read_to_string(dir.join("uevent")).ok();
    let from_uevent = uevent.as_deref().and_then(|u| {
        u.lines()
            .find_map(|l| l.strip_prefix("DEVNAME="))
            .map(str::to_string)
    });
    from_uevent
        .or_else(|| {
            let target = std::fs::read_link(dir).ok()?;
            Some(target.file_name()?.to_string_lossy().into_owned())
        })
        .filter(|n| !n.is_empty() && n.chars().all(|c| !c.is_control()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_come_from_uevent_then_the_link_then_the_numbers() {
        let root = std::env::temp_dir().join(format!("xtop-devnames-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&root);
        let a = root.join("254:0");
        std::fs::create_dir_all(&a).unwrap();
        std::fs::write(
            a.join("uevent"),
            "MAJOR=254\nMINOR=0\nDEVNAME=vda\nDEVTYPE=disk\n",
        )
        .unwrap();
        let target = root.join("devices").join("nvme0n1");
        std::fs::create_dir_all(&target).unwrap();
        std::os::unix::fs::symlink(&target, root.join("259:0")).unwrap();
        let mut names = DeviceNames::new(&root);
        assert_eq!(&*names.name(254 << 20), "vda");
        assert_eq!(&*names.name(259 << 20), "nvme0n1");
        assert_eq!(&*names.name((8 << 20) | 16), "8:16");
        std::fs::write(a.join("uevent"), "DEVNAME=changed\n").unwrap();
        assert_eq!(&*names.name(254 << 20), "vda", "read once per disk");
        std::fs::remove_dir_all(&root).unwrap();
    }
}
