//! Semantics-preserved distortion: candidates for each detected span
//! (surrogates, or the masked span filled by the model), the one with the
//! smallest NDD kept.

use std::ops::Range;
use std::sync::{Arc, OnceLock};

use rand::{Rng, RngCore};

use super::scorer::{Choice, Scorer, SpanCandidates, Window};
use super::{check_candidates, check_mu, window, Divergence, Mode};
use crate::cost::{Cost, Guarantee};
use crate::detect::{Detector, Label, Span};
use crate::error::Result;
use crate::mechanisms::deidentify::Deidentify;
use crate::mechanisms::{Mechanism, Sanitized};
use crate::mlm::{MaskedLm, Row};
use crate::rng::RandomMode;

/// Generative filling samples among this many most likely tokens.
const TOP_K: usize = 50;

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
    pub(super) ner: Arc<Detector>,
    mlm: Arc<MaskedLm>,
    mode: Mode,
    candidates: usize,
    mu: f64,
    divergence: Divergence,
    /// Tokens generation may draw (all, and at a span's first position).
    allowed: OnceLock<(Vec<u32>, Vec<u32>)>,
    /// Spans of labels with an operator (`DATE:shift`, `ID:redact`...)
    /// get it from here instead of distortion.
    replace: Option<Deidentify>,
    /// [`Mechanism::params`], from the spec.
    key: String,
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
    /// Distortion as `spec` says, with the detector and masked LM given.
    pub fn from_spec(
        ner: Arc<Detector>,
        mlm: Arc<MaskedLm>,
        spec: &super::NddSpec,
    ) -> Result<Self> {
        let mut d = Self::new(
            ner.clone(),
            mlm,
            spec.mode,
            spec.candidates,
            spec.mu,
            spec.divergence,
        )?;
        if !spec.operators.is_empty() {
            d.replace = Some(Deidentify::from_spec(ner, spec.replacement())?);
        }
        d.key = spec.key_params();
        Ok(d)
    }

    /// Distortion with `candidates` per span in `mode`, scored with `mu`
    /// and `divergence`.
    pub fn new(
        ner: Arc<Detector>,
        mlm: Arc<MaskedLm>,
        mode: Mode,
        candidates: usize,
        mu: f64,
        divergence: Divergence,
    ) -> Result<Self> {
        check_mu(mu)?;
        check_candidates(candidates)?;
        let key = super::NddSpec {
            mode,
            candidates,
            mu,
            divergence,
            operators: Default::default(),
            shift_days: 365,
            group: None,
        }
        .key_params();
        Ok(NddDistort {
            ner,
            mlm,
            mode,
            candidates,
            mu,
            divergence,
            allowed: OnceLock::new(),
            replace: None,
            key,
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
            let (c, _) = crate::mechanisms::surrogates::full_entity(label, original, rng);
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
        let chosen = self.choose(text, spans, rng)?;
        Ok(splice(text, &chosen).0)
    }

    /// The candidate kept for each of `spans` (sorted, disjoint): its byte
    /// range in `text` and its text, in text order.
    fn choose(
        &self,
        text: &str,
        spans: &[Span],
        rng: &mut dyn RngCore,
    ) -> Result<Vec<(usize, usize, String)>> {
        let scorer = Scorer::new(&self.mlm, self.mu, self.divergence)?;
        let mut chosen: Vec<(usize, usize, String)> = Vec::new();
        let mut windows: Vec<Window> = Vec::new();
        // Per window, its spans' byte ranges and candidate texts.
        let mut targets: Vec<Vec<(usize, usize, Vec<String>)>> = Vec::new();
        for (s0, s1) in sentences(text, spans) {
            crate::cancel::check()?;
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
                crate::cancel::check()?;
                let (a, b) = (s.start - s0, s.end - s0);
                let toks: Vec<usize> = (0..enc.ids.len())
                    .filter(|&t| enc.offsets[t].0 < b && enc.offsets[t].1 > a)
                    .collect();
                let max = self.mlm.max_tokens();
                let unscored = |rng: &mut dyn RngCore| {
                    crate::mechanisms::surrogates::full_entity(s.label, &text[s.start..s.end], rng)
                        .0
                };
                // No model token covers it (e.g. symbols the tokenizer
                // drops), or it is too long to score in the model's window
                // (a pasted URL of 600 tokens): replaced by a surrogate
                // without scoring. Never an error, whose text or whose
                // failing the read would tell the raw span's length.
                let (Some(&i), Some(&j)) = (toks.first(), toks.last()) else {
                    chosen.push((s.start, s.end, unscored(rng)));
                    continue;
                };
                if !super::fits_window(j + 1 - i, max) {
                    chosen.push((s.start, s.end, unscored(rng)));
                    continue;
                }
                let original = &text[s.start..s.end];
                let mut texts =
                    self.candidates_for(s.label, original, &enc.ids, (i, j + 1), rng)?;
                let mut ids: Vec<Vec<u32>> = texts
                    .iter()
                    .map(|c| self.mlm.encode(c).map(|e| e.ids))
                    .collect::<Result<_>>()?;
                // A candidate too long for the window is not scored either.
                let keep: Vec<bool> = ids
                    .iter()
                    .map(|c| super::fits_window(c.len(), max))
                    .collect();
                if keep.iter().any(|k| !k) {
                    let mut k = keep.iter();
                    texts.retain(|_| *k.next().unwrap_or(&false));
                    let mut k = keep.iter();
                    ids.retain(|_| *k.next().unwrap_or(&false));
                }
                if texts.is_empty() {
                    chosen.push((s.start, s.end, unscored(rng)));
                    continue;
                }
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
            let candidates = |w: &Planned<'_>, lo: usize| SpanCandidates {
                start: w.1 - lo,
                end: w.2 - lo,
                candidates: w.4.clone(),
            };
            if enc.ids.len() + longest <= max {
                // The usual case: the sentence is one window.
                windows.push(Window {
                    ids: enc.ids.clone(),
                    spans: work.iter().map(|w| candidates(w, 0)).collect(),
                });
                targets.push(
                    work.into_iter()
                        .map(|w| (w.0.start, w.0.end, w.3))
                        .collect(),
                );
            } else {
                // A sentence longer than the model's window: a window per span.
                for w in work {
                    let grow = w.4.iter().map(Vec::len).max().unwrap_or(0);
                    let (lo, hi) = window(enc.ids.len(), w.1, w.2, grow, max)?;
                    windows.push(Window {
                        ids: enc.ids[lo..hi].to_vec(),
                        spans: vec![candidates(&w, lo)],
                    });
                    targets.push(vec![(w.0.start, w.0.end, w.3)]);
                }
            }
        }
        // Every window of the text scored together: the rounds of the
        // search share their model calls.
        let choices = scorer.choose(&windows)?;
        for (per_window, choice) in targets.into_iter().zip(choices) {
            for ((a, b, texts), c) in per_window.into_iter().zip(choice) {
                chosen.push((a, b, best(&texts, c)));
            }
        }
        chosen.sort_by_key(|c| c.0);
        Ok(chosen)
    }

    /// Detection, then each value's spans: those of a label with an
    /// operator get it ([`Deidentify`]), the others are distorted; spans
    /// overlapping a kept range are left alone.
    fn run_keeping(
        &self,
        text: &str,
        spans: Vec<Span>,
        keep: &[Range<usize>],
        rng: &mut dyn RngCore,
        mode: &RandomMode,
    ) -> Result<Sanitized> {
        let spans: Vec<Span> = spans
            .into_iter()
            .filter(|s| !crate::mechanisms::overlaps(&(s.start..s.end), keep))
            .collect();
        let n = spans.len();
        let (operated, distorted): (Vec<Span>, Vec<Span>) = spans.into_iter().partition(|s| {
            self.replace
                .as_ref()
                .is_some_and(|d| d.spec().operators.get(s.label).is_some())
        });
        let chosen = self.choose(text, &distorted, rng)?;
        let (mut out, edits) = splice(text, &chosen);
        let mut protected =
            crate::mechanisms::protected_after(keep, &edits, &vec![true; edits.len()]);
        let mut labels = Vec::new();
        if let (Some(d), false) = (&self.replace, operated.is_empty()) {
            let moved: Vec<Span> = operated
                .iter()
                .map(|s| Span {
                    start: crate::mechanisms::moved(s.start, &edits),
                    end: crate::mechanisms::moved(s.end, &edits),
                    ..s.clone()
                })
                .collect();
            let r = d.replace_spans_keeping(&out, &moved, &protected, rng, mode);
            out = r.text;
            protected = r.protected;
            labels = r.cost.labels;
        }
        Ok(Sanitized {
            text: out,
            cost: Cost {
                mechanism: "ndd",
                guarantee: Guarantee::None {
                    reason: "NDD distortion picks the candidate closest to the original's context: it carries no formal differential privacy guarantee".to_string(),
                },
                tokens: n,
                oov_tokens: 0,
                kept_tokens: 0,
                composition: "none: no formal guarantee".to_string(),
                worst_case_eps: f64::INFINITY,
                diameter_bound: 0.0,
                embedding: "mlm".to_string(),
                output_set_size: self.mlm.config().vocab_size,
                labels,
                stages: Vec::new(),
                vocabulary: None,
            },
            protected,
        })
    }
}

/// `text` with each chosen range replaced (sorted; a range overlapping an
/// earlier one is skipped), and each replacement's input and output range.
#[allow(clippy::type_complexity)]
fn splice(
    text: &str,
    chosen: &[(usize, usize, String)],
) -> (String, Vec<(Range<usize>, Range<usize>)>) {
    let mut out = String::with_capacity(text.len());
    let mut edits = Vec::with_capacity(chosen.len());
    let mut pos = 0;
    for (a, b, r) in chosen {
        if *a < pos {
            continue;
        }
        out.push_str(&text[pos..*a]);
        let at = out.len();
        out.push_str(r);
        edits.push((*a..*b, at..out.len()));
        pos = *b;
    }
    out.push_str(&text[pos..]);
    (out, edits)
}

/// A span to distort: the span, its token range in the sentence, and its
/// candidates as texts and as tokens.
type Planned<'a> = (&'a Span, usize, usize, Vec<String>, Vec<Vec<u32>>);

fn best(texts: &[String], choice: Option<Choice>) -> String {
    choice
        .and_then(|c| texts.get(c.index).cloned())
        .unwrap_or_else(|| "[REDACTED]".to_string())
}

impl Mechanism for NddDistort {
    fn name(&self) -> &'static str {
        "ndd"
    }

    fn uses_detection(&self) -> bool {
        true
    }

    fn params(&self) -> String {
        self.key.clone()
    }

    fn needs_key(&self) -> Option<&'static str> {
        self.replace.as_ref().and_then(|d| d.needs_key())
    }

    fn sanitize(&self, text: &str, rng: &mut dyn RngCore, mode: &RandomMode) -> Result<Sanitized> {
        let spans = self.ner.detect(text)?;
        self.run_keeping(text, spans, &[], rng, mode)
    }

    fn sanitize_many_keeping(
        &self,
        values: &mut [(&str, &mut dyn RngCore)],
        keep: &[Vec<Range<usize>>],
        mode: &RandomMode,
    ) -> Vec<Result<Sanitized>> {
        values
            .iter_mut()
            .enumerate()
            .map(|(i, (text, rng))| {
                let keep = keep.get(i).map_or(&[][..], Vec::as_slice);
                let spans = self.ner.detect(text)?;
                self.run_keeping(text, spans, keep, &mut **rng, mode)
            })
            .collect()
    }
}
