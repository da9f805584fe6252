//! What the main view shows for a window of history: the top groups (an
//! `aggregation::Aggregate`), per-group sparklines and the stacked ASH chart.
//!
//! Grouping an hour of 10,000 threads (36M samples) per frame is out of the
//! question, so each snapshot is grouped once per query (dims + filters) with
//! `aggregation::aggregate` into a small per-snapshot summary of
//! (group id, samples). A window is then a sum of summaries, which is cheap.
//! When the query changes, summaries are rebuilt newest first within a time
//! budget per frame; until done, the view says how much of the window it
//! covers instead of showing partial numbers as if they were complete.

use std::collections::{HashMap, VecDeque};
use std::time::{Duration, Instant};

use crate::aggregation::{aggregate, Aggregate, Filter, Group};
use crate::dimensions::Dimension;
use crate::model::Snapshot;
use crate::value::Value;

use super::history::History;
use super::timeline::{covers, Columns};

/// Sparkline width, in buckets.
pub const SPARK_W: usize = 12;
/// Chart bands drawn individually; the rest are summed into "other".
pub const MAX_BANDS: usize = 8;

/// Group-by dimensions and filters: what a level of drill-down looks at.
#[derive(Clone, Debug, PartialEq)]
pub struct Query {
    pub dims: Vec<&'static Dimension>,
    pub filters: Vec<Filter>,
}

/// A window of history: snapshot indices `lo..hi` and the time span they are
/// drawn on (`start_ns` exclusive, `end_ns` inclusive).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Window {
    pub lo: usize,
    pub hi: usize,
    pub start_ns: u64,
    pub end_ns: u64,
}

#[derive(Clone, Debug, Default, PartialEq)]
pub struct Chart {
    /// First-dimension values of the bands, bottom first; `other` adds one more band.
    pub bands: Vec<Value>,
    pub other: bool,
    /// Per column (equal spans of the window), per band: average active
    /// threads; None where no snapshot stands for any of the column's time.
    pub cols: Vec<Option<Vec<f64>>>,
    /// The window the columns cut: `(start_ns, end_ns]`.
    pub start_ns: u64,
    pub end_ns: u64,
}

impl Chart {
    /// The band a first-dimension value is drawn in: its own, or "other".
    pub fn band_of(&self, v: &Value) -> Option<usize> {
        let shown = self.bands.iter().position(|b| b == v);
        shown.or(self.other.then_some(self.bands.len()))
    }

    pub fn max_total(&self) -> f64 {
        self.cols
            .iter()
            .flatten()
            .map(|c| c.iter().sum::<f64>())
            .fold(0.0, f64::max)
    }
}

#[derive(Clone, Debug, PartialEq)]
pub struct WindowView {
    /// Groups over the scanned part of the window, largest first.
    pub agg: Aggregate,
    /// Per group (parallel to `agg.groups`): average threads per time bucket.
    pub spark: Vec<[f32; SPARK_W]>,
    pub chart: Chart,
    /// Snapshots of the window whose summaries are in the numbers.
    pub scanned: usize,
    pub snapshots: usize,
    pub window: Option<Window>,
}

impl Default for WindowView {
    fn default() -> Self {
        WindowView {
            agg: Aggregate {
                groups: Vec::new(),
                total_samples: 0,
                total_weight_s: 0.0,
                seconds: 0.0,
                snapshots: 0,
            },
            spark: Vec::new(),
            chart: Chart::default(),
            scanned: 0,
            snapshots: 0,
            window: None,
        }
    }
}

impl WindowView {
    pub fn complete(&self) -> bool {
        self.scanned == self.snapshots
    }
}

/// One snapshot grouped: (group id, samples), and the same summed by the
/// group's first value (what the chart stacks), so a redraw does not walk
/// every group of every snapshot twice.
#[derive(Clone, Debug, Default)]
struct Summary {
    groups: Vec<(u32, u32)>,
    firsts: Vec<(u32, u32)>,
}

/// Interned group keys tolerated before unused ones are dropped.
const MAX_STALE_KEYS: usize = 100_000;

fn empty_snapshot() -> Snapshot {
    Snapshot {
        time_ns: 0,
        interval: Duration::ZERO,
        ncpus: 0,
        arch: crate::model::Arch::native(),
        samples: Vec::new(),
        cost: Default::default(),
        dropped: 0,
    }
}

/// Groups snapshot `i` with `aggregation::aggregate`, the one grouping code.
fn group(h: &History, i: usize, query: &Query, scratch: &mut Snapshot) -> Vec<Group> {
    h.materialize_into(i, scratch);
    aggregate(std::iter::once(&*scratch), &query.dims, &query.filters).groups
}

pub struct Cache {
    query: Option<Query>,
    keys: Vec<Vec<Value>>,
    key_ids: HashMap<Vec<Value>, u32>,
    /// Per key: id of its first value in `firsts`.
    first_of: Vec<u32>,
    firsts: Vec<Value>,
    first_ids: HashMap<Value, u32>,
    /// Aligned with history: `summaries[i]` is for snapshot id `first_id + i`.
    summaries: VecDeque<Option<Summary>>,
    first_id: u64,
    /// `History::reorders` the summaries are aligned with.
    reorders: u64,
    scratch: Snapshot,
    built: Option<(Window, usize, usize)>,
    view: WindowView,
    /// Bumped whenever `view` changes, so derived caches can follow.
    pub generation: u64,
}

impl Default for Cache {
    fn default() -> Self {
        Cache {
            query: None,
            keys: Vec::new(),
            key_ids: HashMap::new(),
            first_of: Vec::new(),
            firsts: Vec::new(),
            first_ids: HashMap::new(),
            summaries: VecDeque::new(),
            first_id: 0,
            reorders: 0,
            scratch: empty_snapshot(),
            built: None,
            view: WindowView::default(),
            generation: 0,
        }
    }
}

impl Cache {
    pub fn view(&self) -> &WindowView {
        &self.view
    }

    /// Brings the view up to date for `query` over `win` with `cols` chart
    /// columns, spending at most `budget` on grouping (None: no limit).
    pub fn refresh(
        &mut self,
        h: &History,
        query: &Query,
        win: Window,
        cols: usize,
        budget: Option<Duration>,
    ) {
        let started = Instant::now();
        // Group keys are interned per query and never evicted one by one; when
        // most belong to groups that left the window (thread churn while
        // grouping by tid), start over rather than grow without bound.
        let stale_keys = self.keys.len() > MAX_STALE_KEYS && self.view.agg.groups.len() * 4 < self.keys.len();
        if self.query.as_ref() != Some(query) || stale_keys {
            self.query = Some(query.clone());
            self.keys.clear();
            self.key_ids.clear();
            self.first_of.clear();
            self.firsts.clear();
            self.first_ids.clear();
            self.summaries.iter_mut().for_each(|s| *s = None);
            self.built = None;
        }
        if h.reorders() != self.reorders {
            self.reorders = h.reorders();
            self.summaries.clear();
            self.built = None;
        }
        // Follow history: evictions at the front, arrivals at the back.
        while self.first_id < h.first_id() && !self.summaries.is_empty() {
            self.summaries.pop_front();
            self.first_id += 1;
        }
        if self.summaries.is_empty() {
            self.first_id = h.first_id();
        }
        self.summaries.resize(h.len(), None);
        // Only the window's summaries are kept: memory stays bounded by the window.
        for (i, s) in self.summaries.iter_mut().enumerate() {
            if i < win.lo || i >= win.hi {
                *s = None;
            }
        }
        // Newest first, until the budget is spent. (Spreading this over CPUs
        // was measured slower: rebuilt samples share Arc reference counts.)
        for i in (win.lo..win.hi).rev() {
            if self.summaries[i].is_some() {
                continue;
            }
            if budget.is_some_and(|b| started.elapsed() >= b) {
                break;
            }
            let groups = group(h, i, query, &mut self.scratch);
            self.summaries[i] = Some(self.intern(groups));
        }
        let scanned = (win.lo..win.hi).filter(|&i| self.summaries[i].is_some()).count();
        let key = (win, cols, scanned);
        if self.built == Some(key) && self.view.window == Some(win) {
            return;
        }
        self.build(h, win, cols, scanned);
        self.built = Some(key);
        self.generation += 1;
    }

    /// Whether `refresh` left part of the window ungrouped.
    pub fn pending(&self) -> bool {
        !self.view.complete()
    }

    fn intern(&mut self, groups: Vec<Group>) -> Summary {
        let mut firsts: Vec<(u32, u32)> = Vec::new();
        let groups = groups
            .into_iter()
            .map(|g| {
                let id = match self.key_ids.get(&g.key) {
                    Some(&id) => id,
                    None => {
                        let first = g.key.first().cloned().unwrap_or(Value::Missing);
                        let next = self.firsts.len() as u32;
                        let fid = *self.first_ids.entry(first).or_insert_with_key(|v| {
                            self.firsts.push(v.clone());
                            next
                        });
                        let id = self.keys.len() as u32;
                        self.keys.push(g.key.clone());
                        self.first_of.push(fid);
                        self.key_ids.insert(g.key, id);
                        id
                    }
                };
                let n = g.samples as u32;
                let fid = self.first_of[id as usize];
                match firsts.iter_mut().find(|(f, _)| *f == fid) {
                    Some((_, c)) => *c += n,
                    None => firsts.push((fid, n)),
                }
                (id, n)
            })
            .collect();
        Summary { groups, firsts }
    }

    fn build(&mut self, h: &History, win: Window, cols: usize, scanned: usize) {
        let spark_cols = Columns::new(win.start_ns, win.end_ns, SPARK_W);
        let chart = Columns::new(win.start_ns, win.end_ns, cols.max(1));
        let nkeys = self.keys.len();
        let mut weight = vec![0.0f64; nkeys];
        let mut samples = vec![0u64; nkeys];
        let mut spark = vec![[0f32; SPARK_W]; nkeys];
        let mut spark_secs = [0f64; SPARK_W];
        let mut col_secs = vec![0f64; cols];
        let (mut seconds, mut total_samples, mut total_weight) = (0.0, 0u64, 0.0);
        for i in win.lo..win.hi {
            let Some(sum) = &self.summaries[i] else {
                continue;
            };
            let w = h.meta(i).interval.as_secs_f64();
            seconds += w;
            let (from, to) = covers(h, i);
            spark_cols.spread(from, to, |b, ns| {
                let secs = ns as f64 / 1e9;
                spark_secs[b] += secs;
                for &(k, n) in &sum.groups {
                    spark[k as usize][b] += (n as f64 * secs) as f32;
                }
            });
            if cols > 0 {
                chart.spread(from, to, |c, ns| col_secs[c] += ns as f64 / 1e9);
            }
            for &(k, n) in &sum.groups {
                let k = k as usize;
                weight[k] += n as f64 * w;
                samples[k] += n as u64;
                total_samples += n as u64;
                total_weight += n as f64 * w;
            }
        }
        // Groups in aggregate()'s order: heaviest first, ties by key.
        let mut ids: Vec<usize> = (0..nkeys).filter(|&k| samples[k] > 0).collect();
        ids.sort_by(|&a, &b| {
            weight[b]
                .total_cmp(&weight[a])
                .then_with(|| self.keys[a].cmp(&self.keys[b]))
        });
        let groups: Vec<Group> = ids
            .iter()
            .map(|&k| Group {
                key: self.keys[k].clone(),
                samples: samples[k],
                weight_s: weight[k],
            })
            .collect();
        let spark = ids
            .iter()
            .map(|&k| {
                let mut s = spark[k];
                for (v, secs) in s.iter_mut().zip(spark_secs) {
                    *v = if secs > 0.0 {
                        (*v as f64 / secs) as f32
                    } else {
                        0.0
                    };
                }
                s
            })
            .collect();

        // Bands: the heaviest values of the first dimension, the rest as "other".
        let mut first_weight = vec![0.0f64; self.firsts.len()];
        for &k in &ids {
            first_weight[self.first_of[k] as usize] += weight[k];
        }
        let mut ranked: Vec<usize> = (0..self.firsts.len())
            .filter(|&f| first_weight[f] > 0.0)
            .collect();
        ranked.sort_by(|&a, &b| {
            first_weight[b]
                .total_cmp(&first_weight[a])
                .then_with(|| self.firsts[a].cmp(&self.firsts[b]))
        });
        let other = ranked.len() > MAX_BANDS;
        let shown = if other { MAX_BANDS - 1 } else { ranked.len() };
        let bands: Vec<Value> = ranked[..shown].iter().map(|&f| self.firsts[f].clone()).collect();
        let nbands = bands.len() + other as usize;
        // Unranked values (the "other" band, or absent from this window) go last.
        let mut band_of_first = vec![nbands.saturating_sub(1); self.firsts.len()];
        for (b, &f) in ranked[..shown].iter().enumerate() {
            band_of_first[f] = b;
        }
        // Each column: the samples of the snapshots standing for its span,
        // averaged by how much of it each stands for; None where none does.
        let mut chart_cols: Vec<Option<Vec<f64>>> = col_secs
            .iter()
            .map(|&secs| (secs > 0.0).then(|| vec![0.0; nbands]))
            .collect();
        if nbands > 0 && cols > 0 {
            for i in win.lo..win.hi {
                let Some(sum) = &self.summaries[i] else {
                    continue;
                };
                let (from, to) = covers(h, i);
                chart.spread(from, to, |c, ns| {
                    let w = ns as f64 / 1e9 / col_secs[c];
                    if let Some(col) = &mut chart_cols[c] {
                        for &(f, n) in &sum.firsts {
                            col[band_of_first[f as usize]] += n as f64 * w;
                        }
                    }
                });
            }
        }
        self.view = WindowView {
            agg: Aggregate {
                groups,
                total_samples,
                total_weight_s: total_weight,
                seconds,
                snapshots: scanned,
            },
            spark,
            chart: Chart {
                bands,
                other,
                cols: chart_cols,
                start_ns: win.start_ns,
                end_ns: win.end_ns,
            },
            scanned,
            snapshots: win.hi - win.lo,
            window: Some(win),
        };
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::dimensions::parse_list;
    use crate::model::fixture::busy_snapshot;

    fn setup(n: u64) -> (History, Vec<Snapshot>) {
        let snaps: Vec<_> = (0..n).map(busy_snapshot).collect();
        let mut h = History::new(None);
        for s in &snaps {
            h.push(s.clone());
        }
        (h, snaps)
    }

    fn window(h: &History) -> Window {
        Window {
            lo: 0,
            hi: h.len(),
            start_ns: h.meta(0).time_ns - 1_000_000_000,
            end_ns: h.latest().unwrap().time_ns,
        }
    }

    #[test]
    fn window_sums_match_a_direct_aggregate() {
        let (h, snaps) = setup(8);
        let q = Query {
            dims: parse_list("state,comm").unwrap(),
            filters: vec![Filter::parse("comm!=java").unwrap()],
        };
        let mut c = Cache::default();
        c.refresh(&h, &q, window(&h), 8, None);
        let want = aggregate(&snaps, &q.dims, &q.filters);
        assert_eq!(c.view().agg, want);
        assert!(c.view().complete());
        // DISK (postgres 1 + dd 0.5 on average) is the largest first-dim band.
        assert_eq!(c.view().chart.bands[0], Value::Name("DISK"));
        let col0 = c.view().chart.cols[0].as_ref().unwrap();
        // Snapshot 0 has dd: DISK = 2 threads in that column.
        assert_eq!(col0[0], 2.0);
        assert!((c.view().chart.max_total() - 4.0).abs() < 1e-9);
    }

    #[test]
    fn budget_scans_newest_first_and_says_so() {
        let (h, _) = setup(50);
        let q = Query {
            dims: parse_list("state").unwrap(),
            filters: vec![],
        };
        let mut c = Cache::default();
        c.refresh(&h, &q, window(&h), 10, Some(Duration::ZERO));
        assert_eq!(c.view().scanned, 0);
        assert!(c.pending());
        c.refresh(&h, &q, window(&h), 10, None);
        assert_eq!(c.view().scanned, 50);
        assert!(!c.pending());
    }

    #[test]
    fn out_of_order_snapshots_are_placed_by_time() {
        let snaps: Vec<_> = (0..6).map(busy_snapshot).collect();
        let mut h = History::new(None);
        let mut c = Cache::default();
        let q = Query {
            dims: parse_list("state,comm").unwrap(),
            filters: vec![],
        };
        for i in [0, 1, 3, 4] {
            h.push(snaps[i].clone());
        }
        c.refresh(&h, &q, window(&h), 4, None);
        h.push(snaps[2].clone());
        h.push(snaps[5].clone());
        c.refresh(&h, &q, window(&h), 4, None);
        assert_eq!(c.view().agg, aggregate(&snaps, &q.dims, &[]));
        assert_eq!(h.meta(2).time_ns, snaps[2].time_ns);
    }

    #[test]
    fn query_change_regroups_and_windows_move() {
        let (h, snaps) = setup(10);
        let mut c = Cache::default();
        let q1 = Query {
            dims: parse_list("state").unwrap(),
            filters: vec![],
        };
        c.refresh(&h, &q1, window(&h), 4, None);
        let g1 = c.generation;
        c.refresh(&h, &q1, window(&h), 4, None);
        assert_eq!(c.generation, g1, "no rebuild without changes");
        let q2 = Query {
            dims: parse_list("comm").unwrap(),
            filters: vec![],
        };
        let mut w = window(&h);
        w.lo = 5;
        w.start_ns = h.meta(4).time_ns;
        c.refresh(&h, &q2, w, 4, None);
        assert_eq!(c.view().agg, aggregate(&snaps[5..], &q2.dims, &[]));
        // Odd snapshots 5,7,9 lack dd: its sparkline is zero in some buckets.
        let dd = c
            .view()
            .agg
            .groups
            .iter()
            .position(|g| g.key[0] == Value::Text("dd".into()))
            .unwrap();
        assert!(c.view().spark[dd].contains(&0.0));
    }
}
