//! Loading, attaching and reading xtop's BPF programs. Event hooks are
//! optional (a warning names any that fail, and the columns they feed become
//! unknown); the task iterator is the one thing sampling cannot do without.

use std::io::Read;
use std::mem::MaybeUninit;

use anyhow::{Context, Result};
use libbpf_rs::skel::{OpenSkel, SkelBuilder};
use libbpf_rs::{Iter, Link, MapCore, MapFlags, OpenObject};

use super::profile;
use super::skel::{XtopSkel, XtopSkelBuilder};
use super::SamplerOptions;

pub struct Bpf<'obj> {
    skel: XtopSkel<'obj>,
    iter_link: Link,
    _hooks: Vec<(&'static str, Link)>,
    profile: Option<profile::Profile>,
    pub warnings: Vec<String>,
}

/// Each optional hook, what it feeds (for the warning when it cannot attach),
/// and the hook without which it would mislead: sys_enter without sys_exit
/// would leave threads "in" syscalls forever, and sched_wakeup_new alone would
/// leave a thread's creator standing as its last waker.
const HOOKS: [(&str, &str, Option<&str>); 8] = [
    (
        "sys_enter",
        "sysc_ns_so_far and the syscall of running threads",
        Some("sys_exit"),
    ),
    (
        "sys_exit",
        "sysc_ns_so_far and the syscall of running threads",
        Some("sys_enter"),
    ),
    ("sched_switch", "since_offcpu_ns, switch", None),
    ("sched_wakeup", "waker_tid", None),
    ("sched_wakeup_new", "waker_tid", Some("sched_wakeup")),
    (
        "sched_process_exit",
        "early freeing of per-thread state (freed with the task instead)",
        None,
    ),
    // Without the completion, requests would stay "in flight" forever.
    ("block_io_start", IO_FEEDS, Some("block_io_done")),
    ("block_io_done", IO_FEEDS, Some("block_io_start")),
];

const IO_FEEDS: &str = "device, io_op, io_bytes, io_inflight_us";

/// XTOP_CPU_WINDOWS (src/bpf/xtop.h): stack window slots per CPU.
const CPU_WINDOWS: u32 = 8;

/// What the on-CPU profile feeds, for the warning when it cannot run.
const PROFILE_FEEDS: &str = "running threads shown without stacks";

fn silence_libbpf() {
    // libbpf's own log is verbose; our errors name what failed. XTOP_DEBUG=1 shows it.
    if std::env::var_os("XTOP_DEBUG").is_none() {
        libbpf_rs::set_print(None);
    }
}

impl<'obj> Bpf<'obj> {
    pub fn load(storage: &'obj mut MaybeUninit<OpenObject>, opts: &SamplerOptions) -> Result<Self> {
        silence_libbpf();
        let track_syscalls = opts.track_syscalls;
        let mut open = XtopSkelBuilder::default()
            .open(storage)
            .context("cannot open the BPF object")?;
        if let Some(ro) = open.maps.rodata_data.as_deref_mut() {
            ro.sc_target = crate::target::args::table(crate::model::Arch::native());
        }
        // The profile's stack windows take ~160 KiB per CPU, only when used.
        let windows = opts.profile_hz > 0 && opts.user_stacks && opts.unwind == super::Unwind::Cfi;
        let slots = match libbpf_rs::num_possible_cpus() {
            Ok(n) if windows => u32::try_from(n).unwrap_or(u32::MAX / 8) * CPU_WINDOWS,
            _ => 1,
        };
        open.maps
            .cpu_windows
            .set_max_entries(slots)
            .context("cannot size the on-CPU stack windows")?;
        let mut skel = open
            .load()
            .context("the kernel refused xtop's BPF programs (XTOP_DEBUG=1 shows libbpf's log)")?;
        let mut hooks = Vec::new();
        let mut warnings = Vec::new();
        // Skips hooks as if they failed to attach: exercises the degraded paths
        // in tests, and lets a user shed a hook's cost.
        let disabled: Vec<String> = std::env::var("XTOP_DISABLE_HOOKS")
            .unwrap_or_default()
            .split(',')
            .map(|h| h.trim().to_string())
            .collect();
        let progs = [
            (track_syscalls, &skel.progs.on_sys_enter),
            (track_syscalls, &skel.progs.on_sys_exit),
            (true, &skel.progs.on_switch),
            (true, &skel.progs.on_wakeup),
            (true, &skel.progs.on_wakeup_new),
            (true, &skel.progs.on_exit),
            (true, &skel.progs.on_io_start),
            (true, &skel.progs.on_io_done),
        ];
        let mut failed = Vec::new();
        for ((wanted, prog), (hook, feeds, _)) in progs.into_iter().zip(HOOKS) {
            if !wanted {
                continue;
            }
            let attached = if disabled.iter().any(|d| d == hook) {
                Err("disabled by XTOP_DISABLE_HOOKS".to_string())
            } else {
                prog.attach().map_err(|e| e.to_string())
            };
            match attached {
                Ok(link) => hooks.push((hook, link)),
                Err(e) => {
                    failed.push(hook);
                    warnings.push(format!("cannot attach {hook} ({e}): {feeds} shown as unknown"));
                }
            }
        }
        hooks.retain(
            |(hook, _)| match HOOKS.iter().find(|h| h.0 == *hook).and_then(|h| h.2) {
                Some(needed) if failed.contains(&needed) => {
                    warnings.push(format!("not using {hook}: without {needed} it would mislead"));
                    false
                }
                _ => true,
            },
        );
        let profile = if opts.profile_hz == 0 {
            None
        } else if disabled.iter().any(|d| d == "perf_event") {
            warnings.push(format!(
                "cannot attach perf_event (disabled by XTOP_DISABLE_HOOKS): {PROFILE_FEEDS}"
            ));
            None
        } else {
            profile::Profile::attach(&skel.progs.profile_cpu, opts.profile_hz)
                .map_err(|e| warnings.push(format!("cannot attach perf_event ({e:#}): {PROFILE_FEEDS}")))
                .ok()
        };
        if let Some(bss) = skel.maps.bss_data.as_deref_mut() {
            bss.user_stacks = opts.user_stacks;
            bss.cfi_windows = opts.unwind == super::Unwind::Cfi;
            bss.resolve_targets = opts.file_names;
            bss.read_apps = opts.app_waits;
            bss.io_hooks = ["block_io_start", "block_io_done"]
                .iter()
                .all(|h| hooks.iter().any(|(k, _)| k == h));
        }
        let iter_link = skel
            .progs
            .dump_tasks
            .attach()
            .context("cannot attach the task iterator")?;
        Ok(Bpf {
            skel,
            iter_link,
            _hooks: hooks,
            profile,
            warnings,
        })
    }

    /// Keeps the on-CPU profile covering every online CPU (see `Profile`).
    pub fn refresh_profile(&mut self) {
        if let Some(p) = &mut self.profile {
            p.refresh(&self.skel.progs.profile_cpu);
        }
    }

    pub fn set_emit_all(&mut self, all: bool) {
        if let Some(bss) = self.skel.maps.bss_data.as_deref_mut() {
            bss.emit_all = all;
        }
    }

    /// Numbers passes, so the kernel side knows which stacks userspace still has.
    pub fn set_pass_gen(&mut self, gen: u32) {
        if let Some(bss) = self.skel.maps.bss_data.as_deref_mut() {
            bss.pass_gen = gen;
        }
    }

    pub fn set_pid_filter(&mut self, pids: &[u32]) -> Result<()> {
        for pid in pids {
            self.skel
                .maps
                .pid_filter
                .update(&pid.to_ne_bytes(), &[1], MapFlags::ANY)
                .context("cannot set the pid filter")?;
        }
        if let Some(bss) = self.skel.maps.bss_data.as_deref_mut() {
            bss.pid_filter_on = !pids.is_empty();
        }
        Ok(())
    }

    /// Tells the iterator where a process keeps its wait state. A failed
    /// update (the map cannot fail short of memory) leaves the process's
    /// samples '?', as if unregistered.
    pub fn register_app(&mut self, r: &crate::appwait::Registration) {
        let _ = self
            .skel
            .maps
            .app_procs
            .update(&r.tgid.to_ne_bytes(), &r.value(), MapFlags::ANY);
    }

    pub fn reads_apps(&self) -> bool {
        self.skel.maps.bss_data.as_deref().is_some_and(|b| b.read_apps)
    }

    /// One pass of the task iterator: the raw records, appended to `buf`.
    pub fn walk(&self, buf: &mut Vec<u8>) -> Result<()> {
        buf.clear();
        let mut iter = Iter::new(&self.iter_link).context("cannot start the task iterator")?;
        iter.read_to_end(buf).context("reading the task iterator")?;
        Ok(())
    }

    /// Block I/O requests not tracked since load: the in-flight map was full.
    pub fn io_untracked(&self) -> u64 {
        self.skel.maps.bss_data.as_deref().map_or(0, |b| b.io_untracked)
    }

    /// Per-thread states created and freed since load (live = created - freed).
    pub fn state_counts(&self) -> (u64, u64) {
        self.skel
            .maps
            .bss_data
            .as_deref()
            .map_or((0, 0), |b| (b.states_created, b.states_freed))
    }
}
