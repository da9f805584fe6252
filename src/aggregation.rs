//! Grouping samples by dimensions (after `filter`'s filters). Batch mode,
//! reports and the TUI all aggregate through here, so their numbers agree.

use std::collections::HashMap;

use crate::dimensions::Dimension;
pub use crate::filter::{matches_all, Filter, FilterOp};
use crate::model::Snapshot;
use crate::value::Value;

#[derive(Clone, Debug, PartialEq)]
pub struct Group {
    pub key: Vec<Value>,
    pub samples: u64,
    /// Thread-seconds: each sample weighs the interval of its snapshot.
    pub weight_s: f64,
}

/// Samples grouped by some dimensions over a range of snapshots.
#[derive(Clone, Debug, PartialEq)]
pub struct Aggregate {
    pub groups: Vec<Group>,
    pub total_samples: u64,
    pub total_weight_s: f64,
    /// Seconds covered by the snapshots (sum of their intervals).
    pub seconds: f64,
    pub snapshots: usize,
}

impl Group {
    /// Average threads in this group over the range: the height of an ASH chart.
    pub fn avg_threads(&self, agg: &Aggregate) -> f64 {
        if agg.seconds > 0.0 {
            self.weight_s / agg.seconds
        } else {
            0.0
        }
    }

    /// Share of all sampled activity in the range, in percent.
    pub fn percent(&self, agg: &Aggregate) -> f64 {
        if agg.total_weight_s > 0.0 {
            100.0 * self.weight_s / agg.total_weight_s
        } else {
            0.0
        }
    }
}

/// Groups every sample that passes `filters`, largest group first (ties by key).
pub fn aggregate<'a>(
    snaps: impl IntoIterator<Item = &'a Snapshot>,
    dims: &[&'static Dimension],
    filters: &[Filter],
) -> Aggregate {
    let mut groups: HashMap<Vec<Value>, (u64, f64)> = HashMap::new();
    let (mut seconds, mut snapshots, mut total_samples, mut total_weight_s) = (0.0, 0, 0, 0.0);
    for snap in snaps {
        let w = snap.interval.as_secs_f64();
        seconds += w;
        snapshots += 1;
        for s in snap.samples.iter().filter(|s| matches_all(filters, snap, s)) {
            let key = dims.iter().map(|d| d.value(snap, s)).collect();
            let g = groups.entry(key).or_default();
            g.0 += 1;
            g.1 += w;
            total_samples += 1;
            total_weight_s += w;
        }
    }
    let mut groups: Vec<Group> = groups
        .into_iter()
        .map(|(key, (samples, weight_s))| Group {
            key,
            samples,
            weight_s,
        })
        .collect();
    groups.sort_by(|a, b| b.weight_s.total_cmp(&a.weight_s).then_with(|| a.key.cmp(&b.key)));
    Aggregate {
        groups,
        total_samples,
        total_weight_s,
        seconds,
        snapshots,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::dimensions::parse_list;
    use crate::model::fixture::{busy_snapshot, sample, snapshot};
    use crate::model::State;

    #[test]
    fn groups_count_and_average_over_snapshots() {
        let snaps: Vec<_> = (0..4).map(busy_snapshot).collect();
        let agg = aggregate(&snaps, &parse_list("state").unwrap(), &[]);
        assert_eq!(agg.snapshots, 4);
        assert_eq!(agg.seconds, 4.0);
        assert_eq!(agg.total_samples, 4 * 5 + 2);
        let top = &agg.groups[0];
        // RUN: 2 per snapshot; DISK: 1 per snapshot plus dd in 2 of 4.
        assert_eq!(top.key, vec![Value::Name("RUN")]);
        assert_eq!(top.samples, 8);
        assert_eq!(top.avg_threads(&agg), 2.0);
        let disk = &agg.groups[1];
        assert_eq!(disk.key, vec![Value::Name("DISK")]);
        assert_eq!(disk.avg_threads(&agg), 1.5);
        let pct: f64 = agg.groups.iter().map(|g| g.percent(&agg)).sum();
        assert!((pct - 100.0).abs() < 1e-9);
    }

    #[test]
    fn multi_dimension_keys_and_filters() {
        let snaps: Vec<_> = (0..2).map(busy_snapshot).collect();
        let dims = parse_list("comm,syscall").unwrap();
        let f = [Filter::parse("state=disk").unwrap()];
        let agg = aggregate(&snaps, &dims, &f);
        assert_eq!(agg.total_samples, 3);
        assert_eq!(
            agg.groups[0].key,
            vec![Value::Text("postgres".into()), Value::Name("pread64")]
        );
        let f = [
            Filter::parse("comm~GRES").unwrap(),
            Filter::parse("state!=RUN").unwrap(),
        ];
        assert_eq!(aggregate(&snaps, &dims, &f).total_samples, 4);
    }

    #[test]
    fn weights_follow_each_snapshot_interval() {
        let mut a = snapshot(0, vec![sample(1, 1, "a", State::Run, None)]);
        a.interval = std::time::Duration::from_millis(500);
        let b = snapshot(
            1,
            vec![
                sample(1, 1, "a", State::Run, None),
                sample(2, 2, "b", State::Run, None),
            ],
        );
        let agg = aggregate([&a, &b], &parse_list("comm").unwrap(), &[]);
        assert_eq!(agg.seconds, 1.5);
        let g = &agg.groups[0];
        assert_eq!(g.key, [Value::Text("a".into())]);
        assert!((g.avg_threads(&agg) - 1.0).abs() < 1e-9);
    }
}
