//! The call tree of a selection: combined stacks (user root → leaf, then
//! kernel root → leaf) merged from the root, with sample counts per node.
//! It is built from distinct (kernel, user) stack pairs with their counts, so
//! the work depends on how many different stacks there are, not on samples.

use std::collections::hash_map::DefaultHasher;
use std::collections::{HashMap, HashSet};
use std::hash::{Hash, Hasher};
use std::sync::Arc;

use crate::dimensions::stack::{self, KERNEL_SUFFIX};
use crate::model::{Reach, Stack};

/// Node for samples without any stack, so percentages add up to the selection.
pub const NO_STACK: &str = "[no stack]";
/// Nodes kept at most; deeper frames of later stacks count at their last kept
/// ancestor (as self samples), so totals stay honest while memory stays bounded.
pub const MAX_NODES: usize = 1_000_000;

#[derive(Clone, Debug, PartialEq)]
pub struct Node {
    pub name: Arc<str>,
    pub kernel: bool,
    /// Samples whose stack passes through this node.
    pub count: u64,
    pub parent: u32,
    /// 0 for the root (all samples), 1 for outermost frames.
    pub depth: u16,
    /// Heaviest first.
    pub children: Vec<u32>,
    /// Hash of the path from the root: expansion and cursor survive rebuilds.
    pub path: u64,
}

impl Node {
    pub fn no_stack(&self) -> bool {
        !self.kernel && &*self.name == NO_STACK
    }

    /// Samples that end here (this frame is their leaf).
    pub fn self_count(&self, tree: &StackTree) -> u64 {
        let below: u64 = self.children.iter().map(|&c| tree.nodes[c as usize].count).sum();
        self.count - below
    }
}

#[derive(Clone, Debug, PartialEq)]
pub struct StackTree {
    /// `nodes[0]` is the root, standing for the whole selection.
    pub nodes: Vec<Node>,
    /// The selection's samples by how their user stacks end: how much of the
    /// tree's user half reaches a root, and which gaps its nodes have.
    pub reach: Reach,
}

impl Default for StackTree {
    fn default() -> Self {
        StackTree::build(std::iter::empty())
    }
}

fn path_hash(parent: u64, name: &str, kernel: bool) -> u64 {
    let mut h = DefaultHasher::new();
    (parent, name, kernel).hash(&mut h);
    h.finish()
}

impl StackTree {
    /// Builds the tree from (kernel stack, user stack, samples) triples.
    pub fn build<'a>(
        pairs: impl IntoIterator<Item = (Option<&'a Stack>, Option<&'a Stack>, u64)>,
    ) -> StackTree {
        let mut nodes = vec![Node {
            name: "all".into(),
            kernel: false,
            count: 0,
            parent: 0,
            depth: 0,
            children: Vec::new(),
            path: 0,
        }];
        let mut index: HashMap<(u32, bool, Arc<str>), u32> = HashMap::new();
        let no_stack: Arc<str> = NO_STACK.into();
        let mut reach = Reach::default();
        for (k, u, n) in pairs {
            if n == 0 {
                continue;
            }
            nodes[0].count += n;
            reach.add(u, n);
            let mut frames: Vec<(&Arc<str>, bool)> = stack::frames(u, k).collect();
            if frames.is_empty() {
                frames.push((&no_stack, false));
            }
            let mut at = 0u32;
            for (name, kern) in frames {
                let key = (at, kern, name.clone());
                let next = match index.get(&key) {
                    Some(&c) => c,
                    None if nodes.len() >= MAX_NODES => break,
                    None => {
                        let p = &nodes[at as usize];
                        let id = nodes.len() as u32;
                        let node = Node {
                            name: name.clone(),
                            kernel: kern,
                            count: 0,
                            parent: at,
                            depth: p.depth.saturating_add(1),
                            children: Vec::new(),
                            path: path_hash(p.path, name, kern),
                        };
                        nodes[at as usize].children.push(id);
                        nodes.push(node);
                        index.insert(key, id);
                        id
                    }
                };
                nodes[next as usize].count += n;
                at = next;
            }
        }
        // Heaviest first; ties by name so the order does not flicker.
        for i in 0..nodes.len() {
            let mut ch = std::mem::take(&mut nodes[i].children);
            ch.sort_by(|&a, &b| {
                let (a, b) = (&nodes[a as usize], &nodes[b as usize]);
                b.count
                    .cmp(&a.count)
                    .then_with(|| a.name.cmp(&b.name))
                    .then(a.kernel.cmp(&b.kernel))
            });
            nodes[i].children = ch;
        }
        StackTree { nodes, reach }
    }

    pub fn total(&self) -> u64 {
        self.nodes[0].count
    }

    /// Share of the selection passing through node `i`, in percent.
    pub fn percent(&self, i: u32) -> f64 {
        self.nodes[i as usize].count as f64 * 100.0 / self.total().max(1) as f64
    }

    /// Nodes in display order: outermost frames, then the children of expanded
    /// nodes (by path hash) under them.
    pub fn visible(&self, expanded: &HashSet<u64>) -> Vec<u32> {
        let mut out = Vec::new();
        let mut todo: Vec<u32> = self.nodes[0].children.iter().rev().copied().collect();
        while let Some(i) = todo.pop() {
            out.push(i);
            let n = &self.nodes[i as usize];
            if expanded.contains(&n.path) {
                todo.extend(n.children.iter().rev());
            }
        }
        out
    }

    /// The tree as folded stacks, `root;...;leaf count` per distinct stack,
    /// kernel frames suffixed `_[k]` (as the `stack` dimension), samples
    /// without a stack as `[no stack]`. Counts sum to `total()`.
    pub fn folded(&self) -> String {
        let mut out = String::new();
        let mut path: Vec<String> = Vec::new();
        // (node, depth of its parent's path): depth-first, heaviest first.
        let mut todo: Vec<(u32, usize)> = self.nodes[0].children.iter().rev().map(|&c| (c, 0)).collect();
        while let Some((i, d)) = todo.pop() {
            let n = &self.nodes[i as usize];
            path.truncate(d);
            path.push(if n.kernel {
                format!("{}{KERNEL_SUFFIX}", n.name)
            } else {
                n.name.to_string()
            });
            let own = n.self_count(self);
            if own > 0 {
                out.push_str(&path.join(";"));
                out.push_str(&format!(" {own}\n"));
            }
            todo.extend(n.children.iter().rev().map(|&c| (c, d + 1)));
        }
        out
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::dimensions::stack::combined;
    use crate::model::TRUNCATED;

    pub(crate) fn stack(hash: u64, frames: &[&str]) -> Arc<Stack> {
        Arc::new(Stack {
            hash,
            frames: frames.iter().map(|&f| f.into()).collect(),
            top: 0,
        })
    }

    fn names(t: &StackTree, ids: &[u32]) -> Vec<String> {
        ids.iter()
            .map(|&i| {
                let n = &t.nodes[i as usize];
                format!("{}{}:{}", n.name, if n.kernel { "[k]" } else { "" }, n.count)
            })
            .collect()
    }

    fn fixture() -> StackTree {
        let k = stack(1, &["__schedule", "schedule", "do_read"]);
        let k2 = stack(2, &["__schedule", "schedule", "do_write"]);
        let u = stack(3, &["read", "work", "main"]);
        let u2 = stack(4, &["write", "flush", TRUNCATED]);
        StackTree::build([
            (Some(&*k), Some(&*u), 5),
            (Some(&*k2), Some(&*u), 2),
            (Some(&*k2), Some(&*u2), 3),
            (None, None, 4),
            (Some(&*k), None, 1),
            (None, Some(&*u), 0),
        ])
    }

    #[test]
    fn counts_percent_and_sort() {
        let t = fixture();
        assert_eq!(t.total(), 15);
        let top = &t.nodes[0].children;
        assert_eq!(
            names(&t, top),
            ["main:7", "[no stack]:4", "[truncated]:3", "do_read[k]:1"]
        );
        assert!((t.percent(top[0]) - 700.0 / 15.0).abs() < 1e-9);
        // Percentages of the outermost frames add up to the selection.
        let sum: f64 = top.iter().map(|&i| t.percent(i)).sum();
        assert!((sum - 100.0).abs() < 1e-9);
        let main = &t.nodes[top[0] as usize];
        let work = &t.nodes[main.children[0] as usize];
        let read = &t.nodes[work.children[0] as usize];
        // Under the user leaf come the kernel stacks, root first; different roots are siblings.
        assert_eq!(names(&t, &read.children), ["do_read[k]:5", "do_write[k]:2"]);
        assert_eq!(read.depth, 3);
        assert!(t.nodes[read.children[0] as usize].kernel);
    }

    #[test]
    fn truncated_and_no_stack_nodes_are_flagged() {
        let t = fixture();
        // Samples, not distinct stacks; the 0-sample triple and those
        // without a user stack count neither way.
        let want = Reach {
            root: 7,
            truncated: 3,
            deeper: 0,
        };
        assert_eq!(t.reach, want);
        let top = &t.nodes[0].children;
        assert!(t.nodes[top[1] as usize].no_stack());
        let gap = |i: u32| !t.nodes[i as usize].kernel && &*t.nodes[i as usize].name == TRUNCATED;
        assert!(gap(top[2]));
        assert!(!gap(top[0]));
        let clean = StackTree::build([(Some(&*stack(1, &["a"])), None, 1)]);
        assert_eq!(clean.reach, Reach::default());
    }

    #[test]
    fn visible_rows_follow_expansion_by_path() {
        let t = fixture();
        let none = HashSet::new();
        assert_eq!(t.visible(&none).len(), 4);
        let main = t.nodes[0].children[0];
        let open: HashSet<u64> = [t.nodes[main as usize].path].into();
        let rows = t.visible(&open);
        assert_eq!(names(&t, &rows[..3]), ["main:7", "work:7", "[no stack]:4"]);
        // The same path in a rebuilt tree is the same node.
        assert_eq!(fixture().nodes[main as usize].path, t.nodes[main as usize].path);
    }

    #[test]
    fn folded_lines_parse_back_to_the_counts_and_match_the_stack_dimension() {
        let t = fixture();
        let text = t.folded();
        let mut total = 0;
        for line in text.lines() {
            let (stack, n) = line.rsplit_once(' ').unwrap();
            assert!(!stack.is_empty());
            total += n.parse::<u64>().unwrap();
        }
        assert_eq!(total, t.total());
        assert!(
            text.contains("main;work;read;do_read_[k];schedule_[k];__schedule_[k] 5\n"),
            "{text}"
        );
        assert!(text.contains("[no stack] 4\n"), "{text}");
        assert!(text.contains("[truncated];flush;write;do_write_[k];schedule_[k];__schedule_[k] 3\n"));
        let mut s = crate::model::fixture::sample(1, 1, "x", crate::model::State::Disk, None);
        s.kstack = Some(stack(1, &["__schedule", "schedule", "do_read"]));
        s.ustack = Some(stack(3, &["read", "work", "main"]));
        let line = format!("{} 5\n", combined(&s).unwrap());
        assert!(
            text.contains(&line),
            "the stack dimension and the tree agree: {line}"
        );
    }

    #[test]
    fn deep_stacks_chain_one_node_per_frame() {
        let frames: Vec<String> = (0..50).map(|i| format!("f{i}")).collect();
        let refs: Vec<&str> = frames.iter().map(String::as_str).collect();
        let s = stack(1, &refs);
        let t = StackTree::build([(Some(&*s), None, 3)]);
        assert_eq!(t.nodes.len(), 51);
        assert_eq!(t.nodes[50].depth, 50);
        assert_eq!(t.nodes[50].self_count(&t), 3);
    }
}
