//! The data xtop passes around: one `Snapshot` per sampling pass, holding one
//! `ThreadSample` per reported thread. The sampler produces it, recordings
//! store it, aggregation and the UI read it.

pub mod fixture;
mod reach;
mod state;
mod syscalls;
mod text;

use std::sync::Arc;
use std::time::Duration;

pub use reach::{Reach, StackEnd};
pub use state::State;
pub use syscalls::Arch;
pub use text::printable;

/// Facts about the sampled machine and run, fixed for a session.
#[derive(Clone, Debug, PartialEq)]
pub struct Session {
    pub host: String,
    pub kernel: String,
    pub arch: Arch,
    pub ncpus: u32,
    pub interval: Duration,
    pub xtop_version: String,
    /// Capture options as given, e.g. "--all --no-track-syscalls".
    pub options: String,
}

/// One sampling pass.
#[derive(Clone, Debug, PartialEq)]
pub struct Snapshot {
    /// Wall-clock time of the pass, ns since the Unix epoch.
    pub time_ns: u64,
    /// Time this snapshot stands for (the sampling interval).
    pub interval: Duration,
    pub ncpus: u32,
    /// Architecture whose syscall numbers the samples carry.
    pub arch: Arch,
    pub samples: Vec<ThreadSample>,
    pub cost: PassCost,
    /// Snapshots the sampler dropped so far because the consumer was behind.
    pub dropped: u64,
}

/// What producing a snapshot cost, so xtop's own overhead is never hidden.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct PassCost {
    /// Kernel-side walk of all threads (reading the task iterator).
    pub walk_ns: u64,
    /// Userspace decoding, /proc lookups and symbolization.
    pub decode_ns: u64,
    /// xtop's own CPU time (user + system, all its threads) since the previous snapshot.
    pub cpu_ns: u64,
}

/// Where a thread is with respect to system calls.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Syscall {
    /// Not in a syscall (in user space, or a kernel thread).
    None,
    /// xtop cannot tell (running thread without syscall tracking).
    Unknown,
    In {
        nr: u32,
        args: [u64; 6],
        /// Time in the syscall so far; None when the entry was not observed.
        ns_so_far: Option<u64>,
        /// Syscalls this thread entered since tracking began; None untracked.
        seq: Option<u64>,
    },
}

/// A symbolized kernel or user stack, shared by every sample that has it.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Stack {
    /// The stack's identity in recordings and exports: a hash of the kernel
    /// addresses, or for user stacks of (binary, file offset) pairs, so every
    /// process running the same code shares it whatever its address layout.
    pub hash: u64,
    /// Function names, innermost (leaf) first. A user stack whose unwind
    /// stopped before reaching its root ends with the `TRUNCATED` frame, one
    /// that goes on past what was copied of it with `DEEPER`, so every view and
    /// export shows the gap instead of a wrong root.
    pub frames: Vec<Arc<str>>,
    /// Index in `frames` of the first frame that is not plumbing: in a kernel
    /// stack, scheduler functions (what /proc/PID/wchan would show); in a user
    /// stack, the C library, the vDSO and Rust's standard library (the
    /// program's own call site, `ustack_app`; `symbols::plumbing`). Past the
    /// end when every frame is plumbing.
    pub top: usize,
}

/// A user stack's own program frame (`Stack::app_frame`, `ustack_app`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum AppFrame<'a> {
    Frame(&'a Arc<str>),
    /// Every frame is the C library's (or the language runtime's).
    None,
    /// The unwind stopped before reaching one, or it was not recorded.
    Unknown,
}

/// Outermost frame of a stack whose unwind failed before its root: code with
/// neither CFI nor frame pointers, or a corrupt stack (see `Stack::frames`).
pub const TRUNCATED: &str = "[truncated]";
/// Outermost frame of a stack that goes on past the part xtop copies of it
/// (the stack window, or the frame limit): the unwind itself was sound.
pub const DEEPER: &str = "[deeper]";
/// Between a signal handler's frames and those of the code it interrupted.
pub const SIGNAL: &str = "[signal]";
/// A frame no symbol source could name.
pub const UNKNOWN: &str = "[unknown]";

impl Stack {
    /// Whether the unwinder gave up before the stack's root.
    pub fn truncated(&self) -> bool {
        self.end() == StackEnd::Truncated
    }

    /// Whether the stack stops short of its root, for whatever reason.
    pub fn cut_short(&self) -> bool {
        self.end() != StackEnd::Root
    }

    pub fn top_frame(&self) -> Option<&Arc<str>> {
        self.frames.get(self.top).or_else(|| self.frames.first())
    }

    /// A user stack's `top` when its program's own frame is not known: read
    /// from a recording made before xtop recorded it.
    pub const APP_UNKNOWN: usize = usize::MAX;

    /// The innermost frame that is the program's own (a user stack's `top`).
    pub fn app_frame(&self) -> AppFrame<'_> {
        match self.frames.get(self.top) {
            _ if self.top == Self::APP_UNKNOWN => AppFrame::Unknown,
            Some(f) if &**f == TRUNCATED || &**f == DEEPER => AppFrame::Unknown,
            Some(f) => AppFrame::Frame(f),
            None => AppFrame::None,
        }
    }
}

/// Per-process facts, read once per process and shared by its threads' samples.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Process {
    pub tgid: u32,
    /// Process (thread group leader) comm.
    pub comm: Arc<str>,
    /// Path of the executable; empty for kernel threads or when unreadable.
    pub exe: Arc<str>,
    /// Command line, arguments joined by spaces; empty for kernel threads.
    pub cmdline: Arc<str>,
}

/// What stays the same from one sample of a thread to the next. Samples of a
/// thread share one `Arc` of it while it does not change (comm via prctl, uid
/// via setuid, cgroup via migration do change it), so consumers can compare
/// identities by pointer before comparing fields.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct ThreadIdent {
    pub tid: u32,
    pub tgid: u32,
    pub uid: u32,
    pub user: Arc<str>,
    /// Thread name (task comm).
    pub comm: Arc<str>,
    pub process: Arc<Process>,
    pub pidns: u32,
    pub cgroup_id: u64,
    pub cgroup: Arc<str>,
    pub kthread: bool,
}

/// What a thread's current syscall works on (`ThreadSample::target`): the file
/// behind its descriptor argument, or its path argument.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum Target {
    /// The syscall has such an argument, but the kernel side could not resolve
    /// it (a descriptor no longer open, unreadable memory).
    Unresolved,
    /// A path (`/var/lib/pg/base/1/1259`), a path argument as passed, or an
    /// anonymous file's kind (`pipe:[123]`, `anon_inode:[eventpoll]`).
    File(Arc<str>),
    /// A socket descriptor: its file's name (`socket:[123]`), what it
    /// connects (`TCP 10.0.0.5:43210->10.0.0.9:5432`, `UNIX ->/run/x.sock`)
    /// and the connection's state (`ESTABLISHED`, `LISTEN`, `CONNECTED`;
    /// empty where its kind has none). Both None when the kernel side could
    /// not read the socket.
    Socket {
        file: Arc<str>,
        connection: Option<Arc<str>>,
        state: Option<Arc<str>>,
    },
}

impl Target {
    /// The file's name, for every kind that has one.
    pub fn file(&self) -> Option<&Arc<str>> {
        match self {
            Target::Unresolved => None,
            Target::File(f) | Target::Socket { file: f, .. } => Some(f),
        }
    }
}

/// What a thread's program itself says the thread waits on (src/appwait):
/// PostgreSQL's wait event and backend type. A sample of a thread whose
/// program publishes none has no `AppWait` at all.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum AppWait {
    /// The program publishes its wait state, but xtop could not read it (not
    /// yet registered, unmapped memory, a binary without the symbol).
    Unread,
    /// `class` and `event` in the program's own names (`LWLock`, `WALWrite`),
    /// both empty while it waits on nothing; `state` its kind of process
    /// (`client backend`, `checkpointer`), empty where it could not be read.
    Known {
        class: Arc<str>,
        event: Arc<str>,
        state: Arc<str>,
    },
}

/// A block I/O request a thread started and that is still in flight
/// (`IoWait::InFlight`).
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct BlockIo {
    /// The disk, as the kernel names it (`vda`, `nvme0n1`), or `MAJ:MIN`.
    pub device: Arc<str>,
    /// The kernel's REQ_OP_* code (`blockio::op_name`).
    pub op: u8,
    pub bytes: u32,
    /// How long it had been in flight at the pass.
    pub inflight_ns: u64,
}

/// The block I/O a thread waits for (`ThreadSample::io`): only of a thread
/// off its CPU, and only a request it started itself (a thread waiting on a
/// page another thread is reading waits on that one's request).
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum IoWait {
    /// The block layer's hooks did not run (or a recording made before xtop
    /// had them).
    Untracked,
    /// No request of its own in flight (or the thread is running).
    None,
    InFlight(BlockIo),
}

/// One thread at one instant.
#[derive(Clone, Debug, PartialEq)]
pub struct ThreadSample {
    pub ident: Arc<ThreadIdent>,
    /// CPU the thread last ran on.
    pub cpu: u32,
    pub state: State,
    pub syscall: Syscall,
    /// Time since the thread last went off a CPU (None: not seen since xtop started).
    pub since_offcpu_ns: Option<u64>,
    /// Time since the thread last came onto a CPU.
    pub since_oncpu_ns: Option<u64>,
    /// Whether the last switch off the CPU was voluntary (blocked) or a preemption.
    pub voluntary: Option<bool>,
    /// How long a runnable thread has been queued for a CPU (None when not queued).
    pub runq_wait_ns: Option<u64>,
    /// Who was on the CPU that issued the last wakeup.
    pub waker_tid: Option<u32>,
    /// Kernel stack: where an off-CPU thread waits, or for a running thread the
    /// latest on-CPU profile stack taken during its current stint on the CPU.
    pub kstack: Option<Arc<Stack>>,
    /// User stack, from the same instant as `kstack` (frame-pointer walk).
    pub ustack: Option<Arc<Stack>>,
    /// The file the current syscall works on; None outside a syscall with a
    /// descriptor or path argument (or when not resolved at all).
    pub target: Option<Arc<Target>>,
    /// The program's own wait state; None where it publishes none.
    pub app: Option<Arc<AppWait>>,
    /// The block I/O request it waits for.
    pub io: IoWait,
}

impl ThreadSample {
    pub fn syscall_name(&self, arch: Arch) -> Option<String> {
        match self.syscall {
            Syscall::In { nr, .. } => Some(
                arch.syscall_name(nr)
                    .map_or_else(|| format!("sys_{nr}"), str::to_string),
            ),
            _ => None,
        }
    }
}

/// Frames (leaf first, as stored) as a `root;...;leaf` line, the folded-stack convention.
pub fn folded(frames: &[Arc<str>]) -> String {
    let mut out = String::new();
    for (i, f) in frames.iter().rev().enumerate() {
        if i > 0 {
            out.push(';');
        }
        out.push_str(f);
    }
    out
}
