//! Child processes a test starts and always ends: killed with everything they
//! started, and reaped, when dropped (even when the test panics).

use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

/// Runs `cmd` to its end; panics, with its stderr, if it fails. `what` names
/// it in the message.
pub fn run_ok(cmd: &mut Command, what: &str) -> Output {
    let out = cmd.output().unwrap_or_else(|e| panic!("{what}: {e}"));
    assert!(
        out.status.success(),
        "{what}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    out
}

/// A child process in a process group of its own (it and anything it starts),
/// killed and reaped when this is dropped.
pub struct Kid(pub Child);

impl Drop for Kid {
    fn drop(&mut self) {
        let pgid = self.0.id() as libc::pid_t;
        // The group this test created for the child (process_group(0): its id is
        // the child's pid, not yet reaped so never reused), nothing else.
        if pgid > 1 {
            // SAFETY: kill(2) with a negative pid signals exactly that group.
            unsafe { libc::kill(-pgid, libc::SIGKILL) };
        }
        let _ = self.0.wait();
    }
}

impl Kid {
    pub fn spawn(cmd: &mut Command) -> Kid {
        use std::os::unix::process::CommandExt;
        Kid(cmd
            .stdin(Stdio::piped())
            .process_group(0)
            .spawn()
            .expect("spawn workload"))
    }

    pub fn pid(&self) -> u32 {
        self.0.id()
    }

    /// Waits until a thread named `comm` of this process sleeps (state S).
    pub fn wait_sleeping(&self, comm: &str) {
        let deadline = Instant::now() + Duration::from_secs(20);
        let task = format!("/proc/{}/task", self.pid());
        loop {
            let asleep = std::fs::read_dir(&task).into_iter().flatten().flatten().any(|t| {
                let stat = std::fs::read_to_string(t.path().join("stat")).unwrap_or_default();
                stat.contains(&format!("({comm}) S"))
            });
            if asleep {
                return;
            }
            assert!(Instant::now() < deadline, "{comm} never went to sleep");
            std::thread::sleep(Duration::from_millis(10));
        }
    }
}
