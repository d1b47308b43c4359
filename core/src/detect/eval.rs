//! Precision and recall of detected spans against gold spans, per label.
//!
//! Two criteria: **strict** (same label, same boundaries) and **overlap**
//! (same label, the spans share at least one byte: a gold address detected
//! as street, city and zip pieces counts as found).

use std::collections::BTreeMap;

use super::Label;

/// Counts for one label under one criterion.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Counts {
    /// Gold spans found.
    pub found: usize,
    /// Gold spans.
    pub gold: usize,
    /// Predicted spans that are right.
    pub correct: usize,
    /// Predicted spans.
    pub predicted: usize,
}

impl Counts {
    /// found / gold (1 when there is no gold span).
    pub fn recall(&self) -> f64 {
        if self.gold == 0 {
            1.0
        } else {
            self.found as f64 / self.gold as f64
        }
    }

    /// correct / predicted (1 when nothing was predicted).
    pub fn precision(&self) -> f64 {
        if self.predicted == 0 {
            1.0
        } else {
            self.correct as f64 / self.predicted as f64
        }
    }
}

/// A span for evaluation: byte range and label.
pub type Labelled = (usize, usize, Label);

/// Adds one text's gold and predicted spans to per-label (strict, overlap) counts.
pub fn add(totals: &mut BTreeMap<Label, (Counts, Counts)>, gold: &[Labelled], pred: &[Labelled]) {
    let overlaps = |a: &Labelled, b: &Labelled| a.2 == b.2 && a.0 < b.1 && b.0 < a.1;
    for g in gold {
        let t = totals.entry(g.2).or_default();
        t.0.gold += 1;
        t.1.gold += 1;
        if pred.contains(g) {
            t.0.found += 1;
        }
        if pred.iter().any(|p| overlaps(g, p)) {
            t.1.found += 1;
        }
    }
    for p in pred {
        let t = totals.entry(p.2).or_default();
        t.0.predicted += 1;
        t.1.predicted += 1;
        if gold.contains(p) {
            t.0.correct += 1;
        }
        if gold.iter().any(|g| overlaps(g, p)) {
            t.1.correct += 1;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn strict_and_overlap_counts() {
        let mut t = BTreeMap::new();
        let gold = [(0, 10, Label::Location), (20, 30, Label::Person)];
        let pred = [
            (0, 4, Label::Location),
            (6, 10, Label::Location),
            (20, 30, Label::Person),
            (40, 45, Label::Date),
        ];
        add(&mut t, &gold, &pred);
        let (strict, overlap) = t[&Label::Location];
        assert_eq!(
            (strict.found, strict.gold, strict.correct, strict.predicted),
            (0, 1, 0, 2)
        );
        assert_eq!((overlap.found, overlap.correct), (1, 2));
        assert_eq!(t[&Label::Person].0.recall(), 1.0);
        assert_eq!(t[&Label::Date].1.precision(), 0.0);
        assert_eq!(t[&Label::Date].1.recall(), 1.0);
    }
}
