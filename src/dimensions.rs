//! The one registry of columns ("dimensions"). Group-by (`-g`, the TUI's `g`),
//! filters (`-w`, `\`), text tables, CSV and JSON all take their columns from here.
//! Names that exist in xcapture v3's CSV keep its spelling (upper-cased in CSV).

pub mod stack;

use std::sync::Arc;

use crate::model::{AppFrame, AppWait, BlockIo, IoWait, Snapshot, Syscall, Target, ThreadSample};
use crate::value::Value;

pub type Extract = fn(&Snapshot, &ThreadSample) -> Value;

pub struct Dimension {
    pub name: &'static str,
    /// What it is and how to read it.
    pub description: &'static str,
    /// Numbers right-align in tables.
    pub numeric: bool,
    pub extract: Extract,
}

impl Dimension {
    pub fn value(&self, snap: &Snapshot, s: &ThreadSample) -> Value {
        (self.extract)(snap, s)
    }

    /// Column name in CSV headers (xcapture's convention).
    pub fn csv_name(&self) -> String {
        self.name.to_ascii_uppercase()
    }
}

impl std::fmt::Debug for Dimension {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name)
    }
}

impl PartialEq for Dimension {
    fn eq(&self, other: &Self) -> bool {
        self.name == other.name
    }
}

const fn dim(name: &'static str, numeric: bool, description: &'static str, extract: Extract) -> Dimension {
    Dimension {
        name,
        description,
        numeric,
        extract,
    }
}

fn text(s: &Arc<str>) -> Value {
    if s.is_empty() {
        Value::Missing
    } else {
        Value::Text(s.clone())
    }
}

fn arg(s: &ThreadSample, i: usize) -> Value {
    match s.syscall {
        Syscall::In { args, .. } => Value::Hex(args[i]),
        Syscall::Unknown => Value::Unknown,
        Syscall::None => Value::Missing,
    }
}

/// The connection (or with `state`, its state) of the socket the current
/// syscall works on: '?' when it, or the syscall, could not be read; '-'
/// when the syscall is on no socket.
fn socket_field(s: &ThreadSample, state: bool) -> Value {
    match (&s.syscall, s.target.as_deref()) {
        (Syscall::Unknown, _) | (_, Some(Target::Unresolved)) => Value::Unknown,
        (
            _,
            Some(Target::Socket {
                connection,
                state: st,
                ..
            }),
        ) => match if state { st } else { connection } {
            Some(v) => text(v),
            None => Value::Unknown,
        },
        _ => Value::Missing,
    }
}

/// A part of the program's own wait state: '-' where the program publishes
/// none, '?' where it could not be read; `none` while it waits on nothing.
fn app_field(s: &ThreadSample, part: fn(&Arc<str>, &Arc<str>, &Arc<str>) -> Value) -> Value {
    match s.app.as_deref() {
        None => Value::Missing,
        Some(AppWait::Unread) => Value::Unknown,
        Some(AppWait::Known { class, event, state }) => part(class, event, state),
    }
}

/// A part of the block I/O request the thread waits for: '-' when it has none
/// in flight (or is running), '?' when the block layer's hooks did not run.
fn io_field(s: &ThreadSample, part: fn(&BlockIo) -> Value) -> Value {
    match &s.io {
        IoWait::Untracked => Value::Unknown,
        IoWait::None => Value::Missing,
        IoWait::InFlight(io) => part(io),
    }
}

fn opt_ns(v: Option<u64>) -> Value {
    v.map_or(Value::Unknown, |v| Value::Int(v as i64))
}

/// Every dimension, in the order CSV and JSON write them.
pub static DIMENSIONS: &[Dimension] = &[
    dim(
        "timestamp",
        false,
        "Time of the sampling pass (local time).",
        |n, _| Value::Time(n.time_ns),
    ),
    dim("tid", true, "Thread id.", |_, s| Value::Int(s.ident.tid.into())),
    dim("tgid", true, "Process id (thread group id).", |_, s| {
        Value::Int(s.ident.tgid.into())
    }),
    dim(
        "pidns",
        true,
        "PID namespace inode: threads in the same container share it.",
        |_, s| Value::Int(s.ident.pidns.into()),
    ),
    dim("cgroup_id", true, "cgroup v2 id of the thread.", |_, s| {
        Value::Int(s.ident.cgroup_id as i64)
    }),
    dim(
        "cgroup",
        false,
        "cgroup v2 path, e.g. /system.slice/nginx.service.",
        |_, s| text(&s.ident.cgroup),
    ),
    dim(
        "state",
        false,
        "RUN on a CPU; RUNQ runnable but waiting for a CPU; DISK uninterruptible (usually I/O); \
         SLEEP; STOPPED; TRACED; ZOMBIE; DEAD; PARKED; IDLE.",
        |_, s| Value::Name(s.state.name()),
    ),
    dim("uid", true, "Effective user id.", |_, s| {
        Value::Int(s.ident.uid.into())
    }),
    dim("username", false, "Effective user name.", |_, s| {
        text(&s.ident.user)
    }),
    dim("exe", false, "Executable path of the process.", |_, s| {
        text(&s.ident.process.exe)
    }),
    dim("comm", false, "Thread name.", |_, s| text(&s.ident.comm)),
    dim(
        "pcomm",
        false,
        "Process name (comm of the main thread).",
        |_, s| text(&s.ident.process.comm),
    ),
    dim(
        "cmdline",
        false,
        "Command line of the process; control characters in it shown as \\n, \\t, \\xNN.",
        |_, s| text(&s.ident.process.cmdline),
    ),
    dim(
        "syscall",
        false,
        "System call the thread is in; '-' in user space, '?' when it cannot be told \
         (running thread without syscall tracking).",
        |n, s| match s.syscall {
            Syscall::In { nr, .. } => n
                .arch
                .syscall_name(nr)
                .map_or_else(|| Value::Text(format!("sys_{nr}").into()), Value::Name),
            Syscall::None => Value::Missing,
            Syscall::Unknown => Value::Unknown,
        },
    ),
    dim(
        "syscall_active",
        true,
        "1 inside a system call, 0 outside.",
        |_, s| match s.syscall {
            Syscall::In { .. } => Value::Int(1),
            Syscall::None => Value::Int(0),
            Syscall::Unknown => Value::Unknown,
        },
    ),
    dim(
        "sysc_ns_so_far",
        true,
        "Nanoseconds spent in the current system call so far ('?' if it began before tracking).",
        |_, s| match s.syscall {
            Syscall::In { ns_so_far, .. } => opt_ns(ns_so_far),
            Syscall::None => Value::Missing,
            Syscall::Unknown => Value::Unknown,
        },
    ),
    dim(
        "sysc_entry_time",
        false,
        "When the current system call began (local time; '?' if it began before tracking).",
        |n, s| match s.syscall {
            Syscall::In {
                ns_so_far: Some(ns), ..
            } => Value::Time(n.time_ns.saturating_sub(ns)),
            Syscall::In { .. } | Syscall::Unknown => Value::Unknown,
            Syscall::None => Value::Missing,
        },
    ),
    dim(
        "sysc_seq_num",
        true,
        "System calls this thread entered since tracking began.",
        |_, s| match s.syscall {
            Syscall::In { seq, .. } => opt_ns(seq),
            _ => Value::Missing,
        },
    ),
    dim("sysc_arg1", false, "First system call argument (hex).", |_, s| {
        arg(s, 0)
    }),
    dim(
        "sysc_arg2",
        false,
        "Second system call argument (hex).",
        |_, s| arg(s, 1),
    ),
    dim("sysc_arg3", false, "Third system call argument (hex).", |_, s| {
        arg(s, 2)
    }),
    dim(
        "sysc_arg4",
        false,
        "Fourth system call argument (hex).",
        |_, s| arg(s, 3),
    ),
    dim("sysc_arg5", false, "Fifth system call argument (hex).", |_, s| {
        arg(s, 4)
    }),
    dim("sysc_arg6", false, "Sixth system call argument (hex).", |_, s| {
        arg(s, 5)
    }),
    dim(
        "filename",
        false,
        "The file the current system call works on: the path behind its descriptor argument, \
         resolved in the kernel from the thread's own file table ('/data/x (deleted)' once \
         unlinked, 'pipe:[ino]', 'socket:[ino]', 'anon_inode:[eventpoll]', 'memfd:name' for \
         anonymous files), or its path argument as passed; '-' outside a system call with either, \
         '?' where it could not be resolved.",
        |_, s| match (&s.syscall, s.target.as_deref()) {
            (Syscall::Unknown, _) | (_, Some(Target::Unresolved)) => Value::Unknown,
            (_, Some(t)) => t.file().map_or(Value::Unknown, |f| Value::Text(f.clone())),
            (_, None) => Value::Missing,
        },
    ),
    dim(
        "connection",
        false,
        "What the socket of the current system call connects, read in the kernel from the \
         descriptor's socket: protocol, local end and remote end ('TCP 10.0.0.5:43210->10.0.0.9:5432', \
         'TCP [::1]:5432' listening, 'UDP 0.0.0.0:53'); UNIX sockets by their path, or their \
         peer's ('UNIX ->/run/postgresql/.s.PGSQL.5432'; '@name' abstract). '-' outside a system \
         call on a socket, '?' where it could not be read.",
        |_, s| socket_field(s, false),
    ),
    dim(
        "conn_state",
        false,
        "State of that connection: TCP's (ESTABLISHED, LISTEN, SYN_SENT, CLOSE_WAIT, ...); \
         CONNECTED, UNCONNECTED or LISTEN for UDP and UNIX sockets; '-' for sockets without one.",
        |_, s| socket_field(s, true),
    ),
    dim(
        "device",
        false,
        "The disk of the block I/O request the thread waits for ('vda', 'nvme0n1', 'sda'; the \
         whole disk for a partition's I/O): the last request it started itself that has not \
         completed, seen by the block layer's tracepoints. '-' for a running thread and for one \
         with no request of its own in flight (a thread waiting on a page another thread reads, \
         on a journal commit, or on writeback waits on theirs).",
        |_, s| io_field(s, |io| Value::Text(io.device.clone())),
    ),
    dim(
        "io_op",
        false,
        "The operation of that request: read, write, flush, discard, write_zeroes, ...",
        |_, s| io_field(s, |io| Value::Name(crate::blockio::op_name(io.op))),
    ),
    dim("io_bytes", true, "The size of that request, in bytes.", |_, s| {
        io_field(s, |io| Value::Int(io.bytes.into()))
    }),
    dim(
        "io_inflight_us",
        true,
        "How long that request had been in flight at the sample, in µs: from when the block \
         layer made it to the pass (queued in the I/O scheduler, then on the device).",
        |_, s| io_field(s, |io| Value::Int((io.inflight_ns / 1_000) as i64)),
    ),
    dim(
        "app_wait",
        false,
        "What the thread's program itself says it waits on, read from its memory at each pass: \
         PostgreSQL's wait event as class:event ('Client:ClientRead', 'LWLock:WALWrite', \
         'IO:DataFileRead', 'Lock:transactionid'), 'none' while the backend waits on nothing \
         PostgreSQL instruments; '-' for programs that publish none, '?' where it could not be read.",
        |_, s| {
            app_field(s, |c, e, _| {
                if c.is_empty() {
                    Value::Name("none")
                } else {
                    Value::Text(format!("{c}:{e}").into())
                }
            })
        },
    ),
    dim(
        "app_wait_class",
        false,
        "The class of app_wait: PostgreSQL's wait_event_type (Client, LWLock, Lock, IO, IPC, \
         Activity, Timeout, BufferPin, Extension); 'none' while not waiting.",
        |_, s| {
            app_field(s, |c, _, _| {
                if c.is_empty() {
                    Value::Name("none")
                } else {
                    Value::Text(c.clone())
                }
            })
        },
    ),
    dim(
        "app_state",
        false,
        "What kind of process the program says the thread is: PostgreSQL's backend_type \
         ('client backend', 'autovacuum worker', 'walwriter', 'checkpointer').",
        |_, s| {
            app_field(s, |_, _, st| {
                if st.is_empty() {
                    Value::Unknown
                } else {
                    Value::Text(st.clone())
                }
            })
        },
    ),
    dim(
        "kstack_top",
        false,
        "Innermost kernel function below the scheduler (like wchan): what an off-CPU thread waits in; \
         for a running thread, where the on-CPU profiler last caught it in the kernel.",
        |_, s| match &s.kstack {
            Some(k) => k.top_frame().map_or(Value::Missing, |f| Value::Text(f.clone())),
            None => Value::Missing,
        },
    ),
    dim(
        "kstack",
        false,
        "Kernel stack, outermost first, ';'-joined: where an off-CPU thread waits, or where a \
         running thread was last caught in the kernel.",
        |_, s| match &s.kstack {
            Some(k) => Value::Text(crate::model::folded(&k.frames).into()),
            None => Value::Missing,
        },
    ),
    dim(
        "kstack_hash",
        false,
        "Identity of the kernel stack (joins xcapture_kstacks files).",
        |_, s| s.kstack.as_ref().map_or(Value::Missing, |k| Value::Hex(k.hash)),
    ),
    dim(
        "ustack_top",
        false,
        "Innermost user-space function (the leaf of the user stack): where the program's own code \
         was when it entered the kernel, or is running now.",
        |_, s| match &s.ustack {
            Some(u) => u
                .frames
                .first()
                .map_or(Value::Missing, |f| Value::Text(f.clone())),
            None => Value::Missing,
        },
    ),
    dim(
        "ustack_app",
        false,
        "Innermost user function that is the program's own: the first frame from the leaf outside \
         the C library (libc, libpthread, libm, the dynamic loader, libstdc++, libgcc_s), the vDSO \
         and Rust's std/core/alloc, so a thread in fdatasync shows the code that called it. '?' \
         when the user stack stops before such a frame; '-' without a user stack or when every \
         frame is the C library's.",
        |_, s| match s.ustack.as_deref().map(crate::model::Stack::app_frame) {
            Some(AppFrame::Frame(f)) => Value::Text(f.clone()),
            Some(AppFrame::Unknown) => Value::Unknown,
            Some(AppFrame::None) | None => Value::Missing,
        },
    ),
    dim(
        "ustack_end",
        false,
        "How the user stack's unwind ended: 'root' when it reached the thread's first function \
         (the stack is whole), 'truncated' when it failed on the way (code with neither CFI nor \
         frame pointers: JIT code, hand-written assembly; or an unreadable stack), 'deeper' when \
         it goes on past the part xtop copies. '-' without a user stack. '-g exe,ustack_end' \
         shows how far each program's stacks can be believed; batch mode, the thread view and \
         the stack view give the share that reached their root.",
        |_, s| match &s.ustack {
            Some(u) => Value::Name(u.end().name()),
            None => Value::Missing,
        },
    ),
    dim(
        "ustack",
        false,
        "User stack, outermost first, ';'-joined. A '[truncated]' first frame means the unwind \
         stopped early, in code with neither CFI nor frame pointers; '[deeper]' that the stack \
         goes on past the part xtop copies (ustack_end tells them apart); '[signal]' separates a \
         signal handler from the code it interrupted.",
        |_, s| match &s.ustack {
            Some(u) => Value::Text(crate::model::folded(&u.frames).into()),
            None => Value::Missing,
        },
    ),
    dim(
        "ustack_hash",
        false,
        "Identity of the user stack, the same across processes and runs of the same binaries \
         (joins xcapture_ustacks files).",
        |_, s| s.ustack.as_ref().map_or(Value::Missing, |u| Value::Hex(u.hash)),
    ),
    dim(
        "stack",
        false,
        "User stack then kernel stack, outermost first, ';'-joined; kernel frames end in '_[k]' \
         (the flame graph convention). A half that was not captured is left out.",
        |_, s| stack::combined(s).map_or(Value::Missing, |t| Value::Text(t.into())),
    ),
    dim(
        "stack_hash",
        false,
        "Identity of the combined user + kernel stack.",
        |_, s| stack::combined_hash(s).map_or(Value::Missing, Value::Hex),
    ),
    dim("cpu", true, "CPU the thread is on, or last ran on.", |_, s| {
        Value::Int(s.cpu.into())
    }),
    dim("kthread", true, "1 for kernel threads.", |_, s| {
        Value::Int(s.ident.kthread.into())
    }),
    dim(
        "since_oncpu_ns",
        true,
        "Nanoseconds since the thread last got a CPU ('?' if not seen since xtop started).",
        |_, s| opt_ns(s.since_oncpu_ns),
    ),
    dim(
        "since_offcpu_ns",
        true,
        "Nanoseconds an off-CPU thread has been off ('?' if not seen leaving since xtop started).",
        |_, s| {
            if s.state == crate::model::State::Run {
                Value::Missing
            } else {
                opt_ns(s.since_offcpu_ns)
            }
        },
    ),
    dim(
        "switch",
        false,
        "How the thread last left a CPU: 'voluntary' (blocked) or 'preempted'.",
        |_, s| match s.voluntary {
            Some(true) => Value::Name("voluntary"),
            Some(false) => Value::Name("preempted"),
            None => Value::Unknown,
        },
    ),
    dim(
        "runq_wait_ns",
        true,
        "Nanoseconds a runnable thread has waited in the run queue so far ('-' when not queued).",
        |_, s| s.runq_wait_ns.map_or(Value::Missing, |v| Value::Int(v as i64)),
    ),
    dim(
        "waker_tid",
        true,
        "Thread on the CPU that issued the last wakeup (0: an interrupt on an idle CPU).",
        |_, s| s.waker_tid.map_or(Value::Unknown, |t| Value::Int(t.into())),
    ),
];

pub const DEFAULT_GROUP_BY: &str = "state,syscall,comm";

pub fn find(name: &str) -> Option<&'static Dimension> {
    let name = name.trim();
    DIMENSIONS.iter().find(|d| d.name.eq_ignore_ascii_case(name))
}

/// Parses a comma-separated list such as `state,syscall,comm`.
pub fn parse_list(list: &str) -> Result<Vec<&'static Dimension>, String> {
    list.split(',')
        .filter(|n| !n.trim().is_empty())
        .map(|n| find(n).ok_or_else(|| format!("unknown dimension '{}' (see --list-dimensions)", n.trim())))
        .collect()
}

/// The `--list-dimensions` text.
pub fn describe_all() -> String {
    let width = DIMENSIONS.iter().map(|d| d.name.len()).max().unwrap_or(0);
    DIMENSIONS
        .iter()
        .map(|d| format!("{:width$}  {}\n", d.name, d.description))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashSet;

    #[test]
    fn names_are_unique_lowercase_and_documented() {
        let mut seen = HashSet::new();
        for d in DIMENSIONS {
            assert!(seen.insert(d.name), "duplicate {}", d.name);
            assert_eq!(d.name, d.name.to_ascii_lowercase());
            assert!(d.description.ends_with('.'), "{}", d.name);
            // A string continued without `\` keeps the next line's indent.
            assert!(!d.description.contains("  "), "{}", d.name);
        }
    }

    #[test]
    fn xcapture_columns_keep_their_names() {
        for c in [
            "TIMESTAMP",
            "TID",
            "TGID",
            "PIDNS",
            "CGROUP_ID",
            "STATE",
            "USERNAME",
            "EXE",
            "COMM",
            "SYSCALL",
        ] {
            assert!(DIMENSIONS.iter().any(|d| d.csv_name() == c), "{c}");
        }
        for i in 1..=6 {
            assert!(find(&format!("SYSC_ARG{i}")).is_some());
        }
    }

    #[test]
    fn user_stack_dimensions_read_the_fixture() {
        use crate::model::fixture::{sample, snapshot};
        use crate::model::State;
        let snap = snapshot(0, vec![]);
        let v = |name: &str, s: &ThreadSample| find(name).unwrap().value(&snap, s).to_string();
        let off = sample(1, 1, "db", State::Disk, Some(0));
        assert_eq!(v("ustack_top", &off), "__libc_read");
        assert_eq!(v("ustack_app", &off), "read_block");
        assert_eq!(v("ustack", &off), "main;read_block;__libc_read");
        assert_eq!(v("ustack_hash", &off), "0xbeef");
        assert_eq!(v("ustack_end", &off), "root");
        assert!(v("stack", &off).starts_with("main;read_block;__libc_read;vfs_read_[k];"));
        let run = sample(2, 1, "db", State::Run, None);
        for d in [
            "ustack_top",
            "ustack_app",
            "ustack_end",
            "ustack",
            "ustack_hash",
            "stack",
            "stack_hash",
        ] {
            assert_eq!(v(d, &run), "-", "{d}: no stacks in the fixture's running thread");
        }
        // Cut short within the C library: the program's frame is unknown;
        // nothing but the C library: there is none.
        let mut cut = off.clone();
        cut.ustack = Some(Arc::new(crate::model::Stack {
            hash: 1,
            frames: vec!["__libc_read".into(), crate::model::TRUNCATED.into()],
            top: 1,
        }));
        assert_eq!(v("ustack_app", &cut), "?");
        assert_eq!(v("ustack_end", &cut), "truncated");
        cut.ustack = Some(Arc::new(crate::model::Stack {
            hash: 2,
            frames: vec!["clone3".into()],
            top: 1,
        }));
        assert_eq!(v("ustack_app", &cut), "-");
        assert_eq!(v("ustack_end", &cut), "root");
        cut.ustack = Some(Arc::new(crate::model::Stack {
            hash: 3,
            frames: vec!["recurse".into(), crate::model::DEEPER.into()],
            top: 0,
        }));
        assert_eq!(v("ustack_end", &cut), "deeper");
    }

    #[test]
    fn filename_tells_none_from_unknown() {
        use crate::model::fixture::{sample, snapshot};
        use crate::model::State;
        let snap = snapshot(0, vec![]);
        let v = |s: &ThreadSample| find("filename").unwrap().value(&snap, s).to_string();
        let mut s = sample(1, 1, "db", State::Disk, Some(17));
        assert_eq!(v(&s), "/var/lib/db/base/16384/2619");
        s.target = Some(Arc::new(Target::Unresolved));
        assert_eq!(v(&s), "?");
        s.target = None;
        assert_eq!(v(&s), "-");
        s.syscall = Syscall::Unknown;
        assert_eq!(v(&s), "?", "a running thread's syscall is not known");
    }

    #[test]
    fn connection_and_state_of_sockets_only() {
        use crate::model::fixture::{sample, snapshot};
        use crate::model::State;
        let snap = snapshot(0, vec![]);
        let v = |d: &str, s: &ThreadSample| find(d).unwrap().value(&snap, s).to_string();
        let mut s = sample(1, 1, "db", State::Sleep, Some(45));
        s.target = Some(Arc::new(Target::Socket {
            file: "socket:[8]".into(),
            connection: Some("TCP 127.0.0.1:5432->127.0.0.1:40000".into()),
            state: Some("ESTABLISHED".into()),
        }));
        assert_eq!(v("filename", &s), "socket:[8]");
        assert_eq!(v("connection", &s), "TCP 127.0.0.1:5432->127.0.0.1:40000");
        assert_eq!(v("conn_state", &s), "ESTABLISHED");
        s.target = Some(Arc::new(Target::Socket {
            file: "socket:[9]".into(),
            connection: Some("NETLINK route".into()),
            state: Some("".into()),
        }));
        assert_eq!(v("conn_state", &s), "-", "a kind of socket without states");
        s.target = Some(Arc::new(Target::Socket {
            file: "socket:[9]".into(),
            connection: None,
            state: None,
        }));
        assert_eq!(
            (v("connection", &s), v("conn_state", &s)),
            ("?".into(), "?".into())
        );
        s.target = Some(Arc::new(Target::File("/tmp/x".into())));
        assert_eq!(
            (v("connection", &s), v("conn_state", &s)),
            ("-".into(), "-".into())
        );
        s.target = Some(Arc::new(Target::Unresolved));
        assert_eq!(v("connection", &s), "?", "the descriptor may have been a socket");
        s.target = None;
        assert_eq!(v("connection", &s), "-");
    }

    #[test]
    fn app_wait_tells_none_unread_and_not_waiting_apart() {
        use crate::model::fixture::{sample, snapshot};
        use crate::model::State;
        let snap = snapshot(0, vec![]);
        let v = |d: &str, s: &ThreadSample| find(d).unwrap().value(&snap, s).to_string();
        let mut s = sample(1, 1, "postgres", State::Sleep, Some(45));
        let all = |s: &ThreadSample| [v("app_wait", s), v("app_wait_class", s), v("app_state", s)];
        assert_eq!(all(&s), ["-", "-", "-"], "a program without a wait state");
        s.app = Some(Arc::new(AppWait::Unread));
        assert_eq!(all(&s), ["?", "?", "?"]);
        s.app = Some(Arc::new(AppWait::Known {
            class: "LWLock".into(),
            event: "WALWrite".into(),
            state: "client backend".into(),
        }));
        assert_eq!(all(&s), ["LWLock:WALWrite", "LWLock", "client backend"]);
        s.app = Some(Arc::new(AppWait::Known {
            class: "".into(),
            event: "".into(),
            state: "".into(),
        }));
        assert_eq!(all(&s), ["none", "none", "?"]);
    }

    #[test]
    fn block_io_tells_untracked_none_and_in_flight_apart() {
        use crate::model::fixture::{sample, snapshot};
        use crate::model::State;
        let snap = snapshot(0, vec![]);
        let v = |d: &str, s: &ThreadSample| find(d).unwrap().value(&snap, s).to_string();
        let all = |s: &ThreadSample| ["device", "io_op", "io_bytes", "io_inflight_us"].map(|d| v(d, s));
        let mut s = sample(1, 1, "db", State::Disk, Some(17));
        assert_eq!(all(&s), ["-", "-", "-", "-"], "nothing of its own in flight");
        s.io = IoWait::Untracked;
        assert_eq!(all(&s), ["?", "?", "?", "?"]);
        s.io = IoWait::InFlight(BlockIo {
            device: "nvme0n1".into(),
            op: 1,
            bytes: 131072,
            inflight_ns: 2_345_678,
        });
        assert_eq!(all(&s), ["nvme0n1", "write", "131072", "2345"]);
        assert!(find("io_bytes").unwrap().numeric);
    }

    #[test]
    fn parse_list_reports_the_bad_name() {
        let dims = parse_list("state, syscall,comm").unwrap();
        assert_eq!(
            dims.iter().map(|d| d.name).collect::<Vec<_>>(),
            ["state", "syscall", "comm"]
        );
        let err = parse_list("state,bogus").unwrap_err();
        assert!(err.contains("'bogus'"), "{err}");
        assert!(parse_list(DEFAULT_GROUP_BY).is_ok());
    }
}
