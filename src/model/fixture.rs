//! Hand-made snapshots for unit tests, UI snapshot tests and benchmarks.

use std::sync::Arc;
use std::time::Duration;

use super::{
    Arch, IoWait, PassCost, Process, Snapshot, Stack, State, Syscall, Target, ThreadIdent, ThreadSample,
};

/// 2026-11-29T12:00:00Z: fixed so rendered fixtures do not change.
pub const T0_NS: u64 = 1_795_953_600_000_000_000;

/// A thread of process `tgid` named `comm`, in `state`, in syscall `nr` (x86_64) if given.
pub fn sample(tid: u32, tgid: u32, comm: &str, state: State, nr: Option<u32>) -> ThreadSample {
    let process = Arc::new(Process {
        tgid,
        comm: comm.into(),
        exe: format!("/usr/bin/{comm}").into(),
        cmdline: format!("{comm} --serve").into(),
    });
    let off_cpu = !matches!(state, State::Run);
    ThreadSample {
        ident: Arc::new(ThreadIdent {
            tid,
            tgid,
            uid: 1000,
            user: "alice".into(),
            comm: comm.into(),
            process,
            pidns: 4026531836,
            cgroup_id: 1234,
            cgroup: "/user.slice".into(),
            kthread: false,
        }),
        cpu: tid % 2,
        state,
        syscall: nr.map_or(Syscall::None, |nr| Syscall::In {
            nr,
            args: [3, 0x7ffd_0000, 4096, 0, 0, 0],
            ns_so_far: Some(1_500_000),
            seq: Some(42),
        }),
        since_offcpu_ns: Some(2_000_000),
        since_oncpu_ns: Some(3_000_000),
        voluntary: Some(off_cpu),
        runq_wait_ns: matches!(state, State::Runq).then_some(2_500_000),
        waker_tid: Some(1),
        kstack: off_cpu.then(|| {
            Arc::new(Stack {
                hash: 0xfeed,
                frames: vec![
                    "__schedule".into(),
                    "schedule".into(),
                    "pipe_read".into(),
                    "vfs_read".into(),
                ],
                top: 2,
            })
        }),
        ustack: off_cpu.then(|| {
            Arc::new(Stack {
                hash: 0xbeef,
                frames: vec!["__libc_read".into(), "read_block".into(), "main".into()],
                top: 1,
            })
        }),
        target: nr.and_then(|nr| target_of(comm, nr)).map(Arc::new),
        app: None,
        io: IoWait::None,
    }
}

/// A file for the fixture's syscalls that take a descriptor (x86_64 numbers).
fn target_of(comm: &str, nr: u32) -> Option<Target> {
    match nr {
        0 | 17 => Some(Target::File(format!("/var/lib/{comm}/base/16384/2619").into())),
        _ => None,
    }
}

pub fn snapshot(seq: u64, samples: Vec<ThreadSample>) -> Snapshot {
    Snapshot {
        time_ns: T0_NS + seq * 1_000_000_000,
        interval: Duration::from_secs(1),
        ncpus: 2,
        arch: Arch::X86_64,
        samples,
        cost: PassCost {
            walk_ns: 50_000,
            decode_ns: 20_000,
            cpu_ns: 90_000,
        },
        dropped: 0,
    }
}

/// A small mixed workload: a busy server, a disk reader, run-queue pressure.
pub fn busy_snapshot(seq: u64) -> Snapshot {
    let mut v = vec![
        sample(100, 100, "postgres", State::Run, None),
        sample(101, 100, "postgres", State::Disk, Some(17)),
        sample(102, 100, "postgres", State::Runq, None),
        sample(200, 200, "java", State::Run, None),
        sample(201, 200, "java", State::Sleep, Some(202)),
    ];
    if seq % 2 == 0 {
        v.push(sample(300, 300, "dd", State::Disk, Some(0)));
    }
    snapshot(seq, v)
}
