//! What one process maps, captured while it lives and kept after it exits, so
//! its addresses still normalize (to a binary and file offset) once it is gone.

use std::path::PathBuf;
use std::sync::Arc;

use super::binary::{Binaries, Binary};
use super::maps::{self, MapKind};
use super::perf_map::PerfMap;

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
    maps: Vec<Mapping>,
    perf_map: PerfMap,
}

impl Process {
    pub fn new(pid: u32, binaries: &mut Binaries) -> Self {
        let mut p = Process {
            pid,
            maps: Vec::new(),
            perf_map: PerfMap::for_pid(pid),
        };
        p.refresh(binaries);
        p
    }

    /// Re-reads the maps (after a dlopen, say). A process that is gone keeps
    /// what was read while it lived.
    pub fn refresh(&mut self, binaries: &mut Binaries) {
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
        }
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
