//! What a thread's program itself says the thread waits on: PostgreSQL's
//! wait events (`pg`), with no configuration.
//!
//! Userspace finds the processes whose executable publishes a wait state and
//! registers, per process, where it lives (`Registration`, the BPF map
//! `app_procs`); the task iterator reads it from the process's memory at each
//! sampling pass, so the program pays nothing on its own hot paths. A child
//! forked without an exec (a PostgreSQL backend, from its postmaster) is
//! covered by its parent's registration from its first sample on.

pub mod pg;
mod pg_events;

use std::collections::{HashMap, HashSet};
use std::os::unix::ffi::OsStrExt;
use std::path::Path;
use std::sync::Arc;

use crate::model::{printable, AppWait};
use crate::symbols::maps::{self, MapKind};
use crate::symbols::{exe_id, stat_fields};

// task_sample.app_flags (src/bpf/xtop.h).
pub const AF_FOUND: u8 = 1;
pub const AF_WAIT: u8 = 2;
pub const AF_STATE: u8 = 4;

/// The backend type xtop gives the postmaster (no BackendType's number).
const POSTMASTER: u32 = u32::MAX - 1;

/// Where one process keeps its wait state (`struct app_proc` in xtop.h).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Registration {
    pub tgid: u32,
    pub wait_ptr: u64,
    pub wait_off: u64,
    pub state_addr: u64,
    pub start_code: u64,
    pub exe_ino: u64,
}

impl Registration {
    /// The BPF map value: five native-endian u64.
    pub fn value(&self) -> [u8; 40] {
        let mut v = [0u8; 40];
        for (i, x) in [
            self.wait_ptr,
            self.wait_off,
            self.state_addr,
            self.start_code,
            self.exe_ino,
        ]
        .iter()
        .enumerate()
        {
            v[i * 8..i * 8 + 8].copy_from_slice(&x.to_ne_bytes());
        }
        v
    }
}

/// What a process's program is, for this module.
#[derive(Clone, Debug)]
pub enum Program {
    /// Publishes no wait state xtop knows of.
    Other,
    /// A PostgreSQL server process; `postmaster` when its parent runs
    /// another program (PostgreSQL has no backend type for it: it says
    /// "not initialized").
    Postgres { bin: Arc<pg::Binary>, postmaster: bool },
    /// A PostgreSQL server whose wait state cannot be read (see the warning).
    Unreadable,
}

#[derive(Default)]
pub struct AppWatch {
    pass: u64,
    /// By executable (device, inode): probed once per binary.
    binaries: HashMap<(u64, u64), Program>,
    /// Parents registered on behalf of their children since the last sweep.
    parents: HashSet<u32>,
    pending: Vec<Registration>,
    warnings: Vec<String>,
    /// One Arc per distinct value, so samples share them.
    values: HashMap<(Option<u32>, u8, u32, u32), Arc<AppWait>>,
}

/// (parent pid, mm start_code) from /proc/PID/stat (fields 4 and 26).
fn parent_and_start_code(pid: u32) -> Option<(u32, u64)> {
    let f = stat_fields(pid)?;
    Some((u32::try_from(*f.get(4 - 3)?).ok()?, *f.get(26 - 3)?))
}

impl AppWatch {
    /// Looks at every running process once (at startup), so that servers
    /// already running are read from the first pass on.
    pub fn scan(&mut self) {
        let Ok(dir) = std::fs::read_dir("/proc") else {
            return;
        };
        for e in dir.flatten() {
            if let Some(pid) = e.file_name().to_str().and_then(|n| n.parse().ok()) {
                self.inspect(pid);
            }
        }
    }

    pub fn begin_pass(&mut self) {
        self.pass += 1;
        let pass = self.pass;
        if pass % 16 == 0 {
            self.parents.clear();
        }
        if self.values.len() > 4096 {
            self.values.clear();
        }
    }

    /// The program of process `tgid`, looked at now: the sampler asks once
    /// per process and keeps the answer with the process's other facts.
    pub fn program(&mut self, tgid: u32, kthread: bool) -> Program {
        if kthread {
            return Program::Other;
        }
        self.inspect(tgid)
    }

    /// What a sample says, given its process's program and the record's
    /// app fields: None where the program publishes nothing.
    pub fn value(&mut self, program: &Program, flags: u8, wait: u32, state: u32) -> Option<Arc<AppWait>> {
        let (bin, postmaster) = match program {
            Program::Other => return None,
            Program::Unreadable => return Some(self.intern(None, 0, 0, 0, || AppWait::Unread)),
            Program::Postgres { bin, postmaster } => (bin, *postmaster),
        };
        if flags & AF_WAIT == 0 {
            return Some(self.intern(None, 0, 0, 0, || AppWait::Unread));
        }
        let state = match flags & AF_STATE != 0 {
            // B_INVALID, which only the postmaster keeps.
            true if state == 0 && postmaster => POSTMASTER,
            true => state,
            // 12 has no MyBackendType, but its postmaster is known as such.
            false if postmaster => POSTMASTER,
            false => u32::MAX,
        };
        let tables = bin.tables();
        Some(self.intern(bin.major, flags, wait, state, || {
            let (class, event) = pg::wait_names(tables, wait);
            let state = match state {
                POSTMASTER => "postmaster".to_string(),
                s => pg::backend_type(tables, s),
            };
            AppWait::Known {
                class: class.into(),
                event: event.into(),
                state: state.into(),
            }
        }))
    }

    fn intern(
        &mut self,
        major: Option<u32>,
        flags: u8,
        wait: u32,
        state: u32,
        make: impl FnOnce() -> AppWait,
    ) -> Arc<AppWait> {
        self.values
            .entry((major, flags & AF_WAIT, wait, state))
            .or_insert_with(|| Arc::new(make()))
            .clone()
    }

    /// Registrations for the BPF side since the last call.
    pub fn take_pending(&mut self) -> Vec<Registration> {
        std::mem::take(&mut self.pending)
    }

    /// Warnings (one per binary) since the last call.
    pub fn take_warnings(&mut self) -> Vec<String> {
        std::mem::take(&mut self.warnings)
    }

    /// Probes the process's executable (once per binary) and, for a server,
    /// queues registrations for it and for its parent running the same
    /// binary (the postmaster), which covers the siblings forked after it.
    fn inspect(&mut self, pid: u32) -> Program {
        let Some(id) = exe_id(pid) else {
            return Program::Other;
        };
        let program = match self.binaries.get(&id) {
            Some(p) => p.clone(),
            None => {
                let p = self.probe(pid);
                self.binaries.insert(id, p.clone());
                p
            }
        };
        let Program::Postgres { bin, .. } = program else {
            return program;
        };
        let Some((ppid, start_code)) = parent_and_start_code(pid) else {
            return Program::Postgres {
                bin,
                postmaster: false,
            };
        };
        self.register(pid, id, start_code, &bin);
        let mut postmaster = true;
        if ppid > 1 && exe_id(ppid) == Some(id) {
            postmaster = false;
            if self.parents.insert(ppid) {
                if let Some((_, parent_code)) = parent_and_start_code(ppid) {
                    self.register(ppid, id, parent_code, &bin);
                }
            }
        }
        Program::Postgres { bin, postmaster }
    }

    fn probe(&mut self, pid: u32) -> Program {
        let shown = std::fs::read_link(format!("/proc/{pid}/exe"))
            .map(|p| printable(p.as_os_str().as_bytes()))
            .unwrap_or_default();
        match pg::probe(Path::new(&format!("/proc/{pid}/exe")), &shown) {
            pg::Probe::Other => Program::Other,
            pg::Probe::Unreadable(why) => {
                self.warnings.push(why);
                Program::Unreadable
            }
            pg::Probe::Server(bin) => {
                if bin.tables().is_none() {
                    let (lo, hi) = pg::known_majors();
                    let v = pg::said_version(&bin.version);
                    self.warnings.push(format!(
                        "{shown} is PostgreSQL {v}: xtop has wait event names for {lo} to {hi}, \
                         so its events are shown by number (class:#n)"
                    ));
                }
                Program::Postgres {
                    bin: Arc::new(bin),
                    postmaster: false,
                }
            }
        }
    }

    /// Queues where `pid` keeps its wait state: the link-time addresses plus
    /// the load bias of its executable mapping.
    fn register(&mut self, pid: u32, (_, ino): (u64, u64), start_code: u64, bin: &pg::Binary) {
        let Ok(exe) = std::fs::read_link(format!("/proc/{pid}/exe")) else {
            return;
        };
        let exe = exe.as_os_str().as_bytes();
        let exe = exe.strip_suffix(b" (deleted)").unwrap_or(exe);
        let Ok(text) = std::fs::read_to_string(format!("/proc/{pid}/maps")) else {
            return;
        };
        let bias = maps::parse(&text).into_iter().find_map(|m| match &m.kind {
            MapKind::File { path, .. } if path.as_bytes() == exe => bin.bias(m.start, m.offset),
            _ => None,
        });
        let Some(bias) = bias else {
            return;
        };
        self.pending.push(Registration {
            tgid: pid,
            wait_ptr: bin.wait_sym.wrapping_add(bias),
            wait_off: bin.wait_off,
            state_addr: bin.type_sym.map_or(0, |a| a.wrapping_add(bias)),
            start_code,
            exe_ino: ino,
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn this_process_is_not_a_server() {
        let mut w = AppWatch::default();
        w.begin_pass();
        let me = std::process::id();
        assert!(matches!(w.program(me, false), Program::Other));
        assert!(w.take_pending().is_empty());
        assert!(w.value(&Program::Other, AF_FOUND | AF_WAIT, 1, 1).is_none());
        assert_eq!(
            w.value(&Program::Unreadable, 0, 0, 0).as_deref(),
            Some(&AppWait::Unread)
        );
        let (ppid, start_code) = parent_and_start_code(me).unwrap();
        assert!(ppid > 0 && start_code > 0, "root reads start_code");
    }

    #[test]
    fn registration_is_the_bpf_struct() {
        let r = Registration {
            tgid: 1,
            wait_ptr: 0x1122,
            wait_off: 676,
            state_addr: 3,
            start_code: 4,
            exe_ino: 5,
        };
        let v = r.value();
        assert_eq!(&v[..8], &0x1122u64.to_ne_bytes());
        assert_eq!(&v[8..16], &676u64.to_ne_bytes());
        assert_eq!(&v[32..], &5u64.to_ne_bytes());
    }
}
