//! What one process maps, captured while it lives and kept after it exits, so
//! its addresses still normalize (to a binary and file offset) once it is gone.

use std::path::PathBuf;
use std::sync::Arc;

use super::binary::{Binaries, Binary};
use super::maps::{self, MapKind};
use super::perf_map::PerfMap;
use crate::unwind::{self, End, ProcessUnwinder, Regs, Unwinder, Unwound, Window};

/// Where an address is, independent of where the process happened to map it.
#[derive(Clone, Debug)]
pub enum Loc {
    File {
        bin: Arc<Binary>,
        offset: u64,
        mapped: Arc<PathBuf>,
    },
    /// Offset into the vDSO: the same code in every process.
    Vdso(u64),
    /// Anonymous executable memory, named by the process's perf map if it has one.
    Jit(u64, Option<Arc<str>>),
    /// Mapped nowhere we know of: garbage or a mapping already gone.
    Unmapped(u64),
    /// A signal trampoline (`unwind::SIGNAL_FRAME`).
    Signal,
}

enum Region {
    File { bin: Arc<Binary>, mapped: Arc<PathBuf> },
    Vdso,
    Anon,
    Other,
}

struct Mapping {
    start: u64,
    end: u64,
    offset: u64,
    region: Region,
}

pub struct Process {
    pid: u32,
    /// Start time (clock ticks) of the process first read: a pid now running
    /// something else must not lend it its maps.
    started: Option<u64>,
    /// (dev, inode) of the executable when the maps were read: an exec
    /// replaces every mapping without a new pid or start time.
    exe: Option<(u64, u64)>,
    maps: Vec<Mapping>,
    perf_map: PerfMap,
    /// Which CFI covers which address, built from `maps` when first needed.
    modules: Option<ProcessUnwinder>,
    /// The sampling pass in which an exec was last looked for.
    checked_in: u64,
    /// The sampling pass in which the maps were last re-read for an address
    /// none of them holds.
    reread_in: u64,
}

impl Process {
    pub fn new(pid: u32, binaries: &mut Binaries) -> Self {
        let mut p = Process {
            pid,
            started: start_ticks(pid),
            exe: None,
            maps: Vec::new(),
            perf_map: PerfMap::for_pid(pid),
            modules: None,
            checked_in: 0,
            reread_in: 0,
        };
        p.refresh(binaries);
        p
    }

    /// Re-reads the maps (after a dlopen, say). A process that is gone keeps
    /// what was read while it lived.
    pub fn refresh(&mut self, binaries: &mut Binaries) {
        if self.started.is_none() || start_ticks(self.pid) != self.started {
            return;
        }
        let exe = exe_id(self.pid);
        let Ok(text) = std::fs::read_to_string(format!("/proc/{}/maps", self.pid)) else {
            return;
        };
        let maps: Vec<Mapping> = maps::parse(&text)
            .into_iter()
            .map(|m| {
                let region = match &m.kind {
                    MapKind::File { path, .. } => {
                        let mapped =
                            PathBuf::from(format!("/proc/{}/map_files/{:x}-{:x}", self.pid, m.start, m.end));
                        match binaries.get(&mapped, path) {
                            Some(bin) => Region::File {
                                bin,
                                mapped: Arc::new(mapped),
                            },
                            None => Region::Other,
                        }
                    }
                    MapKind::Vdso => Region::Vdso,
                    MapKind::Anon => Region::Anon,
                    MapKind::Other => Region::Other,
                };
                Mapping {
                    start: m.start,
                    end: m.end,
                    offset: m.offset,
                    region,
                }
            })
            .collect();
        // A read that raced with the exit comes back empty: keep the old maps.
        if !maps.is_empty() {
            self.maps = maps;
            self.exe = exe;
            self.modules = None;
        }
    }

    /// Whether the process (still alive) now runs another executable than
    /// when its maps were read: they are stale, whatever the addresses.
    pub fn exec_changed(&self) -> bool {
        self.exe.is_some() && exe_id(self.pid).is_some_and(|e| Some(e) != self.exe)
    }

    /// The executable mappings with CFI, for the unwinder: each binary to be
    /// read from a file that is still the one mapped (see `Binary::source`),
    /// and the vDSO.
    pub fn unwind_mappings(&self) -> Vec<unwind::Mapping> {
        self.maps
            .iter()
            .filter_map(|m| match &m.region {
                Region::File { bin, mapped } => Some(unwind::Mapping {
                    start: m.start,
                    end: m.end,
                    offset: m.offset,
                    key: bin.key,
                    source: unwind::Source::File(bin.source(mapped)?),
                }),
                Region::Vdso => unwind::vdso::mapping(m.start, m.end),
                _ => None,
            })
            .collect()
    }

    /// Brings the maps up to date for sampling pass `pass`, as far as one
    /// pass needs: an exec (which replaces them all) is looked for once a pass.
    pub fn begin_use(&mut self, binaries: &mut Binaries, pass: u64) {
        if self.checked_in != pass {
            self.checked_in = pass;
            if self.exec_changed() {
                self.refresh(binaries);
                self.reread_in = pass;
            }
        }
    }

    /// Re-reads the maps because an address no mapping holds may be code
    /// mapped since they were read (a dlopen, a new JIT region), at most once
    /// a pass: an address that stays unmapped must not re-read them per stack.
    /// Whether they were re-read.
    pub fn reread_for_unmapped(&mut self, binaries: &mut Binaries, pass: u64) -> bool {
        if self.reread_in == pass {
            return false;
        }
        self.reread_in = pass;
        self.refresh(binaries);
        true
    }

    /// The stack of one of this process's threads, in sampling pass `pass`.
    pub fn unwind(
        &mut self,
        binaries: &mut Binaries,
        unwinder: &mut Unwinder,
        regs: &Regs,
        window: Window,
        pass: u64,
    ) -> Unwound {
        self.begin_use(binaries, pass);
        let mut u = self.unwind_once(unwinder, regs, window);
        if u.end != End::Root
            && u.addrs.iter().any(|&a| self.locate(a).is_none())
            && self.reread_for_unmapped(binaries, pass)
            && self.modules.is_none()
        {
            u = self.unwind_once(unwinder, regs, window);
        }
        u
    }

    fn unwind_once(&mut self, unwinder: &mut Unwinder, regs: &Regs, window: Window) -> Unwound {
        if self.modules.is_none() {
            self.modules = Some(unwinder.process(&self.unwind_mappings()));
        }
        let modules = self.modules.as_ref().expect("built above");
        unwinder.unwind(modules, regs, window)
    }

    /// Where `addr` is, or None if no known mapping holds it.
    pub fn locate(&mut self, addr: u64) -> Option<Loc> {
        let i = self.maps.partition_point(|m| m.start <= addr).checked_sub(1)?;
        let m = &self.maps[i];
        if addr >= m.end {
            return None;
        }
        Some(match &m.region {
            Region::File { bin, mapped } => Loc::File {
                bin: bin.clone(),
                offset: addr - m.start + m.offset,
                mapped: mapped.clone(),
            },
            Region::Vdso => Loc::Vdso(addr - m.start),
            Region::Anon => Loc::Jit(addr, self.perf_map.find(addr)),
            Region::Other => Loc::Unmapped(addr),
        })
    }
}

/// The (device, inode) of a process's executable.
pub(crate) fn exe_id(pid: u32) -> Option<(u64, u64)> {
    use std::os::unix::fs::MetadataExt;
    let meta = std::fs::metadata(format!("/proc/{pid}/exe")).ok()?;
    Some((meta.dev(), meta.ino()))
}

/// The numeric fields of /proc/PID/stat from field 3 (the state) on: index
/// `n - 3` is field `n`.
pub(crate) fn stat_fields(pid: u32) -> Option<Vec<u64>> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // The command name (field 2) may hold spaces and parentheses: skip past its end.
    let after_comm = &stat[stat.rfind(')')? + 1..];
    // The state letter is not a number: keep the indexes, as 0.
    Some(
        after_comm
            .split_whitespace()
            .map(|f| f.parse().unwrap_or(0))
            .collect(),
    )
}

/// Field 22 of /proc/PID/stat: when the process started, in clock ticks since boot.
fn start_ticks(pid: u32) -> Option<u64> {
    stat_fields(pid)?.get(22 - 3).copied()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn start_time_of_a_live_process_only() {
        let own = start_ticks(std::process::id());
        assert!(own.is_some());
        assert_eq!(own, start_ticks(std::process::id()));
        assert_eq!(start_ticks(u32::MAX), None);
    }

    #[test]
    fn an_exec_is_noticed_and_the_maps_reread() {
        use std::process::Command;
        use std::time::{Duration, Instant};

        let mut child = Command::new("/bin/sh")
            .args(["-c", "read x; exec /bin/sleep 30"])
            .stdin(std::process::Stdio::piped())
            .spawn()
            .expect("spawn sh");
        let pid = child.id();
        let sh = std::fs::canonicalize("/bin/sh").expect("sh path");
        let exe_is =
            |p: &std::path::Path| std::fs::read_link(format!("/proc/{pid}/exe")).ok().as_deref() == Some(p);
        let wait_for = |p: &std::path::Path| {
            let deadline = Instant::now() + Duration::from_secs(10);
            while !exe_is(p) && Instant::now() < deadline {
                std::thread::sleep(Duration::from_millis(5));
            }
            exe_is(p)
        };
        let mut binaries = Binaries::new();
        let shell_started = wait_for(&sh);
        let mut p = Process::new(pid, &mut binaries);
        let before = p.exec_changed();
        drop(child.stdin.take()); // `read` returns: the shell execs sleep.
        let slept = wait_for(&std::fs::canonicalize("/bin/sleep").expect("sleep path"));
        let after_exec = p.exec_changed();
        p.refresh(&mut binaries);
        let after_refresh = p.exec_changed();
        let _ = child.kill();
        let _ = child.wait();
        assert!(shell_started && slept);
        assert!(!before);
        assert!(after_exec);
        assert!(!after_refresh);
    }
}
