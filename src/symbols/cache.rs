//! A bounded map with amortized O(1) eviction: two generations, the older one
//! dropped whole when the newer fills. Entries used since the last turnover
//! survive it (a hit in the old generation moves the entry to the new one), so
//! a steady working set stays cached while one-off entries age out.

use std::borrow::Borrow;
use std::collections::HashMap;
use std::hash::Hash;

pub struct Bounded<K, V> {
    new: HashMap<K, V>,
    old: HashMap<K, V>,
    /// Entries per generation: at most twice this many are held.
    half: usize,
}

impl<K: Hash + Eq, V> Bounded<K, V> {
    /// At most `cap` entries (rounded up to even) are held.
    pub fn new(cap: usize) -> Self {
        Bounded {
            new: HashMap::new(),
            old: HashMap::new(),
            half: cap.div_ceil(2).max(1),
        }
    }

    pub fn get_mut<Q>(&mut self, k: &Q) -> Option<&mut V>
    where
        K: Borrow<Q>,
        Q: Hash + Eq + ?Sized,
    {
        if !self.new.contains_key(k) {
            let (k, v) = self.old.remove_entry(k)?;
            self.insert(k, v);
        }
        self.new.get_mut(k)
    }

    pub fn insert(&mut self, k: K, v: V) {
        if self.new.len() >= self.half && !self.new.contains_key(&k) {
            // Dropping the old generation is O(half), once per `half` inserts.
            self.old = std::mem::take(&mut self.new);
        }
        self.new.insert(k, v);
    }

    #[cfg(test)]
    pub fn len(&self) -> usize {
        self.new.len() + self.old.len()
    }
}

impl<K: Hash + Eq, V: Clone> Bounded<K, V> {
    /// A clone of the value: one hash lookup on the hot path (a hit in `new`).
    pub fn get<Q>(&mut self, k: &Q) -> Option<V>
    where
        K: Borrow<Q>,
        Q: Hash + Eq + ?Sized,
    {
        if let Some(v) = self.new.get(k) {
            return Some(v.clone());
        }
        self.get_mut(k).map(|v| v.clone())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn holds_at_most_cap_and_keeps_what_is_used() {
        let mut c = Bounded::new(4);
        for i in 0..100u32 {
            c.insert(i, i);
            // Key 0 is used all along: it must survive every turnover.
            assert_eq!(c.get(&0), Some(0));
            assert!(c.len() <= 4, "{} entries", c.len());
        }
        assert_eq!(c.get(&1), None, "old one-off entries are gone");
        assert_eq!(c.get(&99), Some(99));
    }
}
