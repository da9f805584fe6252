//! Time on the screen's horizontal axis: a window cut into equal columns, and
//! the span of time each snapshot stands for. The chart, the sparklines and
//! the thread view's timeline all place snapshots through here.
//!
//! A snapshot is an instant, but it stands for the time since the previous
//! one. Placing instants in columns leaves false holes (at one column per
//! half second, every other column gets none; with jitter, some columns get
//! two and some none); spreading each snapshot over the span it stands for
//! and averaging by overlap does not. A column no snapshot stands for is a
//! real gap: the sampler stalled, recordings left a hole, or the window
//! reaches before the first snapshot.

use super::history::History;

/// A window `(start, end]` cut into `n` equal columns.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Columns {
    start: u64,
    end: u64,
    n: usize,
}

impl Columns {
    pub fn new(start_ns: u64, end_ns: u64, n: usize) -> Columns {
        Columns {
            start: start_ns,
            end: end_ns.max(start_ns + 1),
            n: n.max(1),
        }
    }

    pub fn count(&self) -> usize {
        self.n
    }

    /// Left edge of column `c` (exclusive); `edge(n)` is the window's end.
    pub fn edge(&self, c: usize) -> u64 {
        let span = (self.end - self.start) as u128;
        self.start + (span * c as u128 / self.n as u128) as u64
    }

    /// The column holding time `t`, the one with `edge(c) < t <= edge(c + 1)`
    /// (clamped to the window).
    pub fn column_of(&self, t: u64) -> usize {
        let off = (t.clamp(self.start + 1, self.end) - self.start) as u128;
        let c = (off * self.n as u128).div_ceil((self.end - self.start) as u128) - 1;
        (c as usize).min(self.n - 1)
    }

    /// Calls `f(column, overlap_ns)` for every column the span `(a, b]` overlaps.
    pub fn spread(&self, a: u64, b: u64, mut f: impl FnMut(usize, u64)) {
        let (a, b) = (a.max(self.start), b.min(self.end));
        if a >= b {
            return;
        }
        let mut c = self.column_of(a + 1);
        while c < self.n && self.edge(c) < b {
            let overlap = b.min(self.edge(c + 1)) - a.max(self.edge(c));
            if overlap > 0 {
                f(c, overlap);
            }
            c += 1;
        }
    }
}

/// How many intervals may pass between two snapshots before the time between
/// them counts as a gap rather than as the later one's interval.
const STALL_INTERVALS: u64 = 2;

/// The span `(from, to]` snapshot `i` stands for: back to the previous
/// snapshot when that is at most two intervals earlier (so a sampler's jitter
/// leaves no hole), otherwise one interval (so a stall shows as a gap).
pub fn covers(h: &History, i: usize) -> (u64, u64) {
    let meta = h.meta(i);
    let (t, interval) = (meta.time_ns, meta.interval.as_nanos() as u64);
    let from = match i.checked_sub(1).map(|p| h.meta(p).time_ns) {
        Some(prev) if t.saturating_sub(prev) <= interval.saturating_mul(STALL_INTERVALS) => prev,
        _ => t.saturating_sub(interval),
    };
    (from, t)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn columns_are_equal_and_overlaps_add_up() {
        let c = Columns::new(1000, 2000, 3);
        assert_eq!(
            (c.edge(0), c.edge(1), c.edge(2), c.edge(3)),
            (1000, 1333, 1666, 2000)
        );
        assert_eq!(
            (c.column_of(1001), c.column_of(1333), c.column_of(1334)),
            (0, 0, 1)
        );
        assert_eq!((c.column_of(0), c.column_of(5000)), (0, 2));
        let mut got = Vec::new();
        c.spread(900, 1700, |col, ns| got.push((col, ns)));
        assert_eq!(got, [(0, 333), (1, 333), (2, 34)]);
        let mut total = 0;
        c.spread(0, u64::MAX, |_, ns| total += ns);
        assert_eq!(total, 1000, "the whole window, once");
        c.spread(2000, 2500, |_, _| panic!("after the window"));
        c.spread(1200, 1200, |_, _| panic!("empty span"));
    }
}
