//! NDD, the neighbouring distribution divergence, and semantics-preserved
//! distortion (Peng, Li, Zhao; MECHANISMS.md 5).
//!
//! For an edit that replaces tokens `W[i..j)` by `V`, every unedited
//! neighbour `k` is masked in `W` and (at its aligned position `k'`) in
//! `W'`, and the masked LM's two distributions are compared:
//!
//! ```text
//! NDD(W, W') = sum_k mu^d(k) * div( MLM(W', k') || MLM(W, k) )
//! d(k) = i - k left of the span, k - (j - 1) right of it (1 for adjacent tokens)
//! ```
//!
//! `div` is KL (default) or the Hellinger distance. Positions are the
//! model's subword tokens. A text longer than the model's window is scored
//! in a window around the edit; the neighbours left out are farther than
//! the window's radius, where `mu^d` is below `mu^radius` (documented in
//! docs/mechanisms.md).
//!
//! Distortion finds spans with the detector, draws `n` candidates per span
//! (substitutive: surrogates of the span's label; generative: the masked
//! span filled left to right by sampling the model's top 50) and keeps the
//! one with the smallest NDD. The original's distributions are computed
//! once per sentence and every masked copy of every candidate of every span
//! goes to the model in batches.

use std::sync::{Arc, OnceLock};

use rand::{Rng, RngCore};

use super::{Mechanism, Sanitized};
use crate::cost::{Cost, Guarantee};
use crate::detect::{self, model::NerModel, Label, Span};
use crate::error::{Error, Result};
use crate::mlm::{MaskedLm, Row};

/// Which divergence compares two distributions.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum Divergence {
    /// `KL(P || Q)`, unbounded (default, as in the paper).
    #[default]
    Kl,
    /// Hellinger distance, in [0, 1].
    Hellinger,
}

/// How candidates are made.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum Mode {
    /// Surrogates of the span's label (the entity replacement lists).
    #[default]
    Substitutive,
    /// The masked span filled left to right by sampling the model.
    Generative,
}

named_enum!(Divergence, "divergence", "kl" => Kl, "hellinger" => Hellinger);
named_enum!(Mode, "mode", "substitutive" => Substitutive, "generative" => Generative);

/// Largest number of candidates per span.
pub const MAX_CANDIDATES: usize = 64;
/// Generative filling samples among this many most likely tokens.
const TOP_K: usize = 50;

/// Checks mu in (0, 1].
pub fn check_mu(mu: f64) -> Result<()> {
    if !(mu > 0.0 && mu <= 1.0) {
        return Err(Error::invalid("mu", format!("must be in (0, 1], got {mu}")));
    }
    Ok(())
}

/// The divergence between two distributions given as log-probabilities.
pub fn divergence(p: &[f32], q: &[f32], d: Divergence) -> f64 {
    match d {
        Divergence::Kl => p
            .iter()
            .zip(q)
            .map(|(&lp, &lq)| {
                let pp = f64::from(lp).exp();
                if pp > 0.0 {
                    pp * f64::from(lp - lq)
                } else {
                    0.0
                }
            })
            .sum::<f64>()
            .max(0.0),
        Divergence::Hellinger => {
            let bc: f64 = p
                .iter()
                .zip(q)
                .map(|(&lp, &lq)| (0.5 * f64::from(lp + lq)).exp())
                .sum();
            (1.0 - bc.min(1.0)).max(0.0).sqrt()
        }
    }
}

/// NDD scoring with one model.
pub struct Scorer<'a> {
    mlm: &'a MaskedLm,
    mu: f64,
    divergence: Divergence,
}

/// One edit of a window: tokens `[start, end)` replaced by each candidate.
#[derive(Debug, Clone)]
pub struct SpanCandidates {
    /// First replaced token (index into the window).
    pub start: usize,
    /// One past the last replaced token.
    pub end: usize,
    /// Candidate replacements (token ids).
    pub candidates: Vec<Vec<u32>>,
}

impl<'a> Scorer<'a> {
    /// A scorer with distance weight `mu` and divergence `divergence`.
    pub fn new(mlm: &'a MaskedLm, mu: f64, divergence: Divergence) -> Result<Self> {
        check_mu(mu)?;
        Ok(Scorer {
            mlm,
            mu,
            divergence,
        })
    }

    fn masked_row(&self, ids: &[u32], k: usize) -> Row {
        let mut row = self.mlm.wrap(ids);
        row[k + 1] = self.mlm.config().mask_token_id;
        Row {
            ids: row,
            position: k + 1,
        }
    }

    /// `MLM(W, k)` for every position `k` of `ids` (one masked copy each).
    pub fn originals(&self, ids: &[u32]) -> Result<Vec<Vec<f32>>> {
        let rows: Vec<Row> = (0..ids.len()).map(|k| self.masked_row(ids, k)).collect();
        self.mlm.log_probs(&rows)
    }

    /// NDD of every candidate of every span of `ids` (a window that fits
    /// the model with any candidate in place), given `originals` of `ids`.
    /// All masked copies go to the model in batches.
    pub fn score(
        &self,
        ids: &[u32],
        originals: &[Vec<f32>],
        spans: &[SpanCandidates],
    ) -> Result<Vec<Vec<f64>>> {
        // Every masked copy as (span, candidate, k, k', weight); the rows
        // themselves are built one batch at a time, so memory holds one
        // batch of rows and one of distributions.
        let mut jobs: Vec<(usize, usize, usize, usize, f64)> = Vec::new();
        let mut edited: Vec<Vec<Vec<u32>>> = Vec::with_capacity(spans.len());
        for (s, sc) in spans.iter().enumerate() {
            let (i, j) = (sc.start, sc.end);
            let mut per_candidate = Vec::with_capacity(sc.candidates.len());
            for (c, cand) in sc.candidates.iter().enumerate() {
                let mut e = Vec::with_capacity(ids.len() - (j - i) + cand.len());
                e.extend_from_slice(&ids[..i]);
                e.extend_from_slice(cand);
                e.extend_from_slice(&ids[j..]);
                per_candidate.push(e);
                for k in (0..i).chain(j..ids.len()) {
                    let (k2, d) = if k < i {
                        (k, i - k)
                    } else {
                        (k - j + i + cand.len(), k + 1 - j)
                    };
                    jobs.push((s, c, k, k2, self.mu.powi(d as i32)));
                }
            }
            edited.push(per_candidate);
        }
        let mut out: Vec<Vec<f64>> = spans
            .iter()
            .map(|s| vec![0.0; s.candidates.len()])
            .collect();
        for chunk in jobs.chunks(self.mlm.batch()) {
            let rows: Vec<Row> = chunk
                .iter()
                .map(|&(s, c, _, k2, _)| self.masked_row(&edited[s][c], k2))
                .collect();
            self.mlm.log_probs_each(&rows, |r, dist| {
                let (s, c, k, _, w) = chunk[r];
                out[s][c] += w * divergence(dist, &originals[k], self.divergence);
            })?;
        }
        Ok(out)
    }

    /// The naive computation the benchmark compares with: per candidate,
    /// the original's distributions recomputed and one model batch of its
    /// masked copies. Same numbers as [`Scorer::score`].
    pub fn score_naive(&self, ids: &[u32], spans: &[SpanCandidates]) -> Result<Vec<Vec<f64>>> {
        let mut out = Vec::new();
        for sc in spans {
            let mut scores = Vec::new();
            for cand in &sc.candidates {
                let originals = self.originals(ids)?;
                let one = SpanCandidates {
                    start: sc.start,
                    end: sc.end,
                    candidates: vec![cand.clone()],
                };
                scores.push(self.score(ids, &originals, std::slice::from_ref(&one))?[0][0]);
            }
            out.push(scores);
        }
        Ok(out)
    }

    /// NDD of replacing the bytes `span_a` of `a` by the bytes `span_b` of
    /// `b`, where `a` and `b` agree outside those spans (the papers' case
    /// pairs are scored this way).
    pub fn ndd_spans(
        &self,
        a: &str,
        span_a: (usize, usize),
        b: &str,
        span_b: (usize, usize),
    ) -> Result<f64> {
        let ea = self.mlm.encode(a)?;
        let eb = self.mlm.encode(b)?;
        let range = |e: &crate::mlm::Encoded, (x, y): (usize, usize)| {
            let t: Vec<usize> = (0..e.ids.len())
                .filter(|&t| e.offsets[t].0 < y && e.offsets[t].1 > x)
                .collect();
            match (t.first(), t.last()) {
                (Some(&i), Some(&j)) => Ok((i, j + 1)),
                _ => Err(Error::invalid("span", "covers no token")),
            }
        };
        let (i, j) = range(&ea, span_a)?;
        let (i2, j2) = range(&eb, span_b)?;
        if ea.ids[..i] != eb.ids[..i2] || ea.ids[j..] != eb.ids[j2..] {
            return Err(Error::invalid("span", "the texts differ outside the spans"));
        }
        self.one_edit(&ea.ids, (i, j), eb.ids[i2..j2].to_vec())
    }

    /// NDD between a text and an edit of it: the edit is the token range
    /// between their common prefix and common suffix. 0 for equal token
    /// sequences; an error when nothing is left unedited.
    ///
    /// A text longer than the model's window is scored in a window
    /// centred on the edit.
    pub fn ndd(&self, a: &str, b: &str) -> Result<f64> {
        let wa = self.mlm.encode(a)?.ids;
        let wb = self.mlm.encode(b)?.ids;
        if wa == wb {
            return Ok(0.0);
        }
        let prefix = wa.iter().zip(&wb).take_while(|(x, y)| x == y).count();
        let max_suffix = wa.len().min(wb.len()) - prefix;
        let suffix = wa
            .iter()
            .rev()
            .zip(wb.iter().rev())
            .take(max_suffix)
            .take_while(|(x, y)| x == y)
            .count();
        if prefix + suffix == 0 {
            return Err(Error::invalid(
                "b",
                "shares no unedited token with a: NDD scores an edit of a text, not two unrelated texts",
            ));
        }
        let cand = wb[prefix..wb.len() - suffix].to_vec();
        self.one_edit(&wa, (prefix, wa.len() - suffix), cand)
    }

    /// NDD of replacing `w[i..j)` by `cand`, in a window that fits the model.
    fn one_edit(&self, w: &[u32], (i, j): (usize, usize), cand: Vec<u32>) -> Result<f64> {
        let (lo, hi) = window(w.len(), i, j, cand.len(), self.mlm.max_tokens())?;
        let ids = &w[lo..hi];
        let originals = self.originals(ids)?;
        let sc = SpanCandidates {
            start: i - lo,
            end: j - lo,
            candidates: vec![cand],
        };
        Ok(self.score(ids, &originals, &[sc])?[0][0])
    }
}

/// A window `[lo, hi)` of a sequence of `n` tokens around the span
/// `[i, j)` such that the window with the span replaced by `cand_len`
/// tokens fits in `max` tokens.
fn window(n: usize, i: usize, j: usize, cand_len: usize, max: usize) -> Result<(usize, usize)> {
    let span = j - i;
    let grown = n - span + cand_len;
    if grown <= max && n <= max {
        return Ok((0, n));
    }
    let budget = max
        .checked_sub(span.max(cand_len))
        .filter(|b| *b >= 2)
        .ok_or_else(|| {
            Error::invalid(
                "t",
                format!(
                    "an edited span of {} tokens does not fit the model's window of {max}",
                    span.max(cand_len)
                ),
            )
        })?;
    let left = (budget / 2).min(i);
    let right = (budget - left).min(n - j);
    let left = (budget - right).min(i);
    Ok((i - left, j + right))
}

/// Sentence boundaries of `text` (byte ranges): after `.`, `!` or `?`
/// followed by whitespace, and at newlines; never inside a span.
pub fn sentences(text: &str, spans: &[Span]) -> Vec<(usize, usize)> {
    let mut out = Vec::new();
    let mut start = 0;
    let bytes = text.as_bytes();
    for (p, c) in text.char_indices() {
        let end = p + c.len_utf8();
        let boundary = match c {
            '\n' => true,
            '.' | '!' | '?' => bytes.get(end).is_some_and(|b| b.is_ascii_whitespace()),
            _ => false,
        };
        if boundary && !spans.iter().any(|s| s.start < end && end < s.end) {
            out.push((start, end));
            start = end;
        }
    }
    if start < text.len() {
        out.push((start, text.len()));
    }
    out
}

/// Semantics-preserved distortion: each detected span replaced by the
/// candidate with the smallest NDD.
pub struct NddDistort {
    ner: Arc<NerModel>,
    mlm: Arc<MaskedLm>,
    mode: Mode,
    candidates: usize,
    mu: f64,
    divergence: Divergence,
    /// Tokens generation may draw (all, and at a span's first position).
    allowed: OnceLock<(Vec<u32>, Vec<u32>)>,
}

impl std::fmt::Debug for NddDistort {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("NddDistort")
            .field("mode", &self.mode)
            .field("candidates", &self.candidates)
            .finish()
    }
}

/// Applies the casing of `original` (Title or UPPER) to a generated text.
fn recase(original: &str, generated: &str) -> String {
    if original.chars().any(char::is_lowercase) {
        if original.chars().next().is_some_and(char::is_uppercase) {
            generated
                .split(' ')
                .map(|w| {
                    let mut c = w.chars();
                    c.next()
                        .map(|f| f.to_uppercase().chain(c).collect::<String>())
                        .unwrap_or_default()
                })
                .collect::<Vec<_>>()
                .join(" ")
        } else {
            generated.to_string()
        }
    } else if original.chars().any(char::is_uppercase) {
        generated.to_uppercase()
    } else {
        generated.to_string()
    }
}

impl NddDistort {
    /// Distortion with `candidates` per span in `mode`, scored with `mu`
    /// and `divergence`.
    pub fn new(
        ner: Arc<NerModel>,
        mlm: Arc<MaskedLm>,
        mode: Mode,
        candidates: usize,
        mu: f64,
        divergence: Divergence,
    ) -> Result<Self> {
        check_mu(mu)?;
        check_candidates(candidates)?;
        Ok(NddDistort {
            ner,
            mlm,
            mode,
            candidates,
            mu,
            divergence,
            allowed: OnceLock::new(),
        })
    }

    /// Candidate texts for one span.
    fn candidates_for(
        &self,
        label: Label,
        original: &str,
        ids: &[u32],
        (i, j): (usize, usize),
        rng: &mut dyn RngCore,
    ) -> Result<Vec<String>> {
        let mut out: Vec<String> = Vec::new();
        let push = |c: String, out: &mut Vec<String>| {
            if !c.trim().is_empty() && !c.eq_ignore_ascii_case(original) && !out.contains(&c) {
                out.push(c);
            }
        };
        if self.mode == Mode::Generative {
            for c in self.generate(ids, (i, j), rng)? {
                push(recase(original, &c), &mut out);
            }
        }
        // Substitutive candidates; also the fallback when generation only
        // reproduced the original.
        let mut tries = 0;
        let want = if self.mode == Mode::Generative {
            1
        } else {
            self.candidates
        };
        while out.len() < want && tries < self.candidates * 4 {
            let (c, _) = super::replace::full_entity(label, original, rng);
            push(c, &mut out);
            tries += 1;
        }
        Ok(out)
    }

    /// `n` fillings of `ids[i..j)` (masked), left to right, all candidates
    /// of a step in one batch.
    fn generate(
        &self,
        ids: &[u32],
        (i, j): (usize, usize),
        rng: &mut dyn RngCore,
    ) -> Result<Vec<String>> {
        let cfg = self.mlm.config();
        // A sentence longer than the model's window: generate in a window
        // around the span.
        let (lo, hi) = window(ids.len(), i, j, j - i, self.mlm.max_tokens())?;
        let (ids, i, j) = (&ids[lo..hi], i - lo, j - lo);
        let mut rows: Vec<Vec<u32>> = (0..self.candidates)
            .map(|_| {
                let mut r = ids.to_vec();
                r[i..j].fill(cfg.mask_token_id);
                r
            })
            .collect();
        for t in i..j {
            let batch: Vec<Row> = rows
                .iter()
                .map(|r| Row {
                    ids: self.mlm.wrap(r),
                    position: t + 1,
                })
                .collect();
            let dists = self.mlm.log_probs(&batch)?;
            for (r, dist) in rows.iter_mut().zip(&dists) {
                r[t] = self.sample(dist, t == i, rng);
            }
        }
        rows.iter().map(|r| self.mlm.decode(&r[i..j])).collect()
    }

    /// Tokens generation may draw: no special tokens (`[CLS]`, `[UNK]`,
    /// ...), and at a span's first position no `##` continuation; computed
    /// once per mechanism.
    fn allowed(&self, first: bool) -> &[u32] {
        let (all, firsts) = self.allowed.get_or_init(|| {
            let v = self.mlm.config().vocab_size as u32;
            let ok: Vec<(u32, bool)> = (0..v)
                .filter_map(|t| {
                    let tok = self.mlm.token(t)?;
                    let special = tok.starts_with('[') && tok.ends_with(']');
                    (!special).then_some((t, tok.starts_with("##")))
                })
                .collect();
            (
                ok.iter().map(|p| p.0).collect(),
                ok.iter().filter(|p| !p.1).map(|p| p.0).collect(),
            )
        });
        if first {
            firsts
        } else {
            all
        }
    }

    /// A token drawn from the `TOP_K` most likely allowed tokens.
    fn sample(&self, dist: &[f32], first: bool, rng: &mut dyn RngCore) -> u32 {
        let mut idx: Vec<u32> = self.allowed(first).to_vec();
        let k = TOP_K.min(idx.len());
        if k == 0 {
            return self.mlm.config().mask_token_id;
        }
        idx.select_nth_unstable_by(k - 1, |&a, &b| {
            dist[b as usize].total_cmp(&dist[a as usize])
        });
        idx.truncate(k);
        idx.sort_unstable();
        let weights: Vec<f64> = idx
            .iter()
            .map(|&t| f64::from(dist[t as usize]).exp())
            .collect();
        let total: f64 = weights.iter().sum();
        let mut u = rng.random::<f64>() * total;
        for (t, w) in idx.iter().zip(&weights) {
            if u < *w {
                return *t;
            }
            u -= w;
        }
        idx[k - 1]
    }

    /// Distorts the given spans of `text`.
    pub fn distort_spans(
        &self,
        text: &str,
        spans: &[Span],
        rng: &mut dyn RngCore,
    ) -> Result<String> {
        let scorer = Scorer::new(&self.mlm, self.mu, self.divergence)?;
        let mut chosen: Vec<(usize, usize, String)> = Vec::new();
        for (s0, s1) in sentences(text, spans) {
            let sentence = &text[s0..s1];
            let inside: Vec<&Span> = spans
                .iter()
                .filter(|s| s.start >= s0 && s.end <= s1)
                .collect();
            if inside.is_empty() {
                continue;
            }
            let enc = self.mlm.encode(sentence)?;
            // Token range of each span, and its candidates.
            let mut work: Vec<Planned> = Vec::new();
            for s in inside {
                let (a, b) = (s.start - s0, s.end - s0);
                let toks: Vec<usize> = (0..enc.ids.len())
                    .filter(|&t| enc.offsets[t].0 < b && enc.offsets[t].1 > a)
                    .collect();
                let (Some(&i), Some(&j)) = (toks.first(), toks.last()) else {
                    // No model token covers it (e.g. symbols the tokenizer
                    // drops): replaced by a surrogate without scoring.
                    let (c, _) = super::replace::full_entity(s.label, &text[s.start..s.end], rng);
                    chosen.push((s.start, s.end, c));
                    continue;
                };
                let original = &text[s.start..s.end];
                let texts = self.candidates_for(s.label, original, &enc.ids, (i, j + 1), rng)?;
                let ids: Vec<Vec<u32>> = texts
                    .iter()
                    .map(|c| self.mlm.encode(c).map(|e| e.ids))
                    .collect::<Result<_>>()?;
                work.push((s, i, j + 1, texts, ids));
            }
            if work.is_empty() {
                continue;
            }
            let longest = work
                .iter()
                .map(|w| {
                    w.4.iter()
                        .map(Vec::len)
                        .max()
                        .unwrap_or(0)
                        .saturating_sub(w.2 - w.1)
                })
                .max()
                .unwrap_or(0);
            let max = self.mlm.max_tokens();
            if enc.ids.len() + longest <= max {
                // The usual case: one window, originals once per sentence.
                let originals = scorer.originals(&enc.ids)?;
                let scs: Vec<SpanCandidates> = work
                    .iter()
                    .map(|w| SpanCandidates {
                        start: w.1,
                        end: w.2,
                        candidates: w.4.clone(),
                    })
                    .collect();
                let scores = scorer.score(&enc.ids, &originals, &scs)?;
                for (w, sc) in work.iter().zip(scores) {
                    chosen.push((w.0.start, w.0.end, best(&w.3, &sc)));
                }
            } else {
                // A sentence longer than the model's window: a window per span.
                for w in &work {
                    let grow = w.4.iter().map(Vec::len).max().unwrap_or(0);
                    let (lo, hi) = window(enc.ids.len(), w.1, w.2, grow, max)?;
                    let ids = &enc.ids[lo..hi];
                    let originals = scorer.originals(ids)?;
                    let sc = SpanCandidates {
                        start: w.1 - lo,
                        end: w.2 - lo,
                        candidates: w.4.clone(),
                    };
                    let scores = scorer.score(ids, &originals, &[sc])?;
                    chosen.push((w.0.start, w.0.end, best(&w.3, &scores[0])));
                }
            }
        }
        chosen.sort_by_key(|c| c.0);
        let mut out = String::with_capacity(text.len());
        let mut pos = 0;
        for (a, b, r) in chosen {
            if a < pos {
                continue;
            }
            out.push_str(&text[pos..a]);
            out.push_str(&r);
            pos = b;
        }
        out.push_str(&text[pos..]);
        Ok(out)
    }
}

/// A span to distort: the span, its token range in the sentence, and its
/// candidates as texts and as tokens.
type Planned<'a> = (&'a Span, usize, usize, Vec<String>, Vec<Vec<u32>>);

fn best(texts: &[String], scores: &[f64]) -> String {
    scores
        .iter()
        .enumerate()
        .min_by(|a, b| a.1.total_cmp(b.1))
        .and_then(|(i, _)| texts.get(i).cloned())
        .unwrap_or_else(|| "[REDACTED]".to_string())
}

/// Checks the number of candidates.
pub fn check_candidates(n: usize) -> Result<()> {
    if !(1..=MAX_CANDIDATES).contains(&n) {
        return Err(Error::invalid(
            "candidates",
            format!("must be in [1, {MAX_CANDIDATES}], got {n}"),
        ));
    }
    Ok(())
}

impl Mechanism for NddDistort {
    fn name(&self) -> &'static str {
        "ndd"
    }

    fn params(&self) -> String {
        format!(
            "mode={},candidates={},mu={},divergence={}",
            self.mode.name(),
            self.candidates,
            self.mu,
            self.divergence.name()
        )
    }

    fn sanitize(&self, text: &str, rng: &mut dyn RngCore) -> Result<Sanitized> {
        let spans = detect::detect(text, Some(&self.ner))?;
        let out = self.distort_spans(text, &spans, rng)?;
        Ok(Sanitized {
            text: out,
            cost: Cost {
                mechanism: "ndd",
                guarantee: Guarantee::None {
                    reason: "NDD distortion picks the candidate closest to the original's context: it carries no formal differential privacy guarantee".to_string(),
                },
                tokens: spans.len(),
                oov_tokens: 0,
                kept_tokens: 0,
                composition: "none: no formal guarantee".to_string(),
                worst_case_eps: f64::INFINITY,
                diameter_bound: 0.0,
                embedding: "mlm".to_string(),
                output_set_size: self.mlm.config().vocab_size,
            },
        })
    }
}

#[cfg(test)]
mod tests;
