//! Bounded history of snapshots in a compact form.
//!
//! A `ThreadSample` is 176 bytes (six syscall arguments, `Option<u64>`s, Arcs;
//! its identity is shared); an hour of 10,000 threads at 1 s would be ~6 GB.
//! History keeps instead one 16-byte `Row` per sample: the thread (interned
//! identity: tid, process, user, cgroup...), its state and CPU, and an *episode*: everything else
//! (syscall invocation, kernel stack, last on/off-CPU and run-queue entry), stored as
//! absolute times (`snapshot time - since`) so that it does not change while a
//! thread stays blocked or running. Consecutive samples of a thread share its
//! episode; only a thread that changed since the previous sample costs a new
//! one (~144 bytes). Entries are reference-counted and freed with the last
//! snapshot using them, so memory stays flat once history is full. Samples are
//! rebuilt on demand, exactly (in tid order).

use std::collections::{HashMap, VecDeque};
use std::hash::{Hash, Hasher};
use std::sync::Arc;
use std::time::Duration;

use crate::model::{
    AppWait, BlockIo, IoWait, Snapshot, Stack, State, Syscall, Target, ThreadIdent, ThreadSample,
};

/// An interning key for values the sampler and the recording decoder share as
/// Arcs (thread identities, stacks): equal by pointer first, then by value, and
/// hashed by `KeyHash`, which reads only the fields that tell values apart
/// cheaply, so interning neither rehashes every frame name nor every string.
#[derive(Clone, Debug)]
struct ArcKey<T>(Arc<T>);

trait KeyHash {
    fn key_hash<H: Hasher>(&self, h: &mut H);
}

impl<T: PartialEq> PartialEq for ArcKey<T> {
    fn eq(&self, other: &Self) -> bool {
        Arc::ptr_eq(&self.0, &other.0) || self.0 == other.0
    }
}
impl<T: Eq> Eq for ArcKey<T> {}
impl<T: KeyHash> Hash for ArcKey<T> {
    fn hash<H: Hasher>(&self, h: &mut H) {
        self.0.key_hash(h);
    }
}

impl KeyHash for ThreadIdent {
    fn key_hash<H: Hasher>(&self, h: &mut H) {
        // Not the tid alone: a thread renaming itself every second would pile
        // up an hour of identities in one hash chain.
        (self.tid, self.uid, self.cgroup_id, &*self.comm).hash(h);
    }
}

impl KeyHash for Stack {
    fn key_hash<H: Hasher>(&self, h: &mut H) {
        self.hash.hash(h);
    }
}

impl KeyHash for AppWait {
    fn key_hash<H: Hasher>(&self, h: &mut H) {
        self.hash(h);
    }
}

impl KeyHash for Target {
    fn key_hash<H: Hasher>(&self, h: &mut H) {
        self.hash(h);
    }
}

/// "None" for the u64/u32 fields below. An absolute time of u64::MAX would
/// need a `since` larger than the snapshot time: not a real value.
const NONE_U64: u64 = u64::MAX;
const NONE_U32: u32 = u32::MAX;
const SYSCALL_NONE: u8 = 0;
const SYSCALL_UNKNOWN: u8 = 1;
const SYSCALL_IN: u8 = 2;
const IO_UNTRACKED: u8 = 0;
const IO_NONE: u8 = 1;
const IO_INFLIGHT: u8 = 2;

/// Everything of a sample beyond identity, state and CPU; constant while the
/// thread does not change (times are absolute, see the module comment).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Episode {
    args: [u64; 6],
    seq: u64,
    syscall_start: u64,
    offcpu_at: u64,
    oncpu_at: u64,
    queued_at: u64,
    /// When the block I/O request it waits for started (absolute, as above).
    io_start: u64,
    nr: u32,
    waker: u32,
    kstack: u32,
    ustack: u32,
    target: u32,
    app: u32,
    /// Id in `History::devices`; NONE_U32 without a request in flight.
    io_dev: u32,
    io_bytes: u32,
    io: u8,
    io_op: u8,
    syscall: u8,
    /// 0 unknown, 1 preempted, 2 voluntary.
    voluntary: u8,
}

/// One thread sample in history.
#[derive(Clone, Copy, Debug)]
pub struct Row {
    thread: u32,
    episode: u32,
    cpu: u32,
    state: State,
}

fn at(time: u64, since: Option<u64>) -> u64 {
    since.map_or(NONE_U64, |s| time.wrapping_sub(s))
}

fn since(time: u64, at: u64) -> Option<u64> {
    (at != NONE_U64).then(|| time.wrapping_sub(at))
}

/// Reference-counted interning with id reuse, so ids stay dense and memory flat.
struct Interner<K> {
    ids: HashMap<K, u32>,
    slots: Vec<Option<(K, u32)>>,
    free: Vec<u32>,
}

impl<K: Clone + Eq + Hash> Interner<K> {
    fn new() -> Self {
        Interner {
            ids: HashMap::new(),
            slots: Vec::new(),
            free: Vec::new(),
        }
    }

    fn acquire(&mut self, key: K) -> u32 {
        if let Some(&id) = self.ids.get(&key) {
            if let Some((_, refs)) = &mut self.slots[id as usize] {
                *refs += 1;
            }
            return id;
        }
        let id = match self.free.pop() {
            Some(id) => id,
            None => {
                self.slots.push(None);
                (self.slots.len() - 1) as u32
            }
        };
        self.slots[id as usize] = Some((key.clone(), 1));
        self.ids.insert(key, id);
        id
    }

    fn release(&mut self, id: u32) {
        let slot = &mut self.slots[id as usize];
        if let Some((key, refs)) = slot {
            *refs -= 1;
            if *refs == 0 {
                self.ids.remove(key);
                *slot = None;
                self.free.push(id);
            }
        }
    }

    fn get(&self, id: u32) -> &K {
        &self.slots[id as usize].as_ref().expect("interned id in use").0
    }

    fn live(&self) -> usize {
        self.ids.len()
    }

    /// Approximate heap use: the key twice (map and slot) plus table overhead.
    fn bytes(&self) -> usize {
        let k = std::mem::size_of::<K>();
        self.ids.capacity() * (k + 4 + 1)
            + self.slots.capacity() * std::mem::size_of::<Option<(K, u32)>>()
            + self.free.capacity() * 4
    }
}

/// Episodes: no hash table; a new sample is compared with its thread's
/// previous episode only, which is where all sharing happens.
struct Episodes {
    slots: Vec<(Episode, u32)>,
    free: Vec<u32>,
    live: usize,
}

impl Episodes {
    /// Takes a reference to `prev` if it is the same episode.
    fn share(&mut self, e: &Episode, prev: u32) -> Option<u32> {
        let (old, refs) = self.slots.get_mut(prev as usize)?;
        (*refs > 0 && old == e).then(|| {
            *refs += 1;
            prev
        })
    }

    fn insert(&mut self, e: Episode) -> u32 {
        self.live += 1;
        match self.free.pop() {
            Some(id) => {
                self.slots[id as usize] = (e, 1);
                id
            }
            None => {
                self.slots.push((e, 1));
                (self.slots.len() - 1) as u32
            }
        }
    }

    /// Drops a reference; returns the episode if that was the last one.
    fn release(&mut self, id: u32) -> Option<Episode> {
        let (e, refs) = &mut self.slots[id as usize];
        *refs -= 1;
        (*refs == 0).then(|| {
            self.free.push(id);
            self.live -= 1;
            *e
        })
    }
}

struct Stored {
    /// The snapshot's own fields with `samples` left empty.
    meta: Snapshot,
    rows: Box<[Row]>,
}

pub struct History {
    snaps: VecDeque<Stored>,
    threads: Interner<ArcKey<ThreadIdent>>,
    /// Per thread id: the episode of its latest stored sample.
    last_episode: Vec<u32>,
    episodes: Episodes,
    stacks: Interner<ArcKey<Stack>>,
    targets: Interner<ArcKey<Target>>,
    apps: Interner<ArcKey<AppWait>>,
    devices: Interner<Arc<str>>,
    /// Keep snapshots newer than `latest - limit`; None keeps everything (replay).
    limit: Option<Duration>,
    /// Id of `snaps[0]`: ids count every snapshot ever pushed, so caches can
    /// follow evictions.
    first_id: u64,
    samples: usize,
    /// Snapshots that arrived out of time order (and so shifted ids).
    reorders: u64,
}

impl History {
    pub fn new(limit: Option<Duration>) -> History {
        History {
            snaps: VecDeque::new(),
            threads: Interner::new(),
            last_episode: Vec::new(),
            episodes: Episodes {
                slots: Vec::new(),
                free: Vec::new(),
                live: 0,
            },
            stacks: Interner::new(),
            targets: Interner::new(),
            apps: Interner::new(),
            devices: Interner::new(),
            limit,
            first_id: 0,
            samples: 0,
            reorders: 0,
        }
    }

    pub fn len(&self) -> usize {
        self.snaps.len()
    }

    pub fn is_empty(&self) -> bool {
        self.snaps.is_empty()
    }

    pub fn first_id(&self) -> u64 {
        self.first_id
    }

    /// Counts out-of-order arrivals: when it changes, positions after the
    /// insertion point no longer match the ids they had.
    pub fn reorders(&self) -> u64 {
        self.reorders
    }

    /// Thread samples held.
    pub fn samples(&self) -> usize {
        self.samples
    }

    pub fn meta(&self, i: usize) -> &Snapshot {
        &self.snaps[i].meta
    }

    pub fn rows(&self, i: usize) -> usize {
        self.snaps[i].rows.len()
    }

    pub fn first_time(&self) -> Option<u64> {
        self.snaps.front().map(|s| s.meta.time_ns)
    }

    pub fn latest(&self) -> Option<&Snapshot> {
        self.snaps.back().map(|s| &s.meta)
    }

    /// First index whose time is after `t`.
    pub fn index_after(&self, t: u64) -> usize {
        self.snaps.partition_point(|s| s.meta.time_ns <= t)
    }

    /// Stores a snapshot and evicts what falls out of the limit; returns how
    /// many snapshots were evicted. Snapshots must arrive in time order (an
    /// out-of-order one is placed by time so window searches stay valid).
    pub fn push(&mut self, mut snap: Snapshot) -> usize {
        let mut samples = std::mem::take(&mut snap.samples);
        // Rows sorted by tid let the thread view find a thread by binary search.
        samples.sort_by_key(|s| s.ident.tid);
        let rows: Box<[Row]> = samples.iter().map(|s| self.compact(&snap, s)).collect();
        self.samples += rows.len();
        let stored = Stored { meta: snap, rows };
        let pos = self.index_after(stored.meta.time_ns);
        if pos < self.snaps.len() {
            self.reorders += 1;
        }
        self.snaps.insert(pos, stored);
        let mut evicted = 0;
        if let Some(limit) = self.limit {
            let latest = self.snaps.back().map_or(0, |s| s.meta.time_ns);
            let horizon = latest.saturating_sub(limit.as_nanos() as u64);
            while self.snaps.len() > 1 && self.snaps[0].meta.time_ns <= horizon {
                self.evict_oldest();
                evicted += 1;
            }
        }
        evicted
    }

    fn evict_oldest(&mut self) {
        if let Some(old) = self.snaps.pop_front() {
            for r in old.rows.iter() {
                self.threads.release(r.thread);
                if let Some(e) = self.episodes.release(r.episode) {
                    for id in [e.kstack, e.ustack] {
                        if id != NONE_U32 {
                            self.stacks.release(id);
                        }
                    }
                    if e.target != NONE_U32 {
                        self.targets.release(e.target);
                    }
                    if e.app != NONE_U32 {
                        self.apps.release(e.app);
                    }
                    if e.io_dev != NONE_U32 {
                        self.devices.release(e.io_dev);
                    }
                }
            }
            self.samples -= old.rows.len();
            self.first_id += 1;
        }
    }

    fn compact(&mut self, snap: &Snapshot, s: &ThreadSample) -> Row {
        let thread = self.threads.acquire(ArcKey(s.ident.clone()));
        let t = snap.time_ns;
        let (syscall, nr, args, seq, syscall_start) = match s.syscall {
            Syscall::None => (SYSCALL_NONE, 0, [0; 6], NONE_U64, NONE_U64),
            Syscall::Unknown => (SYSCALL_UNKNOWN, 0, [0; 6], NONE_U64, NONE_U64),
            Syscall::In {
                nr,
                args,
                ns_so_far,
                seq,
            } => (SYSCALL_IN, nr, args, seq.unwrap_or(NONE_U64), at(t, ns_so_far)),
        };
        // Look the stack up without taking a reference: if the episode is shared,
        // the shared one already holds it. An unknown stack means a new episode.
        let stack_key = s.kstack.as_ref().map(|k| ArcKey(k.clone()));
        let known = stack_key
            .as_ref()
            .map_or(Some(NONE_U32), |k| self.stacks.ids.get(k).copied());
        let ustack_key = s.ustack.as_ref().map(|u| ArcKey(u.clone()));
        let uknown = ustack_key
            .as_ref()
            .map_or(Some(NONE_U32), |u| self.stacks.ids.get(u).copied());
        let target_key = s.target.as_ref().map(|t| ArcKey(t.clone()));
        let tknown = target_key
            .as_ref()
            .map_or(Some(NONE_U32), |t| self.targets.ids.get(t).copied());
        let app_key = s.app.as_ref().map(|a| ArcKey(a.clone()));
        let aknown = app_key
            .as_ref()
            .map_or(Some(NONE_U32), |a| self.apps.ids.get(a).copied());
        let (io, io_op, io_bytes, io_start) = match &s.io {
            IoWait::Untracked => (IO_UNTRACKED, 0, 0, NONE_U64),
            IoWait::None => (IO_NONE, 0, 0, NONE_U64),
            IoWait::InFlight(b) => (IO_INFLIGHT, b.op, b.bytes, t.wrapping_sub(b.inflight_ns)),
        };
        let device = match &s.io {
            IoWait::InFlight(b) => Some(&b.device),
            _ => None,
        };
        let dknown = device.map_or(Some(NONE_U32), |d| self.devices.ids.get(d).copied());
        let mut e = Episode {
            args,
            seq,
            syscall_start,
            offcpu_at: at(t, s.since_offcpu_ns),
            oncpu_at: at(t, s.since_oncpu_ns),
            queued_at: at(t, s.runq_wait_ns),
            io_start,
            nr,
            waker: s.waker_tid.unwrap_or(NONE_U32),
            kstack: known.unwrap_or(NONE_U32),
            ustack: uknown.unwrap_or(NONE_U32),
            target: tknown.unwrap_or(NONE_U32),
            app: aknown.unwrap_or(NONE_U32),
            io_dev: dknown.unwrap_or(NONE_U32),
            io_bytes,
            io,
            io_op,
            syscall,
            voluntary: s.voluntary.map_or(0, |v| 1 + v as u8),
        };
        if self.last_episode.len() <= thread as usize {
            self.last_episode.resize(thread as usize + 1, NONE_U32);
        }
        let prev = self.last_episode[thread as usize];
        let shared = known
            .and(uknown)
            .and(tknown)
            .and(aknown)
            .and(dknown)
            .and_then(|_| self.episodes.share(&e, prev));
        let episode = shared.unwrap_or_else(|| {
            e.kstack = stack_key.map_or(NONE_U32, |k| self.stacks.acquire(k));
            e.ustack = ustack_key.map_or(NONE_U32, |u| self.stacks.acquire(u));
            e.target = target_key.map_or(NONE_U32, |t| self.targets.acquire(t));
            e.app = app_key.map_or(NONE_U32, |a| self.apps.acquire(a));
            e.io_dev = device.map_or(NONE_U32, |d| self.devices.acquire(d.clone()));
            self.episodes.insert(e)
        });
        self.last_episode[thread as usize] = episode;
        Row {
            thread,
            episode,
            cpu: s.cpu,
            state: s.state,
        }
    }

    /// The row of thread `tid` in snapshot `i`, if it was sampled there.
    pub fn find_tid(&self, i: usize, tid: u32) -> Option<usize> {
        let rows = &self.snaps[i].rows;
        let at = rows.partition_point(|r| self.threads.get(r.thread).0.tid < tid);
        (at < rows.len() && self.threads.get(rows[at].thread).0.tid == tid).then_some(at)
    }

    pub fn ident(&self, i: usize, row: usize) -> &ThreadIdent {
        &self.threads.get(self.snaps[i].rows[row].thread).0
    }

    /// The exact sample `row` of snapshot `i` (rows are in tid order).
    pub fn sample(&self, i: usize, row: usize) -> ThreadSample {
        let st = &self.snaps[i];
        let r = &st.rows[row];
        let e = &self.episodes.slots[r.episode as usize].0;
        let time = st.meta.time_ns;
        let syscall = match e.syscall {
            SYSCALL_NONE => Syscall::None,
            SYSCALL_UNKNOWN => Syscall::Unknown,
            _ => Syscall::In {
                nr: e.nr,
                args: e.args,
                ns_so_far: since(time, e.syscall_start),
                seq: (e.seq != NONE_U64).then_some(e.seq),
            },
        };
        ThreadSample {
            ident: self.threads.get(r.thread).0.clone(),
            cpu: r.cpu,
            state: r.state,
            syscall,
            since_offcpu_ns: since(time, e.offcpu_at),
            since_oncpu_ns: since(time, e.oncpu_at),
            voluntary: match e.voluntary {
                0 => None,
                v => Some(v == 2),
            },
            runq_wait_ns: since(time, e.queued_at),
            waker_tid: (e.waker != NONE_U32).then_some(e.waker),
            kstack: (e.kstack != NONE_U32).then(|| self.stacks.get(e.kstack).0.clone()),
            ustack: (e.ustack != NONE_U32).then(|| self.stacks.get(e.ustack).0.clone()),
            target: (e.target != NONE_U32).then(|| self.targets.get(e.target).0.clone()),
            app: (e.app != NONE_U32).then(|| self.apps.get(e.app).0.clone()),
            io: match e.io {
                IO_UNTRACKED => IoWait::Untracked,
                IO_NONE => IoWait::None,
                _ => IoWait::InFlight(BlockIo {
                    device: self.devices.get(e.io_dev).clone(),
                    op: e.io_op,
                    bytes: e.io_bytes,
                    inflight_ns: time.wrapping_sub(e.io_start),
                }),
            },
        }
    }

    /// Rebuilds snapshot `i` into `out`, reusing its sample buffer.
    pub fn materialize_into(&self, i: usize, out: &mut Snapshot) {
        let meta = &self.snaps[i].meta;
        out.time_ns = meta.time_ns;
        out.interval = meta.interval;
        out.ncpus = meta.ncpus;
        out.arch = meta.arch;
        out.cost = meta.cost;
        out.dropped = meta.dropped;
        out.samples.clear();
        out.samples
            .extend((0..self.snaps[i].rows.len()).map(|r| self.sample(i, r)));
    }

    pub fn materialize(&self, i: usize) -> Snapshot {
        let mut out = Snapshot {
            samples: Vec::new(),
            ..self.snaps[i].meta.clone()
        };
        self.materialize_into(i, &mut out);
        out
    }

    /// Approximate heap bytes held (rows, episodes and interning tables; the
    /// strings and stacks the Arcs point to are shared with the sampler's caches).
    pub fn bytes(&self) -> usize {
        let rows: usize = self
            .snaps
            .iter()
            .map(|s| s.rows.len() * std::mem::size_of::<Row>())
            .sum();
        rows + self.snaps.capacity() * std::mem::size_of::<Stored>()
            + self.threads.bytes()
            + self.last_episode.capacity() * 4
            + self.episodes.slots.capacity() * std::mem::size_of::<(Episode, u32)>()
            + self.episodes.free.capacity() * 4
            + self.stacks.bytes()
            + self.targets.bytes()
            + self.apps.bytes()
            + self.devices.bytes()
    }

    /// Live entries: (threads, episodes, stacks).
    pub fn interned(&self) -> (usize, usize, usize) {
        (self.threads.live(), self.episodes.live, self.stacks.live())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::fixture::{busy_snapshot, sample, snapshot};

    #[test]
    fn rows_are_16_bytes() {
        assert_eq!(std::mem::size_of::<Row>(), 16);
        assert_eq!(std::mem::size_of::<(Episode, u32)>(), 144);
    }

    #[test]
    fn samples_round_trip_exactly() {
        let mut h = History::new(None);
        let mut snap = busy_snapshot(0);
        snap.samples[0].runq_wait_ns = None;
        snap.samples[1].voluntary = Some(false);
        snap.samples[2].syscall = Syscall::Unknown;
        snap.samples[3].waker_tid = None;
        if let Syscall::In { ns_so_far, .. } = &mut snap.samples[4].syscall {
            *ns_so_far = None;
        }
        snap.samples[5].app = Some(Arc::new(AppWait::Known {
            class: "IO".into(),
            event: "WALSync".into(),
            state: "client backend".into(),
        }));
        snap.samples[0].app = Some(Arc::new(AppWait::Unread));
        snap.samples[1].io = IoWait::Untracked;
        snap.samples[2].io = IoWait::InFlight(BlockIo {
            device: "vda".into(),
            op: 1,
            bytes: 4096,
            inflight_ns: 1_500_000,
        });
        h.push(snap.clone());
        assert_eq!(h.materialize(0), snap);
        // The same thread waiting elsewhere is a new episode, not the old one.
        let mut next = snap.clone();
        next.time_ns += 1_000_000_000;
        next.samples[5].app = Some(Arc::new(AppWait::Known {
            class: "Client".into(),
            event: "ClientRead".into(),
            state: "client backend".into(),
        }));
        h.push(next.clone());
        assert_eq!(h.materialize(1), next);
        assert_eq!(h.materialize(0), snap);
        assert_eq!(h.find_tid(0, 200), Some(3));
        assert_eq!(h.find_tid(0, 150), None);
    }

    #[test]
    fn eviction_keeps_the_limit_and_frees_interned_entries() {
        let mut h = History::new(Some(Duration::from_secs(10)));
        for i in 0..100 {
            h.push(busy_snapshot(i));
        }
        // Newer than latest-10s: 89 < t <= 99.
        assert_eq!(h.len(), 10);
        assert_eq!(h.first_id(), 90);
        assert_eq!(h.meta(0).time_ns, busy_snapshot(90).time_ns);
        let (threads, _, stacks) = h.interned();
        assert_eq!(threads, 6);
        assert_eq!(stacks, 2, "the fixture's one kernel and one user stack");
        let mut one = History::new(Some(Duration::from_secs(1)));
        for i in 0..50 {
            one.push(snapshot(i, vec![sample(i as u32, 1, "x", State::Disk, Some(0))]));
        }
        // Every snapshot has a new thread; only the last one's entries remain.
        assert_eq!(one.len(), 1);
        assert_eq!(one.interned(), (1, 1, 2), "evicted entries are freed");
        assert_eq!(one.samples(), 1);
    }

    #[test]
    fn identities_intern_by_value_and_a_renamed_thread_is_a_new_one() {
        let mut h = History::new(None);
        let a = sample(7, 7, "db", State::Disk, Some(17));
        let mut b = a.clone();
        Arc::make_mut(&mut b.ident).comm = "db-worker".into();
        // A fresh but equal Arc (what a restarted sampler would hand out).
        let c = sample(7, 7, "db", State::Disk, Some(17));
        for (i, s) in [&a, &b, &c].into_iter().enumerate() {
            h.push(snapshot(i as u64, vec![s.clone()]));
        }
        assert_eq!(h.interned().0, 2);
        assert_eq!(h.sample(1, 0), b);
        assert_eq!(h.sample(2, 0), a);
    }

    #[test]
    fn a_changed_user_stack_alone_is_kept() {
        let mut h = History::new(None);
        let a = sample(7, 7, "db", State::Disk, Some(17));
        let mut b = a.clone();
        b.ustack = Some(Arc::new(Stack {
            hash: 0xbeef,
            frames: vec!["other".into()],
            top: 0,
        }));
        h.push(snapshot(0, vec![a.clone()]));
        h.push(snapshot(1, vec![b.clone()]));
        assert_eq!(h.sample(0, 0), a);
        assert_eq!(h.sample(1, 0), b);
        assert_eq!(h.interned().2, 3);
    }

    #[test]
    fn a_blocked_thread_shares_one_episode() {
        let mut h = History::new(None);
        let grow = |v: Option<u64>, i: u64| v.map(|v| v + i * 1_000_000_000);
        for i in 0..10u64 {
            let mut s = sample(7, 7, "db", State::Disk, Some(17));
            if let Syscall::In { ns_so_far, .. } = &mut s.syscall {
                *ns_so_far = grow(*ns_so_far, i);
            }
            s.since_offcpu_ns = grow(s.since_offcpu_ns, i);
            s.since_oncpu_ns = grow(s.since_oncpu_ns, i);
            s.runq_wait_ns = grow(s.runq_wait_ns, i);
            h.push(snapshot(i, vec![s.clone(), sample(8, 7, "db", State::Run, None)]));
            assert_eq!(h.materialize(i as usize).samples[0], s);
        }
        // Thread 7 kept one episode; thread 8's fixture times do not move with
        // the clock, so each of its samples is a new episode.
        assert_eq!(h.interned(), (2, 1 + 10, 2));
        let last = h.sample(9, 0);
        assert!(matches!(
            last.syscall,
            Syscall::In {
                ns_so_far: Some(9_001_500_000),
                ..
            }
        ));
        while h.len() > 1 {
            h.evict_oldest();
        }
        assert_eq!(h.interned(), (2, 2, 2));
    }
}
