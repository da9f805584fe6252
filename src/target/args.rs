//! Which argument of a syscall names the file it works on. The kernel side
//! reads this as a table indexed by syscall number (`sc_target` in
//! src/bpf/xtop.bpf.c), filled from here for the architecture sampled, so the
//! list is kept once, by name.

use crate::model::Arch;

/// XTOP_NR_SYSCALLS (src/bpf/xtop.h): the table's size.
pub const NR_SYSCALLS: usize = 512;

// TA_* in src/bpf/xtop.h: the kind in the high nibble, the argument index below.
const TA_FD: u8 = 0x10;
const TA_PATH: u8 = 0x20;
const TA_POLL: u8 = 0x30;
const TA_SELECT: u8 = 0x40;

/// How a syscall names its file.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Arg {
    /// A descriptor in argument `i` (from 0).
    Fd(u8),
    /// A path string in argument `i`.
    Path(u8),
    /// poll/ppoll: the descriptor of a one-entry pollfd array.
    Poll,
    /// select/pselect6: the only descriptor in the read and write sets.
    Select,
}

impl Arg {
    fn code(self) -> u8 {
        match self {
            Arg::Fd(i) => TA_FD | i,
            Arg::Path(i) => TA_PATH | i,
            Arg::Poll => TA_POLL,
            Arg::Select => TA_SELECT,
        }
    }
}

/// Syscalls whose first argument is a descriptor. Where a call has two
/// (sendfile, copy_file_range, splice, tee), the one read from is named:
/// that is where a thread waits on a disk.
const FD0: &[&str] = &[
    "read",
    "write",
    "pread64",
    "pwrite64",
    "readv",
    "writev",
    "preadv",
    "pwritev",
    "preadv2",
    "pwritev2",
    "fsync",
    "fdatasync",
    "sync_file_range",
    "sync_file_range2",
    "syncfs",
    "lseek",
    "getdents",
    "getdents64",
    "ioctl",
    "fcntl",
    "flock",
    "fstat",
    "fstatfs",
    "ftruncate",
    "fallocate",
    "fadvise64",
    "readahead",
    "fchmod",
    "fchown",
    "fchdir",
    "fgetxattr",
    "fsetxattr",
    "flistxattr",
    "fremovexattr",
    "close",
    "copy_file_range",
    "splice",
    "tee",
    "vmsplice",
    "io_uring_enter",
    "io_uring_register",
    "epoll_wait",
    "epoll_pwait",
    "epoll_pwait2",
    "epoll_ctl",
    "recvfrom",
    "recvmsg",
    "recvmmsg",
    "sendto",
    "sendmsg",
    "sendmmsg",
    "accept",
    "accept4",
    "connect",
    "bind",
    "listen",
    "shutdown",
    "getsockopt",
    "setsockopt",
    "getsockname",
    "getpeername",
    "inotify_add_watch",
    "fanotify_mark",
    "timerfd_settime",
    "timerfd_gettime",
    "signalfd4",
    "finit_module",
    "fsconfig",
    "fsmount",
    "move_mount",
];

/// Syscalls whose first argument is a path.
const PATH0: &[&str] = &[
    "open",
    "creat",
    "stat",
    "lstat",
    "access",
    "truncate",
    "chdir",
    "chroot",
    "mkdir",
    "rmdir",
    "unlink",
    "link",
    "rename",
    "readlink",
    "chmod",
    "chown",
    "lchown",
    "statfs",
    "execve",
    "utime",
    "utimes",
    "mknod",
    "umount2",
    "swapon",
    "swapoff",
    "acct",
    "getxattr",
    "setxattr",
    "listxattr",
    "removexattr",
    "lgetxattr",
    "lsetxattr",
    "llistxattr",
    "lremovexattr",
    "pivot_root",
    "uselib",
];

/// Syscalls with a directory descriptor first and the path second: the path
/// is named as passed (relative to that directory when it is relative).
const PATH1: &[&str] = &[
    "openat",
    "openat2",
    "newfstatat",
    "statx",
    "unlinkat",
    "mkdirat",
    "mknodat",
    "fchownat",
    "futimesat",
    "utimensat",
    "faccessat",
    "faccessat2",
    "fchmodat",
    "fchmodat2",
    "readlinkat",
    "renameat",
    "renameat2",
    "linkat",
    "execveat",
    "name_to_handle_at",
    "open_tree",
    "mount",
    "symlink",
    "getxattrat",
    "setxattrat",
    "listxattrat",
    "removexattrat",
];

/// How syscall `name` names its file, if it does.
pub fn arg_of(name: &str) -> Option<Arg> {
    match name {
        "mmap" => Some(Arg::Fd(4)),
        "sendfile" => Some(Arg::Fd(1)),
        "symlinkat" => Some(Arg::Path(2)),
        "poll" | "ppoll" => Some(Arg::Poll),
        "select" | "pselect6" => Some(Arg::Select),
        n if FD0.contains(&n) => Some(Arg::Fd(0)),
        n if PATH0.contains(&n) => Some(Arg::Path(0)),
        n if PATH1.contains(&n) => Some(Arg::Path(1)),
        _ => None,
    }
}

/// The kernel side's table for `arch`: entry `nr` says how syscall `nr` names
/// its file (0: it does not).
pub fn table(arch: Arch) -> [u8; NR_SYSCALLS] {
    let mut t = [0u8; NR_SYSCALLS];
    for (nr, slot) in t.iter_mut().enumerate() {
        if let Some(a) = arch.syscall_name(nr as u32).and_then(arg_of) {
            *slot = a.code();
        }
    }
    t
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_listed_name_is_a_syscall_somewhere() {
        let lists = [FD0, PATH0, PATH1].concat();
        for name in lists
            .iter()
            .chain(&["mmap", "sendfile", "symlinkat", "poll", "select"])
        {
            assert!(
                [Arch::X86_64, Arch::Aarch64]
                    .iter()
                    .any(|a| a.syscall_nr(name).is_some()),
                "{name} is not a syscall name xtop knows"
            );
        }
        for (i, n) in lists.iter().enumerate() {
            assert!(!lists[..i].contains(n), "{n} listed twice");
        }
    }

    #[test]
    fn x86_64_table() {
        let t = table(Arch::X86_64);
        assert_eq!(t[0], TA_FD, "read(fd, ...)");
        assert_eq!(t[9], TA_FD | 4, "mmap(addr, len, prot, flags, fd, off)");
        assert_eq!(t[40], TA_FD | 1, "sendfile(out, in, ...): the file read");
        assert_eq!(t[257], TA_PATH | 1, "openat(dirfd, path, ...)");
        assert_eq!(t[2], TA_PATH, "open(path, ...)");
        assert_eq!(t[7], TA_POLL);
        assert_eq!(t[23], TA_SELECT);
        assert_eq!(t[232], TA_FD, "epoll_wait(epfd, ...)");
        assert_eq!(t[202], 0, "futex: no file");
        assert_eq!(t[35], 0, "nanosleep");
    }

    #[test]
    fn aarch64_table() {
        let t = table(Arch::Aarch64);
        assert_eq!(t[63], TA_FD, "read");
        assert_eq!(t[56], TA_PATH | 1, "openat");
        assert_eq!(t[79], TA_PATH | 1, "newfstatat");
        assert_eq!(t[73], TA_POLL, "ppoll");
    }
}
