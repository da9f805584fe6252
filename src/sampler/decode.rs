//! Turns the iterator's raw `task_sample` records into `ThreadSample`s:
//! state decoding, choosing between hook-tracked and register-read syscalls,
//! and joining the per-process and symbol caches.

use std::collections::HashMap;
use std::sync::Arc;

use crate::appwait::AppWatch;
use crate::blockio::DeviceNames;
use crate::model::{BlockIo, IoWait, Stack, State, Syscall, Target, ThreadSample};
use crate::symbols::{KernelSymbols, UserSymbols};
use crate::target::name::{self, Interner, TGT_BYTES};
use crate::unwind::{End, Regs, Window};

use super::procinfo::{ProcCache, RawIdent};
use super::skel::types::task_sample as RawSample;

// Flags from src/bpf/xtop.h.
const XF_ON_CPU: u32 = 1 << 0;
const XF_SC_TRACKED: u32 = 1 << 3;
const XF_IN_SYSCALL: u32 = 1 << 4;
const XF_REGS_VALID: u32 = 1 << 5;
const XF_VOLUNTARY: u32 = 1 << 6;
const XF_SEEN_SWITCH: u32 = 1 << 7;
const XF_SEEN_WAKEUP: u32 = 1 << 8;
const XF_KTHREAD: u32 = 1 << 9;
const XF_STACK_SAME: u32 = 1 << 10;
const XF_USTACK_TRUNC: u32 = 1 << 11;
const XF_UWIN_TO_END: u32 = 1 << 13;
const XF_USTACK_DEEP: u32 = 1 << 14;
const XF_IO_TRACKED: u32 = 1 << 15;
const XF_IO_INFLIGHT: u32 = 1 << 16;

/// XTOP_UWIN_BYTES (src/bpf/xtop.h): the most stack window a record carries.
pub const UWIN_BYTES: usize = 16384;

/// Bytes of a record before its variable-length stacks.
pub const HEADER_LEN: usize = std::mem::offset_of!(RawSample, kstack);

/// Copies `len` bytes (clamped to the array) of 8-byte addresses from `buf`.
fn read_stack(buf: &[u8], len: i32, out: &mut [u64; 32], what: &str, off: usize) -> Result<usize, String> {
    let bytes = usize::try_from(len).unwrap_or(0).min(out.len() * 8) & !7;
    if buf.len() < bytes {
        return Err(format!("truncated {what} stack at byte {off}"));
    }
    *out = [0; 32];
    for (i, chunk) in buf[..bytes].chunks_exact(8).enumerate() {
        out[i] = u64::from_ne_bytes(chunk.try_into().expect("8-byte chunk"));
    }
    Ok(bytes)
}

/// The variable-length parts of a record, as slices of the iterator's buffer.
#[derive(Clone, Copy, Default)]
pub struct Tail<'a> {
    /// The user stack window, from `uregs[1]` up.
    pub window: &'a [u8],
    /// The file record (`target::name`).
    pub target: &'a [u8],
}

/// Splits the iterator's byte stream into records. A record is a fixed header
/// followed by `kstack_len` bytes of kernel stack, `ustack_len` bytes of user
/// stack, `uwin_len` bytes of user stack window and `tgt_len` bytes of file
/// record (passed on as slices of `buf`, never copied); a short tail is
/// reported, not guessed.
pub fn parse_records(buf: &[u8], mut f: impl FnMut(&RawSample, Tail)) -> Result<usize, String> {
    let mut off = 0;
    let mut n = 0;
    let mut rec = RawSample::default();
    while off < buf.len() {
        if buf.len() - off < HEADER_LEN {
            return Err(format!("truncated record header at byte {off}"));
        }
        // SAFETY: RawSample is plain old data (integers and arrays); we copy at
        // most HEADER_LEN bytes into its prefix.
        unsafe {
            std::ptr::copy_nonoverlapping(
                buf[off..].as_ptr(),
                (&mut rec as *mut RawSample).cast::<u8>(),
                HEADER_LEN,
            )
        };
        off += HEADER_LEN;
        off += read_stack(&buf[off..], rec.kstack_len, &mut rec.kstack, "kernel", off)?;
        off += read_stack(&buf[off..], rec.ustack_len, &mut rec.ustack, "user", off)?;
        let wlen = usize::try_from(rec.uwin_len).unwrap_or(0).min(UWIN_BYTES);
        let window = buf
            .get(off..off + wlen)
            .ok_or_else(|| format!("truncated user stack window at byte {off}"))?;
        off += wlen;
        let tlen = (rec.tgt_len as usize).min(TGT_BYTES);
        let target = buf
            .get(off..off + tlen)
            .ok_or_else(|| format!("truncated file record at byte {off}"))?;
        off += tlen;
        f(&rec, Tail { window, target });
        n += 1;
    }
    Ok(n)
}

/// Where the thread is with respect to syscalls. The hooks know best when they
/// have seen the thread; otherwise the saved user registers of an off-CPU
/// thread tell the syscall it sleeps in (but not since when); a running thread
/// nobody tracked is honestly unknown.
pub fn syscall_of(r: &RawSample) -> Syscall {
    if r.flags & XF_KTHREAD != 0 {
        return Syscall::None;
    }
    if r.flags & XF_SC_TRACKED != 0 {
        if r.flags & XF_IN_SYSCALL != 0 && r.sc_nr >= 0 {
            return Syscall::In {
                nr: r.sc_nr as u32,
                args: r.sc_args,
                ns_so_far: Some(r.now_ns.saturating_sub(r.sc_entry_ns)),
                seq: Some(r.sc_seq),
            };
        }
        return Syscall::None;
    }
    if r.flags & XF_REGS_VALID != 0 {
        // A job-control stop happens on the way back to user space: the
        // registers still name the last syscall, but the thread is not in it.
        let stopped = State::decode(r.state, r.exit_state, false) == State::Stopped;
        if r.regs_nr >= 0 && !stopped {
            return Syscall::In {
                nr: r.regs_nr as u32,
                args: r.regs_args,
                ns_so_far: None,
                seq: None,
            };
        }
        return Syscall::None;
    }
    if r.exit_state != 0 {
        return Syscall::None;
    }
    Syscall::Unknown
}

/// Time from `then` to `now` (scheduler clock). The sampling CPU's clock may
/// trail another CPU's by a few µs, hence saturating.
fn since(now: u64, then: u64, seen: bool) -> Option<u64> {
    (seen && now != 0 && then != 0).then(|| now.saturating_sub(then))
}

/// Stacks of the previous pass by tid: the BPF side sends none for a thread
/// that has not run since then (XF_STACK_SAME), and we reuse these.
#[derive(Default)]
pub struct StackMemo {
    prev: HashMap<u32, Stacks>,
    cur: HashMap<u32, Stacks>,
    /// One Arc per distinct file name, from pass to pass.
    targets: Interner,
}

type Stacks = (Option<Arc<Stack>>, Option<Arc<Stack>>);

impl StackMemo {
    /// Call after each pass: this pass's stacks become the ones to reuse.
    pub fn end_pass(&mut self) {
        std::mem::swap(&mut self.prev, &mut self.cur);
        self.cur.clear();
        self.targets.trim();
    }

    /// The file a record's syscall works on, resolved by the kernel side in
    /// this pass (never kept from an earlier one: a rename elsewhere changes
    /// the name of a file a sleeping thread reads). Only inside a syscall: a
    /// stopped thread's registers still name its last one.
    fn target(&mut self, r: &RawSample, record: &[u8], syscall: &Syscall) -> Option<Arc<Target>> {
        if !matches!(syscall, Syscall::In { .. }) {
            return None;
        }
        let raw = name::Raw {
            kind: r.tgt_kind,
            flags: r.tgt_flags,
            magic: r.tgt_magic,
            ino: r.tgt_ino,
            bytes: record,
        };
        self.targets.get(&raw)
    }

    /// Kernel and user stacks of a record (and its user stack window, if any).
    fn stacks(
        &mut self,
        r: &RawSample,
        window: &[u8],
        syms: &mut KernelSymbols,
        usyms: &mut UserSymbols,
    ) -> Stacks {
        let stacks = if r.flags & XF_STACK_SAME != 0 {
            self.prev.get(&r.tid).cloned().unwrap_or_default()
        } else {
            let n = |len: i32| (len.max(0) as usize / 8).min(32);
            let k = (r.kstack_len > 0).then(|| syms.stack(&r.kstack[..n(r.kstack_len)]));
            let u = if !window.is_empty() {
                let [ip, sp, fp, lr] = r.uregs;
                let regs = Regs { ip, sp, fp, lr };
                let w = Window {
                    start: sp,
                    bytes: window,
                    to_end: r.flags & XF_UWIN_TO_END != 0,
                };
                Some(usyms.unwound(r.tgid, r.start_ns, &regs, w))
            } else {
                (r.ustack_len > 0).then(|| {
                    let end = match (r.flags & XF_USTACK_TRUNC != 0, r.flags & XF_USTACK_DEEP != 0) {
                        (false, _) => End::Root,
                        (true, false) => End::Lost,
                        (true, true) => End::Depth,
                    };
                    usyms.stack(r.tgid, r.start_ns, &r.ustack[..n(r.ustack_len)], end)
                })
            };
            (k, u)
        };
        if stacks.0.is_some() || stacks.1.is_some() {
            self.cur.insert(r.tid, stacks.clone());
        }
        stacks
    }
}

/// The caches `decode` joins records with.
pub struct Ctx<'a> {
    pub procs: &'a mut ProcCache,
    pub apps: &'a mut AppWatch,
    pub syms: &'a mut KernelSymbols,
    pub usyms: &'a mut UserSymbols,
    pub memo: &'a mut StackMemo,
    pub devices: &'a mut DeviceNames,
}

/// The block I/O request an off-CPU thread waits for (see `IoWait`).
pub fn io_of(r: &RawSample, devices: &mut DeviceNames) -> IoWait {
    if r.flags & XF_IO_TRACKED == 0 {
        return IoWait::Untracked;
    }
    if r.flags & XF_IO_INFLIGHT == 0 {
        return IoWait::None;
    }
    IoWait::InFlight(BlockIo {
        device: devices.name(r.io_dev),
        op: r.io_op,
        bytes: r.io_bytes,
        // A request started after the pass began is younger than its "now".
        inflight_ns: r.now_ns.saturating_sub(r.io_start_ns),
    })
}

pub fn decode(r: &RawSample, tail: Tail, ctx: &mut Ctx) -> ThreadSample {
    let on_cpu = r.flags & XF_ON_CPU != 0;
    let kthread = r.flags & XF_KTHREAD != 0;
    let as_bytes = |c: &[i8; 16]| c.map(|b| b as u8);
    let switch_seen = r.flags & XF_SEEN_SWITCH != 0;
    let wakeup_seen = r.flags & XF_SEEN_WAKEUP != 0;
    let (kstack, ustack) = ctx.memo.stacks(r, tail.window, ctx.syms, ctx.usyms);
    let syscall = syscall_of(r);
    let target = ctx.memo.target(r, tail.target, &syscall);
    let pcomm = as_bytes(&r.pcomm);
    let raw = RawIdent {
        tid: r.tid,
        tgid: r.tgid,
        start_ns: r.start_ns,
        uid: r.uid,
        pidns: r.pidns,
        cgroup_id: r.cgroup_id,
        kthread,
        comm: as_bytes(&r.comm),
    };
    let ident = ctx.procs.ident(raw, &pcomm);
    let program = ctx
        .procs
        .program(r.tgid, r.start_ns, &pcomm, || ctx.apps.program(r.tgid, kthread));
    let app = ctx.apps.value(&program, r.app_flags, r.app_wait, r.app_state);
    ThreadSample {
        ident,
        cpu: r.cpu.max(0) as u32,
        state: State::decode(r.state, r.exit_state, on_cpu),
        syscall,
        since_offcpu_ns: since(r.now_rq, r.offcpu_rq, switch_seen && !on_cpu),
        since_oncpu_ns: since(r.now_rq, r.last_arrival_rq, true),
        voluntary: (switch_seen && r.offcpu_rq != 0).then_some(r.flags & XF_VOLUNTARY != 0),
        runq_wait_ns: since(r.now_rq, r.last_queued_rq, !on_cpu),
        waker_tid: wakeup_seen.then_some(r.waker_tid),
        kstack,
        ustack,
        target,
        app,
        io: io_of(r, ctx.devices),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn raw(flags: u32) -> RawSample {
        RawSample {
            now_ns: 5_000,
            flags,
            sc_nr: -1,
            regs_nr: -1,
            ..Default::default()
        }
    }

    #[test]
    fn tracked_syscall_wins_and_has_duration() {
        let mut r = raw(XF_SC_TRACKED | XF_IN_SYSCALL | XF_REGS_VALID);
        r.sc_nr = 0;
        r.sc_entry_ns = 1_000;
        r.sc_seq = 9;
        r.regs_nr = 35;
        r.sc_args[0] = 7;
        assert_eq!(
            syscall_of(&r),
            Syscall::In {
                nr: 0,
                args: [7, 0, 0, 0, 0, 0],
                ns_so_far: Some(4_000),
                seq: Some(9)
            }
        );
        assert_eq!(syscall_of(&raw(XF_SC_TRACKED)), Syscall::None);
    }

    #[test]
    fn registers_fill_in_for_untracked_sleepers_only() {
        let mut r = raw(XF_REGS_VALID);
        r.regs_nr = 230;
        r.regs_args = [1, 2, 3, 4, 5, 6];
        assert_eq!(
            syscall_of(&r),
            Syscall::In {
                nr: 230,
                args: [1, 2, 3, 4, 5, 6],
                ns_so_far: None,
                seq: None
            }
        );
        r.state = 0x104; // SIGSTOPped: signal delivery, not the syscall
        assert_eq!(syscall_of(&r), Syscall::None);
        r.state = 0x1;
        r.regs_nr = -1; // interrupted in user space
        assert_eq!(syscall_of(&r), Syscall::None);
        assert_eq!(syscall_of(&raw(XF_ON_CPU)), Syscall::Unknown);
        assert_eq!(syscall_of(&raw(XF_KTHREAD)), Syscall::None);
    }

    fn bytes(r: &RawSample, len: usize) -> Vec<u8> {
        // SAFETY: reading the POD record as bytes.
        unsafe { std::slice::from_raw_parts((r as *const RawSample).cast::<u8>(), len) }.to_vec()
    }

    #[test]
    fn block_io_is_untracked_none_or_the_request_in_flight() {
        let dir = std::env::temp_dir().join(format!("xtop-decode-io-{}", std::process::id()));
        let mut devices = DeviceNames::new(&dir);
        assert_eq!(io_of(&raw(0), &mut devices), IoWait::Untracked);
        assert_eq!(io_of(&raw(XF_IO_TRACKED), &mut devices), IoWait::None);
        let mut r = raw(XF_IO_TRACKED | XF_IO_INFLIGHT);
        r.io_dev = (254 << 20) | 3;
        r.io_op = 1;
        r.io_bytes = 8192;
        r.io_start_ns = 1_000;
        let want = BlockIo {
            device: "254:3".into(),
            op: 1,
            bytes: 8192,
            inflight_ns: 4_000,
        };
        assert_eq!(io_of(&r, &mut devices), IoWait::InFlight(want.clone()));
        r.io_start_ns = 9_000; // started after the pass's clock read
        let young = BlockIo {
            inflight_ns: 0,
            ..want
        };
        assert_eq!(io_of(&r, &mut devices), IoWait::InFlight(young));
    }

    #[test]
    fn parses_variable_length_records_and_rejects_torn_ones() {
        let mut a = raw(XF_ON_CPU);
        a.tid = 1;
        let mut b = raw(0);
        b.tid = 2;
        b.kstack_len = 16;
        b.kstack[..2].copy_from_slice(&[0xaaaa, 0xbbbb]);
        b.ustack_len = 24;
        b.ustack[..3].copy_from_slice(&[0x1, 0x2, 0x3]);
        let mut c = raw(0);
        c.tid = 3;
        c.ustack_len = 8;
        c.ustack[0] = 0x4;
        let mut d = raw(0);
        d.tid = 4;
        d.uwin_len = 5;
        d.tgt_len = 3;
        let mut buf = bytes(&a, HEADER_LEN);
        buf.extend(bytes(&b, HEADER_LEN + 16));
        buf.extend(b.ustack[..3].iter().flat_map(|x| x.to_ne_bytes()));
        buf.extend(bytes(&c, HEADER_LEN));
        buf.extend(0x4u64.to_ne_bytes());
        let c_end = buf.len();
        buf.extend(bytes(&d, HEADER_LEN));
        buf.extend(b"stack");
        buf.extend(b"f\0/");
        let mut seen = vec![];
        let r = parse_records(&buf, |r, t| {
            seen.push((
                r.tid,
                r.kstack[..2].to_vec(),
                r.ustack[..3].to_vec(),
                t.window.to_vec(),
                t.target.to_vec(),
            ))
        });
        assert_eq!(r, Ok(4));
        assert_eq!(
            seen,
            [
                (1, vec![0, 0], vec![0, 0, 0], vec![], vec![]),
                (2, vec![0xaaaa, 0xbbbb], vec![1, 2, 3], vec![], vec![]),
                (3, vec![0, 0], vec![4, 0, 0], vec![], vec![]),
                (4, vec![0, 0], vec![0, 0, 0], b"stack".to_vec(), b"f\0/".to_vec()),
            ]
        );
        let cut = |n: usize| parse_records(&buf[..n], |_, _| {});
        assert!(cut(buf.len() - 1).unwrap_err().contains("file record"));
        assert!(cut(buf.len() - 4).unwrap_err().contains("window"));
        assert!(cut(c_end - 4).unwrap_err().contains("user stack"));
        let b_end = 2 * HEADER_LEN + 16 + 24;
        assert_eq!(cut(b_end), Ok(2));
        assert!(cut(b_end - 8).unwrap_err().contains("user stack"));
        assert!(cut(2 * HEADER_LEN + 8).unwrap_err().contains("kernel stack"));
        assert!(cut(10).unwrap_err().contains("header"));
    }

    #[test]
    fn unchanged_threads_reuse_the_previous_pass_stacks() {
        let mut syms = KernelSymbols::new();
        let mut usyms = UserSymbols::new();
        let mut memo = StackMemo::default();
        let mut r = raw(0);
        r.tid = 7;
        r.kstack_len = 16;
        r.kstack[..2].copy_from_slice(&[0x10, 0x20]);
        r.ustack_len = 8;
        r.ustack[0] = 0x30;
        let (k, u) = memo.stacks(&r, &[], &mut syms, &mut usyms);
        let (k, u) = (k.unwrap(), u.unwrap());
        // Without XF_USTACK_TRUNC the walk says it found the root, but 0x30
        // is mapped nowhere: no thread starts there.
        assert!(u.truncated());
        memo.end_pass();
        let mut same = raw(XF_STACK_SAME);
        same.tid = 7;
        let (k2, u2) = memo.stacks(&same, &[], &mut syms, &mut usyms);
        assert!(Arc::ptr_eq(&k2.unwrap(), &k));
        assert!(Arc::ptr_eq(&u2.unwrap(), &u));
        memo.end_pass();
        memo.end_pass(); // a pass without thread 7: nothing left to reuse
        assert_eq!(memo.stacks(&same, &[], &mut syms, &mut usyms), (None, None));
    }

    #[test]
    fn targets_are_named_inside_syscalls_only_and_shared() {
        let mut memo = StackMemo::default();
        let mut r = raw(XF_SC_TRACKED | XF_IN_SYSCALL);
        r.tid = 9;
        r.sc_nr = 0;
        r.tgt_kind = name::TK_DENTRY;
        let rec = b"x\0tmp\0";
        let sc = syscall_of(&r);
        let t = memo.target(&r, rec, &sc).expect("a file");
        assert_eq!(*t, Target::File("/tmp/x".into()));
        assert_eq!(
            memo.target(&r, rec, &Syscall::None),
            None,
            "outside a syscall: none"
        );
        memo.end_pass();
        // Resolved again every pass, whatever XF_STACK_SAME says, and shared.
        let mut same = r;
        same.flags |= XF_STACK_SAME;
        let again = memo.target(&same, rec, &sc).expect("named");
        assert!(Arc::ptr_eq(&again, &t));
        r.tgt_kind = name::TK_FAIL;
        assert_eq!(memo.target(&r, &[], &sc).as_deref(), Some(&Target::Unresolved));
    }

    #[test]
    fn user_stacks_carry_truncation_and_absence() {
        let (mut syms, mut usyms, mut memo) =
            (KernelSymbols::new(), UserSymbols::new(), StackMemo::default());
        let mut r = raw(XF_USTACK_TRUNC);
        r.ustack_len = 8;
        r.ustack[0] = 0x30;
        let (k, u) = memo.stacks(&r, &[], &mut syms, &mut usyms);
        assert_eq!(k, None);
        assert!(u.unwrap().truncated());
        // The frame-pointer walk stopped at its depth limit: deeper, not lost.
        let mut deep = raw(XF_USTACK_TRUNC | XF_USTACK_DEEP);
        deep.tid = 8;
        deep.ustack_len = 8;
        deep.ustack[0] = 0x30;
        let (_, d) = memo.stacks(&deep, &[], &mut syms, &mut usyms);
        let d = d.unwrap();
        assert!(!d.truncated() && d.cut_short(), "{:?}", d.frames);
        assert_eq!(memo.stacks(&raw(0), &[], &mut syms, &mut usyms), (None, None));
    }

    #[test]
    fn durations_need_an_observed_event() {
        assert_eq!(since(10, 4, true), Some(6));
        assert_eq!(since(10, 0, true), None);
        assert_eq!(since(10, 4, false), None);
        assert_eq!(since(0, 4, true), None, "no scheduler clock: unknown");
        assert_eq!(
            since(3, 4, true),
            Some(0),
            "clocks of two CPUs may differ slightly"
        );
    }

    #[cfg(target_arch = "x86_64")]
    #[test]
    fn a_record_with_a_stack_window_is_unwound_with_cfi() {
        let c = std::thread::spawn(crate::unwind::capture::capture)
            .join()
            .unwrap();
        let (mut syms, mut usyms, mut memo) =
            (KernelSymbols::new(), UserSymbols::new(), StackMemo::default());
        let mut r = raw(XF_UWIN_TO_END);
        r.tgid = std::process::id();
        r.uregs = [c.regs.ip, c.regs.sp, c.regs.fp, 0];
        let (_, u) = memo.stacks(&r, &c.stack, &mut syms, &mut usyms);
        let u = u.expect("a user stack");
        assert!(!u.cut_short(), "{:?}", u.frames);
        assert!(
            u.frames.first().is_some_and(|f| f.contains("capture")),
            "{:?}",
            u.frames
        );
        assert!(
            u.frames.iter().any(|f| f.contains("start_thread")),
            "{:?}",
            u.frames
        );
        // Cut short of the stack's end, the window says the stack went on.
        r.flags = 0;
        let (_, short) = memo.stacks(&r, &c.stack[..64], &mut syms, &mut usyms);
        let short = short.unwrap();
        assert_eq!(short.frames.last().map(|f| &**f), Some(crate::model::DEEPER));
    }
}
