//! Kernel stack symbolization through blazesym (kallsyms), cached twice: per
//! address (names) and per stack (a whole `Stack` shared by every sample that
//! has it), so a steady workload symbolizes nothing new each pass.

use std::collections::HashMap;
use std::ops::Range;
use std::sync::Arc;
use std::time::{Duration, Instant};

use blazesym::symbolize::source::{Kernel, Source};
use blazesym::symbolize::{Input, Symbolized, Symbolizer};
use blazesym::MaybeDefault;

use super::{stack_hash, MAX_CACHED};
use crate::model::Stack;

pub struct KernelSymbols {
    symbolizer: Symbolizer,
    /// When kallsyms was last (re)loaded.
    loaded: Instant,
    names: HashMap<u64, Arc<str>>,
    stacks: HashMap<u64, Arc<Stack>>,
    /// Addresses of `__sched` functions (schedule, io_schedule, mutex_lock...):
    /// skipped when picking a stack's top frame, as the kernel's wchan does.
    sched_text: Range<u64>,
    unknown: Arc<str>,
}

/// Least time between two loads of kallsyms (~60,000 lines, ~30 ms to parse).
const RELOAD_AFTER: Duration = Duration::from_secs(60);

/// blazesym re-reads a file whose metadata changed; /proc/kallsyms "changes"
/// all the time, which made every new address cost a full parse. We reload it
/// ourselves when an address does not resolve.
fn kallsyms_symbolizer() -> Symbolizer {
    Symbolizer::builder().enable_auto_reload(false).build()
}

fn sched_text_range() -> Range<u64> {
    let Ok(text) = std::fs::read_to_string("/proc/kallsyms") else {
        return 0..0;
    };
    let find = |name: &str| {
        text.lines().find_map(|l| {
            let mut f = l.split_whitespace();
            let addr = f.next()?;
            (f.nth(1)? == name)
                .then(|| u64::from_str_radix(addr, 16).ok())
                .flatten()
        })
    };
    match (find("__sched_text_start"), find("__sched_text_end")) {
        (Some(s), Some(e)) if s < e => s..e,
        _ => 0..0,
    }
}

impl KernelSymbols {
    pub fn new() -> Self {
        KernelSymbols {
            symbolizer: kallsyms_symbolizer(),
            loaded: Instant::now(),
            names: HashMap::new(),
            stacks: HashMap::new(),
            sched_text: sched_text_range(),
            unknown: "[unknown]".into(),
        }
    }

    /// The symbolized stack for these return addresses (leaf first).
    pub fn stack(&mut self, addrs: &[u64]) -> Arc<Stack> {
        let hash = stack_hash(addrs);
        if let Some(s) = self.stacks.get(&hash) {
            return s.clone();
        }
        self.resolve_missing(addrs);
        let frames: Vec<Arc<str>> = addrs
            .iter()
            .map(|a| self.names.get(a).cloned().unwrap_or_else(|| self.unknown.clone()))
            .collect();
        let top = addrs
            .iter()
            .position(|a| !self.sched_text.contains(a))
            .unwrap_or(0);
        let stack = Arc::new(Stack { hash, frames, top });
        if self.stacks.len() >= MAX_CACHED {
            self.stacks.clear();
        }
        self.stacks.insert(hash, stack.clone());
        stack
    }

    fn resolve_missing(&mut self, addrs: &[u64]) {
        let missing: Vec<u64> = addrs
            .iter()
            .copied()
            .filter(|a| !self.names.contains_key(a))
            .collect();
        if missing.is_empty() {
            return;
        }
        if self.names.len() + missing.len() > MAX_CACHED {
            self.names.clear();
        }
        let src = Source::Kernel(Kernel {
            // kallsyms is always there and fast; a vmlinux search would probe the disk.
            vmlinux: MaybeDefault::None,
            ..Kernel::default()
        });
        let mut resolved = self.symbolizer.symbolize(&src, Input::AbsAddr(&missing));
        // Modules and BPF programs loaded since: reload kallsyms, at most once a minute.
        let unnamed = |r: &Result<Vec<Symbolized>, _>| {
            r.as_ref()
                .map_or(true, |v| v.iter().any(|s| s.as_sym().is_none()))
        };
        if unnamed(&resolved) && self.loaded.elapsed() > RELOAD_AFTER {
            self.symbolizer = kallsyms_symbolizer();
            self.loaded = Instant::now();
            resolved = self.symbolizer.symbolize(&src, Input::AbsAddr(&missing));
        }
        for (i, addr) in missing.iter().enumerate() {
            let name = match resolved.as_ref().ok().and_then(|r| r.get(i)) {
                Some(Symbolized::Sym(sym)) => Arc::from(&*sym.name),
                _ => self.unknown.clone(),
            };
            self.names.insert(*addr, name);
        }
    }
}

impl Default for KernelSymbols {
    fn default() -> Self {
        Self::new()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unresolvable_addresses_are_unknown_not_guessed() {
        let mut k = KernelSymbols::new();
        let s = k.stack(&[0x10, 0x20]);
        assert_eq!(s.frames.len(), 2);
        assert!(s.frames.iter().all(|f| &**f == "[unknown]"));
        assert!(Arc::ptr_eq(&s, &k.stack(&[0x10, 0x20])), "cached");
    }
}
