//! Coverage ranges: which data positions a derived index answers for.
//!
//! A derived file (a key-index file today; topic and field indexes can state theirs the
//! same way) covers a range of data positions when every message in that range that the
//! index is about (a keyed message, for the key index) is in it. A lookup puts together the
//! ranges its files cover, with what it learnt from the data itself (ranges read and found
//! to hold nothing to index), and asks for the [`Coverage::gaps`] within the queue's
//! positions: it reads those from the data, or raises, and never answers from the index
//! alone for a range the index does not cover. Positions are `format::position` values
//! (data-file number and offset), so a range can span data files.

use std::ops::Range;

/// A set of data positions, kept as sorted, disjoint, non-adjacent half-open ranges.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Coverage {
    ranges: Vec<Range<u64>>,
}

impl Coverage {
    /// The empty set.
    pub fn new() -> Self {
        Self::default()
    }

    /// Adds `r` (an empty range adds nothing), merging it with the ranges it overlaps or
    /// touches.
    pub fn add(&mut self, r: Range<u64>) {
        if r.start >= r.end {
            return;
        }
        // First range that ends at or after r.start (may merge), last that starts at or
        // before r.end.
        let from = self.ranges.partition_point(|x| x.end < r.start);
        let to = self.ranges.partition_point(|x| x.start <= r.end);
        let mut merged = r;
        if from < to {
            merged.start = merged.start.min(self.ranges[from].start);
            merged.end = merged.end.max(self.ranges[to - 1].end);
        }
        self.ranges.splice(from..to, std::iter::once(merged));
    }

    /// Adds every range of `other`.
    pub fn add_all(&mut self, other: &Coverage) {
        for r in &other.ranges {
            self.add(r.clone());
        }
    }

    /// The parts of `within` not in the set, in ascending order.
    pub fn gaps(&self, within: Range<u64>) -> Vec<Range<u64>> {
        let mut out = Vec::new();
        let mut at = within.start;
        let first = self.ranges.partition_point(|x| x.end <= at);
        for r in &self.ranges[first..] {
            if r.start >= within.end {
                break;
            }
            if r.start > at {
                out.push(at..r.start);
            }
            at = at.max(r.end);
            if at >= within.end {
                return out;
            }
        }
        if at < within.end {
            out.push(at..within.end);
        }
        out
    }

    /// The ranges, ascending.
    pub fn ranges(&self) -> &[Range<u64>] {
        &self.ranges
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ranges_merge_and_gaps_are_what_is_left() {
        let mut c = Coverage::new();
        c.add(10..20);
        c.add(30..40);
        c.add(5..5);
        assert_eq!(c.gaps(0..50), vec![0..10, 20..30, 40..50]);
        c.add(20..25);
        assert_eq!(c.ranges(), &[10..25, 30..40]);
        c.add(24..31);
        assert_eq!(c.ranges().to_vec(), vec![10..40]);
        assert_eq!(c.gaps(12..38), Vec::<Range<u64>>::new());
        assert_eq!(c.gaps(0..10).first(), Some(&(0..10)));
        assert_eq!(c.gaps(0..10).len(), 1);
        assert_eq!(c.gaps(39..u64::MAX).first(), Some(&(40..u64::MAX)));
        assert_eq!(c.gaps(39..u64::MAX).len(), 1);
        c.add(0..u64::MAX);
        assert!(c.gaps(0..u64::MAX).is_empty());
    }
}
