//! Checks that turn "the kernel said EPERM" into one line the user can act on.

use std::path::Path;

use anyhow::{bail, Result};

const CAP_SYS_ADMIN: u32 = 21;
const CAP_PERFMON: u32 = 38;
const CAP_BPF: u32 = 39;

/// Effective capability mask of this process, from /proc/self/status.
fn effective_caps() -> Option<u64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let hex = status.lines().find_map(|l| l.strip_prefix("CapEff:"))?;
    u64::from_str_radix(hex.trim(), 16).ok()
}

/// Names of the capabilities missing to load and read xtop's BPF programs.
pub fn missing_capabilities(caps: u64) -> Vec<&'static str> {
    let has = |c: u32| caps & (1 << c) != 0;
    if has(CAP_SYS_ADMIN) {
        return vec![];
    }
    [(CAP_BPF, "CAP_BPF"), (CAP_PERFMON, "CAP_PERFMON")]
        .into_iter()
        .filter(|&(c, _)| !has(c))
        .map(|(_, n)| n)
        .collect()
}

pub fn check() -> Result<()> {
    if let Some(caps) = effective_caps() {
        let missing = missing_capabilities(caps);
        if !missing.is_empty() {
            bail!(
                "live sampling needs root ({} missing): run `sudo xtop`, or `xtop replay FILE` to view a recording",
                missing.join(" and ")
            );
        }
    }
    if !Path::new("/sys/kernel/btf/vmlinux").exists() {
        bail!("this kernel has no BTF (/sys/kernel/btf/vmlinux is missing): xtop needs a kernel built with CONFIG_DEBUG_INFO_BTF=y");
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_what_is_missing() {
        assert_eq!(missing_capabilities(0), ["CAP_BPF", "CAP_PERFMON"]);
        assert_eq!(missing_capabilities(1 << CAP_BPF), ["CAP_PERFMON"]);
        assert!(missing_capabilities((1 << CAP_BPF) | (1 << CAP_PERFMON)).is_empty());
        assert!(missing_capabilities(1 << CAP_SYS_ADMIN).is_empty());
    }
}
