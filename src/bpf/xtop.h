/* SPDX-License-Identifier: GPL-2.0-or-later */
/* Records shared between the BPF programs and the Rust sampler.
 * The Rust side uses the skeleton's generated copy of `struct task_sample`. */
#ifndef XTOP_H
#define XTOP_H

#define XTOP_COMM_LEN 16
#define XTOP_KSTACK_DEPTH 32
#define XTOP_USTACK_DEPTH 32 /* a power of two: indexes are masked with it */
/* Bytes of user stack copied from the stack pointer up for CFI unwinding in
 * userspace. With the rest of a record it must fit the iterator's 32 KiB
 * seq_file buffer. */
#define XTOP_UWIN_BYTES 16384
/* The file record of a sample (src/target): path components are written at
 * offsets below XTOP_TGT_SPAN (a mask + 1), each at most XTOP_NAME_BYTES with
 * its NUL; a path argument takes at most XTOP_TGT_SPAN bytes. */
#define XTOP_TGT_SPAN 1024
#define XTOP_NAME_BYTES 256
#define XTOP_TGT_BYTES (XTOP_TGT_SPAN + XTOP_NAME_BYTES)
#define XTOP_PATH_DEPTH 32 /* dentries and mount crossings walked up from a file */
#define XTOP_NR_SYSCALLS 512 /* size of the syscall-to-argument table */

/* task_sample.tgt_kind: what the file record holds */
#define TK_NONE   0 /* the syscall has no descriptor or path argument */
#define TK_FAIL   1 /* it has one, which could not be resolved */
#define TK_DENTRY 2 /* NUL-terminated names from the file's dentry up, leaf first */
#define TK_USTR   3 /* the path argument as the thread passed it */

/* task_sample.tgt_flags */
#define TF_DELETED 1 /* the file was unlinked */
#define TF_LONG    2 /* the walk stopped at its depth or size limit, below the root */
#define TF_PSEUDO  4 /* it ended at a dentry that is its own parent but no mount's
		      * root: an anonymous file (pipe, socket, anon inode, memfd) */
#define TF_SOCK    8 /* a socket: the record starts with a struct sock_rec */

/* What a socket connects, at the start of its file record (TF_SOCK); then
 * the socket's own UNIX address (uown_len bytes of sun_path), its peer's
 * (upeer_len), then the names of its dentries. */
struct sock_rec {
	__u8 laddr[16];        /* local address: 4 bytes for AF_INET, 16 for AF_INET6 */
	__u8 raddr[16];        /* remote address */
	__u16 family;          /* AF_* */
	__u16 type;            /* SOCK_STREAM, SOCK_DGRAM, ... */
	__u16 protocol;        /* IPPROTO_* for inet sockets, NETLINK_* for netlink */
	__u16 lport;           /* host byte order */
	__u16 rport;           /* host byte order */
	__u8 state;            /* skc_state: TCP_* (other protocols reuse some) */
	__u8 uown_len;
	__u8 upeer_len;
	__u8 pad[3];
};
#define XTOP_SUN_PATH 108 /* sizeof(sockaddr_un.sun_path) */

/* A process whose program publishes its own wait state in its memory
 * (src/appwait), registered by userspace in app_procs under its tgid. The
 * addresses hold in every process forked from it without an exec: the
 * iterator checks that the thread's mm has the same start_code and exe. */
struct app_proc {
	__u64 wait_ptr;        /* address of a pointer (my_wait_event_info; MyProc before 14) */
	__u64 wait_off;        /* the u32 wait state is this far past where it points (PGPROC's wait_event_info) */
	__u64 state_addr;      /* address of the u32 process kind (MyBackendType); 0: none */
	__u64 start_code;      /* mm->start_code of the registered process */
	__u64 exe_ino;         /* inode number of its executable */
};

/* task_sample.app_flags */
#define AF_FOUND 1 /* the thread's process is registered (or forked from one that is) */
#define AF_WAIT  2 /* app_wait was read */
#define AF_STATE 4 /* app_state was read */

/* sc_target[nr]: which argument of syscall nr names a file (src/target/args.rs) */
#define TA_FD     0x10 /* | argument index: a descriptor */
#define TA_PATH   0x20 /* | argument index: a path in the thread's memory */
#define TA_POLL   0x30 /* poll, ppoll: the descriptor of a one-entry pollfd array */
#define TA_SELECT 0x40 /* select, pselect6: the only descriptor in the read and write sets */

/* flags in task_sample.flags */
#define XF_ON_CPU        (1 << 0) /* task->on_cpu: currently on a CPU */
#define XF_ON_RQ         (1 << 1) /* task->on_rq: queued on a run queue */
#define XF_TRACKED       (1 << 2) /* a per-thread state struct exists */
#define XF_SC_TRACKED    (1 << 3) /* syscall hooks saw this thread enter or leave a syscall */
#define XF_IN_SYSCALL    (1 << 4) /* syscall hooks say: inside syscall sc_nr */
#define XF_REGS_VALID    (1 << 5) /* regs_nr/args come from the task's saved user registers */
#define XF_VOLUNTARY     (1 << 6) /* last switch away from the CPU was voluntary */
#define XF_SEEN_SWITCH   (1 << 7) /* sched_switch hooks saw this thread go off or on CPU */
#define XF_SEEN_WAKEUP   (1 << 8) /* sched_wakeup hooks saw this thread being woken */
#define XF_KTHREAD       (1 << 9) /* PF_KTHREAD */
#define XF_STACK_SAME    (1 << 10) /* not run since the previous pass: same kernel and user stacks as then */
#define XF_USTACK_TRUNC  (1 << 11) /* user frame-pointer walk stopped before the root */
#define XF_ONCPU_STACK   (1 << 12) /* stacks of a running thread, from the on-CPU profile */
#define XF_UWIN_TO_END   (1 << 13) /* the stack window reaches the end of the stack's mapping */
#define XF_USTACK_DEEP   (1 << 14) /* with XF_USTACK_TRUNC: the walk stopped at its depth limit */
#define XF_IO_TRACKED    (1 << 15) /* the block I/O hooks run: io_* say whether a request is in flight */
#define XF_IO_INFLIGHT   (1 << 16) /* io_*: a block I/O request this thread started is in flight */

/* A block I/O request in flight (the inflight map, by struct request address). */
struct io_req {
	__u64 start_ns;        /* bpf_ktime_get_ns() at block_io_start */
	__u32 tid;             /* the thread that started it */
	__u32 dev;             /* its disk, as the kernel's dev_t: major << 20 | first minor */
	__u32 bytes;
	__u8 op;               /* REQ_OP_* */
	__u8 pad[3];
};

/* Long-lived state of one thread, in task local storage (freed with the task).
 * Times named *_rq are the scheduler's clock (rq->clock, as in task->sched_info),
 * read from memory instead of calling bpf_ktime_get_ns() (~40 ns) per event. */
struct thread_state {
	__u64 sc_entry_ns;     /* bpf_ktime_get_ns() at sys_enter */
	__u64 sc_args[6];
	__u64 sc_seq;          /* syscalls entered since tracking began */
	__u64 offcpu_rq;       /* last switch away from a CPU */
	__u64 blocked_rq;      /* last voluntary switch away (the thread blocked) */
	__u64 stack_arrival;   /* sched_info.last_arrival when the stack was last emitted */
	__u32 stack_gen;       /* pass_gen of that pass */
	__s32 sc_nr;           /* -1 when not in a syscall */
	__u32 waker_tid;
	__u32 flags;           /* XF_SC_TRACKED | XF_IN_SYSCALL | XF_VOLUNTARY | XF_SEEN_* */
	__u64 io_rq;           /* the last block I/O request it started (struct request address) */
	__u64 io_start_ns;     /* and when: the inflight entry is that request only if it matches */
};

/* One emitted thread, written by the task iterator into its seq_file. */
struct task_sample {
	__u64 now_ns;          /* bpf_ktime_get_ns() when this task was read */
	__u64 start_ns;        /* task start time (boot-based ns), keys per-process caches */
	__u64 cgroup_id;
	__u64 regs_args[6];    /* syscall args from saved user registers */
	__u64 sc_args[6];      /* syscall args from the sys_enter hook */
	__u64 sc_entry_ns;
	__u64 sc_seq;
	__u64 now_rq;          /* scheduler clock of the sampling CPU */
	__u64 offcpu_rq;       /* from thread_state */
	__u64 last_arrival_rq; /* task->sched_info: last time it got a CPU */
	__u64 last_queued_rq;  /* task->sched_info: queued waiting for a CPU since (0: not) */
	__u64 uregs[4];        /* user ip, sp, fp, lr where the stack window was copied */
	__u64 io_start_ns;     /* XF_IO_INFLIGHT: the request's start (bpf_ktime_get_ns) */
	__u32 tid;
	__u32 tgid;
	__u32 uid;
	__u32 pidns;
	__u32 state;           /* task->__state */
	__u32 exit_state;
	__u32 flags;
	__u32 waker_tid;
	__s32 sc_nr;           /* from the hooks, valid with XF_IN_SYSCALL */
	__s32 regs_nr;         /* from saved registers, valid with XF_REGS_VALID; -1: none */
	__s32 cpu;
	__s32 kstack_len;      /* bytes of kstack filled, <0 on error */
	__s32 ustack_len;      /* bytes of ustack filled */
	__s32 uwin_len;        /* bytes of user stack window, from uregs[1] up */
	__u64 tgt_ino;         /* inode number of the syscall's file (TK_DENTRY) */
	__u32 tgt_magic;       /* s_magic of its filesystem (TK_DENTRY) */
	__s32 tgt_fd;          /* the descriptor resolved, -1: none */
	__u32 tgt_len;         /* bytes of file record after the window */
	__u32 app_wait;        /* the program's own wait state (AF_WAIT): PostgreSQL's wait_event_info */
	__u32 app_state;       /* and its kind of process (AF_STATE): PostgreSQL's BackendType */
	__u32 io_dev;          /* XF_IO_INFLIGHT: the request's disk (struct io_req) */
	__u32 io_bytes;        /* its size */
	__u8 tgt_kind;         /* TK_* */
	__u8 tgt_flags;        /* TF_* */
	__u8 app_flags;        /* AF_* */
	__u8 io_op;            /* XF_IO_INFLIGHT: its REQ_OP_* */
	char comm[XTOP_COMM_LEN];
	char pcomm[XTOP_COMM_LEN];
	/* Written after the header: kstack_len bytes of kstack, ustack_len of
	 * ustack, uwin_len bytes of stack window (kept in its own map), then
	 * tgt_len bytes of file record (likewise). */
	__u64 kstack[XTOP_KSTACK_DEPTH];
	__u64 ustack[XTOP_USTACK_DEPTH]; /* leaf first: ip, then return addresses */
};

/* Latest on-CPU profile sample of a thread (task local storage). */
struct cpu_stack {
	__u64 seq;             /* odd while being written */
	__u64 stamp_rq;        /* scheduler clock when taken (compare: sched_info.last_arrival) */
	__s32 kstack_len;
	__s32 ustack_len;
	__u32 flags;           /* XF_USTACK_TRUNC */
	__u32 win_slot;        /* cpu_windows slot holding its user stack window */
	__u64 win_seq;         /* that slot's seq when written; 0: no window */
	__u64 stack_lo;        /* the mapping of the thread's user stack pointer, */
	__u64 stack_hi;        /* as last looked up (0, 0: not found) */
	__u64 kstack[XTOP_KSTACK_DEPTH];
	__u64 ustack[XTOP_USTACK_DEPTH]; /* frame-pointer walk: used when the window is gone */
};

/* A running thread's user stack window, copied by the on-CPU profile and
 * unwound with CFI in userspace like an off-CPU thread's. Each CPU has
 * XTOP_CPU_WINDOWS slots (a power of two), reused round robin: a window
 * stays until that CPU's profile has fired as many times again, so memory is
 * bounded per CPU, not per thread. */
#define XTOP_CPU_WINDOWS 8
struct cpu_window {
	__u64 seq;             /* odd while being written */
	__u64 uregs[4];        /* user ip, sp, fp, lr */
	__u32 len;             /* bytes of b, from uregs[1] up */
	__u32 flags;           /* XF_UWIN_TO_END */
	/* A page more than a window holds: the copy goes page by page, and the
	 * verifier must see room for a whole page at every offset it may start. */
	__u8 b[XTOP_UWIN_BYTES + 4096];
};

#endif
