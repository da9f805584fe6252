//! User stack symbolization. FIRST CUT (to be replaced on the symbols branch):
//! blazesym's process source, per pid, cached per stack.

use std::collections::HashMap;
use std::sync::Arc;

use blazesym::symbolize::source::{Process, Source};
use blazesym::symbolize::{Input, Symbolized, Symbolizer};
use blazesym::Pid;

use super::{stack_hash, MAX_CACHED};
use crate::model::{Stack, TRUNCATED, UNKNOWN};

pub struct UserSymbols {
    symbolizer: Symbolizer,
    stacks: HashMap<(u32, u64, u64), Arc<Stack>>,
}

impl UserSymbols {
    pub fn new() -> Self {
        UserSymbols {
            symbolizer: Symbolizer::new(),
            stacks: HashMap::new(),
        }
    }

    /// The symbolized user stack of process `pid` (started at `start_ns`, which
    /// tells a reused pid apart). `addrs` are leaf first: the instruction
    /// pointer, then return addresses. `truncated`: the unwinder stopped early.
    pub fn stack(&mut self, pid: u32, start_ns: u64, addrs: &[u64], truncated: bool) -> Arc<Stack> {
        let hash = stack_hash(addrs) ^ u64::from(truncated);
        let key = (pid, start_ns, hash);
        if let Some(s) = self.stacks.get(&key) {
            return s.clone();
        }
        let src = Source::Process(Process::new(Pid::from(pid)));
        let resolved = self.symbolizer.symbolize(&src, Input::AbsAddr(addrs));
        let mut frames: Vec<Arc<str>> = (0..addrs.len())
            .map(|i| match resolved.as_ref().ok().and_then(|r| r.get(i)) {
                Some(Symbolized::Sym(sym)) => Arc::from(&*sym.name),
                _ => Arc::from(UNKNOWN),
            })
            .collect();
        if truncated {
            frames.push(TRUNCATED.into());
        }
        let stack = Arc::new(Stack { hash, frames, top: 0 });
        if self.stacks.len() >= MAX_CACHED {
            self.stacks.clear();
        }
        self.stacks.insert(key, stack.clone());
        stack
    }
}

impl Default for UserSymbols {
    fn default() -> Self {
        Self::new()
    }
}
