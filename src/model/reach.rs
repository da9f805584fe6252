//! How far user stacks reach: whether each unwind got to the thread's root,
//! and the share of samples whose did. A stack that stops short still names
//! its innermost frames, so views that only show those look just as sure of
//! themselves; this is what tells a reader how much of "where it was called
//! from" to believe.

use super::{Stack, ThreadSample, DEEPER, TRUNCATED};

/// How a user stack ends (the `ustack_end` dimension).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum StackEnd {
    /// The unwind reached the thread's first function: the stack is whole.
    Root,
    /// The unwind failed: code with neither CFI nor frame pointers (JIT code
    /// without them, hand-written assembly), or a stack it could not read.
    Truncated,
    /// The unwind was sound but the stack goes on past the part xtop copies.
    Deeper,
}

impl StackEnd {
    pub fn name(self) -> &'static str {
        match self {
            StackEnd::Root => "root",
            StackEnd::Truncated => "truncated",
            StackEnd::Deeper => "deeper",
        }
    }
}

impl Stack {
    /// How this stack's unwind ended, told by its gap frame.
    pub fn end(&self) -> StackEnd {
        match self.frames.last().map(|f| &**f) {
            Some(TRUNCATED) => StackEnd::Truncated,
            Some(DEEPER) => StackEnd::Deeper,
            _ => StackEnd::Root,
        }
    }
}

/// Samples with a user stack, by how the stack ends.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Reach {
    pub root: u64,
    pub truncated: u64,
    pub deeper: u64,
}

impl Reach {
    /// Counts `n` samples with user stack `u`; samples without one (kernel
    /// threads, stacks not captured) do not count either way.
    pub fn add(&mut self, u: Option<&Stack>, n: u64) {
        match u.map(Stack::end) {
            Some(StackEnd::Root) => self.root += n,
            Some(StackEnd::Truncated) => self.truncated += n,
            Some(StackEnd::Deeper) => self.deeper += n,
            None => {}
        }
    }

    /// Counts each of `samples` once.
    pub fn of<'a>(samples: impl IntoIterator<Item = &'a ThreadSample>) -> Reach {
        let mut reach = Reach::default();
        for s in samples {
            reach.add(s.ustack.as_deref(), 1);
        }
        reach
    }

    pub fn total(&self) -> u64 {
        self.root + self.truncated + self.deeper
    }

    /// `ustacks to root 45/50 (90%; 3 truncated, 2 deeper)`, None without
    /// user stacks. The percentage is floored, so 100% means every one.
    pub fn summary(&self) -> Option<String> {
        let total = self.total();
        if total == 0 {
            return None;
        }
        let pct = self.root * 100 / total;
        let mut gaps = Vec::new();
        for (n, what) in [(self.truncated, "truncated"), (self.deeper, "deeper")] {
            if n > 0 {
                gaps.push(format!("{n} {what}"));
            }
        }
        let gaps = if gaps.is_empty() {
            String::new()
        } else {
            format!("; {}", gaps.join(", "))
        };
        Some(format!("ustacks to root {}/{total} ({pct}%{gaps})", self.root))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;

    fn stack(frames: &[&str]) -> Stack {
        Stack {
            hash: 1,
            frames: frames.iter().map(|&f| Arc::from(f)).collect(),
            top: 0,
        }
    }

    #[test]
    fn the_gap_frame_tells_how_a_stack_ends() {
        assert_eq!(stack(&["leaf", "main"]).end(), StackEnd::Root);
        assert_eq!(stack(&["leaf", TRUNCATED]).end(), StackEnd::Truncated);
        assert_eq!(stack(&["leaf", DEEPER]).end(), StackEnd::Deeper);
        // A gap marker anywhere but last is just a (strange) name.
        assert_eq!(stack(&[TRUNCATED, "main"]).end(), StackEnd::Root);
    }

    #[test]
    fn summary_counts_samples_and_names_the_gaps() {
        let mut r = Reach::default();
        assert_eq!(r.summary(), None);
        r.add(Some(&stack(&["a", "main"])), 45);
        r.add(None, 1000);
        assert_eq!(r.summary().unwrap(), "ustacks to root 45/45 (100%)");
        r.add(Some(&stack(&["a", TRUNCATED])), 3);
        r.add(Some(&stack(&["a", DEEPER])), 2);
        assert_eq!(
            r.summary().unwrap(),
            "ustacks to root 45/50 (90%; 3 truncated, 2 deeper)"
        );
        // Floored: one short of all is not rounded up to 100%.
        let [all_but_one, none] = [[999, 1, 0], [0, 0, 7]].map(|[root, truncated, deeper]| Reach {
            root,
            truncated,
            deeper,
        });
        assert_eq!(
            all_but_one.summary().unwrap(),
            "ustacks to root 999/1000 (99%; 1 truncated)"
        );
        assert_eq!(none.summary().unwrap(), "ustacks to root 0/7 (0%; 7 deeper)");
    }
}
