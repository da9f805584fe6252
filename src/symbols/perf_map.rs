//! JIT symbol maps (`/tmp/perf-PID.map`, the perf convention): one
//! `START SIZE name` line (hex, no 0x) per generated function. Runtimes append
//! as they compile, so the file is re-read when it changed and an address
//! is not found.

use std::os::unix::fs::MetadataExt;
use std::path::PathBuf;
use std::sync::Arc;

pub struct PerfMap {
    path: PathBuf,
    /// (length, mtime ns) of the file as last read: whether it changed since.
    stamp: Option<(u64, i64)>,
    /// (start, end, name), sorted by start; a later line for the same start wins.
    syms: Vec<(u64, u64, Arc<str>)>,
}

impl PerfMap {
    /// The map of process `pid`: a process in a pid namespace (a container)
    /// names it by its own pid, in its own /tmp.
    pub fn for_pid(pid: u32) -> Self {
        let path = match ns_pid(pid) {
            Some(ns) if ns != pid => format!("/proc/{pid}/root/tmp/perf-{ns}.map"),
            _ => format!("/tmp/perf-{pid}.map"),
        };
        PerfMap {
            path: PathBuf::from(path),
            stamp: None,
            syms: Vec::new(),
        }
    }

    /// The JIT function containing `addr`, reloading the file if it changed.
    pub fn find(&mut self, addr: u64) -> Option<Arc<str>> {
        if let Some(name) = self.lookup(addr) {
            return Some(name);
        }
        let meta = std::fs::metadata(&self.path).ok()?;
        let stamp = Some((meta.len(), meta.mtime() * 1_000_000_000 + meta.mtime_nsec()));
        if stamp == self.stamp {
            return None;
        }
        let text = std::fs::read_to_string(&self.path).ok()?;
        self.stamp = stamp;
        self.syms = parse(&text);
        self.lookup(addr)
    }

    fn lookup(&self, addr: u64) -> Option<Arc<str>> {
        let i = self.syms.partition_point(|s| s.0 <= addr).checked_sub(1)?;
        let (_, end, name) = &self.syms[i];
        (addr < *end).then(|| name.clone())
    }
}

/// The pid of `pid` in its innermost pid namespace (last of NSpid in status).
fn ns_pid(pid: u32) -> Option<u32> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    let line = status.lines().find_map(|l| l.strip_prefix("NSpid:"))?;
    line.split_whitespace().last()?.parse().ok()
}

fn parse(text: &str) -> Vec<(u64, u64, Arc<str>)> {
    let mut syms: Vec<(u64, u64, Arc<str>)> = text
        .lines()
        .filter_map(|l| {
            let (start, rest) = l.trim_start().split_once(' ')?;
            let (size, name) = rest.trim_start().split_once(' ')?;
            let start = u64::from_str_radix(start, 16).ok()?;
            let size = u64::from_str_radix(size, 16).ok()?;
            Some((start, start.checked_add(size)?, Arc::from(name.trim_end())))
        })
        .collect();
    // Stable: among equal starts the line written last stays last, and wins.
    syms.sort_by_key(|s| s.0);
    syms.reverse();
    syms.dedup_by_key(|s| s.0);
    syms.reverse();
    syms
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn finds_the_containing_function_and_only_that() {
        let text = "1000 10 LazyCompile:*foo app.js:1\n2000 8 old\nnot a line\n2000 20 new\n";
        let syms = parse(text);
        let mut m = PerfMap {
            path: PathBuf::from("/nonexistent"),
            stamp: None,
            syms,
        };
        assert_eq!(m.find(0x1000).as_deref(), Some("LazyCompile:*foo app.js:1"));
        assert_eq!(m.find(0x100f).as_deref(), Some("LazyCompile:*foo app.js:1"));
        assert_eq!(m.find(0x1010), None, "past the end is not the neighbour");
        assert_eq!(m.find(0xfff), None);
        assert_eq!(m.find(0x2018).as_deref(), Some("new"), "the later line wins");
    }

    #[test]
    fn a_process_outside_namespaces_uses_the_plain_path() {
        let own = std::process::id();
        assert_eq!(ns_pid(own), Some(own));
        assert_eq!(
            PerfMap::for_pid(own).path,
            PathBuf::from(format!("/tmp/perf-{own}.map"))
        );
    }
}
