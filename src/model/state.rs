//! Thread states: the kernel's `ps` letters plus xtop's split of R into RUN and RUNQ.

use std::fmt;

/// What a thread was doing at the instant it was sampled.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum State {
    /// On a CPU (`R`, and `task->on_cpu`).
    Run,
    /// Runnable, waiting in a run queue for a CPU (`R`, not on a CPU).
    Runq,
    /// Uninterruptible sleep, usually I/O (`D`).
    Disk,
    /// Interruptible sleep (`S`).
    Sleep,
    /// Stopped by a job-control signal (`T`).
    Stopped,
    /// Stopped by a tracer (`t`).
    Traced,
    /// Exited, not yet reaped (`Z`).
    Zombie,
    /// Being torn down (`X`).
    Dead,
    /// Parked kernel thread (`P`).
    Parked,
    /// Idle kernel thread: uninterruptible but not counted in load (`I`).
    Idle,
}

// task->__state and task->exit_state bits (include/linux/sched.h).
const TASK_INTERRUPTIBLE: u32 = 0x1;
const TASK_UNINTERRUPTIBLE: u32 = 0x2;
const TASK_STOPPED: u32 = 0x4;
const TASK_TRACED: u32 = 0x8;
const EXIT_DEAD: u32 = 0x10;
const EXIT_ZOMBIE: u32 = 0x20;
const TASK_PARKED: u32 = 0x40;
const TASK_NOLOAD: u32 = 0x400;
const TASK_IDLE: u32 = TASK_UNINTERRUPTIBLE | TASK_NOLOAD;
const TASK_RTLOCK_WAIT: u32 = 0x1000;
const TASK_FROZEN: u32 = 0x8000;
/// The bits /proc reports; others (TASK_WAKING, TASK_FREEZABLE...) are masked off.
const TASK_REPORT: u32 = 0x7f;

impl State {
    pub const ALL: [State; 10] = [
        State::Run,
        State::Runq,
        State::Disk,
        State::Sleep,
        State::Stopped,
        State::Traced,
        State::Zombie,
        State::Dead,
        State::Parked,
        State::Idle,
    ];

    /// Decodes raw task fields the way the kernel's `__task_state_index()`
    /// does for /proc (so transient bits such as TASK_WAKING read as runnable,
    /// as `ps` says), then splits running into RUN and RUNQ by `on_cpu`.
    /// The BPF filter `is_active()` in src/bpf/xtop.bpf.c mirrors this.
    pub fn decode(state: u32, exit_state: u32, on_cpu: bool) -> State {
        let s = (state | exit_state) & TASK_REPORT;
        if state & TASK_IDLE == TASK_IDLE {
            State::Idle
        } else if state == TASK_RTLOCK_WAIT {
            State::Disk
        } else if state & TASK_FROZEN != 0 {
            // The kernel reports frozen tasks as R; they cannot run, so: stopped (by the freezer).
            State::Stopped
        } else if s & TASK_PARKED != 0 {
            // The highest reported bit wins, as with the kernel's fls().
            State::Parked
        } else if s & EXIT_ZOMBIE != 0 {
            State::Zombie
        } else if s & EXIT_DEAD != 0 {
            State::Dead
        } else if s & TASK_TRACED != 0 {
            State::Traced
        } else if s & TASK_STOPPED != 0 {
            State::Stopped
        } else if s & TASK_UNINTERRUPTIBLE != 0 {
            State::Disk
        } else if s & TASK_INTERRUPTIBLE != 0 {
            State::Sleep
        } else if on_cpu {
            State::Run
        } else {
            State::Runq
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            State::Run => "RUN",
            State::Runq => "RUNQ",
            State::Disk => "DISK",
            State::Sleep => "SLEEP",
            State::Stopped => "STOPPED",
            State::Traced => "TRACED",
            State::Zombie => "ZOMBIE",
            State::Dead => "DEAD",
            State::Parked => "PARKED",
            State::Idle => "IDLE",
        }
    }

    /// The `ps` state letter this state comes from.
    pub fn letter(self) -> char {
        match self {
            State::Run | State::Runq => 'R',
            State::Disk => 'D',
            State::Sleep => 'S',
            State::Stopped => 'T',
            State::Traced => 't',
            State::Zombie => 'Z',
            State::Dead => 'X',
            State::Parked => 'P',
            State::Idle => 'I',
        }
    }

    pub fn from_name(name: &str) -> Option<State> {
        State::ALL
            .into_iter()
            .find(|s| s.name().eq_ignore_ascii_case(name))
    }

    /// Active threads are reported by default; the rest only with `--all`.
    pub fn is_active(self) -> bool {
        !matches!(self, State::Sleep | State::Parked | State::Idle)
    }
}

impl fmt::Display for State {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.pad(self.name())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn decodes_every_ps_letter() {
        let cases = [
            (0, 0, true, State::Run),
            (0, 0, false, State::Runq),
            (0x1, 0, false, State::Sleep),
            (0x2, 0, false, State::Disk),
            (0x402, 0, false, State::Idle),
            (0x104, 0, false, State::Stopped), // TASK_STOPPED = WAKEKILL | __TASK_STOPPED
            (0x8, 0, false, State::Traced),
            (0x80, 0x20, false, State::Zombie), // TASK_DEAD with EXIT_ZOMBIE
            (0x80, 0x10, false, State::Dead),
            (0x40, 0, false, State::Parked),
            (0x102, 0, false, State::Disk),     // TASK_KILLABLE
            (0x200, 0, false, State::Runq),     // TASK_WAKING: being woken, runnable
            (0x2001, 0, false, State::Sleep),   // freezable sleep
            (0x2402, 0, false, State::Idle),    // freezable idle
            (0x1000, 0, false, State::Disk),    // RT lock wait
            (0x8000, 0, false, State::Stopped), // frozen
        ];
        for (state, exit, on_cpu, want) in cases {
            assert_eq!(State::decode(state, exit, on_cpu), want, "{state:#x}/{exit:#x}");
        }
    }

    #[test]
    fn names_round_trip_and_letters_match_ps() {
        for s in State::ALL {
            assert_eq!(State::from_name(s.name()), Some(s));
            assert_eq!(State::from_name(&s.name().to_lowercase()), Some(s));
        }
        let letters: String = State::ALL.iter().map(|s| s.letter()).collect();
        assert_eq!(letters, "RRDSTtZXPI");
        assert!(State::Runq.is_active() && !State::Sleep.is_active());
    }
}
