//! What one sanitized value keeps of its original, in words: the share of
//! tokens left unchanged (the papers' N_x), the detected PII tokens that
//! survive verbatim, and what a Query Attack recovers from N outputs.
//!
//! Words are the core's segmentation ([`dptext_core::text::Segmented`]:
//! runs of letters and digits). A sanitized value with as many words as its
//! original is compared position by position, as the papers do for
//! word-by-word mechanisms; one with another count (entity replacement,
//! NDD) is aligned to its original by a longest common subsequence, and
//! only aligned words count as kept.

use std::collections::HashMap;

use dptext_core::detect::{Label, Span};
use dptext_core::text::Segmented;

/// The words of a text.
pub fn words(text: &str) -> Vec<&str> {
    let s = Segmented::new(text);
    s.words().map(|w| s.word_str(w)).collect()
}

/// Longest pair-table the alignment builds (original words times output
/// words); longer pairs are compared position by position.
const MAX_ALIGN_CELLS: usize = 16_000_000;

/// For each original word, the output word aligned to it (`None`: none).
pub fn align<'a>(orig: &[&str], out: &[&'a str]) -> Vec<Option<&'a str>> {
    if orig.len() == out.len() || orig.len().saturating_mul(out.len()) > MAX_ALIGN_CELLS {
        return (0..orig.len()).map(|i| out.get(i).copied()).collect();
    }
    // LCS table, suffix form: t[i][j] = LCS of orig[i..], out[j..].
    let (n, m) = (orig.len(), out.len());
    let w = m + 1;
    let mut t = vec![0u32; (n + 1) * w];
    for i in (0..n).rev() {
        for j in (0..m).rev() {
            t[i * w + j] = if orig[i] == out[j] {
                t[(i + 1) * w + j + 1] + 1
            } else {
                t[(i + 1) * w + j].max(t[i * w + j + 1])
            };
        }
    }
    let mut aligned = vec![None; n];
    let (mut i, mut j) = (0, 0);
    while i < n && j < m {
        if orig[i] == out[j] {
            aligned[i] = Some(out[j]);
            i += 1;
            j += 1;
        } else if t[(i + 1) * w + j] >= t[i * w + j + 1] {
            i += 1;
        } else {
            j += 1;
        }
    }
    aligned
}

/// Original words left unchanged in `out`.
pub fn unchanged(orig: &[&str], out: &[&str]) -> usize {
    align(orig, out)
        .iter()
        .zip(orig)
        .filter(|(a, o)| a.as_deref() == Some(**o))
        .count()
}

/// The detected PII words of a text, with their label.
pub fn pii_words<'a>(text: &'a str, spans: &[Span]) -> Vec<(Label, &'a str)> {
    let mut out = Vec::new();
    for s in spans {
        let Some(part) = text.get(s.start..s.end) else {
            continue;
        };
        out.extend(words(part).into_iter().map(|w| (s.label, w)));
    }
    out
}

/// Per label, (PII words, of which found verbatim anywhere in `out`).
pub fn pii_kept(pii: &[(Label, &str)], out: &[&str]) -> HashMap<Label, (usize, usize)> {
    let present: std::collections::HashSet<&str> = out.iter().copied().collect();
    let mut by: HashMap<Label, (usize, usize)> = HashMap::new();
    for (label, w) in pii {
        let e = by.entry(*label).or_default();
        e.0 += 1;
        if present.contains(w) {
            e.1 += 1;
        }
    }
    by
}

/// The Query Attack (CusText, Algorithm 2) on one value: from `outs`, N
/// sanitized versions of the same original, the attacker guesses each word
/// as the most frequent word at its place. Returns how many original words
/// the guess gets right: a word counts only when it is strictly more
/// frequent than any other (a tie is no recovery). Outputs with another
/// word count are aligned as in [`align`]; an unaligned place counts as a
/// distinct guess, never as the original.
pub fn query_attack(orig: &[&str], outs: &[Vec<&str>]) -> usize {
    let aligned: Vec<Vec<Option<&str>>> = outs.iter().map(|o| align(orig, o)).collect();
    let mut recovered = 0;
    for (i, o) in orig.iter().enumerate() {
        let mut counts: HashMap<&str, usize> = HashMap::new();
        for a in &aligned {
            if let Some(w) = a[i] {
                *counts.entry(w).or_default() += 1;
            }
        }
        let mine = counts.get(o).copied().unwrap_or(0);
        let best_other = counts
            .iter()
            .filter(|(w, _)| *w != o)
            .map(|(_, c)| *c)
            .max()
            .unwrap_or(0);
        if mine > 0 && mine > best_other {
            recovered += 1;
        }
    }
    recovered
}

#[cfg(test)]
mod tests {
    use super::*;
    use dptext_core::detect::Source;

    #[test]
    fn same_length_compares_by_position() {
        let o = words("the patient has a fever");
        let s = words("the client has the fever");
        assert_eq!(unchanged(&o, &s), 3);
        // A word moved is not unchanged at its place.
        let s = words("fever the patient has a");
        assert_eq!(unchanged(&o, &s), 0);
    }

    #[test]
    fn other_lengths_align_by_common_subsequence() {
        let o = words("Seen by Dr Jane Doe on 2 March");
        let s = words("Seen by Dr PERSON on DATE");
        assert_eq!(unchanged(&o, &s), 4); // Seen by Dr on
        assert_eq!(unchanged(&o, &[]), 0);
        assert_eq!(unchanged(&[], &s), 0);
        let a = align(&o, &s);
        assert_eq!(a[3], None);
        assert_eq!(a[5], Some("on"));
    }

    #[test]
    fn pii_words_survive_anywhere() {
        let text = "Jane Doe called 555 1234";
        let spans = vec![
            Span {
                start: 0,
                end: 8,
                label: Label::Person,
                score: 1.0,
                source: Source::Model,
            },
            Span {
                start: 16,
                end: 24,
                label: Label::Contact,
                score: 1.0,
                source: Source::Model,
            },
        ];
        let pii = pii_words(text, &spans);
        assert_eq!(pii.len(), 4);
        let kept = pii_kept(&pii, &words("Doe Jane phoned 000 0000"));
        assert_eq!(kept[&Label::Person], (2, 2));
        assert_eq!(kept[&Label::Contact], (2, 0));
    }

    #[test]
    fn query_attack_takes_the_plurality() {
        let o = words("a b c");
        let outs = vec![words("a x c"), words("a b y"), words("z b c")];
        // a: 2 of 3, b: 2 of 3, c: 2 of 3.
        assert_eq!(query_attack(&o, &outs), 3);
        let outs = vec![words("a x q"), words("w b y"), words("z v c")];
        // Each original word once, each other word once: ties, no recovery.
        assert_eq!(query_attack(&o, &outs), 0);
        // One output: the attacker's guess is that output.
        assert_eq!(query_attack(&o, &[words("a x c")]), 2);
        // Identical outputs (keyed mode) recover exactly what one keeps.
        let same = vec![words("a x c"); 5];
        assert_eq!(query_attack(&o, &same), 2);
    }
}
