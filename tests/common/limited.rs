//! Children run under an address-space limit and a time limit, reaped with
//! `wait4` for their peak RSS: a test feeding hostile input fails when the
//! reader regresses, instead of starving the machine.

use std::os::unix::process::CommandExt;
use std::process::{Child, Command};
use std::time::{Duration, Instant};

pub struct Ended {
    pub code: Option<i32>,
    pub signal: Option<i32>,
    pub max_rss_kb: i64,
    pub wall: Duration,
}

/// The child gets `RLIMIT_AS` = `bytes` before it runs anything: an
/// allocation past it fails there.
pub fn limit_address_space(cmd: &mut Command, bytes: u64) {
    // SAFETY: only async-signal-safe calls between fork and exec.
    unsafe {
        cmd.pre_exec(move || {
            let lim = libc::rlimit {
                rlim_cur: bytes,
                rlim_max: bytes,
            };
            if libc::setrlimit(libc::RLIMIT_AS, &lim) != 0 {
                return Err(std::io::Error::last_os_error());
            }
            Ok(())
        });
    }
}

/// Waits for `child` (started at `t`); past `deadline` it is killed and the
/// test fails as a hang of `what`.
pub fn reap(child: Child, t: Instant, deadline: Duration, what: &str) -> Ended {
    let pid = child.id() as libc::pid_t;
    assert!(pid > 0);
    let mut status = 0;
    // SAFETY: rusage is plain data we own.
    let mut ru: libc::rusage = unsafe { std::mem::zeroed() };
    loop {
        // SAFETY: waits for our own child, by its pid (> 0).
        let r = unsafe { libc::wait4(pid, &mut status, libc::WNOHANG, &mut ru) };
        assert!(r >= 0, "wait4: {}", std::io::Error::last_os_error());
        if r == pid {
            break;
        }
        if t.elapsed() > deadline {
            // SAFETY: our own child, pid > 0, not yet reaped.
            unsafe { libc::kill(pid, libc::SIGKILL) };
            panic!("{what} hung (killed after {deadline:?})");
        }
        std::thread::sleep(Duration::from_millis(5));
    }
    Ended {
        code: libc::WIFEXITED(status).then(|| libc::WEXITSTATUS(status)),
        signal: libc::WIFSIGNALED(status).then(|| libc::WTERMSIG(status)),
        max_rss_kb: ru.ru_maxrss,
        wall: t.elapsed(),
    }
}
