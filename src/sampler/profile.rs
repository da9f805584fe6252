//! The on-CPU profile: a CPU-clock perf event on every online CPU, at a fixed
//! low rate, running the `profile_cpu` BPF program, which keeps each running
//! thread's latest stacks for the next pass.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use anyhow::{anyhow, Result};
use libbpf_rs::libbpf_sys;
use libbpf_rs::{Link, ProgramMut};

/// Allowed `--profile-hz` values (0 turns the profile off).
pub const MAX_HZ: u32 = 1000;

/// The per-CPU events and their links. A CPU taken offline loses its
/// per-CPU perf events for good (they stay dead when it comes back), and a CPU
/// brought online later has none: `refresh` finds both and re-arms them, so
/// running threads there do not silently lose their stacks.
pub struct Profile {
    hz: u32,
    cpus: BTreeMap<u32, CpuEvent>,
    checked: Instant,
}

struct CpuEvent {
    /// Owned by `_link` (libbpf closes it on detach); read for its count.
    fd: i32,
    _link: Link,
    /// CPU-clock nanoseconds at the last check: a live event always advances.
    count: u64,
}

/// How often `refresh` looks: cheap (one read per CPU) but not worth every pass.
const CHECK_EVERY: Duration = Duration::from_secs(1);

impl Profile {
    /// Attaches `prog` to a CPU-clock event every `1/hz` s on each online CPU.
    /// Fails only if no CPU could be covered; CPUs that went offline are skipped.
    pub fn attach(prog: &ProgramMut, hz: u32) -> Result<Profile> {
        let mut p = Profile {
            hz,
            cpus: BTreeMap::new(),
            checked: Instant::now(),
        };
        let mut last_err = None;
        for cpu in online_cpus() {
            if let Err(e) = p.arm(prog, cpu) {
                last_err = Some(e);
            }
        }
        match (p.cpus.is_empty(), last_err) {
            (true, Some(e)) => Err(e),
            (true, None) => Err(anyhow!("no online CPUs")),
            _ => Ok(p),
        }
    }

    /// Re-arms CPUs whose event stopped counting and covers CPUs that came
    /// online; returns the CPUs (re-)armed. Failures are retried next time.
    pub fn refresh(&mut self, prog: &ProgramMut) -> Vec<u32> {
        if self.checked.elapsed() < CHECK_EVERY {
            return Vec::new();
        }
        self.checked = Instant::now();
        let mut armed = Vec::new();
        for cpu in online_cpus() {
            let stalled = match self.cpus.get_mut(&cpu) {
                Some(ev) => {
                    let now = read_count(ev.fd);
                    let stalled = now.is_none_or(|c| c == ev.count);
                    ev.count = now.unwrap_or(ev.count);
                    stalled
                }
                None => true,
            };
            if stalled && self.arm(prog, cpu).is_ok() {
                armed.push(cpu);
            }
        }
        armed
    }

    fn arm(&mut self, prog: &ProgramMut, cpu: u32) -> Result<()> {
        let fd = open_cpu_clock(cpu, self.hz)?;
        let link = prog.attach_perf_event(fd).map_err(|e| {
            // SAFETY: our fd, not owned by anything else when attaching failed.
            unsafe { libc::close(fd) };
            anyhow!("{e}")
        })?;
        let count = read_count(fd).unwrap_or(0);
        // Replacing the old entry drops its link, which closes the dead event.
        self.cpus.insert(
            cpu,
            CpuEvent {
                fd,
                _link: link,
                count,
            },
        );
        Ok(())
    }
}

/// The event's count (CPU-clock ns); None when it cannot be read.
fn read_count(fd: i32) -> Option<u64> {
    let mut count = 0u64;
    // SAFETY: reads at most 8 bytes into a u64 we own; fd is a perf event.
    let n = unsafe { libc::read(fd, (&mut count as *mut u64).cast(), 8) };
    (n == 8).then_some(count)
}

/// A sampling CPU-clock event with a fixed period (not a frequency: the kernel
/// then never retunes it, and the cost stays what was measured).
fn open_cpu_clock(cpu: u32, hz: u32) -> Result<i32> {
    // SAFETY: perf_event_attr is plain data; all-zero is its documented default.
    let mut attr: libbpf_sys::perf_event_attr = unsafe { std::mem::zeroed() };
    attr.type_ = libbpf_sys::PERF_TYPE_SOFTWARE;
    attr.config = libbpf_sys::PERF_COUNT_SW_CPU_CLOCK as u64;
    attr.size = std::mem::size_of::<libbpf_sys::perf_event_attr>() as u32;
    attr.__bindgen_anon_1.sample_period = 1_000_000_000 / u64::from(hz.max(1));
    // SAFETY: a valid attr for this call; the fd returned is ours.
    let fd = unsafe {
        libc::syscall(
            libc::SYS_perf_event_open,
            &attr as *const libbpf_sys::perf_event_attr,
            -1i32,
            cpu as i32,
            -1i32,
            libbpf_sys::PERF_FLAG_FD_CLOEXEC as libc::c_ulong,
        )
    };
    if fd < 0 {
        return Err(anyhow!("perf_event_open: {}", std::io::Error::last_os_error()));
    }
    Ok(fd as i32)
}

fn online_cpus() -> Vec<u32> {
    std::fs::read_to_string("/sys/devices/system/cpu/online")
        .ok()
        .and_then(|s| parse_cpu_list(s.trim()))
        .unwrap_or_else(|| (0..super::online_cpus()).collect())
}

/// "0-3,5,7-8" as a list of CPUs.
fn parse_cpu_list(s: &str) -> Option<Vec<u32>> {
    let mut cpus = Vec::new();
    for part in s.split(',') {
        match part.split_once('-') {
            Some((a, b)) => cpus.extend(a.parse::<u32>().ok()?..=b.parse::<u32>().ok()?),
            None => cpus.push(part.parse().ok()?),
        }
    }
    Some(cpus)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cpu_lists() {
        assert_eq!(parse_cpu_list("0"), Some(vec![0]));
        assert_eq!(parse_cpu_list("0-2,5,7-8"), Some(vec![0, 1, 2, 5, 7, 8]));
        assert_eq!(parse_cpu_list("x"), None);
    }
}
