//! Facts the kernel walk does not carry (exe, cmdline, user names, cgroup
//! paths), read from /proc, /etc/passwd and cgroupfs once and cached, so a
//! steady workload costs no file reads per pass.

use std::collections::HashMap;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::appwait::Program;
use crate::model::{printable, Process, ThreadIdent};

/// Passes after which an unseen process or thread is forgotten.
const FORGET_AFTER_PASSES: u64 = 120;
/// Rescans of /etc/passwd or cgroupfs for an unknown id happen at most this often.
const RESCAN_EVERY: Duration = Duration::from_secs(10);

type ProcKey = (u32, u64, [u8; 16]);

struct Cached {
    process: Arc<Process>,
    /// What appwait made of its program, once asked.
    program: Option<Program>,
    last_pass: u64,
}

#[derive(Default)]
pub struct ProcCache {
    pass: u64,
    /// Keyed by (tgid, start time) so a reused pid is a new process, and by
    /// the process's comm, which an exec sets to the new program's name: a
    /// process first seen between fork and exec is read again after it.
    procs: HashMap<ProcKey, Cached>,
    /// Each thread's current identity, handed out again while it holds.
    threads: HashMap<u32, CachedIdent>,
    comms: HashMap<[u8; 16], Arc<str>>,
    users: HashMap<u32, Arc<str>>,
    users_scanned: Option<Instant>,
    cgroups: HashMap<u64, Arc<str>>,
    cgroups_scanned: Option<Instant>,
    /// Bumped by every rescan of user names or cgroup paths: names already
    /// in identities may have changed (an id first shown as a number or "").
    names_gen: u64,
}

/// A thread's identity as the kernel walk gives it, before names are looked up.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct RawIdent {
    pub tid: u32,
    pub tgid: u32,
    /// Process start time: with tgid, the process cache key.
    pub start_ns: u64,
    pub uid: u32,
    pub pidns: u32,
    pub cgroup_id: u64,
    pub kthread: bool,
    pub comm: [u8; 16],
}

struct CachedIdent {
    raw: RawIdent,
    names_gen: u64,
    ident: Arc<ThreadIdent>,
    last_pass: u64,
}

fn due(last: Option<Instant>) -> bool {
    last.is_none_or(|t| t.elapsed() >= RESCAN_EVERY)
}

impl ProcCache {
    /// Starts a sampling pass; forgets processes and threads not seen for a while.
    pub fn begin_pass(&mut self) {
        self.pass += 1;
        let pass = self.pass;
        if pass % 16 == 0 {
            self.procs.retain(|_, c| pass - c.last_pass < FORGET_AFTER_PASSES);
            self.threads
                .retain(|_, c| pass - c.last_pass < FORGET_AFTER_PASSES);
        }
        if self.comms.len() > 65_536 {
            self.comms.clear();
        }
    }

    /// Interned comm, so thousands of samples share one allocation.
    pub fn comm(&mut self, raw: &[u8; 16]) -> Arc<str> {
        if let Some(c) = self.comms.get(raw) {
            return c.clone();
        }
        let end = raw.iter().position(|&b| b == 0).unwrap_or(raw.len());
        let s: Arc<str> = printable(&raw[..end]).into();
        self.comms.insert(*raw, s.clone());
        s
    }

    pub fn process(&mut self, tgid: u32, start_ns: u64, pcomm: &[u8; 16], kthread: bool) -> Arc<Process> {
        let pass = self.pass;
        if let Some(c) = self.procs.get_mut(&(tgid, start_ns, *pcomm)) {
            c.last_pass = pass;
            return c.process.clone();
        }
        let comm = self.comm(pcomm);
        let (exe, cmdline) = if kthread {
            (String::new(), String::new())
        } else {
            read_exe_cmdline(tgid)
        };
        let process = Arc::new(Process {
            tgid,
            comm,
            exe: exe.into(),
            cmdline: cmdline.into(),
        });
        self.procs.insert(
            (tgid, start_ns, *pcomm),
            Cached {
                process: process.clone(),
                program: None,
                last_pass: pass,
            },
        );
        process
    }

    /// The program of a process `ident` has seen this pass, from `inspect`
    /// once per process (an exec makes a new entry, as for its exe).
    pub fn program(
        &mut self,
        tgid: u32,
        start_ns: u64,
        pcomm: &[u8; 16],
        inspect: impl FnOnce() -> Program,
    ) -> Program {
        match self.procs.get_mut(&(tgid, start_ns, *pcomm)) {
            Some(c) => c.program.get_or_insert_with(inspect).clone(),
            None => inspect(),
        }
    }

    /// The thread's identity: the same Arc as in its previous sample while
    /// nothing changed, so consumers can compare identities by pointer; a new
    /// one when something did (comm via prctl, uid via setuid, cgroup
    /// migration, a reused tid, a user or cgroup renamed by a rescan).
    pub fn ident(&mut self, raw: RawIdent, pcomm: &[u8; 16]) -> Arc<ThreadIdent> {
        let pass = self.pass;
        if let Some(c) = self.threads.get_mut(&raw.tid) {
            // Unchanged: no name lookups. The process entry is forgotten no
            // sooner than its threads', so it is there to be kept alive.
            if c.raw == raw && c.names_gen == self.names_gen {
                if let Some(p) = self.procs.get_mut(&(raw.tgid, raw.start_ns, *pcomm)) {
                    p.last_pass = pass;
                    c.last_pass = pass;
                    return c.ident.clone();
                }
            }
        }
        let ident = ThreadIdent {
            tid: raw.tid,
            tgid: raw.tgid,
            uid: raw.uid,
            user: self.user(raw.uid),
            comm: self.comm(&raw.comm),
            process: self.process(raw.tgid, raw.start_ns, pcomm, raw.kthread),
            pidns: raw.pidns,
            cgroup_id: raw.cgroup_id,
            cgroup: self.cgroup(raw.cgroup_id),
            kthread: raw.kthread,
        };
        let ident = match self.threads.get(&raw.tid) {
            // Equal after all (a rescan that renamed nothing): keep the pointer.
            Some(c) if *c.ident == ident => c.ident.clone(),
            _ => Arc::new(ident),
        };
        let cached = CachedIdent {
            raw,
            names_gen: self.names_gen, // read after the lookups, which may rescan
            ident: ident.clone(),
            last_pass: pass,
        };
        self.threads.insert(raw.tid, cached);
        ident
    }

    pub fn user(&mut self, uid: u32) -> Arc<str> {
        if !self.users.contains_key(&uid) && due(self.users_scanned) {
            self.users_scanned = Some(Instant::now());
            if let Ok(text) = std::fs::read_to_string("/etc/passwd") {
                self.users.extend(parse_passwd(&text));
                self.names_gen += 1;
            }
        }
        self.users
            .entry(uid)
            .or_insert_with(|| uid.to_string().into())
            .clone()
    }

    /// cgroup v2 path of an id; ids are the inode numbers of cgroupfs directories.
    pub fn cgroup(&mut self, id: u64) -> Arc<str> {
        if id == 0 {
            return "".into();
        }
        if !self.cgroups.contains_key(&id) && due(self.cgroups_scanned) {
            self.cgroups_scanned = Some(Instant::now());
            let mut found = HashMap::new();
            match cgroup2_mount() {
                Some(root) => {
                    let dev = std::fs::metadata(&root).map(|m| m.dev()).unwrap_or(0);
                    scan_cgroups(&root, &root, dev, &mut found, 0);
                }
                // cgroup v2 not mounted (v1-only host): every task sits in its root.
                None => drop(found.insert(1, "/".into())),
            }
            self.cgroups.extend(found);
            self.names_gen += 1;
        }
        self.cgroups.get(&id).cloned().unwrap_or_else(|| "".into())
    }
}

fn read_exe_cmdline(tgid: u32) -> (String, String) {
    let exe = std::fs::read_link(format!("/proc/{tgid}/exe"))
        .map(|p| printable(p.as_os_str().as_bytes()))
        .unwrap_or_default();
    let cmdline = std::fs::read(format!("/proc/{tgid}/cmdline"))
        .map(|b| join_cmdline(&b))
        .unwrap_or_default();
    (exe, cmdline)
}

/// NUL-separated argv as one space-separated, printable line.
pub fn join_cmdline(raw: &[u8]) -> String {
    let trimmed = raw.strip_suffix(&[0]).unwrap_or(raw);
    let spaced: Vec<u8> = trimmed.iter().map(|&b| if b == 0 { b' ' } else { b }).collect();
    printable(&spaced)
}

fn parse_passwd(text: &str) -> impl Iterator<Item = (u32, Arc<str>)> + '_ {
    text.lines().filter_map(|l| {
        let mut f = l.split(':');
        let name = f.next()?;
        let uid = f.nth(1)?.parse().ok()?;
        Some((uid, Arc::from(name)))
    })
}

/// Where cgroup v2 is mounted, from /proc/self/mountinfo.
fn cgroup2_mount() -> Option<PathBuf> {
    let info = std::fs::read_to_string("/proc/self/mountinfo").ok()?;
    info.lines().find_map(|l| {
        let (left, right) = l.split_once(" - ")?;
        let mount = left.split_whitespace().nth(4)?;
        (right.split_whitespace().next()? == "cgroup2").then(|| PathBuf::from(mount))
    })
}

/// Maps directory inode numbers (= cgroup ids) to paths, staying on one filesystem.
fn scan_cgroups(root: &Path, dir: &Path, dev: u64, out: &mut HashMap<u64, Arc<str>>, depth: usize) {
    if depth > 32 {
        return;
    }
    if let Ok(meta) = std::fs::metadata(dir) {
        if meta.dev() != dev {
            return;
        }
        let rel = dir
            .strip_prefix(root)
            .map(|p| printable(p.as_os_str().as_bytes()))
            .unwrap_or_default();
        out.insert(meta.ino(), format!("/{rel}").into());
    }
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for e in entries.flatten() {
        if e.file_type().is_ok_and(|t| t.is_dir()) {
            scan_cgroups(root, &e.path(), dev, out, depth + 1);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cmdline_and_passwd_parsing() {
        assert_eq!(join_cmdline(b"postgres\0-D\0/var/lib\0"), "postgres -D /var/lib");
        assert_eq!(join_cmdline(b""), "");
        // What CI's own harness runs: a script with newlines must stay one row.
        assert_eq!(join_cmdline(b"bash\0-c\0x=0\nrun\0"), "bash -c x=0\\nrun");
        let users: HashMap<_, _> =
            parse_passwd("root:x:0:0::/root:/bin/sh\nbad\nbob:x:1000:1000::/h:/bin/sh").collect();
        assert_eq!(&*users[&0], "root");
        assert_eq!(&*users[&1000], "bob");
    }

    #[test]
    fn processes_are_cached_by_pid_and_start_time() {
        let mut c = ProcCache::default();
        c.begin_pass();
        let me = std::process::id();
        let comm = *b"test\0\0\0\0\0\0\0\0\0\0\0\0";
        let a = c.process(me, 1, &comm, false);
        assert!(a.exe.len() > 1, "own exe readable");
        assert!(Arc::ptr_eq(&a, &c.process(me, 1, &comm, false)));
        assert!(
            !Arc::ptr_eq(&a, &c.process(me, 2, &comm, false)),
            "pid reuse is a new process"
        );
        let exec = *b"postgres\0\0\0\0\0\0\0\0";
        assert!(
            !Arc::ptr_eq(&a, &c.process(me, 1, &exec, false)),
            "an exec (a new comm) is read again"
        );
        assert!(Arc::ptr_eq(&c.comm(&comm), &c.comm(&comm)));
        assert_eq!(&*c.comm(&comm), "test");
    }

    #[test]
    fn a_program_is_asked_once_per_process() {
        let mut c = ProcCache::default();
        c.begin_pass();
        let me = std::process::id();
        let comm = *b"test\0\0\0\0\0\0\0\0\0\0\0\0";
        let asked = std::cell::Cell::new(0);
        let ask = || {
            asked.set(asked.get() + 1);
            Program::Other
        };
        c.program(me, 1, &comm, ask);
        assert_eq!(asked.get(), 1, "not cached before the process is");
        c.process(me, 1, &comm, false);
        c.program(me, 1, &comm, ask);
        c.program(me, 1, &comm, ask);
        assert_eq!(asked.get(), 2, "then once");
    }

    #[test]
    fn a_thread_keeps_its_ident_until_something_changes() {
        let mut c = ProcCache::default();
        c.begin_pass();
        let mut raw = RawIdent {
            tid: 7,
            tgid: std::process::id(),
            start_ns: 1,
            uid: 1000,
            pidns: 1,
            cgroup_id: 0,
            kthread: false,
            comm: *b"a\0\0\0\0\0\0\0\0\0\0\0\0\0\0\0",
        };
        let pcomm = raw.comm;
        let a = c.ident(raw, &pcomm);
        c.begin_pass();
        assert!(Arc::ptr_eq(&a, &c.ident(raw, &pcomm)), "unchanged: the same Arc");
        raw.comm[0] = b'b'; // prctl(PR_SET_NAME)
        assert_eq!(&*c.ident(raw, &pcomm).comm, "b");
        raw.uid = 4242; // setuid
        assert_eq!(c.ident(raw, &pcomm).uid, 4242);
        // A rescan naming the user: same raw fields, new identity.
        c.users.insert(4242, "carol".into());
        c.names_gen += 1;
        let named = c.ident(raw, &pcomm);
        assert_eq!(&*named.user, "carol");
        // A rescan that renamed nothing keeps the Arc.
        c.names_gen += 1;
        assert!(Arc::ptr_eq(&named, &c.ident(raw, &pcomm)));
        raw.cgroup_id = 9; // migrated
        assert_eq!(c.ident(raw, &pcomm).cgroup_id, 9);
        for _ in 0..FORGET_AFTER_PASSES + 16 {
            c.begin_pass();
        }
        assert!(c.threads.is_empty(), "threads not seen for a while are forgotten");
    }
}
