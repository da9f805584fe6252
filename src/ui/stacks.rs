//! Stack view state: which samples it shows (the selection), the tree of their
//! stacks kept up to date cheaply, and what its keys do. No drawing here.
//!
//! Like the main view's cache, each snapshot is scanned once per selection
//! into (stack pair, samples) counts; a moving window then only scans the new
//! snapshots, and the tree is rebuilt from distinct stack pairs when the
//! window's counts are complete, never per frame.

use std::collections::{HashMap, HashSet};
use std::hash::{Hash, Hasher};
use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::filter::{matches_all, Filter};
use crate::model::{Snapshot, Stack, ThreadSample};

use super::history::History;
use super::stack_tree::StackTree;
use super::view::Window;

/// Distinct stack pairs tolerated before the counts start over (live churn).
const MAX_PAIRS: usize = 200_000;

/// The samples a stack view or `f` covers: the level's filters and, when a row
/// of the main table was highlighted, that row's values (`App::row_filters`,
/// the same filters Enter drills into).
#[derive(Clone, Debug, PartialEq)]
pub struct Selection {
    pub filters: Vec<Filter>,
}

impl Selection {
    pub fn matches(&self, snap: &Snapshot, s: &ThreadSample) -> bool {
        matches_all(&self.filters, snap, s)
    }

    /// `dim=value` terms, e.g. for a title.
    pub fn describe(&self) -> String {
        let terms: Vec<String> = self.filters.iter().map(ToString::to_string).collect();
        if terms.is_empty() {
            "all samples".into()
        } else {
            terms.join(" ")
        }
    }
}

/// A (kernel, user) stack pair, compared by pointer first and hashed by the
/// stacks' address hashes, so counting does not rehash frame names.
#[derive(Clone, Debug)]
struct Pair(Option<Arc<Stack>>, Option<Arc<Stack>>);

fn same(a: &Option<Arc<Stack>>, b: &Option<Arc<Stack>>) -> bool {
    match (a, b) {
        (Some(a), Some(b)) => Arc::ptr_eq(a, b) || a == b,
        (None, None) => true,
        _ => false,
    }
}

impl PartialEq for Pair {
    fn eq(&self, o: &Self) -> bool {
        same(&self.0, &o.0) && same(&self.1, &o.1)
    }
}
impl Eq for Pair {}
impl Hash for Pair {
    fn hash<H: Hasher>(&self, h: &mut H) {
        self.0.as_ref().map(|s| s.hash).hash(h);
        self.1.as_ref().map(|s| s.hash).hash(h);
    }
}

/// Per-snapshot stack counts of one selection.
#[derive(Default)]
pub struct StackCounts {
    pairs: Vec<Pair>,
    ids: HashMap<Pair, u32>,
    /// By snapshot id (`History::first_id() + index`): (pair, samples).
    summaries: HashMap<u64, Vec<(u32, u32)>>,
    reorders: u64,
    scratch: Option<Snapshot>,
    pub scanned: usize,
    pub snapshots: usize,
}

impl StackCounts {
    /// Scans the window's snapshots not yet counted, newest first, for at most
    /// `budget` (None: all); true when the whole window is counted.
    pub fn refresh(&mut self, h: &History, sel: &Selection, win: Window, budget: Option<Duration>) -> bool {
        let started = Instant::now();
        if h.reorders() != self.reorders || self.pairs.len() > MAX_PAIRS {
            self.reorders = h.reorders();
            self.summaries.clear();
            self.pairs.clear();
            self.ids.clear();
        }
        let first = h.first_id();
        let (lo, hi) = (first + win.lo as u64, first + win.hi as u64);
        self.summaries.retain(|&id, _| id >= lo && id < hi);
        for i in (win.lo..win.hi).rev() {
            if self.summaries.contains_key(&(first + i as u64)) {
                continue;
            }
            if budget.is_some_and(|b| started.elapsed() >= b) {
                break;
            }
            let snap = self.scratch.get_or_insert_with(|| h.meta(i).clone());
            h.materialize_into(i, snap);
            let mut counts: Vec<(u32, u32)> = Vec::new();
            for s in snap.samples.iter().filter(|s| sel.matches(snap, s)) {
                let pair = Pair(s.kstack.clone(), s.ustack.clone());
                let next = self.pairs.len() as u32;
                let id = *self.ids.entry(pair).or_insert_with_key(|p| {
                    self.pairs.push(p.clone());
                    next
                });
                match counts.iter_mut().find(|(p, _)| *p == id) {
                    Some((_, n)) => *n += 1,
                    None => counts.push((id, 1)),
                }
            }
            self.summaries.insert(first + i as u64, counts);
        }
        self.snapshots = win.hi - win.lo;
        self.scanned = self.summaries.len();
        self.scanned == self.snapshots
    }

    /// The tree of what has been counted.
    pub fn tree(&self) -> StackTree {
        let mut n = vec![0u64; self.pairs.len()];
        for s in self.summaries.values() {
            for &(p, c) in s {
                n[p as usize] += c as u64;
            }
        }
        StackTree::build(
            self.pairs
                .iter()
                .zip(n)
                .map(|(p, c)| (p.0.as_deref(), p.1.as_deref(), c)),
        )
    }
}

/// The open stack view.
pub struct StackView {
    pub sel: Selection,
    pub tree: StackTree,
    /// Visible nodes in display order.
    pub rows: Vec<u32>,
    pub selected: usize,
    pub offset: usize,
    counts: StackCounts,
    expanded: HashSet<u64>,
    /// Path of the node under the cursor, kept across rebuilds.
    cursor: Option<u64>,
    built: Option<(Window, u64, u64)>,
}

impl StackView {
    pub fn new(sel: Selection) -> StackView {
        StackView {
            sel,
            tree: StackTree::default(),
            rows: Vec::new(),
            selected: 0,
            offset: 0,
            counts: StackCounts::default(),
            expanded: HashSet::new(),
            cursor: None,
            built: None,
        }
    }

    /// Whether the window is still being counted (the tree shown is older).
    pub fn pending(&self) -> bool {
        self.counts.scanned < self.counts.snapshots
    }

    /// Percent of the window counted so far.
    pub fn progress(&self) -> usize {
        100 * self.counts.scanned / self.counts.snapshots.max(1)
    }

    pub fn refresh(&mut self, h: &History, win: Window, budget: Option<Duration>, page: usize) {
        let key = Some((win, h.first_id(), h.reorders()));
        if self.built != key && self.counts.refresh(h, &self.sel, win, budget) {
            self.tree = self.counts.tree();
            self.built = key;
            self.relayout();
        }
        if self.selected < self.offset {
            self.offset = self.selected;
        } else if self.selected >= self.offset + page.max(1) {
            self.offset = self.selected + 1 - page.max(1);
        }
    }

    /// Shows `tree` as if counted (tests with hand-made stacks).
    #[cfg(test)]
    pub(crate) fn set_tree(&mut self, tree: StackTree) {
        self.tree = tree;
        self.relayout();
    }

    /// Recomputes the visible rows and puts the cursor back on its node.
    fn relayout(&mut self) {
        self.rows = self.tree.visible(&self.expanded);
        if let Some(p) = self.cursor {
            if let Some(i) = self
                .rows
                .iter()
                .position(|&r| self.tree.nodes[r as usize].path == p)
            {
                self.selected = i;
            }
        }
        self.selected = self.selected.min(self.rows.len().saturating_sub(1));
        self.remember();
    }

    fn remember(&mut self) {
        self.cursor = self.current().map(|n| self.tree.nodes[n as usize].path);
    }

    /// Node under the cursor.
    pub fn current(&self) -> Option<u32> {
        self.rows.get(self.selected).copied()
    }

    pub fn is_expanded(&self, node: u32) -> bool {
        self.expanded.contains(&self.tree.nodes[node as usize].path)
    }

    pub fn move_by(&mut self, delta: isize) {
        let last = self.rows.len().saturating_sub(1) as isize;
        self.selected = (self.selected as isize).saturating_add(delta).clamp(0, last) as usize;
        self.remember();
    }

    /// Enter/Right: opens the node, and the chain below it while it does not
    /// branch (deep stacks open in one key); on an open node, steps into it.
    pub fn expand(&mut self) {
        let Some(mut n) = self.current() else { return };
        if self.is_expanded(n) {
            self.move_by(1);
            return;
        }
        loop {
            let node = &self.tree.nodes[n as usize];
            if node.children.is_empty() {
                break;
            }
            self.expanded.insert(node.path);
            if node.children.len() != 1 {
                break;
            }
            n = node.children[0];
        }
        self.relayout();
    }

    /// Left/Backspace: closes an open node, else moves to its parent; false
    /// when already on a closed outermost frame (nothing left to go back to).
    pub fn collapse(&mut self) -> bool {
        let Some(n) = self.current() else { return false };
        let node = &self.tree.nodes[n as usize];
        if self.expanded.remove(&node.path) {
            self.relayout();
            return true;
        }
        if node.depth <= 1 {
            return false;
        }
        let parent = node.parent;
        if let Some(i) = self.rows.iter().position(|&r| r == parent) {
            self.selected = i;
            self.remember();
        }
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::fixture::{sample, snapshot};
    use crate::model::State;
    use crate::ui::stack_tree::tests::stack;
    use crate::value::Value;

    /// A view of hand-made stack pairs, without history.
    type Counted = (Option<Arc<Stack>>, Option<Arc<Stack>>, u64);

    fn view_of(samples: &[Counted]) -> StackView {
        let mut v = StackView::new(Selection { filters: vec![] });
        v.set_tree(StackTree::build(
            samples.iter().map(|(k, u, n)| (k.as_deref(), u.as_deref(), *n)),
        ));
        v
    }

    fn current_name(v: &StackView) -> String {
        v.tree.nodes[v.current().unwrap() as usize].name.to_string()
    }

    #[test]
    fn keys_expand_collapse_and_walk_up() {
        let k = stack(1, &["__schedule", "do_read"]);
        let k2 = stack(2, &["__schedule", "do_write"]);
        let u = stack(3, &["read", "work", "main"]);
        let mut v = view_of(&[
            (Some(k), Some(u.clone()), 5),
            (Some(k2), Some(u), 3),
            (None, None, 1),
        ]);
        assert_eq!(v.rows.len(), 2, "main and [no stack]");
        v.expand();
        // main → work → read opens in one go; read branches into two kernel roots.
        assert_eq!(v.rows.len(), 6);
        v.expand();
        assert_eq!(current_name(&v), "work", "Enter on an open node steps in");
        v.move_by(2);
        assert_eq!(current_name(&v), "do_read");
        assert!(v.collapse(), "moves to the parent");
        assert_eq!(current_name(&v), "read");
        assert!(v.collapse(), "closes read");
        assert_eq!(v.rows.len(), 4);
        v.move_by(isize::MIN / 2);
        assert!(v.collapse(), "closes main");
        assert_eq!(v.rows.len(), 2);
        assert!(!v.collapse(), "nothing left: the caller goes back");
        v.move_by(isize::MAX / 2);
        assert_eq!(current_name(&v), "[no stack]");
        v.expand();
        assert_eq!(v.rows.len(), 2, "a leaf does not open");
    }

    #[test]
    fn expansion_and_cursor_survive_a_rebuild_from_history() {
        let mut h = History::new(None);
        for i in 0..4 {
            h.push(snapshot(
                i,
                vec![
                    sample(1, 1, "db", State::Disk, Some(17)),
                    sample(2, 1, "db", State::Run, None),
                    sample(3, 1, "db", State::Disk, Some(17)),
                ],
            ));
        }
        let win = |h: &History| Window {
            lo: 0,
            hi: h.len(),
            start_ns: 0,
            end_ns: h.latest().unwrap().time_ns,
        };
        let mut v = StackView::new(Selection { filters: vec![] });
        v.refresh(&h, win(&h), None, 10);
        // Fixture: DISK threads have a user and a kernel stack, RUN ones none.
        assert_eq!(v.tree.total(), 12);
        assert_eq!(current_name(&v), "main");
        v.expand();
        v.move_by(5);
        assert_eq!(current_name(&v), "schedule");
        h.push(snapshot(4, vec![sample(1, 1, "db", State::Disk, Some(17))]));
        v.refresh(&h, win(&h), None, 10);
        assert_eq!(v.tree.total(), 13);
        assert_eq!(current_name(&v), "schedule", "cursor kept on its node");
        assert_eq!(v.rows.len(), 8);
        let no_stack = v.rows[7];
        assert_eq!(v.tree.nodes[no_stack as usize].count, 4);
    }

    #[test]
    fn selection_matches_the_highlighted_group() {
        let dims = crate::dimensions::parse_list("state").unwrap();
        let sel = Selection {
            filters: vec![
                Filter::parse("comm=db").unwrap(),
                Filter::exact(dims[0], &Value::Name("DISK")),
            ],
        };
        let snap = snapshot(0, vec![]);
        assert!(sel.matches(&snap, &sample(1, 1, "db", State::Disk, None)));
        assert!(!sel.matches(&snap, &sample(1, 1, "db", State::Run, None)));
        assert!(!sel.matches(&snap, &sample(1, 1, "x", State::Disk, None)));
        assert_eq!(sel.describe(), "comm=db state=DISK");
    }
}
