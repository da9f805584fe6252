//! A PostgreSQL cluster of a test's own, from the distribution's packages: a
//! temporary data directory, a Unix socket there and no TCP port, run as the
//! `postgres` account, shut down and removed when dropped.

use std::io::Write;
use std::os::unix::process::CommandExt;
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use super::kid::{run_ok, Kid};

/// A tool the test needs: in CI its absence fails the test (`.ci/run`
/// installs it), elsewhere it skips it.
pub fn need<T>(what: &str, found: Option<T>) -> Option<T> {
    if found.is_none() {
        assert!(
            std::env::var_os("CI").is_none(),
            "{what} is missing; .ci/run installs it"
        );
        eprintln!("skipped: {what} is missing");
    }
    found
}

/// The PostgreSQL to test against, its major version and bin directory: the
/// newest installed, or the server in `XTOP_TEST_PG_BIN` (a directory named
/// like `.../13/bin`, e.g. another major's package unpacked, to check xtop
/// against versions the distribution does not ship; its client tools may
/// come from the installed one).
fn postgres_bin() -> Option<(u32, PathBuf)> {
    if let Some(dir) = std::env::var_os("XTOP_TEST_PG_BIN") {
        let bin = PathBuf::from(dir);
        let major = bin.parent()?.file_name()?.to_str()?.parse().ok()?;
        return Some((major, bin));
    }
    installed_bin()
}

fn installed_bin() -> Option<(u32, PathBuf)> {
    std::fs::read_dir("/usr/lib/postgresql")
        .ok()?
        .flatten()
        .filter_map(|e| Some((e.file_name().to_str()?.parse::<u32>().ok()?, e.path().join("bin"))))
        .filter(|(_, b)| b.join("postgres").exists() && b.join("initdb").exists())
        .max()
}

/// uid and gid of the `postgres` account (PostgreSQL refuses to run as root).
fn postgres_account() -> Option<(u32, u32)> {
    let name = std::ffi::CString::new("postgres").unwrap();
    // SAFETY: getpwnam returns null or a pointer to a static record, read at once.
    let pw = unsafe { libc::getpwnam(name.as_ptr()) };
    // SAFETY: checked non-null just before.
    (!pw.is_null()).then(|| unsafe { ((*pw).pw_uid, (*pw).pw_gid) })
}

/// A private directory under /tmp, removed when dropped.
pub struct TempDir(pub PathBuf);

impl TempDir {
    pub fn new(tag: &str, owner: (u32, u32)) -> TempDir {
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .subsec_nanos();
        let dir = std::env::temp_dir().join(format!("xtop-{tag}-{}-{nanos}", std::process::id()));
        std::fs::create_dir(&dir).expect("a fresh temp dir");
        std::os::unix::fs::chown(&dir, Some(owner.0), Some(owner.1)).unwrap();
        TempDir(dir)
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// A PostgreSQL cluster of this test's own, and its clients. Dropping it ends
/// the clients, then the server (an immediate shutdown), then the directory.
pub struct Cluster {
    pub version: u32,
    clients: Vec<Kid>,
    server: Option<Kid>,
    pub bin: PathBuf,
    pub account: (u32, u32),
    pub dir: TempDir,
}

impl Cluster {
    pub fn start() -> Option<Cluster> {
        Cluster::start_with(&[])
    }

    /// A cluster with these `name=value` settings after the test defaults
    /// (which they override: `fsync=on`).
    pub fn start_with(settings: &[&str]) -> Option<Cluster> {
        let (version, bin) = need("PostgreSQL", postgres_bin())?;
        let account = need("the postgres account", postgres_account())?;
        let dir = TempDir::new("pg", account);
        let data = dir.0.join("data");
        run_ok(
            Command::new(bin.join("initdb"))
                .args(["-N", "-A", "trust", "-U", "postgres", "-D"])
                .arg(&data)
                .uid(account.0)
                .gid(account.1),
            "initdb",
        );
        let server = Kid::spawn(
            Command::new(bin.join("postgres"))
                .arg("-D")
                .arg(&data)
                .arg("-k")
                .arg(&dir.0)
                .args([
                    "-c",
                    "listen_addresses=",
                    "-c",
                    "shared_buffers=16MB",
                    "-c",
                    "fsync=off",
                ])
                .args(settings.iter().flat_map(|s| ["-c", s]))
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .uid(account.0)
                .gid(account.1),
        );
        let c = Cluster {
            version,
            clients: Vec::new(),
            server: Some(server),
            bin,
            account,
            dir,
        };
        let deadline = Instant::now() + Duration::from_secs(30);
        while !c.dir.0.join(".s.PGSQL.5432").exists() {
            assert!(Instant::now() < deadline, "postgres did not start");
            std::thread::sleep(Duration::from_millis(50));
        }
        Some(c)
    }

    /// The cluster's own client tool, else the installed PostgreSQL's.
    fn client(&self, name: &str) -> PathBuf {
        let own = self.bin.join(name);
        match installed_bin() {
            Some((_, bin)) if !own.exists() => bin.join(name),
            _ => own,
        }
    }

    pub fn psql(&self) -> Command {
        let mut cmd = Command::new(self.client("psql"));
        cmd.arg("-h")
            .arg(&self.dir.0)
            .args(["-U", "postgres", "-X", "-q", "-v", "ON_ERROR_STOP=1"])
            .stdout(Stdio::null())
            .uid(self.account.0)
            .gid(self.account.1);
        cmd
    }

    /// A client tool of the cluster's (pgbench), pointed at it, as `postgres`.
    pub fn tool(&self, name: &str) -> Command {
        let mut cmd = Command::new(self.client(name));
        cmd.arg("-h")
            .arg(&self.dir.0)
            .args(["-U", "postgres"])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .uid(self.account.0)
            .gid(self.account.1);
        cmd
    }

    /// Rows of a query, fields split at '|'.
    pub fn query(&self, sql: &str) -> Vec<Vec<String>> {
        let out = run_ok(
            self.psql()
                .args(["-A", "-t", "-c", sql])
                .stdin(Stdio::null())
                .stdout(Stdio::piped()),
            sql,
        );
        String::from_utf8_lossy(&out.stdout)
            .lines()
            .filter(|l| !l.is_empty())
            .map(|l| l.split('|').map(str::to_string).collect())
            .collect()
    }

    /// Runs `sql` to completion.
    pub fn run(&self, sql: &str) {
        run_ok(self.psql().args(["-c", sql]).stdin(Stdio::null()), sql);
    }

    /// A client session left running: `sql` sent on its standard input, which
    /// stays open (an empty `sql` leaves the session idle).
    pub fn session(&mut self, sql: &str) {
        let mut kid = Kid::spawn(&mut self.psql());
        let stdin = kid.0.stdin.as_mut().unwrap();
        stdin.write_all(sql.as_bytes()).unwrap();
        stdin.flush().unwrap();
        self.clients.push(kid);
    }

    /// The postmaster and every process it started.
    pub fn pids(&self) -> Vec<u32> {
        let pm = self.server.as_ref().unwrap().pid();
        let mut pids = vec![pm];
        for e in std::fs::read_dir("/proc").unwrap().flatten() {
            let Ok(pid) = e.file_name().to_string_lossy().parse::<u32>() else {
                continue;
            };
            let stat = std::fs::read_to_string(e.path().join("stat")).unwrap_or_default();
            // The parent pid is the second field after the parenthesized comm.
            let ppid = stat
                .rsplit_once(") ")
                .and_then(|(_, rest)| rest.split(' ').nth(1)?.parse::<u32>().ok());
            if ppid == Some(pm) {
                pids.push(pid);
            }
        }
        pids
    }
}

impl Drop for Cluster {
    fn drop(&mut self) {
        self.clients.clear();
        if let Some(server) = self.server.take() {
            let pid = server.pid() as libc::pid_t;
            if pid > 1 {
                // SAFETY: our own child, not yet reaped: SIGQUIT asks it for an
                // immediate shutdown, which ends its children too.
                unsafe { libc::kill(pid, libc::SIGQUIT) };
            }
            let mut server = server;
            let deadline = Instant::now() + Duration::from_secs(10);
            while Instant::now() < deadline && matches!(server.0.try_wait(), Ok(None)) {
                std::thread::sleep(Duration::from_millis(50));
            }
        }
    }
}
