//! The file record the kernel side writes for a sample (`resolve_target` in
//! src/bpf/xtop.bpf.c) to the name users know: a path as /proc/PID/fd would
//! show it, the path argument as passed, or an anonymous file's kind.

use std::collections::HashMap;
use std::hash::{Hash, Hasher};
use std::sync::Arc;

use super::socket;
use crate::model::{printable, Target};

// TK_* and TF_* in src/bpf/xtop.h.
pub const TK_NONE: u8 = 0;
pub const TK_FAIL: u8 = 1;
pub const TK_DENTRY: u8 = 2;
pub const TK_USTR: u8 = 3;
pub const TF_DELETED: u8 = 1;
pub const TF_LONG: u8 = 2;
pub const TF_PSEUDO: u8 = 4;
pub const TF_SOCK: u8 = 8;

/// XTOP_TGT_BYTES (src/bpf/xtop.h): the most a file record holds.
pub const TGT_BYTES: usize = 1024 + 256;

// Filesystems of anonymous files (include/uapi/linux/magic.h).
const PIPEFS: u32 = 0x5049_5045;
const SOCKFS: u32 = 0x534f_434b;
const ANON_INODE_FS: u32 = 0x0904_1934;
const PIDFS: u32 = 0x5049_4446;
const NSFS: u32 = 0x6e73_6673;
const TMPFS: u32 = 0x0102_1994;

/// The record's parts, as the kernel side wrote them.
#[derive(Clone, Copy, Debug, Default)]
pub struct Raw<'a> {
    pub kind: u8,
    pub flags: u8,
    pub magic: u32,
    pub ino: u64,
    pub bytes: &'a [u8],
}

/// The target a record describes; None when the syscall names no file.
pub fn target(r: &Raw) -> Option<Target> {
    match r.kind {
        TK_NONE => None,
        TK_DENTRY if r.flags & TF_SOCK != 0 => match socket::parse(r.bytes) {
            Some((sock, names)) => Some(Target::Socket {
                file: dentry_name(&Raw { bytes: names, ..*r }).into(),
                connection: Some(sock.connection().into()),
                state: Some(sock.state().into()),
            }),
            None => Some(Target::Unresolved),
        },
        // A socket the kernel side could not read: still a socket.
        TK_DENTRY if r.magic == SOCKFS => Some(Target::Socket {
            file: dentry_name(r).into(),
            connection: None,
            state: None,
        }),
        TK_DENTRY => Some(Target::File(dentry_name(r).into())),
        TK_USTR => {
            // The copy may lack its NUL when cut at the record's size.
            let end = r.bytes.iter().position(|&b| b == 0);
            let mut s = text(&r.bytes[..end.unwrap_or(r.bytes.len())]);
            if end.is_none() {
                s.push('…');
            }
            Some(Target::File(s.into()))
        }
        _ => Some(Target::Unresolved),
    }
}

/// Path bytes as text: kernel names are bytes, not UTF-8; control characters
/// in them could rewrite a terminal.
fn text(b: &[u8]) -> String {
    printable(b)
}

fn dentry_name(r: &Raw) -> String {
    // NUL-terminated names, leaf first; an anonymous file's name may be empty.
    let mut names: Vec<String> = r.bytes.split(|&b| b == 0).map(text).collect();
    if r.bytes.last() == Some(&0) {
        names.pop();
    }
    let pseudo = r.flags & TF_PSEUDO != 0;
    if pseudo && names.len() == 1 {
        return anonymous(r.magic, r.ino, &names[0]);
    }
    let mut path = String::new();
    if r.flags & TF_LONG != 0 || pseudo {
        // Above what was walked: too deep to walk, or a dentry cut off from
        // its mount (a file opened by handle). Not a guess at what it is.
        path.push('…');
    }
    for n in names.iter().rev() {
        path.push('/');
        path.push_str(n);
    }
    if path.is_empty() {
        path.push('/');
    }
    if r.flags & TF_DELETED != 0 {
        path.push_str(" (deleted)");
    }
    path
}

/// The kind of an anonymous file, as /proc/PID/fd names it.
fn anonymous(magic: u32, ino: u64, name: &str) -> String {
    match magic {
        PIPEFS => format!("pipe:[{ino}]"),
        SOCKFS => format!("socket:[{ino}]"),
        ANON_INODE_FS if !name.is_empty() => format!("anon_inode:{name}"),
        ANON_INODE_FS => format!("anon_inode:[{ino}]"),
        PIDFS => "anon_inode:[pidfd]".to_string(),
        NSFS => format!("nsfs:[{ino}]"),
        // memfd_create()'s files are named "memfd:NAME" on an internal tmpfs.
        TMPFS if name.starts_with("memfd:") => name.to_string(),
        TMPFS => format!("/{name} (deleted)"),
        _ if !name.is_empty() => format!("anon:{name}"),
        _ => format!("anon:[{ino}]"),
    }
}

/// Names by the record they come from, so a thread still on the same file
/// costs a hash of its record at each pass, not a path built and hashed
/// again; samples naming the same file share one Arc.
#[derive(Default)]
pub struct Interner {
    seen: HashMap<u64, Vec<(Key, Arc<Target>)>>,
}

/// A record's parts, owned.
struct Key {
    kind: u8,
    flags: u8,
    magic: u32,
    ino: u64,
    bytes: Box<[u8]>,
}

impl Key {
    fn matches(&self, r: &Raw) -> bool {
        (self.kind, self.flags, self.magic, self.ino) == (r.kind, r.flags, r.magic, r.ino)
            && *self.bytes == *r.bytes
    }
}

impl Interner {
    /// The target a record describes (see `target`), shared.
    pub fn get(&mut self, r: &Raw) -> Option<Arc<Target>> {
        if r.kind == TK_NONE {
            return None;
        }
        let mut h = std::collections::hash_map::DefaultHasher::new();
        (r.kind, r.flags, r.magic, r.ino, r.bytes).hash(&mut h);
        let same = self.seen.entry(h.finish()).or_default();
        if let Some((_, t)) = same.iter().find(|(k, _)| k.matches(r)) {
            return Some(t.clone());
        }
        let t = Arc::new(target(r)?);
        let key = Key {
            kind: r.kind,
            flags: r.flags,
            magic: r.magic,
            ino: r.ino,
            bytes: r.bytes.into(),
        };
        same.push((key, t.clone()));
        Some(t)
    }

    /// Forgets names nothing else holds (call between passes).
    pub fn trim(&mut self) {
        self.seen.retain(|_, v| {
            v.retain(|(_, t)| Arc::strong_count(t) > 1);
            !v.is_empty()
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn dentry(flags: u8, magic: u32, ino: u64, bytes: &[u8]) -> String {
        let r = Raw {
            kind: TK_DENTRY,
            flags,
            magic,
            ino,
            bytes,
        };
        match target(&r) {
            Some(t) => t.file().expect("a name").to_string(),
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn sockets_carry_their_connection() {
        let mut bytes = socket::tests::record(
            2,
            1,
            6,
            1,
            (&[10, 0, 0, 1], 5432),
            (&[10, 0, 0, 2], 39856),
            b"",
            b"",
        );
        bytes.extend_from_slice(b"TCP\0");
        let r = Raw {
            kind: TK_DENTRY,
            flags: TF_PSEUDO | TF_SOCK,
            magic: SOCKFS,
            ino: 77,
            bytes: &bytes,
        };
        assert_eq!(
            target(&r),
            Some(Target::Socket {
                file: "socket:[77]".into(),
                connection: Some("TCP 10.0.0.1:5432->10.0.0.2:39856".into()),
                state: Some("ESTABLISHED".into()),
            })
        );
        let cut = Raw {
            bytes: &bytes[..40],
            ..r
        };
        assert_eq!(
            target(&cut),
            Some(Target::Unresolved),
            "a short record names nothing"
        );
        let unread = Raw {
            flags: TF_PSEUDO,
            bytes: b"TCP\0",
            ..r
        };
        assert_eq!(
            target(&unread),
            Some(Target::Socket {
                file: "socket:[77]".into(),
                connection: None,
                state: None,
            }),
            "a socket whose connection could not be read is still a socket"
        );
    }

    #[test]
    fn paths_are_joined_root_first() {
        assert_eq!(
            dentry(0, 0xef53, 12, b"1259\0base\0pgdata\0var\0"),
            "/var/pgdata/base/1259"
        );
        assert_eq!(
            dentry(TF_DELETED, 0xef53, 12, b"old.log\0tmp\0"),
            "/tmp/old.log (deleted)"
        );
        assert_eq!(dentry(TF_LONG, 0xef53, 12, b"f\0d\0"), "…/d/f");
        assert_eq!(dentry(0, 0xef53, 2, b""), "/", "the root directory itself");
    }

    #[test]
    fn anonymous_files_show_their_kind() {
        assert_eq!(dentry(TF_PSEUDO, PIPEFS, 4711, b"\0"), "pipe:[4711]");
        assert_eq!(dentry(TF_PSEUDO, SOCKFS, 99, b"TCP\0"), "socket:[99]");
        assert_eq!(
            dentry(TF_PSEUDO, ANON_INODE_FS, 7, b"[eventpoll]\0"),
            "anon_inode:[eventpoll]"
        );
        assert_eq!(dentry(TF_PSEUDO, TMPFS, 5, b"memfd:wal\0"), "memfd:wal");
        assert_eq!(
            dentry(TF_PSEUDO, TMPFS, 5, b"SYSV00000000\0"),
            "/SYSV00000000 (deleted)"
        );
        assert_eq!(dentry(TF_PSEUDO, PIDFS, 5, b"\0"), "anon_inode:[pidfd]");
        // A disconnected dentry with names below it is a path cut short.
        assert_eq!(dentry(TF_PSEUDO, 0xef53, 5, b"f\0d\0"), "…/d/f");
    }

    #[test]
    fn path_arguments_and_failures() {
        let r = |kind, bytes: &'static [u8]| {
            target(&Raw {
                kind,
                bytes,
                ..Raw::default()
            })
        };
        assert_eq!(
            r(TK_USTR, b"data/x.csv\0junk"),
            Some(Target::File("data/x.csv".into()))
        );
        assert_eq!(
            r(TK_USTR, b"/very/long"),
            Some(Target::File("/very/long…".into()))
        );
        assert_eq!(r(TK_USTR, b"a\nb\0"), Some(Target::File("a\\nb".into())));
        assert_eq!(r(TK_FAIL, b""), Some(Target::Unresolved));
        assert_eq!(r(TK_NONE, b""), None);
        assert_eq!(r(77, b""), Some(Target::Unresolved), "an unknown kind is no name");
    }

    #[test]
    fn interner_shares_and_trims() {
        let mut i = Interner::default();
        let raw = |bytes| Raw {
            kind: TK_DENTRY,
            bytes,
            ..Raw::default()
        };
        let a = i.get(&raw(b"x\0")).unwrap();
        let b = i.get(&raw(b"x\0")).unwrap();
        assert!(Arc::ptr_eq(&a, &b));
        assert_eq!(*a, Target::File("/x".into()));
        let c = i.get(&raw(b"y\0")).unwrap();
        assert_eq!(*c, Target::File("/y".into()));
        assert_eq!(i.get(&Raw::default()), None, "no file");
        drop((a, b));
        i.trim();
        assert_eq!(i.seen.len(), 1, "only the name still held");
    }
}
