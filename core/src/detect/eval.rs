//! Precision and recall of detected spans against gold spans, per label.
//!
//! Two criteria: **strict** (same label, same boundaries) and **overlap**
//! (same label, the spans share at least one byte: a gold address detected
//! as street, city and zip pieces counts as found).

use std::collections::BTreeMap;

use super::annotated::{Category, Note};
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

/// Recall and precision on annotated notes, span- and token-level.
///
/// - A gold span is **found** when every one of its words (alphanumeric
///   runs) is covered, byte for byte, by predicted spans of its category's
///   label: finding `Lopez` in `Maria Lopez` does not count. It is
///   **protected** when the same holds for predicted spans of any label.
/// - A predicted span is **correct** when it overlaps a gold span of its label.
/// - Token-level: the words inside gold spans that are covered by a span
///   of the right label, and the words inside predicted spans that lie in a
///   gold span of the same label.
#[derive(Debug, Clone, Default)]
pub struct Report {
    /// Recall side, per annotated category.
    pub categories: BTreeMap<Category, Tally>,
    /// Precision side, per detector label.
    pub labels: BTreeMap<Label, Tally>,
    /// Notes scored.
    pub notes: usize,
    /// Annotated clinical words (drugs, labs, anatomy), per kind: (words,
    /// of those left alone by every predicted span).
    pub clinical: BTreeMap<super::annotated::Clinical, (usize, usize)>,
}

impl Report {
    /// Clinical words kept over every kind: (words, kept), and their share.
    pub fn clinical_kept(&self) -> (usize, usize, f64) {
        let (n, k) = self
            .clinical
            .values()
            .fold((0, 0), |(n, k), &(a, b)| (n + a, k + b));
        (
            n,
            k,
            if n == 0 {
                f64::NAN
            } else {
                k as f64 / n as f64
            },
        )
    }
}

/// Counts for one category (recall) or one label (precision).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Tally {
    /// Gold spans.
    pub gold: usize,
    /// Gold spans found under their label.
    pub found: usize,
    /// Gold spans covered by spans of any label.
    pub protected: usize,
    /// Words inside gold spans.
    pub gold_words: usize,
    /// Of those, words covered under the right label.
    pub found_words: usize,
    /// Predicted spans.
    pub predicted: usize,
    /// Predicted spans overlapping a gold span of their label.
    pub correct: usize,
    /// Words inside predicted spans.
    pub predicted_words: usize,
    /// Of those, words inside a gold span of the same label.
    pub correct_words: usize,
}

fn ratio(a: usize, b: usize) -> f64 {
    if b == 0 {
        1.0
    } else {
        a as f64 / b as f64
    }
}

impl Tally {
    /// Span recall: found / gold.
    pub fn recall(&self) -> f64 {
        ratio(self.found, self.gold)
    }
    /// Share of gold spans covered under any label.
    pub fn protected_share(&self) -> f64 {
        ratio(self.protected, self.gold)
    }
    /// Word recall.
    pub fn word_recall(&self) -> f64 {
        ratio(self.found_words, self.gold_words)
    }
    /// Span precision: correct / predicted.
    pub fn precision(&self) -> f64 {
        ratio(self.correct, self.predicted)
    }
    /// Word precision.
    pub fn word_precision(&self) -> f64 {
        ratio(self.correct_words, self.predicted_words)
    }
    fn add(&mut self, o: &Tally) {
        self.gold += o.gold;
        self.found += o.found;
        self.protected += o.protected;
        self.gold_words += o.gold_words;
        self.found_words += o.found_words;
        self.predicted += o.predicted;
        self.correct += o.correct;
        self.predicted_words += o.predicted_words;
        self.correct_words += o.correct_words;
    }
}

/// The alphanumeric runs of `text` as byte ranges.
fn words(text: &str) -> Vec<(usize, usize)> {
    let mut out = Vec::new();
    let mut start = None;
    for (i, c) in text.char_indices() {
        match (c.is_alphanumeric(), start) {
            (true, None) => start = Some(i),
            (false, Some(s)) => {
                out.push((s, i));
                start = None;
            }
            _ => {}
        }
    }
    if let Some(s) = start {
        out.push((s, text.len()));
    }
    out
}

/// Whether every word of `g` is covered, byte for byte, by predicted
/// spans of `label` (any label when `None`): the "found" of [`Report`].
pub fn covered(
    text: &str,
    g: &super::annotated::Gold,
    pred: &[Labelled],
    label: Option<Label>,
) -> bool {
    words(text)
        .iter()
        .filter(|w| w.0 < g.end && g.start < w.1)
        .all(|w| {
            let (s, e) = (w.0.max(g.start), w.1.min(g.end));
            (s..e).all(|i| {
                pred.iter()
                    .any(|p| label.is_none_or(|l| p.2 == l) && p.0 <= i && i < p.1)
            })
        })
}

impl Report {
    /// Scores one note against the detector's spans.
    pub fn add_note(&mut self, note: &Note, pred: &[Labelled]) {
        self.notes += 1;
        let n = note.text.len();
        // Byte coverage per label, and by any label.
        let mut cover: BTreeMap<Label, Vec<bool>> = BTreeMap::new();
        let mut any = vec![false; n];
        for &(s, e, l) in pred {
            let c = cover.entry(l).or_insert_with(|| vec![false; n]);
            for i in s.min(n)..e.min(n) {
                c[i] = true;
                any[i] = true;
            }
        }
        let none = vec![false; n];
        let ws = words(&note.text);
        for c in &note.clinical {
            let e = self.clinical.entry(c.kind).or_default();
            for w in ws.iter().filter(|w| w.0 < c.end && c.start < w.1) {
                e.0 += 1;
                if !(w.0.max(c.start)..w.1.min(c.end)).any(|i| any[i]) {
                    e.1 += 1;
                }
            }
        }
        let covered = |c: &[bool], s: usize, e: usize| (s..e).all(|i| c[i]);
        for g in &note.gold {
            let c = cover.get(&g.category.label()).unwrap_or(&none);
            let t = self.categories.entry(g.category).or_default();
            t.gold += 1;
            let inside: Vec<(usize, usize)> = ws
                .iter()
                .filter(|w| w.0 < g.end && g.start < w.1)
                .map(|w| (w.0.max(g.start), w.1.min(g.end)))
                .collect();
            let found: Vec<bool> = inside.iter().map(|&(s, e)| covered(c, s, e)).collect();
            t.gold_words += inside.len();
            t.found_words += found.iter().filter(|&&f| f).count();
            if found.iter().all(|&f| f) {
                t.found += 1;
            }
            if inside.iter().all(|&(s, e)| covered(&any, s, e)) {
                t.protected += 1;
            }
        }
        for &(s, e, l) in pred {
            let t = self.labels.entry(l).or_default();
            t.predicted += 1;
            let hits = |a: usize, b: usize| {
                note.gold
                    .iter()
                    .any(|g| g.category.label() == l && g.start < b && a < g.end)
            };
            if hits(s, e) {
                t.correct += 1;
            }
            for w in ws.iter().filter(|w| w.0 < e && s < w.1) {
                t.predicted_words += 1;
                if hits(w.0.max(s), w.1.min(e)) {
                    t.correct_words += 1;
                }
            }
        }
    }

    /// All categories together (recall side).
    pub fn recall_total(&self) -> Tally {
        let mut t = Tally::default();
        for c in self.categories.values() {
            t.add(c);
        }
        t
    }

    /// All labels together (precision side).
    pub fn precision_total(&self) -> Tally {
        let mut t = Tally::default();
        for c in self.labels.values() {
            t.add(c);
        }
        t
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

#[cfg(test)]
mod report_tests {
    use super::*;

    /// A clinical word any predicted span touches is not kept; the others are.
    #[test]
    fn clinical_words_kept_counts_what_no_span_touches() {
        let note = crate::detect::annotated::parse(
            "{{DRUG|Xanax}} given; {{LAB|CO2}} 27.8; {{ANATOMY|left groin}} clean",
        )
        .unwrap();
        let xanax = note.text.find("Xanax").unwrap();
        let mut r = Report::default();
        r.add_note(&note, &[(xanax, xanax + 5, Label::Person)]);
        let (n, kept, share) = r.clinical_kept();
        assert_eq!((n, kept), (4, 3));
        assert!((share - 0.75).abs() < 1e-9);
    }
    use crate::detect::annotated::parse;

    #[test]
    fn a_partly_found_name_is_not_found_but_its_words_count() {
        let note = parse("{{NAME|Maria Lopez}} lives in {{LOCATION|Springfield}}.").unwrap();
        let mut r = Report::default();
        // "Lopez" as PERSON, "Springfield" as PERSON (wrong label), "lives" as DATE.
        r.add_note(
            &note,
            &[
                (6, 11, Label::Person),
                (21, 32, Label::Person),
                (12, 17, Label::Date),
            ],
        );
        let name = r.categories[&Category::Name];
        assert_eq!(
            (name.gold, name.found, name.gold_words, name.found_words),
            (1, 0, 2, 1)
        );
        let loc = r.categories[&Category::Location];
        assert_eq!((loc.found, loc.protected), (0, 1));
        let person = r.labels[&Label::Person];
        assert_eq!((person.predicted, person.correct), (2, 1));
        assert_eq!(r.labels[&Label::Date].precision(), 0.0);
        assert!((r.recall_total().recall() - 0.0).abs() < 1e-9);
        assert!((r.precision_total().precision() - 1.0 / 3.0).abs() < 1e-9);
    }
}
