// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * xtop's kernel side.
 *
 * Event hooks (tp_btf) keep one small `thread_state` per thread in task local
 * storage: syscall entry, last switch off/on CPU, last wakeup. They do no I/O
 * and no allocation beyond the first event of a thread.
 *
 * Once per interval userspace reads the `dump_tasks` task iterator, which walks
 * every thread, decides in the kernel whether it is worth reporting, and writes
 * one `task_sample` (live task fields joined with the tracked state, plus the
 * kernel and user stacks of off-CPU threads) into the iterator's seq_file.
 *
 * Stacks of threads on a CPU cannot be read from another CPU: a low-rate
 * perf_event profile (`profile_cpu`) keeps each running thread's latest
 * kernel and user stack, and the iterator reports it if it was taken during
 * the thread's current stint on the CPU.
 *
 * Nothing stack-related runs on the syscall or scheduler hot paths.
 */
#include "vmlinux.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>
#include <bpf/bpf_core_read.h>
#include <bpf/bpf_endian.h>
#include "xtop.h"

_Static_assert(sizeof(struct sock_rec) == 48, "src/target/socket.rs reads 48 bytes");

char LICENSE[] SEC("license") = "GPL";

#define TASK_RUNNING         0x0000
#define TASK_UNINTERRUPTIBLE 0x0002
#define __TASK_STOPPED       0x0004
#define __TASK_TRACED        0x0008
#define EXIT_DEAD            0x0010
#define EXIT_ZOMBIE          0x0020
#define TASK_PARKED          0x0040
#define TASK_REPORT          0x007f
#define TASK_NOLOAD          0x0400
#define TASK_IDLE            (TASK_UNINTERRUPTIBLE | TASK_NOLOAD)
#define TASK_RTLOCK_WAIT     0x1000
#define TASK_FROZEN          0x8000
#define PF_EXITING           0x00000004
#define PF_USER_WORKER       0x00004000 /* io_uring / vhost workers: never in user space */
#define PF_KTHREAD           0x00200000
#define NO_USER_STACK        (PF_EXITING | PF_USER_WORKER | PF_KTHREAD)

struct {
	__uint(type, BPF_MAP_TYPE_TASK_STORAGE);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__type(key, int);
	__type(value, struct thread_state);
} thread_states SEC(".maps");

/* -p PID,...: thread group ids to report (consulted when pid_filter_on). */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 1024);
	__type(key, __u32);
	__type(value, __u8);
} pid_filter SEC(".maps");

/* Processes whose wait state the iterator reads (struct app_proc), by tgid.
 * LRU: userspace never has to clean up after processes that exited. */
struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, 8192);
	__type(key, __u32);
	__type(value, struct app_proc);
} app_procs SEC(".maps");

/* Scratch record: too large for the 512-byte BPF stack. */
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct task_sample);
} scratch SEC(".maps");

/* Latest on-CPU profile stacks of each thread. */
struct {
	__uint(type, BPF_MAP_TYPE_TASK_STORAGE);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__type(key, int);
	__type(value, struct cpu_stack);
} cpu_stacks SEC(".maps");

/* A window of the user stack being walked: one remote copy serves several
 * frames (each bpf_copy_from_user_task on another task costs ~0.3 µs). */
#define UWIN_WORDS 64
struct ustack_window {
	__u64 w[UWIN_WORDS];
};

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct ustack_window);
} uwin SEC(".maps");

/* A copy of an off-CPU thread's user stack, unwound with CFI in userspace. */
struct stack_copy {
	__u8 b[XTOP_UWIN_BYTES];
};

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct stack_copy);
} stackwin SEC(".maps");

/* Running threads' user stack windows (struct cpu_window): XTOP_CPU_WINDOWS
 * slots per possible CPU, sized by userspace before load (1 entry when the
 * profile copies no windows). */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct cpu_window);
} cpu_windows SEC(".maps");

/* Each CPU's next cpu_windows slot (round robin). */
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, __u32);
} win_next SEC(".maps");

/* A sample's file record (see resolve_target). */
struct tgt_buf {
	char b[XTOP_TGT_BYTES];
};

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct tgt_buf);
} tgtbuf SEC(".maps");

/* Block I/O requests in flight (struct io_req), by struct request address:
 * entered in the context of the thread that starts one (block_io_start),
 * removed at its completion (block_io_done, usually in an interrupt). Request
 * structs come from a fixed pool per queue, so an entry whose completion was
 * missed is overwritten when its struct is reused: they cannot pile up. */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 16384);
	__type(key, __u64);
	__type(value, struct io_req);
} inflight SEC(".maps");

/* Which argument of each syscall names a file (TA_*), set before load from
 * src/target/args.rs: the numbers are the architecture's, the list is not. */
const volatile __u8 sc_target[XTOP_NR_SYSCALLS];

#ifndef bpf_ksym_exists
#define bpf_ksym_exists(sym) (!!&(sym))
#endif
extern void bpf_rcu_read_lock(void) __ksym;
extern void bpf_rcu_read_unlock(void) __ksym;
extern int bpf_copy_from_user_task_str(void *dst, __u32 dst__sz, const void *unsafe_ptr__ign,
				       struct task_struct *tsk, __u64 flags) __ksym __weak;

/* Runtime switches, written by userspace through the mmapped .bss. */
volatile bool cfi_windows;   /* off-CPU user stacks as windows for CFI (else a frame-pointer walk here) */
volatile bool emit_all;      /* also report sleeping / idle / parked threads */
volatile bool user_stacks;   /* walk user stacks (off-CPU at pass time, on-CPU in the profile) */
volatile bool pid_filter_on;
volatile bool resolve_targets; /* name the file or path each syscall works on */
volatile bool read_apps;     /* read programs' own wait states (app_procs) */
volatile bool io_hooks;      /* both block I/O hooks are attached */
volatile __u32 pass_gen;     /* incremented by userspace before each pass */
__u64 pass_now_ns;            /* clocks read at the first thread of a pass */
__u64 pass_now_rq;
__u64 prev_pass_rq;           /* pass_now_rq of the previous pass (0: none yet) */

/* The scheduler's clock (rq->clock) of the CPU a task is on: what sched_info
 * timestamps use. A few plain loads, where bpf_ktime_get_ns() costs ~40 ns.
 * Reached through the task's CFS run queue (CONFIG_FAIR_GROUP_SCHED); where
 * that link is missing, 0 tells userspace the timing columns are unknown. */
static __always_inline __u64 rq_clock_of(struct task_struct *t)
{
	struct cfs_rq *cfs;

	if (!bpf_core_field_exists(cfs->rq))
		return 0;
	cfs = t->se.cfs_rq;
	return cfs ? cfs->rq->clock : 0;
}

/* Lifetime counters of thread_state, so tests can prove exits free them. */
__u64 states_created;
__u64 states_freed;
/* Block I/O requests not tracked because the inflight map was full. */
__u64 io_untracked;

static __always_inline struct thread_state *state_of(struct task_struct *t)
{
	struct thread_state *s = bpf_task_storage_get(&thread_states, t, 0, 0);

	/* A dying task must not get fresh storage after sched_process_exit freed it. */
	if (s || (t->flags & PF_EXITING) || t->pid == 0)
		return s;
	s = bpf_task_storage_get(&thread_states, t, 0, BPF_LOCAL_STORAGE_GET_F_CREATE);
	if (!s)
		return s;
	s->sc_nr = -1;
	__sync_fetch_and_add(&states_created, 1);
	/* The sleepable iterator can be preempted between the check above and
	 * the creation, while the task runs its exit hook: undo, or the state
	 * would outlive that hook (until the task struct is freed). */
	if (t->flags & PF_EXITING) {
		if (bpf_task_storage_delete(&thread_states, t) == 0)
			__sync_fetch_and_add(&states_freed, 1);
		return NULL;
	}
	return s;
}

/* Registers are read by direct (BTF) loads, not bpf_probe_read: this hook runs
 * on every syscall of every thread, and each helper call costs ~10 ns. */
SEC("tp_btf/sys_enter")
int BPF_PROG(on_sys_enter, struct pt_regs *regs, long id)
{
	struct thread_state *s = state_of(bpf_get_current_task_btf());

	if (!s)
		return 0;
	s->sc_nr = id;
	s->sc_entry_ns = bpf_ktime_get_ns();
	s->sc_args[0] = PT_REGS_PARM1_SYSCALL(regs);
	s->sc_args[1] = PT_REGS_PARM2_SYSCALL(regs);
	s->sc_args[2] = PT_REGS_PARM3_SYSCALL(regs);
	s->sc_args[3] = PT_REGS_PARM4_SYSCALL(regs);
	s->sc_args[4] = PT_REGS_PARM5_SYSCALL(regs);
	s->sc_args[5] = PT_REGS_PARM6_SYSCALL(regs);
	s->sc_seq++;
	s->flags |= XF_SC_TRACKED | XF_IN_SYSCALL;
	return 0;
}

SEC("tp_btf/sys_exit")
int BPF_PROG(on_sys_exit, struct pt_regs *regs, long ret)
{
	struct thread_state *s = state_of(bpf_get_current_task_btf());

	if (!s)
		return 0;
	s->sc_nr = -1;
	s->flags = (s->flags & ~XF_IN_SYSCALL) | XF_SC_TRACKED;
	return 0;
}

/* Only the thread leaving the CPU is touched: when a thread got a CPU, and how
 * long it has been queued for one, the kernel already keeps in sched_info. */
SEC("tp_btf/sched_switch")
int BPF_PROG(on_switch, bool preempt, struct task_struct *prev, struct task_struct *next)
{
	struct thread_state *s = state_of(prev);

	if (s) {
		/* Same rule as the kernel's nvcsw/nivcsw accounting. */
		bool voluntary = !preempt && prev->__state != TASK_RUNNING;

		s->offcpu_rq = rq_clock_of(prev);
		if (voluntary)
			s->blocked_rq = s->offcpu_rq;
		s->flags = (s->flags & ~XF_VOLUNTARY) | XF_SEEN_SWITCH |
			   (voluntary ? XF_VOLUNTARY : 0);
	}
	return 0;
}

static __always_inline int record_wakeup(struct task_struct *p)
{
	struct thread_state *s = state_of(p);

	if (s) {
		/* In interrupt context this is the interrupted thread: "who was on CPU". */
		s->waker_tid = bpf_get_current_pid_tgid();
		s->flags |= XF_SEEN_WAKEUP;
	}
	return 0;
}

SEC("tp_btf/sched_wakeup")
int BPF_PROG(on_wakeup, struct task_struct *p)
{
	return record_wakeup(p);
}

SEC("tp_btf/sched_wakeup_new")
int BPF_PROG(on_wakeup_new, struct task_struct *p)
{
	return record_wakeup(p);
}

SEC("tp_btf/sched_process_exit")
int BPF_PROG(on_exit, struct task_struct *p)
{
	if (bpf_task_storage_delete(&thread_states, p) == 0)
		__sync_fetch_and_add(&states_freed, 1);
	bpf_task_storage_delete(&cpu_stacks, p);
	return 0;
}

#define XTOP_REQ_OP_MASK 0xff /* REQ_OP_BITS of a request's cmd_flags */

/* A request's disk as the kernel's dev_t (MKDEV: major << 20 | minor), the
 * whole disk even for a partition's I/O, as block tracepoints name it. */
static __always_inline __u32 disk_dev(struct request *rq)
{
	struct gendisk *d = BPF_CORE_READ(rq, q, disk);

	if (!d)
		return 0;
	return ((__u32)BPF_CORE_READ(d, major) << 20) | (__u32)BPF_CORE_READ(d, first_minor);
}

/* Runs where the request is made from a bio, in the submitting thread (a
 * kworker for writeback): who waits on it, if anyone does. */
SEC("tp_btf/block_io_start")
int BPF_PROG(on_io_start, struct request *rq)
{
	struct task_struct *t = bpf_get_current_task_btf();
	struct thread_state *s;
	struct io_req e = {};
	__u64 key = (__u64)rq;

	e.start_ns = bpf_ktime_get_ns();
	e.tid = t->pid;
	e.dev = disk_dev(rq);
	e.bytes = BPF_CORE_READ(rq, __data_len);
	e.op = BPF_CORE_READ(rq, cmd_flags) & XTOP_REQ_OP_MASK;
	if (bpf_map_update_elem(&inflight, &key, &e, BPF_ANY)) {
		__sync_fetch_and_add(&io_untracked, 1);
		return 0;
	}
	s = state_of(t);
	if (s) {
		s->io_rq = key;
		s->io_start_ns = e.start_ns;
	}
	return 0;
}

SEC("tp_btf/block_io_done")
int BPF_PROG(on_io_done, struct request *rq)
{
	__u64 key = (__u64)rq;

	bpf_map_delete_elem(&inflight, &key);
	return 0;
}

/* The block I/O request the thread started last, if it is still in flight:
 * what a thread blocked on its own I/O waits for. The entry is checked
 * against the thread's record of it before and after the copy, as its
 * struct may be reused for another thread's request meanwhile. */
static __always_inline void read_io(struct thread_state *s, struct task_sample *r)
{
	__u64 key = s->io_rq, start = s->io_start_ns;
	struct io_req *e;

	if (!key)
		return;
	e = bpf_map_lookup_elem(&inflight, &key);
	if (!e || e->start_ns != start || e->tid != r->tid)
		return;
	r->io_dev = e->dev;
	r->io_bytes = e->bytes;
	r->io_op = e->op;
	barrier();
	if (e->start_ns != start)
		return;
	r->io_start_ns = start;
	r->flags |= XF_IO_INFLIGHT;
}

/* Kernel-side filter: what State::decode() (src/model/state.rs) calls RUN,
 * RUNQ, DISK, STOPPED, TRACED, ZOMBIE or DEAD. Like the kernel's
 * __task_state_index(), bits outside TASK_REPORT (TASK_WAKING...) are masked. */
static __always_inline bool is_active(__u32 state, __u32 exit_state)
{
	__u32 s = (state | exit_state) & TASK_REPORT;

	if ((state & TASK_IDLE) == TASK_IDLE)
		return false;
	if (state == TASK_RTLOCK_WAIT || (state & TASK_FROZEN))
		return true;
	if (s & TASK_PARKED)
		return false;
	if (s & (EXIT_ZOMBIE | EXIT_DEAD | __TASK_TRACED | __TASK_STOPPED | TASK_UNINTERRUPTIBLE))
		return true;
	return s == TASK_RUNNING;
}

static __always_inline void read_user_regs(struct task_struct *task, struct task_sample *r)
{
	struct pt_regs *regs = (struct pt_regs *)bpf_task_pt_regs(task);

	if (!regs)
		return;
#if defined(__TARGET_ARCH_x86)
	r->regs_nr = regs->orig_ax;
#elif defined(__TARGET_ARCH_arm64)
	r->regs_nr = regs->syscallno;
#else
	return;
#endif
	r->regs_args[0] = PT_REGS_PARM1_SYSCALL(regs);
	r->regs_args[1] = PT_REGS_PARM2_SYSCALL(regs);
	r->regs_args[2] = PT_REGS_PARM3_SYSCALL(regs);
	r->regs_args[3] = PT_REGS_PARM4_SYSCALL(regs);
	r->regs_args[4] = PT_REGS_PARM5_SYSCALL(regs);
	r->regs_args[5] = PT_REGS_PARM6_SYSCALL(regs);
	r->flags |= XF_REGS_VALID;
}

#define USTACK_MASK (XTOP_USTACK_DEPTH - 1)
#define barrier() asm volatile("" ::: "memory")

/* User stacks are walked along the frame-pointer chain: each frame record is
 * {caller's frame pointer, return address}. The chain ends at its root when
 * the frame pointer or the return address is 0; any other stop (unreadable
 * record, frame pointer not growing or misaligned) sets XF_USTACK_TRUNC in
 * *uflags, and the depth limit XF_USTACK_DEEP with it. Code built without
 * frame pointers shows as a truncated stack. */

/* Another (off-CPU) thread's stack, from a sleepable program: one copy of a
 * 512-byte window serves several frames; a window running past the end of the
 * stack mapping falls back to the 16-byte record alone. */
static __always_inline int walk_user_task(struct task_struct *task, struct pt_regs *regs, __u64 *out,
					  __u32 *uflags)
{
	__u64 fp = PT_REGS_FP(regs), base = 0, nfp, ra, off, zero = 0;
	struct ustack_window *win = bpf_map_lookup_elem(&uwin, &zero);
	bool have = false;
	int i, n = 1;

	*uflags = XF_USTACK_TRUNC;
	out[0] = PT_REGS_IP(regs);
	if (!win)
		return n;
	for (i = 1; i < XTOP_USTACK_DEPTH; i++) {
		if (!fp)
			break;
		if (fp & 7)
			return n;
		if (!have || fp < base || fp + 16 > base + sizeof(win->w)) {
			base = fp;
			have = !bpf_copy_from_user_task(win->w, sizeof(win->w), (void *)fp, task, 0);
			/* only w[0..1] valid: the next frame refills */
			if (!have && bpf_copy_from_user_task(win->w, 16, (void *)fp, task, 0))
				return n;
		}
		off = ((fp - base) / 8) & (UWIN_WORDS - 1);
		if (off > UWIN_WORDS - 2)
			return n;
		nfp = win->w[off];
		ra = win->w[off + 1];
		if (!ra) {
			fp = 0;
			break;
		}
		out[i & USTACK_MASK] = ra;
		n = i + 1;
		if (nfp && nfp <= fp)
			return n;
		fp = nfp;
	}
	*uflags = fp ? XF_USTACK_TRUNC | XF_USTACK_DEEP : 0;
	return n;
}

/* The mapping bpf_find_vma found: [lo, hi). */
struct vma_range {
	__u64 lo, hi;
};

static long vma_range_of(struct task_struct *task, struct vm_area_struct *vma, void *data)
{
	struct vma_range *r = data;

	r->lo = vma->vm_start;
	r->hi = vma->vm_end;
	return 0;
}

/* The registers unwinding starts from: user ip, sp, fp, lr. */
static __always_inline void user_regs(struct pt_regs *regs, __u64 *uregs)
{
	uregs[0] = PT_REGS_IP(regs);
	uregs[1] = PT_REGS_SP(regs);
	uregs[2] = PT_REGS_FP(regs);
#if defined(__TARGET_ARCH_arm64)
	uregs[3] = regs->regs[30];
#endif
}

/* The mapping holding `sp`, or {0, 0}. The mmap lock is only tried. */
static __always_inline struct vma_range stack_vma(struct task_struct *task, __u64 sp)
{
	struct vma_range r = {};

	if (bpf_find_vma(task, sp, vma_range_of, &r, 0) || r.hi <= sp || r.lo > sp)
		r.lo = r.hi = 0;
	return r;
}

/* Bytes of user stack a window takes from `sp`: up to `end`, the end of the
 * stack's mapping, at most XTOP_UWIN_BYTES; *to_end says whether it gets
 * there. Without `end` (the mmap lock was busy) the window ends with sp's
 * own page, which is surely mapped, and is short. */
static __always_inline __u64 window_len(__u64 sp, __u64 end, bool *to_end)
{
	__u64 len;

	*to_end = true;
	if (end <= sp) {
		end = (sp | 4095) + 1;
		*to_end = false;
	}
	len = end - sp;
	if (len > XTOP_UWIN_BYTES) {
		len = XTOP_UWIN_BYTES;
		*to_end = false;
	}
	return len;
}

/* Copies another (off-CPU) thread's user stack window, with the registers
 * unwinding starts from. Userspace unwinds it with the binaries' CFI.
 * Returns the bytes copied. */
static __always_inline __u32 copy_window(struct task_struct *task, struct pt_regs *regs,
					 struct task_sample *r, struct stack_copy *w)
{
	__u64 sp = PT_REGS_SP(regs), len;
	bool to_end;

	user_regs(regs, r->uregs);
	len = window_len(sp, stack_vma(task, sp).hi, &to_end);
	barrier_var(len);
	if (!len || len > XTOP_UWIN_BYTES || bpf_copy_from_user_task(w->b, len, (void *)sp, task, 0))
		return 0;
	if (to_end)
		r->flags |= XF_UWIN_TO_END;
	return len;
}

/* The current thread's stack, from the profile's interrupt: no faulting. */
static __always_inline int walk_user_current(struct pt_regs *regs, __u64 *out, __u32 *uflags)
{
	__u64 fp = PT_REGS_FP(regs), fr[2];
	int i, n = 1;

	*uflags = XF_USTACK_TRUNC;
	out[0] = PT_REGS_IP(regs);
	for (i = 1; i < XTOP_USTACK_DEPTH; i++) {
		if (!fp)
			break;
		if ((fp & 7) || bpf_probe_read_user(fr, sizeof(fr), (void *)fp))
			return n;
		if (!fr[1]) {
			fp = 0;
			break;
		}
		out[i & USTACK_MASK] = fr[1];
		n = i + 1;
		if (fr[0] && fr[0] <= fp)
			return n;
		fp = fr[0];
	}
	*uflags = fp ? XF_USTACK_TRUNC | XF_USTACK_DEEP : 0;
	return n;
}

/* The first `len` bytes from `sp` that are present, page by page: a
 * non-faulting read of a range fails whole if one page of it was never
 * touched (below a large frame never written, say). The window ends there,
 * short. Returns the bytes copied. */
static __always_inline __u64 copy_present(struct cpu_window *w, __u64 sp, __u64 len)
{
	__u64 off = 0, chunk;
	int i;

	for (i = 0; i < XTOP_UWIN_BYTES / 4096 + 1; i++) {
		if (off >= len || off > XTOP_UWIN_BYTES)
			break;
		chunk = ((sp + off) | 4095) + 1 - (sp + off);
		if (chunk > len - off)
			chunk = len - off;
		if (chunk > 4096)
			break;
		barrier_var(chunk);
		if (bpf_probe_read_user(w->b + off, chunk, (void *)(sp + off)))
			break;
		off += chunk;
	}
	return off;
}

/* The interrupted thread's user stack window, from the profile: into this
 * CPU's next cpu_windows slot, which `c` then names. The thread is current
 * and its stack pages in use, so a non-faulting read serves. */
static __always_inline void profile_window(struct task_struct *t, struct pt_regs *regs,
					   struct cpu_stack *c)
{
	__u32 zero = 0, slot, *rr = bpf_map_lookup_elem(&win_next, &zero);
	__u64 sp = PT_REGS_SP(regs), len, seq;
	struct cpu_window *w;
	bool to_end;

	if (!rr)
		return;
	slot = bpf_get_smp_processor_id() * XTOP_CPU_WINDOWS + (*rr & (XTOP_CPU_WINDOWS - 1));
	*rr += 1;
	w = bpf_map_lookup_elem(&cpu_windows, &slot);
	if (!w)
		return;
	/* From an interrupt bpf_find_vma defers the mmap unlock to an irq_work,
	 * ~10 µs on a VM (a self-IPI): look once per thread and stack, then
	 * while sp stays in that mapping use what was found. */
	if (sp < c->stack_lo || sp >= c->stack_hi) {
		struct vma_range vr = stack_vma(t, sp);

		c->stack_lo = vr.lo;
		c->stack_hi = vr.hi;
	}
	len = window_len(sp, c->stack_hi, &to_end);
	/* A seqcount, as for cpu_stack: the iterator may copy it meanwhile. */
	seq = w->seq | 1;
	w->seq = seq;
	barrier();
	user_regs(regs, w->uregs);
	barrier_var(len);
	if (len > XTOP_UWIN_BYTES)
		len = 0;
	if (len && bpf_probe_read_user(w->b, len, (void *)sp)) {
		len = copy_present(w, sp, len);
		to_end = false;
	}
	w->flags = to_end ? XF_UWIN_TO_END : 0;
	w->len = len;
	barrier();
	w->seq = seq + 1;
	if (len) {
		c->win_slot = slot;
		c->win_seq = seq + 1;
	}
}

/* On-CPU profile: a CPU-clock event on every CPU at a low fixed rate. Keeps
 * the interrupted thread's latest stacks, stamped with the scheduler clock so
 * the iterator can tell whether they belong to the thread's current stint. */
SEC("perf_event")
int profile_cpu(struct bpf_perf_event_data *ctx)
{
	struct task_struct *t = bpf_get_current_task_btf();
	struct cpu_stack *c;
	struct pt_regs *regs;
	__u32 uflags = 0;
	int n;

	if (t->pid == 0 || (t->flags & PF_EXITING))
		return 0;
	c = bpf_task_storage_get(&cpu_stacks, t, 0, BPF_LOCAL_STORAGE_GET_F_CREATE);
	if (!c)
		return 0;
	/* A seqcount: the iterator may read this from another CPU meanwhile. */
	c->seq++;
	barrier();
	c->stamp_rq = rq_clock_of(t);
	c->kstack_len = bpf_get_stack(ctx, c->kstack, sizeof(c->kstack), 0);
	c->ustack_len = 0;
	c->flags = 0;
	c->win_seq = 0;
	regs = (struct pt_regs *)bpf_task_pt_regs(t);
	if (user_stacks && regs && !(t->flags & NO_USER_STACK)) {
		if (cfi_windows)
			profile_window(t, regs, c);
		/* Also when a window was copied: the fallback if its slot is
		 * reused before a pass reads it. */
		n = walk_user_current(regs, c->ustack, &uflags);
		c->ustack_len = n * 8;
		c->flags = uflags;
	}
	barrier();
	c->seq++;
	return 0;
}

/* The window the profile copied into cpu_windows[slot] as `seq`, into the
 * record and `w`, unless the slot was reused since (or while copying it).
 * Returns whether the record has it. */
static __always_inline bool cpu_window_of(__u32 slot, __u64 seq, struct task_sample *r,
					  struct stack_copy *w)
{
	struct cpu_window *cw = bpf_map_lookup_elem(&cpu_windows, &slot);
	__u32 len;

	if (!cw || cw->seq != seq)
		return false;
	len = cw->len;
	if (len > XTOP_UWIN_BYTES)
		len = 0;
	barrier_var(len);
	if (!len || bpf_probe_read_kernel(w->b, len, cw->b))
		return false;
	__builtin_memcpy(r->uregs, cw->uregs, sizeof(r->uregs));
	r->flags |= cw->flags & XF_UWIN_TO_END;
	barrier();
	if (cw->seq != seq) {
		r->flags &= ~XF_UWIN_TO_END;
		return false;
	}
	r->uwin_len = len;
	return true;
}

/* A running thread's stacks: its latest profile sample, if that was taken
 * during its current stint on the CPU, or earlier in this interval with the
 * thread only preempted since, never blocked (a CPU-bound thread sharing a
 * busy CPU runs in slices of a few ms, shorter than the profile period).
 * Otherwise none: an older stack would describe other work. */
static __always_inline void profile_stacks(struct task_struct *task, struct thread_state *s,
					   struct task_sample *r, struct stack_copy *w)
{
	struct cpu_stack *c = bpf_task_storage_get(&cpu_stacks, task, 0, 0);
	__u64 stamp, win_seq;
	__u32 win_slot;
	__u64 seq;
	__s32 klen, ulen;
	__u32 flags;

	if (!c)
		return;
	seq = c->seq;
	barrier();
	stamp = c->stamp_rq;
	if ((seq & 1) || !stamp)
		return;
	if (stamp < task->sched_info.last_arrival &&
	    (!s || !prev_pass_rq || stamp < prev_pass_rq || stamp < s->blocked_rq))
		return;
	klen = c->kstack_len;
	ulen = c->ustack_len;
	flags = c->flags;
	win_slot = c->win_slot;
	win_seq = c->win_seq;
	__builtin_memcpy(r->kstack, c->kstack, sizeof(r->kstack));
	__builtin_memcpy(r->ustack, c->ustack, sizeof(r->ustack));
	barrier();
	if (c->seq != seq)
		return;
	r->kstack_len = klen;
	r->flags |= XF_ONCPU_STACK;
	if (win_seq && w && cpu_window_of(win_slot, win_seq, r, w))
		return;
	r->ustack_len = ulen;
	r->flags |= flags & (XF_USTACK_TRUNC | XF_USTACK_DEEP);
}

/* Whether the thread got a CPU since `arrival` (or is on one now). */
static __always_inline bool ran_since(struct task_struct *task, __u64 arrival)
{
	return task->sched_info.last_arrival != arrival || task->on_cpu;
}

/* Stacks of an off-CPU thread. Unwinding costs microseconds: a thread that
 * has not run since the previous pass emitted its stacks still has them, so
 * say so instead, and userspace reuses the ones it decoded then. */
static __always_inline void offcpu_stacks(struct task_struct *task, struct thread_state *s,
					  struct task_sample *r, struct stack_copy *w, bool user)
{
	__u64 arrival = task->sched_info.last_arrival;
	__u32 gen = pass_gen;
	struct pt_regs *regs;
	__u32 uflags = 0;

	if (!s)
		s = state_of(task);
	if (s && s->stack_gen + 1 == gen && s->stack_arrival == arrival) {
		r->flags |= XF_STACK_SAME;
	} else {
		r->kstack_len = bpf_get_task_stack(task, r->kstack, sizeof(r->kstack), 0);
		regs = (struct pt_regs *)bpf_task_pt_regs(task);
		/* If the thread ran meanwhile, what was read is a mix of two moments:
		 * better none. Checked after each stack: copying a user stack window
		 * takes µs, longer than the shortest waits (a 4 KiB O_DIRECT read),
		 * and the kernel stack taken before it is still whole. */
		if (ran_since(task, arrival)) {
			r->kstack_len = 0;
			arrival = 0;
		} else if (user && regs) {
			if (cfi_windows && w) {
				r->uwin_len = copy_window(task, regs, r, w);
				/* No window (unmapped sp?): the instruction pointer alone. */
				if (!r->uwin_len) {
					r->ustack[0] = PT_REGS_IP(regs);
					r->ustack_len = 8;
					r->flags |= XF_USTACK_TRUNC;
				}
			} else {
				r->ustack_len = walk_user_task(task, regs, r->ustack, &uflags) * 8;
				r->flags |= uflags;
			}
			if (ran_since(task, arrival)) {
				r->ustack_len = 0;
				r->uwin_len = 0;
				r->flags &= ~(XF_USTACK_TRUNC | XF_USTACK_DEEP | XF_UWIN_TO_END);
				arrival = 0;
			}
		}
	}
	if (s) {
		s->stack_gen = gen;
		s->stack_arrival = arrival;
	}
}

/* Filesystem magics of anonymous files whose dentry name tells their kind. */
#define PIPEFS_MAGIC 0x50495045
#define SOCKFS_MAGIC 0x534F434B

/* State of a walk up a file's dentries (walk_step). */
struct walk {
	struct dentry *d;
	struct dentry *root; /* the root of mount m */
	struct mount *m;
	__u32 off;           /* bytes of names written */
	__u8 flags;          /* TF_* */
	__u8 failed;
	__u8 done;
};

/* One step up: a dentry's name, or the crossing of a mount point. A
 * bpf_loop() callback, so the verifier checks one step, not every depth. */
static long walk_step(__u32 i, struct walk *w)
{
	/* Locals: a CO-RE read through w-> would relocate struct walk too. */
	struct dentry *d = w->d, *parent;
	struct mount *m = w->m, *mp;
	struct tgt_buf *b;
	__u32 zero = 0;
	long n;

	if (d == w->root) {
		mp = BPF_CORE_READ(m, mnt_parent);
		if (mp == m || !mp) {
			w->done = 1; /* the root of the thread's mount tree */
			return 1;
		}
		w->d = BPF_CORE_READ(m, mnt_mountpoint);
		w->m = mp;
		w->root = BPF_CORE_READ(mp, mnt.mnt_root);
		return 0;
	}
	b = bpf_map_lookup_elem(&tgtbuf, &zero);
	if (!b || !d) {
		w->failed = 1;
		return 1;
	}
	if (w->off >= XTOP_TGT_SPAN) {
		w->flags |= TF_LONG;
		w->done = 1;
		return 1;
	}
	n = bpf_probe_read_kernel_str(&b->b[w->off & (XTOP_TGT_SPAN - 1)], XTOP_NAME_BYTES,
				      BPF_CORE_READ(d, d_name.name));
	if (n <= 0) {
		w->failed = 1;
		return 1;
	}
	w->off += n;
	parent = BPF_CORE_READ(d, d_parent);
	if (parent == d || !parent) {
		w->flags |= TF_PSEUDO;
		w->done = 1;
		return 1;
	}
	w->d = parent;
	return 0;
}

#define AF_UNIX  1
#define AF_INET  2
#define AF_INET6 10

/* The sun_path of a UNIX socket's address (as bound; abstract ones start
 * with a NUL), at dst; its length, 0 when it has none. */
static __always_inline __u32 unix_path(struct sock *sk, char *dst)
{
	struct unix_address *a = BPF_CORE_READ((struct unix_sock *)sk, addr);
	__u32 len;

	if (!a)
		return 0;
	len = BPF_CORE_READ(a, len);
	if (len <= sizeof(__kernel_sa_family_t))
		return 0;
	len -= sizeof(__kernel_sa_family_t);
	if (len > XTOP_SUN_PATH)
		len = XTOP_SUN_PATH;
	barrier_var(len);
	len &= 127; /* what the verifier can follow: the clamp, again */
	if (bpf_probe_read_kernel(dst, len, &a->name[0].sun_path))
		return 0;
	return len;
}

/* What a socket file connects, as a struct sock_rec at the start of the file
 * record, then its UNIX addresses; the bytes written, 0 if unreadable. The
 * fields are read without the socket lock, as /proc/net/tcp reads them: a
 * connection changing state meanwhile may show its old or new addresses. */
static __always_inline __u32 read_sock(struct file *f, struct tgt_buf *b)
{
	struct sock_rec *sr = (struct sock_rec *)b->b;
	struct socket *sock = BPF_CORE_READ(f, private_data);
	struct sock *sk = sock ? BPF_CORE_READ(sock, sk) : NULL, *peer;
	__u32 own, a4;

	if (!sk)
		return 0;
	__builtin_memset(sr, 0, sizeof(*sr));
	sr->type = BPF_CORE_READ(sock, type);
	sr->family = BPF_CORE_READ(sk, __sk_common.skc_family);
	sr->protocol = BPF_CORE_READ(sk, sk_protocol);
	sr->state = BPF_CORE_READ(sk, __sk_common.skc_state);
	switch (sr->family) {
	case AF_INET:
		/* Through a __u32: BPF_CORE_READ_INTO reads sizeof(*dst) bytes. */
		a4 = BPF_CORE_READ(sk, __sk_common.skc_rcv_saddr);
		__builtin_memcpy(sr->laddr, &a4, sizeof(a4));
		a4 = BPF_CORE_READ(sk, __sk_common.skc_daddr);
		__builtin_memcpy(sr->raddr, &a4, sizeof(a4));
		break;
	case AF_INET6:
		BPF_CORE_READ_INTO(&sr->laddr, sk, __sk_common.skc_v6_rcv_saddr);
		BPF_CORE_READ_INTO(&sr->raddr, sk, __sk_common.skc_v6_daddr);
		break;
	case AF_UNIX:
		/* A connected client has no address of its own: its server's
		 * (the peer's) is what names the connection. */
		own = unix_path(sk, b->b + sizeof(*sr));
		sr->uown_len = own;
		peer = BPF_CORE_READ((struct unix_sock *)sk, peer);
		if (peer)
			sr->upeer_len = unix_path(peer, b->b + sizeof(*sr) + own);
		return sizeof(*sr) + sr->uown_len + sr->upeer_len;
	default:
		return sizeof(*sr);
	}
	sr->lport = BPF_CORE_READ(sk, __sk_common.skc_num);
	sr->rport = bpf_ntohs(BPF_CORE_READ(sk, __sk_common.skc_dport));
	return sizeof(*sr);
}

/* The names of a file's dentries up to the root of the thread's mount tree,
 * leaf first, as NUL-terminated strings in the file record; mount points are
 * crossed as d_path() does, with nothing locked beyond RCU. */
static __always_inline void walk_dentries(struct file *f, struct task_sample *r,
					  struct tgt_buf *b)
{
	struct vfsmount *vm = BPF_CORE_READ(f, f_path.mnt);
	struct dentry *d = BPF_CORE_READ(f, f_path.dentry);
	struct walk w = {
		.d = d,
		.m = container_of(vm, struct mount, mnt),
		.root = BPF_CORE_READ(vm, mnt_root),
	};

	r->tgt_magic = BPF_CORE_READ(d, d_sb, s_magic);
	/* An unlinked file: its dentry left the hash table, and it is no root. */
	if (!BPF_CORE_READ(d, d_hash.pprev) && BPF_CORE_READ(d, d_parent) != d)
		w.flags |= TF_DELETED;
	if (r->tgt_magic == SOCKFS_MAGIC) {
		w.off = read_sock(f, b);
		if (w.off)
			w.flags |= TF_SOCK;
	}
	bpf_loop(XTOP_PATH_DEPTH, walk_step, &w, 0);
	if (w.failed)
		return;
	if (!w.done)
		w.flags |= TF_LONG;
	r->tgt_kind = TK_DENTRY;
	r->tgt_flags = w.flags;
	r->tgt_len = w.off;
}

/* The file open as descriptor fd in the thread's own file table, read under
 * RCU as the kernel's fd lookup does (tables and files are freed after a
 * grace period): what /proc/PID/fd would show, without its race with close. */
static __always_inline void resolve_fd(struct task_struct *task, int fd, struct task_sample *r,
				       struct tgt_buf *b)
{
	struct files_struct *files;
	struct fdtable *fdt;
	struct file **fds, *f = NULL;

	r->tgt_kind = TK_FAIL;
	r->tgt_fd = fd;
	bpf_rcu_read_lock();
	files = BPF_CORE_READ(task, files);
	fdt = files ? BPF_CORE_READ(files, fdt) : NULL;
	if (fdt && fd < BPF_CORE_READ(fdt, max_fds)) {
		fds = BPF_CORE_READ(fdt, fd);
		bpf_probe_read_kernel(&f, sizeof(f), &fds[fd]);
	}
	if (f) {
		r->tgt_ino = BPF_CORE_READ(f, f_inode, i_ino);
		walk_dentries(f, r, b);
	}
	bpf_rcu_read_unlock();
}

/* A path argument, as the thread passed it. */
static __always_inline void copy_path_arg(struct task_struct *task, __u64 ptr, struct task_sample *r,
					  struct tgt_buf *b)
{
	long n = -1;
	__u64 len;

	r->tgt_kind = TK_FAIL;
	if (!ptr)
		return;
	if (bpf_ksym_exists(bpf_copy_from_user_task_str)) {
		n = bpf_copy_from_user_task_str(b->b, XTOP_TGT_SPAN, (void *)ptr, task, 0);
	} else {
		/* Older kernels: what lies in the argument's own page (a copy
		 * fails whole at an unmapped byte); userspace finds the NUL. */
		len = 4096 - (ptr & 4095);
		if (len > XTOP_TGT_SPAN)
			len = XTOP_TGT_SPAN;
		barrier_var(len);
		if (len && !bpf_copy_from_user_task(b->b, len, (void *)ptr, task, 0))
			n = len;
	}
	if (n > 0 && n <= XTOP_TGT_SPAN) {
		r->tgt_kind = TK_USTR;
		r->tgt_len = n;
	}
}

/* The one descriptor a poll or select call waits on, or -1 (several, none,
 * or unreadable: a name would then pick one arbitrarily). */
static __always_inline int waited_fd(struct task_struct *task, __u8 how, __u64 *args)
{
	__u64 set = 0, w = 0;
	int fd = -1;

	if (how == TA_POLL) {
		if (args[1] != 1 || bpf_copy_from_user_task(&fd, sizeof(fd), (void *)args[0], task, 0))
			return -1;
		return fd;
	}
	if (!args[0] || args[0] > 64)
		return -1;
	/* The first word of each set: the kernel reads no more for nfds <= 64. */
	if (args[1] && bpf_copy_from_user_task(&w, sizeof(w), (void *)args[1], task, 0))
		return -1;
	set = w;
	w = 0;
	if (args[2] && bpf_copy_from_user_task(&w, sizeof(w), (void *)args[2], task, 0))
		return -1;
	set |= w;
	if (args[0] < 64)
		set &= (1ULL << args[0]) - 1;
	if (!set || (set & (set - 1)))
		return -1;
	/* The index of the one bit (BPF has no count-trailing-zeros). */
	fd = 0;
	if (set >> 32) { fd += 32; set >>= 32; }
	if (set >> 16) { fd += 16; set >>= 16; }
	if (set >> 8) { fd += 8; set >>= 8; }
	if (set >> 4) { fd += 4; set >>= 4; }
	if (set >> 2) { fd += 2; set >>= 2; }
	if (set >> 1)
		fd += 1;
	return fd;
}

/* The file the thread's current syscall works on: the one behind its
 * descriptor argument, or its path argument (sc_target says which). The
 * syscall is chosen as userspace does (src/sampler/decode.rs, syscall_of). */
static __always_inline void resolve_target(struct task_struct *task, struct task_sample *r,
					   struct tgt_buf *b)
{
	__u64 *args;
	__u8 how, a;
	__s32 nr;
	int fd;

	r->tgt_fd = -1;
	if (r->flags & XF_KTHREAD)
		return;
	if (r->flags & XF_SC_TRACKED) {
		if (!(r->flags & XF_IN_SYSCALL))
			return;
		nr = r->sc_nr;
		args = r->sc_args;
	} else if (r->flags & XF_REGS_VALID) {
		nr = r->regs_nr;
		args = r->regs_args;
	} else {
		return;
	}
	if (nr < 0 || nr >= XTOP_NR_SYSCALLS)
		return;
	how = sc_target[nr];
	a = how & 7;
	if (!how || a > 5)
		return;
	if (!resolve_targets) {
		r->tgt_kind = TK_FAIL; /* not asked to: unknown, not "no file" */
		return;
	}
	switch (how & 0xf0) {
	case TA_FD:
		fd = args[a];
		break;
	case TA_PATH:
		copy_path_arg(task, args[a], r, b);
		return;
	case TA_POLL:
	case TA_SELECT:
		fd = waited_fd(task, how & 0xf0, args);
		break;
	default:
		return;
	}
	/* Negative: no file (an anonymous mmap, AT_FDCWD) or not a descriptor. */
	if (fd >= 0)
		resolve_fd(task, fd, r, b);
}

/* The registration that covers a thread: its process's own, or else its
 * parent's, which a child forked without an exec shares (a PostgreSQL backend
 * and its postmaster). Either holds only for the same mm layout and exe. */
static __always_inline struct app_proc *app_proc_of(struct task_struct *task, __u32 tgid)
{
	struct app_proc *e;
	__u32 ptgid;
	__u64 start_code = BPF_CORE_READ(task, mm, start_code);
	__u64 ino = BPF_CORE_READ(task, mm, exe_file, f_inode, i_ino);

	if (!start_code)
		return 0;
	/* An entry of a process that exited may outlive it (LRU): a reused
	 * pid fails the check and falls back to its parent's. */
	e = bpf_map_lookup_elem(&app_procs, &tgid);
	if (e && e->start_code == start_code && e->exe_ino == ino)
		return e;
	ptgid = BPF_CORE_READ(task, group_leader, real_parent, tgid);
	e = bpf_map_lookup_elem(&app_procs, &ptgid);
	if (e && e->start_code == start_code && e->exe_ino == ino)
		return e;
	return 0;
}

/* The program's own account of what the thread waits on, read from its
 * memory here so that the program pays nothing for it: PostgreSQL keeps its
 * wait_event_info behind the pointer my_wait_event_info (12 and 13: in the
 * PGPROC MyProc points to). A null pointer is a process with nowhere to
 * publish a wait (12/13's postmaster, logger, stats collector): it reports
 * none, as 14's do. */
static __always_inline void read_app(struct task_struct *task, struct task_sample *r)
{
	struct app_proc *e = app_proc_of(task, r->tgid);
	__u64 ptr = 0;
	__u32 v = 0;

	if (!e)
		return;
	r->app_flags = AF_FOUND;
	if (!bpf_copy_from_user_task(&ptr, sizeof(ptr), (void *)e->wait_ptr, task, 0) &&
	    (!ptr || !bpf_copy_from_user_task(&v, sizeof(v), (void *)(ptr + e->wait_off), task, 0))) {
		r->app_wait = v;
		r->app_flags |= AF_WAIT;
	}
	if (e->state_addr && !bpf_copy_from_user_task(&v, sizeof(v), (void *)e->state_addr, task, 0)) {
		r->app_state = v;
		r->app_flags |= AF_STATE;
	}
}

SEC("iter.s/task")
int dump_tasks(struct bpf_iter__task *ctx)
{
	struct seq_file *seq = ctx->meta->seq;
	struct task_struct *task = ctx->task;
	struct thread_state *s;
	struct task_sample *r;
	struct stack_copy *w;
	struct tgt_buf *b;
	__u32 zero = 0, tgid, state, exit_state;
	unsigned int pflags;
	bool user;
	__u32 klen, ulen, wlen, tlen;

	if (!task)
		return 0;
	/* One "now" per pass: every thread's durations are measured to the same
	 * instant, as a snapshot should be (and it saves a clock read per thread). */
	if (ctx->meta->seq_num == 0) {
		pass_now_ns = bpf_ktime_get_ns();
		prev_pass_rq = pass_now_rq;
		pass_now_rq = rq_clock_of(bpf_get_current_task_btf());
	}
	/* The thread running this walk is on a CPU at every pass by construction:
	 * reporting it would put xtop's own sampler on top of every screen. Its
	 * real cost is measured and shown apart. */
	if (task->pid == (__u32)bpf_get_current_pid_tgid())
		return 0;
	tgid = task->tgid;
	if (pid_filter_on && !bpf_map_lookup_elem(&pid_filter, &tgid))
		return 0;
	state = task->__state;
	exit_state = task->exit_state;
	if (!emit_all && !is_active(state, exit_state))
		return 0;
	r = bpf_map_lookup_elem(&scratch, &zero);
	if (!r)
		return 0;
	__builtin_memset(r, 0, offsetof(struct task_sample, kstack));

	w = bpf_map_lookup_elem(&stackwin, &zero);
	b = bpf_map_lookup_elem(&tgtbuf, &zero);
	pflags = task->flags;
	r->now_ns = pass_now_ns;
	r->now_rq = pass_now_rq;
	r->last_arrival_rq = task->sched_info.last_arrival;
	r->last_queued_rq = task->sched_info.last_queued;
	r->tid = task->pid;
	r->tgid = tgid;
	r->state = state;
	r->exit_state = exit_state;
	r->start_ns = BPF_CORE_READ(task, group_leader, start_time);
	r->uid = BPF_CORE_READ(task, cred, euid.val);
	r->pidns = BPF_CORE_READ(task, nsproxy, pid_ns_for_children, ns.inum);
	r->cgroup_id = BPF_CORE_READ(task, cgroups, dfl_cgrp, kn, id);
	r->cpu = BPF_CORE_READ(task, thread_info.cpu);
	r->regs_nr = -1;
	r->sc_nr = -1;
	r->tgt_fd = -1;
	bpf_probe_read_kernel_str(r->comm, sizeof(r->comm), task->comm);
	bpf_probe_read_kernel_str(r->pcomm, sizeof(r->pcomm), BPF_CORE_READ(task, group_leader, comm));
	if (task->on_cpu)
		r->flags |= XF_ON_CPU;
	if (task->on_rq)
		r->flags |= XF_ON_RQ;
	if (pflags & PF_KTHREAD)
		r->flags |= XF_KTHREAD;

	s = bpf_task_storage_get(&thread_states, task, 0, 0);
	if (s) {
		r->flags |= XF_TRACKED | (s->flags & (XF_SC_TRACKED | XF_IN_SYSCALL | XF_VOLUNTARY |
						     XF_SEEN_SWITCH | XF_SEEN_WAKEUP));
		r->sc_nr = s->sc_nr;
		r->sc_entry_ns = s->sc_entry_ns;
		r->sc_seq = s->sc_seq;
		__builtin_memcpy(r->sc_args, s->sc_args, sizeof(r->sc_args));
		r->offcpu_rq = s->offcpu_rq;
		r->waker_tid = s->waker_tid;
	}

	/* Saved registers and stacks are stable only while the thread is off CPU. */
	user = user_stacks && !(pflags & NO_USER_STACK);
	/* A running thread waits on nothing, whatever it has in flight. */
	if (io_hooks) {
		r->flags |= XF_IO_TRACKED;
		if (s && !(r->flags & XF_ON_CPU) && !exit_state)
			read_io(s, r);
	}
	if (r->flags & XF_ON_CPU) {
		profile_stacks(task, s, r, w);
	} else if (!exit_state) {
		if (!(pflags & PF_KTHREAD))
			read_user_regs(task, r);
		offcpu_stacks(task, s, r, w, user);
	}
	/* Every pass, even for a thread that has not run since the previous
	 * one: a rename or unlink elsewhere changes its file's name meanwhile. */
	if (b && !exit_state)
		resolve_target(task, r, b);
	if (read_apps && !exit_state && !(pflags & NO_USER_STACK))
		read_app(task, r);
	/* Negative: the unwinder failed; either way nothing follows the header. */
	if (r->kstack_len < 0 || r->kstack_len > sizeof(r->kstack))
		r->kstack_len = 0;
	if (r->ustack_len < 0 || r->ustack_len > sizeof(r->ustack))
		r->ustack_len = 0;
	bpf_seq_write(seq, r, offsetof(struct task_sample, kstack));
	/* Fresh bounds checks on fresh registers: what the verifier can follow. */
	klen = r->kstack_len;
	if (klen > sizeof(r->kstack))
		klen = 0;
	barrier_var(klen);
	if (klen)
		bpf_seq_write(seq, r->kstack, klen);
	ulen = r->ustack_len;
	if (ulen > sizeof(r->ustack))
		ulen = 0;
	barrier_var(ulen);
	if (ulen)
		bpf_seq_write(seq, r->ustack, ulen);
	wlen = r->uwin_len;
	if (wlen > XTOP_UWIN_BYTES)
		wlen = 0;
	barrier_var(wlen);
	if (wlen && w)
		bpf_seq_write(seq, w->b, wlen);
	tlen = r->tgt_len;
	if (tlen > XTOP_TGT_BYTES)
		tlen = 0;
	barrier_var(tlen);
	if (tlen && b)
		bpf_seq_write(seq, b->b, tlen);
	return 0;
}
