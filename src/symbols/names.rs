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
use super::maps;
use super::process::Loc;
use super::MAX_CACHED;
use crate::model::{SIGNAL, UNKNOWN};
// vDSO offsets are cached next to binary keys under the unwinder's key for it.
use crate::unwind::vdso::KEY as VDSO_KEY;

/// Frames for one address: inlined callees first, the containing function last.
pub type Frames = Arc<[Arc<str>]>;

/// blazesym keeps every ELF it opened; start afresh past this many files.
const MAX_FILES: usize = 512;

pub struct Names {
    symbolizer: Symbolizer,
    files: HashSet<PathBuf>,
    cache: Bounded<(u64, u64), Frames>,
    unknown: Frames,
    signal: Frames,
}

impl Names {
    pub fn new() -> Self {
        Names {
            symbolizer: Symbolizer::new(),
            files: HashSet::new(),
            cache: Bounded::new(MAX_CACHED),
            unknown: Arc::new([Arc::from(UNKNOWN)]),
            signal: Arc::new([Arc::from(SIGNAL)]),
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
        // Our own vDSO names theirs: the kernel gives every process the same one.
        if let (Some(own), false) = (maps::own_vdso(), vdso.is_empty()) {
            let addrs: Vec<u64> = vdso
                .iter()
                .map(|o| own.start + o)
                .filter(|a| *a < own.end)
                .collect();
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
            Loc::Signal => return self.signal.clone(),
        };
        if let Some(f) = fresh.get(&key).cloned().or_else(|| self.cache.get(&key)) {
            return f;
        }
        match loc {
            Loc::File { bin, offset, .. } => file_unknown(bin, *offset),
            _ => Arc::new(["[vdso]".into()]),
        }
    }

    /// Names for offsets of one file (None: no symbol there); None when the file
    /// cannot be read. Debug info gives the inlined callees, the symbol table the
    /// containing function's full demangled name (line-tables-only debug info
    /// only has its short name) when both agree on where that function starts.
    fn symbolize_file(&mut self, path: PathBuf, offsets: &[u64]) -> Option<Vec<Option<Frames>>> {
        let debug = Source::Elf(Elf::new(path.clone()));
        let symtab = Source::Elf(Elf {
            debug_syms: false,
            ..Elf::new(path.clone())
        });
        self.note_file(path);
        let resolved = self
            .symbolizer
            .symbolize(&debug, Input::FileOffset(offsets))
            .ok()?;
        let plain = self
            .symbolizer
            .symbolize(&symtab, Input::FileOffset(offsets))
            .ok();
        let named = resolved.iter().enumerate().map(|(i, r)| {
            let sym = r.as_sym().filter(|s| within(s))?;
            let mut frames = expand(sym);
            if let Some(Symbolized::Sym(p)) = plain.as_ref().and_then(|p| p.get(i)) {
                if p.addr == sym.addr && within(p) && p.name != sym.name {
                    let mut v = frames.to_vec();
                    if let Some(last) = v.last_mut() {
                        *last = Arc::from(&*p.name);
                    }
                    frames = v.into();
                }
            }
            Some(frames)
        });
        Some(named.collect())
    }

    /// blazesym keeps every file it opened: bound how many.
    fn note_file(&mut self, file: PathBuf) {
        if self.files.insert(file) && self.files.len() > MAX_FILES {
            self.symbolizer = Symbolizer::new();
            self.files.clear();
        }
    }

    /// Names for a batch of inputs of one source (None: no symbol there); None
    /// when the source cannot be read.
    fn symbolize(
        &mut self,
        file: PathBuf,
        src: &Source,
        input: Input<&[u64]>,
    ) -> Option<Vec<Option<Frames>>> {
        self.note_file(file);
        let resolved = self.symbolizer.symbolize(src, input).ok()?;
        Some(
            resolved
                .iter()
                .map(|r| r.as_sym().filter(|s| within(s)).map(expand))
                .collect(),
        )
    }
}

/// Whether the address is inside the symbol found: debug info ranges are
/// exact, but a symbol table also holds markers (version names, labels) with
/// no size, and the nearest one below an address is not its function.
fn within(sym: &Sym) -> bool {
    sym.code_info.is_some() || sym.size.is_some_and(|size| sym.offset < size)
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
    use std::path::Path;

    use blazesym::inspect::{self, Inspector};
    use blazesym::symbolize::InlinedFn;

    use super::super::binary::Binaries;
    use super::*;

    #[test]
    fn cpp_names_are_demangled_and_headers_unnamed() {
        let lib = "/usr/lib/x86_64-linux-gnu/libstdc++.so.6";
        if !Path::new(lib).exists() {
            return; // Not a Debian x86-64 system with libstdc++: nothing to check.
        }
        let src = inspect::source::Source::Elf(inspect::source::Elf {
            debug_syms: false,
            ..inspect::source::Elf::new(lib)
        });
        let inspector = Inspector::new();
        let found = inspector
            .lookup(&src, &["_ZSt17__throw_bad_allocv"])
            .expect("inspect");
        let offset = found[0][0].file_offset.expect("file offset");
        let mapped = Arc::new(PathBuf::from("/nonexistent"));
        let bin = Binaries::new().get(&mapped, lib).expect("binary");
        let loc = |offset| Loc::File {
            bin: bin.clone(),
            offset,
            mapped: mapped.clone(),
        };
        let frames = Names::new().frames(&[loc(offset + 1), loc(0)]);
        assert_eq!(frames[0].len(), 1);
        assert!(
            frames[0][0].starts_with("std::__throw_bad_alloc()"),
            "{:?}",
            frames[0]
        );
        assert_eq!(
            &*frames[1][0], "[unknown] libstdc++.so.6+0x0",
            "the ELF header is no function"
        );
    }

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
