//! Names for normalized locations, by (binary, file offset): a library's code
//! is parsed once and named once for every process that maps it.

use std::collections::{HashMap, HashSet};
use std::path::PathBuf;
use std::sync::Arc;

use blazesym::symbolize::source::{Elf, Process, Source};
use blazesym::symbolize::{Input, Sym, Symbolized, Symbolizer};
use blazesym::Pid;

use super::binary::Binary;
use super::cache::Bounded;
use super::maps::{self, MapKind};
use super::process::Loc;
use super::MAX_CACHED;
use crate::model::UNKNOWN;

/// Frames for one address: inlined callees first, the containing function last.
pub type Frames = Arc<[Arc<str>]>;

/// Cache key of vDSO offsets, next to binary keys (64-bit hashes: a clash is negligible).
const VDSO_KEY: u64 = u64::MAX;
/// blazesym keeps every ELF it opened; start afresh past this many files.
const MAX_FILES: usize = 512;

pub struct Names {
    symbolizer: Symbolizer,
    files: HashSet<PathBuf>,
    cache: Bounded<(u64, u64), Frames>,
    /// Our own vDSO (start, end): the kernel gives every process the same one.
    own_vdso: Option<(u64, u64)>,
    unknown: Frames,
}

impl Names {
    pub fn new() -> Self {
        let own_vdso = std::fs::read_to_string("/proc/self/maps").ok().and_then(|t| {
            maps::parse(&t)
                .into_iter()
                .find(|m| m.kind == MapKind::Vdso)
                .map(|m| (m.start, m.end))
        });
        Names {
            symbolizer: Symbolizer::new(),
            files: HashSet::new(),
            cache: Bounded::new(MAX_CACHED),
            own_vdso,
            unknown: Arc::new([Arc::from(UNKNOWN)]),
        }
    }

    /// The frames of each location, in order.
    pub fn frames(&mut self, locs: &[Loc]) -> Vec<Frames> {
        let mut fresh: HashMap<(u64, u64), Frames> = HashMap::new();
        let mut wanted: HashMap<u64, (&Loc, Vec<u64>)> = HashMap::new();
        let mut vdso = Vec::new();
        for loc in locs {
            match loc {
                Loc::File { bin, offset, .. } if self.cache.get_mut(&(bin.key, *offset)).is_none() => {
                    wanted.entry(bin.key).or_insert((loc, Vec::new())).1.push(*offset)
                }
                Loc::Vdso(off) if self.cache.get_mut(&(VDSO_KEY, *off)).is_none() => vdso.push(*off),
                _ => {}
            }
        }
        for (key, (loc, offsets)) in wanted {
            let Loc::File { bin, mapped, .. } = loc else {
                continue;
            };
            // No trustworthy file: those frames stay unnamed (and uncached: a live
            // process mapping the same binary may still name them).
            let Some(path) = bin.source(mapped) else {
                continue;
            };
            if let Some(names) = self.symbolize_file(path, &offsets) {
                for (off, f) in offsets.iter().zip(names) {
                    fresh.insert((key, *off), f.unwrap_or_else(|| file_unknown(bin, *off)));
                }
            }
        }
        if let (Some((start, end)), false) = (self.own_vdso, vdso.is_empty()) {
            let addrs: Vec<u64> = vdso.iter().map(|o| start + o).filter(|a| *a < end).collect();
            if addrs.len() == vdso.len() {
                let src = Source::Process(Process::new(Pid::Slf));
                if let Some(names) = self.symbolize(PathBuf::from("[vdso]"), &src, Input::AbsAddr(&addrs)) {
                    for (off, f) in vdso.iter().zip(names) {
                        fresh.insert((VDSO_KEY, *off), f.unwrap_or_else(|| Arc::new(["[vdso]".into()])));
                    }
                }
            }
        }
        let out = locs.iter().map(|loc| self.name(loc, &fresh)).collect();
        for (k, f) in fresh {
            self.cache.insert(k, f);
        }
        out
    }

    fn name(&mut self, loc: &Loc, fresh: &HashMap<(u64, u64), Frames>) -> Frames {
        let key = match loc {
            Loc::File { bin, offset, .. } => (bin.key, *offset),
            Loc::Vdso(off) => (VDSO_KEY, *off),
            Loc::Jit(_, Some(name)) => return Arc::new([name.clone()]),
            Loc::Jit(_, None) | Loc::Unmapped(_) => return self.unknown.clone(),
        };
        if let Some(f) = fresh.get(&key).cloned().or_else(|| self.cache.get(&key)) {
            return f;
        }
        match loc {
            Loc::File { bin, offset, .. } => file_unknown(bin, *offset),
            _ => Arc::new(["[vdso]".into()]),
        }
    }

    /// Names for offsets of one file. Debug info gives the inlined callees, the
    /// symbol table the containing function's full demangled name (line-tables-only
    /// debug info only has its short name).
    fn symbolize_file(&mut self, path: PathBuf, offsets: &[u64]) -> Option<Vec<Option<Frames>>> {
        let src = Source::Elf(Elf::new(path.clone()));
        let mut names = self.symbolize(path.clone(), &src, Input::FileOffset(offsets))?;
        let symtab = Source::Elf(Elf {
            debug_syms: false,
            ..Elf::new(path)
        });
        if let Ok(plain) = self.symbolizer.symbolize(&symtab, Input::FileOffset(offsets)) {
            for (frames, p) in names.iter_mut().zip(plain) {
                if let (Some(f), Symbolized::Sym(sym)) = (frames, p) {
                    let mut v = f.to_vec();
                    if let Some(last) = v.last_mut() {
                        *last = Arc::from(&*sym.name);
                    }
                    *f = v.into();
                }
            }
        }
        Some(names)
    }

    /// Names for a batch of inputs of one source (None: no symbol there); None
    /// when the source cannot be read.
    fn symbolize(
        &mut self,
        file: PathBuf,
        src: &Source,
        input: Input<&[u64]>,
    ) -> Option<Vec<Option<Frames>>> {
        if self.files.insert(file) && self.files.len() > MAX_FILES {
            self.symbolizer = Symbolizer::new();
            self.files.clear();
        }
        let resolved = self.symbolizer.symbolize(src, input).ok()?;
        Some(
            resolved
                .iter()
                .map(|r| match r {
                    Symbolized::Sym(sym) => Some(expand(sym)),
                    _ => None,
                })
                .collect(),
        )
    }
}

/// An unnamed frame in a known file: greppable, and enough for addr2line.
fn file_unknown(bin: &Binary, offset: u64) -> Frames {
    Arc::new([format!("{UNKNOWN} {}+{offset:#x}", bin.name).into()])
}

/// Inlined frames as separate frames, innermost first, as perf shows them.
fn expand(sym: &Sym) -> Frames {
    sym.inlined
        .iter()
        .rev()
        .map(|f| Arc::from(&*f.name))
        .chain(std::iter::once(Arc::from(&*sym.name)))
        .collect()
}

#[cfg(test)]
mod tests {
    use blazesym::symbolize::InlinedFn;

    use super::*;

    #[test]
    fn inlined_callees_become_frames_innermost_first() {
        let inlined = |name: &'static str| InlinedFn {
            name: name.into(),
            code_info: None,
            _non_exhaustive: (),
        };
        let sym = Sym {
            name: "outer".into(),
            module: None,
            addr: 0x1000,
            offset: 4,
            size: None,
            code_info: None,
            inlined: vec![inlined("middle"), inlined("inner")].into_boxed_slice(),
            _non_exhaustive: (),
        };
        let frames = expand(&sym);
        let names: Vec<&str> = frames.iter().map(|n| &**n).collect();
        assert_eq!(names, ["inner", "middle", "outer"]);
    }
}
