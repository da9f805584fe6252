//! PostgreSQL: which binaries are PostgreSQL servers, where their wait state
//! lives, and what its numbers are called in each major version.
//!
//! Every backend keeps its current wait event in a 32-bit `wait_event_info`
//! (class in the high byte, event in the rest) behind the exported pointer
//! `my_wait_event_info` (PostgreSQL 14 and later; 12 and 13 keep it in the
//! backend's PGPROC, behind the exported `MyProc`), and its kind of process
//! in the exported `MyBackendType` (13 and later). The names are enum
//! positions, so they come from PostgreSQL's own sources: `pg_events.rs`,
//! written by `tools/pg_wait_events.py`.

use std::fs::File;
use std::path::Path;

use object::read::elf::{ElfFile64, ProgramHeader};
use object::{Object, ObjectSection, ObjectSymbol, ReadCache};

use super::pg_events::TABLES;

/// One major version's names by number (enum position within each class).
pub struct Tables {
    pub major: u32,
    pub activity: &'static [&'static str],
    pub client: &'static [&'static str],
    pub ipc: &'static [&'static str],
    pub timeout: &'static [&'static str],
    pub io: &'static [&'static str],
    /// By tranche id: the individual LWLocks, then the built-in tranches;
    /// ids past the end belong to extensions.
    pub lwlock: &'static [&'static str],
    /// By LockTagType.
    pub lock: &'static [&'static str],
    /// By BackendType, as pg_stat_activity.backend_type shows them.
    pub backend_type: &'static [&'static str],
}

/// The exported symbol every PostgreSQL server since 14 has.
pub const WAIT_SYMBOL: &str = "my_wait_event_info";
const TYPE_SYMBOL: &str = "MyBackendType";
/// Before 14: the backend's PGPROC, which holds `wait_event_info`.
const PROC_SYMBOL: &str = "MyProc";

/// `offsetof(PGPROC, wait_event_info)` on 64-bit Linux, by major version
/// (PGPROC is part of PostgreSQL's ABI, kept within a major). Measured by
/// compiling `offsetof` against each configured release tree (12.2, 13.16),
/// and checked against Ubuntu's 12.22 and Debian's 13.23 servers, whose
/// backends read here as pg_stat_activity shows them.
const PGPROC_WAIT_OFFSET: &[(u32, u64)] = &[(12, 676), (13, 684)];

/// A PostgreSQL server binary.
#[derive(Debug, PartialEq, Eq)]
pub struct Binary {
    /// "15.18", from the binary's own version string ("" if not found).
    pub version: String,
    pub major: Option<u32>,
    /// Link-time addresses of the pointer to `wait_event_info` (the
    /// pointer `my_wait_event_info`, or `MyProc` with `wait_off`) and of
    /// `MyBackendType`.
    pub wait_sym: u64,
    /// Where `wait_event_info` is past what `wait_sym` points to.
    pub wait_off: u64,
    pub type_sym: Option<u64>,
    /// Executable loadable segments as (file offset, address, file size).
    exec_loads: Vec<(u64, u64, u64)>,
}

/// What a binary is, as far as xtop's PostgreSQL support goes.
#[derive(Debug, PartialEq, Eq)]
pub enum Probe {
    Other,
    Server(Binary),
    /// A PostgreSQL server xtop cannot read the wait state of, and why.
    Unreadable(String),
}

/// Whether a file name is one PostgreSQL servers are installed under.
fn named_like_server(path: &str) -> bool {
    let base = path.rsplit('/').next().unwrap_or(path);
    let base = base.strip_suffix(" (deleted)").unwrap_or(base);
    base == "postgres" || base == "postmaster"
}

/// Reads what xtop needs from the ELF file at `path` (`shown` names it in
/// messages). Only the dynamic symbol table is read for binaries that turn
/// out to be something else.
pub fn probe(path: &Path, shown: &str) -> Probe {
    let Ok(file) = File::open(path) else {
        return Probe::Other;
    };
    let cache = ReadCache::new(file);
    let Ok(elf) = ElfFile64::<object::LittleEndian, _>::parse(&cache) else {
        return Probe::Other;
    };
    // The dynamic symbols first: every dynamically linked server exports
    // these to its extensions. The full table (large in unstripped binaries
    // of anything) only for files named like a server: a static build.
    let full = named_like_server(shown);
    let find = |name: &str| {
        let hit = |s: &object::read::elf::ElfSymbol64<'_, '_, object::LittleEndian, &ReadCache<File>>| {
            s.name() == Ok(name) && s.is_definition()
        };
        elf.dynamic_symbols()
            .find(hit)
            .or_else(|| if full { elf.symbols().find(hit) } else { None })
            .map(|s| s.address())
    };
    let version = || {
        elf.section_by_name(".rodata")
            .and_then(|s| s.data().ok())
            .and_then(version_in)
            .unwrap_or_default()
    };
    let (wait_sym, wait_off, version) = match (find(WAIT_SYMBOL), find(PROC_SYMBOL)) {
        (Some(sym), _) => (sym, 0, version()),
        (None, Some(proc_sym)) => {
            let version = version();
            if version.is_empty() && !full {
                return Probe::Other;
            }
            let major = major_of(&version);
            let Some(&(_, off)) = PGPROC_WAIT_OFFSET.iter().find(|(m, _)| Some(*m) == major) else {
                return Probe::Unreadable(format!(
                    "{shown} is PostgreSQL {}: xtop reads the wait events of 12 and later, \
                     so its threads' app_wait is '?'",
                    said_version(&version)
                ));
            };
            (proc_sym, off, version)
        }
        (None, None) if full => {
            return Probe::Unreadable(format!(
                "{shown} looks like a PostgreSQL server but exports neither {WAIT_SYMBOL} nor \
                 {PROC_SYMBOL} (stripped or static): its threads' app_wait is '?'"
            ))
        }
        (None, None) => return Probe::Other,
    };
    let endian = elf.endian();
    let exec_loads = elf
        .elf_program_headers()
        .iter()
        .filter(|p| p.p_type(endian) == object::elf::PT_LOAD && p.p_flags(endian) & object::elf::PF_X != 0)
        .map(|p| (p.p_offset(endian), p.p_vaddr(endian), p.p_filesz(endian)))
        .collect();
    Probe::Server(Binary {
        major: major_of(&version),
        version,
        wait_sym,
        wait_off,
        type_sym: find(TYPE_SYMBOL),
        exec_loads,
    })
}

/// A version as warnings say it.
pub fn said_version(version: &str) -> &str {
    if version.is_empty() {
        "of an unknown version"
    } else {
        version
    }
}

/// 15 of "15.18", 17 of "17beta1".
fn major_of(version: &str) -> Option<u32> {
    version.split(|c: char| !c.is_ascii_digit()).next()?.parse().ok()
}

/// The version in PostgreSQL's `postgres (PostgreSQL) 15.18` string.
fn version_in(data: &[u8]) -> Option<String> {
    const MARK: &[u8] = b"(PostgreSQL) ";
    let at = data.windows(MARK.len()).position(|w| w == MARK)? + MARK.len();
    let v: Vec<u8> = data[at..]
        .iter()
        .take(32)
        .take_while(|b| b.is_ascii_alphanumeric() || **b == b'.')
        .copied()
        .collect();
    (!v.is_empty()).then(|| String::from_utf8_lossy(&v).into_owned())
}

impl Binary {
    /// The load bias of the binary in a process that maps the file `offset`
    /// executable at `start`: a link-time address `a` is at `a + bias`.
    pub fn bias(&self, start: u64, offset: u64) -> Option<u64> {
        let &(p_offset, p_vaddr, _) = self
            .exec_loads
            .iter()
            .find(|&&(o, _, size)| offset >= o & !0xfff && offset < o + size.max(1))?;
        Some(start.wrapping_sub(p_vaddr.wrapping_add(offset).wrapping_sub(p_offset)))
    }

    /// The names of this binary's major version, if xtop has them.
    pub fn tables(&self) -> Option<&'static Tables> {
        TABLES.iter().find(|t| Some(t.major) == self.major)
    }
}

/// The newest and oldest major versions xtop has names for.
pub fn known_majors() -> (u32, u32) {
    let majors = TABLES.iter().map(|t| t.major);
    (majors.clone().min().unwrap_or(0), majors.max().unwrap_or(0))
}

/// PostgreSQL's name of a wait class (`pgstat_get_wait_event_type`).
fn class_name(class: u8) -> Option<&'static str> {
    Some(match class {
        0x01 => "LWLock",
        0x03 => "Lock",
        0x04 => "BufferPin",
        0x05 => "Activity",
        0x06 => "Client",
        0x07 => "Extension",
        0x08 => "IPC",
        0x09 => "Timeout",
        0x0A => "IO",
        0x0B => "InjectionPoint",
        _ => return None,
    })
}

/// `wait_event_info` as (class, event) in PostgreSQL's names; ("", "") when
/// the backend waits on nothing. A number xtop has no name for is shown as
/// `#n`, never guessed.
pub fn wait_names(tables: Option<&Tables>, info: u32) -> (String, String) {
    if info == 0 {
        return (String::new(), String::new());
    }
    let class = (info >> 24) as u8;
    let id = info & 0xffff;
    let Some(cname) = class_name(class) else {
        return (format!("#{class:#04x}"), format!("#{}", info & 0xff_ffff));
    };
    let list = tables.map(|t| match class {
        0x01 => t.lwlock,
        0x03 => t.lock,
        0x05 => t.activity,
        0x06 => t.client,
        0x08 => t.ipc,
        0x09 => t.timeout,
        0x0A => t.io,
        _ => &[],
    });
    let event = match (class, list) {
        // One event each, named after the class.
        (0x04, _) if id == 0 => "BufferPin".to_string(),
        (0x07, _) if id == 0 => "Extension".to_string(),
        (_, Some(names)) => match names.get(id as usize) {
            Some(n) if !n.is_empty() => n.to_string(),
            // Tranches past the built-in ones are registered by extensions,
            // by a name only the registering backend knows: PostgreSQL
            // itself shows "extension" there.
            None if class == 0x01 => "extension".to_string(),
            _ => format!("#{id}"),
        },
        (_, None) => format!("#{id}"),
    };
    (cname.to_string(), event)
}

/// The backend type's name (`pg_stat_activity.backend_type`); "" unknown.
pub fn backend_type(tables: Option<&Tables>, v: u32) -> String {
    tables
        .and_then(|t| t.backend_type.get(v as usize))
        .map_or_else(String::new, |s| s.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn t(major: u32) -> Option<&'static Tables> {
        TABLES.iter().find(|t| t.major == major)
    }

    #[test]
    fn names_postgresql_15_events_as_pg_stat_activity_does() {
        let n = |info: u32| {
            let (c, e) = wait_names(t(15), info);
            format!("{c}:{e}")
        };
        assert_eq!(n(0x0600_0000), "Client:ClientRead");
        assert_eq!(n(0x0600_0001), "Client:ClientWrite");
        assert_eq!(n(0x0100_0008), "LWLock:WALWrite");
        assert_eq!(n(0x0100_0001), "LWLock:ShmemIndex");
        assert_eq!(n(0x0300_0005), "Lock:transactionid");
        assert_eq!(n(0x0300_0000), "Lock:relation");
        assert_eq!(n(0x0500_000b), "Activity:WalWriterMain");
        assert_eq!(n(0x0500_0004), "Activity:CheckpointerMain");
        assert_eq!(n(0x0400_0000), "BufferPin:BufferPin");
        assert_eq!(n(0x0700_0000), "Extension:Extension");
        assert_eq!(n(0x0100_0000 + 2000), "LWLock:extension");
        assert_eq!(n(0x0100_0000), "LWLock:#0", "a gap in the individual locks");
        assert_eq!(n(0x0600_0000 + 999), "Client:#999");
        assert_eq!(n(0x7f00_0001), "#0x7f:#1");
        assert_eq!(wait_names(t(15), 0), (String::new(), String::new()));
        let io = t(15).unwrap().io;
        assert!(io.contains(&"WALSync") && io.contains(&"DataFileRead"));
    }

    #[test]
    fn each_major_has_its_own_numbers() {
        // IO:WALSync is a different number in each version; 17 renamed it.
        let find = |major, name: &str| t(major).unwrap().io.iter().position(|n| *n == name);
        assert_ne!(find(14, "WALSync"), find(15, "WALSync"));
        assert_eq!(find(17, "WALSync"), None);
        assert!(find(17, "WalSync").is_some());
        assert_eq!(backend_type(t(15), 3), "client backend");
        assert_eq!(backend_type(t(17), 1), "client backend");
        assert_eq!(backend_type(t(15), 999), "");
        assert_eq!(known_majors(), (12, 17));
        // Without tables (an unknown major), numbers only.
        assert_eq!(
            wait_names(None, 0x0600_0000),
            ("Client".to_string(), "#0".to_string())
        );
    }

    #[test]
    fn names_the_events_of_12_and_13() {
        let n = |major, info: u32| {
            let (c, e) = wait_names(t(major), info);
            format!("{c}:{e}")
        };
        // 12 shows the individual LWLocks with their "Lock" suffix and names
        // its tranches where they are registered; 13 dropped the suffix.
        assert_eq!(n(12, 0x0100_0008), "LWLock:WALWriteLock");
        assert_eq!(n(13, 0x0100_0008), "LWLock:WALWrite");
        let lw = t(12).unwrap().lwlock;
        assert!(
            lw.contains(&"buffer_content")
                && lw.contains(&"wal_insert")
                && lw.contains(&"replication_origin")
        );
        assert_eq!(n(12, 0x0600_0000), "Client:ClientRead");
        assert_eq!(n(13, 0x0300_0005), "Lock:transactionid", "13 added frozenid");
        assert_eq!(n(12, 0x0300_0004), "Lock:transactionid");
        assert!(t(12).unwrap().io.contains(&"WALSync"));
        // 12 has no MyBackendType; 13 does.
        assert!(t(12).unwrap().backend_type.is_empty());
        assert_eq!(backend_type(t(13), 3), "client backend");
        for (major, off) in PGPROC_WAIT_OFFSET {
            assert!(t(*major).is_some() && off % 4 == 0);
        }
    }

    #[test]
    fn finds_the_version_string() {
        assert_eq!(
            version_in(b"x\0postgres (PostgreSQL) 15.18 (Debian)\n\0").as_deref(),
            Some("15.18")
        );
        assert_eq!(version_in(b"(PostgreSQL) 17beta1\n").as_deref(), Some("17beta1"));
        assert_eq!(version_in(b"no version"), None);
        assert_eq!(major_of("12.22"), Some(12));
        assert_eq!(major_of("17beta1"), Some(17));
        assert_eq!(major_of(""), None);
        assert!(named_like_server("/usr/lib/postgresql/15/bin/postgres"));
        assert!(named_like_server("/opt/pg/bin/postgres (deleted)"));
        assert!(!named_like_server("/usr/bin/postgres_exporter"));
    }

    #[test]
    fn bias_of_pie_and_fixed_binaries() {
        let b = Binary {
            version: String::new(),
            major: None,
            wait_sym: 0,
            wait_off: 0,
            type_sym: None,
            exec_loads: vec![(0xcd000, 0xcd000, 0x5299a9)],
        };
        assert_eq!(b.bias(0x5555_5562_2000, 0xcd000), Some(0x5555_5555_5000));
        let fixed = Binary {
            exec_loads: vec![(0x1000, 0x401000, 0x1000)],
            ..b
        };
        assert_eq!(fixed.bias(0x401000, 0x1000), Some(0));
        assert_eq!(fixed.bias(0x401000, 0x9000), None);
    }
}
