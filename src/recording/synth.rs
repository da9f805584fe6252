//! A deterministic synthetic workload shaped like a live capture (threads
//! blocked for long stretches, CPU-bound threads, disk readers), for tests and
//! the recording benchmark. It feeds the writer; it is not a sampler.

use std::sync::Arc;
use std::time::Duration;

use crate::model::{
    Arch, IoWait, PassCost, Process, Session, Snapshot, Stack, State, Syscall, Target, ThreadIdent,
    ThreadSample,
};

/// xorshift64*: tiny, seedable, good enough for test data and fuzzing.
pub struct Rng(u64);

impl Rng {
    pub fn new(seed: u64) -> Rng {
        Rng(seed.max(1))
    }

    pub fn next_u64(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }

    /// Uniform in 0..n (n > 0).
    pub fn below(&mut self, n: u64) -> u64 {
        self.next_u64() % n
    }
}

pub fn session(interval: Duration) -> Session {
    Session {
        host: "synth".into(),
        kernel: "6.12.0-synthetic".into(),
        arch: Arch::X86_64,
        ncpus: 16,
        interval,
        xtop_version: env!("CARGO_PKG_VERSION").into(),
        options: "--all".into(),
    }
}

fn stacks() -> Vec<Arc<Stack>> {
    let s = |hash, f: &[&str]| {
        Arc::new(Stack {
            hash,
            frames: f.iter().map(|&x| x.into()).collect(),
            top: 2,
        })
    };
    vec![
        s(
            0x1a2b,
            &[
                "__schedule",
                "schedule",
                "io_schedule",
                "folio_wait_bit",
                "filemap_read",
                "vfs_read",
            ],
        ),
        s(
            0x3c4d,
            &[
                "__schedule",
                "schedule",
                "futex_wait_queue",
                "futex_wait",
                "do_futex",
            ],
        ),
        s(
            0x5e6f,
            &[
                "__schedule",
                "schedule",
                "schedule_hrtimeout_range",
                "ep_poll",
                "do_epoll_wait",
            ],
        ),
        s(
            0x7a8b,
            &[
                "__schedule",
                "schedule",
                "io_schedule",
                "blk_mq_get_tag",
                "submit_bio",
                "ext4_read",
            ],
        ),
    ]
}

/// User stacks, leaf first: a waiter, two CPU-bound paths (one through a
/// library without frame pointers) and a reader.
fn ustacks() -> Vec<Arc<Stack>> {
    // `top`: the program's own innermost frame, past the C library's.
    let s = |hash, f: &[&str]| {
        let top = f
            .iter()
            .position(|x| !x.starts_with("__") && !x.starts_with("pthread_"))
            .unwrap_or(f.len());
        Arc::new(Stack {
            hash,
            frames: f.iter().map(|&x| x.into()).collect(),
            top,
        })
    };
    vec![
        s(
            0x9a01,
            &[
                "__futex_abstimed_wait",
                "pthread_cond_wait",
                "WaitLatch",
                "PostgresMain",
                "main",
            ],
        ),
        s(
            0x9a02,
            &["hash_search", "ExecAgg", "ExecutorRun", "PostgresMain", "main"],
        ),
        s(0x9a03, &["inflate_fast", crate::model::TRUNCATED]),
        s(0x9a04, &["__libc_pread64", "read_block", "scan_file", "main"]),
    ]
}

/// `threads` threads over `snapshots` passes at `interval`, from `seed`.
pub fn workload(threads: u32, snapshots: u64, interval: Duration, seed: u64) -> Vec<Snapshot> {
    let mut rng = Rng::new(seed);
    let stacks = stacks();
    let ustacks = ustacks();
    let step = interval.as_nanos() as u64;
    let procs: Vec<Arc<Process>> = (0..(threads / 10).max(1))
        .map(|p| {
            let comm = ["postgres", "java", "nginx", "dd", "python3"][p as usize % 5];
            Arc::new(Process {
                tgid: 1000 + p * 100,
                comm: comm.into(),
                exe: format!("/usr/bin/{comm}").into(),
                cmdline: format!("{comm} --worker {p} --config /etc/{comm}/{comm}.conf").into(),
            })
        })
        .collect();
    // What the disk readers read.
    let files: Vec<Arc<Target>> = (0..4)
        .map(|k| {
            Arc::new(Target::File(
                format!("/var/lib/db/base/16384/{}", 2600 + k).into(),
            ))
        })
        .collect();
    // (role, thread): the role (i % 10) decides how the thread behaves.
    let mut live: Vec<(u32, ThreadSample)> = (0..threads)
        .map(|i| {
            let p = &procs[(i as usize) % procs.len()];
            let blocked = i % 10 < 5;
            let t = ThreadSample {
                ident: Arc::new(ThreadIdent {
                    tid: p.tgid + i / procs.len() as u32,
                    tgid: p.tgid,
                    uid: 1000,
                    user: "alice".into(),
                    comm: format!("{}-{}", p.comm, i % 4).into(),
                    process: p.clone(),
                    pidns: 4026531836,
                    cgroup_id: 5000 + u64::from(p.tgid),
                    cgroup: format!("/system.slice/{}.service", p.comm).into(),
                    kthread: false,
                }),
                cpu: i % 16,
                state: if blocked { State::Sleep } else { State::Run },
                syscall: if blocked {
                    Syscall::In {
                        nr: 202,
                        args: [0x7f00_1234_0000 + u64::from(i) * 64, 128, 0, 0, 0, 0],
                        ns_so_far: Some(5_000_000),
                        seq: Some(10),
                    }
                } else {
                    Syscall::None
                },
                since_offcpu_ns: Some(1_000_000),
                since_oncpu_ns: Some(2_000_000),
                voluntary: Some(blocked),
                runq_wait_ns: None,
                waker_tid: Some(1),
                kstack: blocked.then(|| stacks[1].clone()),
                ustack: Some(ustacks[if blocked { 0 } else { 1 }].clone()),
                target: None,
                app: None,
                io: IoWait::None,
            };
            (i % 10, t)
        })
        .collect();
    live.sort_by_key(|(_, s)| s.ident.tid); // the kernel's task iterator walks in pid order
    let t0 = crate::model::fixture::T0_NS;
    (0..snapshots)
        .map(|n| {
            for (i, (role, s)) in live.iter_mut().enumerate() {
                let skew = rng.below(40_000); // where in the pass this thread was read
                let adv = |v: &mut Option<u64>| *v = v.map(|x| x + step + skew);
                match role {
                    // Blocked: nothing happens but time, and rarely a new wait.
                    0..=4 => {
                        [&mut s.since_offcpu_ns, &mut s.since_oncpu_ns]
                            .into_iter()
                            .for_each(adv);
                        if let Syscall::In {
                            ns_so_far, seq, args, ..
                        } = &mut s.syscall
                        {
                            adv(ns_so_far);
                            if rng.below(50) == 0 {
                                *ns_so_far = Some(rng.below(step));
                                *seq = seq.map(|q| q + 1 + rng.below(100));
                                args[2] = rng.below(4);
                                s.since_offcpu_ns = *ns_so_far;
                                s.since_oncpu_ns = ns_so_far.map(|v| v + rng.below(50_000));
                            }
                        }
                    }
                    // CPU-bound: runs and gets preempted, migrates now and then.
                    5..=7 => {
                        s.state = if rng.below(4) == 0 {
                            State::Runq
                        } else {
                            State::Run
                        };
                        s.since_oncpu_ns = Some(rng.below(4_000_000));
                        s.since_offcpu_ns = Some(rng.below(8_000_000));
                        s.runq_wait_ns = (s.state == State::Runq).then(|| rng.below(3_000_000));
                        s.voluntary = Some(false);
                        // The profiler catches a different path now and then.
                        s.ustack = Some(ustacks[1 + (n + i as u64) as usize % 4 / 3].clone());
                        if rng.below(8) == 0 {
                            s.cpu = rng.below(16) as u32;
                        }
                    }
                    // Disk readers: short reads at advancing offsets.
                    _ => {
                        s.state = if rng.below(3) == 0 {
                            State::Run
                        } else {
                            State::Disk
                        };
                        let off = 4096 * (n * 7 + i as u64);
                        s.syscall = if s.state == State::Disk {
                            Syscall::In {
                                nr: 17,
                                args: [5, 0x7f55_0000_0000, 131072, off, 0, 0],
                                ns_so_far: Some(rng.below(2_000_000)),
                                seq: Some(n * 3),
                            }
                        } else {
                            Syscall::None
                        };
                        s.kstack =
                            (s.state == State::Disk).then(|| stacks[rng.below(2) as usize * 3].clone());
                        s.target = (s.state == State::Disk).then(|| files[i % files.len()].clone());
                        s.ustack = Some(ustacks[3].clone());
                        s.since_offcpu_ns = Some(rng.below(2_000_000));
                        s.since_oncpu_ns = Some(rng.below(1_000_000));
                        s.voluntary = Some(true);
                    }
                }
            }
            Snapshot {
                time_ns: t0 + n * step + rng.below(200_000),
                interval,
                ncpus: 16,
                arch: Arch::X86_64,
                samples: live.iter().map(|(_, s)| s.clone()).collect(),
                cost: PassCost {
                    walk_ns: 300_000 + rng.below(50_000),
                    decode_ns: 150_000 + rng.below(50_000),
                    cpu_ns: 600_000 + rng.below(100_000),
                },
                dropped: 0,
            }
        })
        .collect()
}
