//! NDD, the neighbouring distribution divergence, and semantics-preserved
//! distortion (Peng, Li, Zhao; docs/mechanisms.md).
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
//! goes to the model in batches ([`Scorer::score`]). Distortion only needs
//! the winner, so [`Scorer::choose`] finds it without scoring every
//! candidate in full: the terms are never negative, so a partial sum is a
//! lower bound, and a candidate whose bound passes a complete candidate's
//! NDD cannot win. It returns the same winner and NDD as the full
//! evaluation (tested) with about half the masked copies.
//!
//! Divergences are computed from the raw logits in one pass
//! ([`crate::mlm::math`]): about 14% of the time, against 47% with
//! libm's `f64` exp (perf, on the NDD benchmark).

use std::sync::{Arc, OnceLock};

use rand::{Rng, RngCore};

use super::{Mechanism, Sanitized};
use crate::cost::{Cost, Guarantee};
use crate::detect::{self, model::NerModel, Label, Span};
use crate::error::{Error, Result};
use crate::mlm::{math, MaskedLm, Row};

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

/// The divergence of the masked LM's distribution with logits `z` from a
/// reference distribution given as log-probabilities.
pub fn divergence(z: &[f32], log_q: &[f32], d: Divergence, scratch: &mut Vec<f32>) -> f64 {
    match d {
        Divergence::Kl => math::kl(z, log_q, scratch),
        Divergence::Hellinger => math::hellinger(z, log_q, scratch),
    }
}

/// Margin below which a partial sum does not prune: sums of the same
/// positive terms in another order differ by far less than this.
const PRUNE_MARGIN: f64 = 1e-9;

/// The winner of one span's candidates.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Choice {
    /// Index of the candidate with the smallest NDD (the first of equals).
    pub index: usize,
    /// Its NDD.
    pub ndd: f64,
}

/// One term of an NDD: the divergence at one unedited neighbour.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Term {
    /// The neighbour's token position in the unedited window.
    pub position: usize,
    /// Its distance to the span, in tokens (1 for an adjacent token).
    pub distance: usize,
    /// `mu^distance`.
    pub weight: f64,
    /// The divergence of its masked-LM distributions (unedited, edited).
    pub divergence: f64,
}

/// One masked copy to score: the neighbour `k` of the original, its
/// position `k2` in the edited text, its weight and its distance.
#[derive(Debug, Clone, Copy)]
struct Job {
    k: usize,
    k2: usize,
    w: f64,
    d: usize,
}

/// Scoring state of one candidate of one span.
struct Tally {
    /// Jobs in the order the full sum adds them (by `k`).
    jobs: Vec<Job>,
    /// Indices into `jobs`, nearest neighbours first.
    order: Vec<usize>,
    /// Divergence per job, once computed.
    div: Vec<f64>,
    /// How many of `order` are done.
    done: usize,
    /// Sum of the weighted divergences done so far (a lower bound).
    partial: f64,
    /// Dropped because its lower bound exceeds a complete candidate's NDD.
    pruned: bool,
}

impl Tally {
    fn complete(&self) -> bool {
        self.done == self.jobs.len()
    }

    /// The NDD, summed in the same order as a full evaluation.
    fn total(&self) -> f64 {
        self.jobs
            .iter()
            .zip(&self.div)
            .fold(0.0, |acc, (j, d)| acc + j.w * d)
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

/// A token sequence that fits the model with any candidate in place, and
/// the edits to score in it.
#[derive(Debug, Clone)]
pub struct Window {
    /// The unedited tokens.
    pub ids: Vec<u32>,
    /// The spans to replace and their candidates.
    pub spans: Vec<SpanCandidates>,
}

/// Scoring state of one window.
struct State<'w> {
    ids: &'w [u32],
    /// Edited tokens per span and candidate.
    edited: Vec<Vec<Vec<u32>>>,
    tallies: Vec<Vec<Tally>>,
    /// `MLM(W, k)` per position, computed when a masked copy first needs it.
    originals: Vec<Option<Vec<f32>>>,
}

/// A masked copy to run: position `k` of window `w`'s original, or job
/// `x` of candidate `c` of span `s` of window `w`.
#[derive(Debug, Clone, Copy)]
enum Item {
    Original(usize, usize),
    Edit(usize, usize, usize, usize),
}

impl Item {
    /// Tokens of its row (without `[CLS]`/`[SEP]`).
    fn len(self, states: &[State<'_>]) -> usize {
        match self {
            Item::Original(w, _) => states[w].ids.len(),
            Item::Edit(w, s, c, _) => states[w].edited[s][c].len(),
        }
    }
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

    /// The edited texts and the jobs of every candidate of every span.
    fn plan<'w>(&self, window: &'w Window) -> State<'w> {
        let ids = &window.ids[..];
        let mut edited = Vec::with_capacity(window.spans.len());
        let mut tallies = Vec::with_capacity(window.spans.len());
        for sc in &window.spans {
            let (i, j) = (sc.start, sc.end);
            let mut texts = Vec::with_capacity(sc.candidates.len());
            let mut per = Vec::with_capacity(sc.candidates.len());
            for cand in &sc.candidates {
                let mut e = Vec::with_capacity(ids.len() - (j - i) + cand.len());
                e.extend_from_slice(&ids[..i]);
                e.extend_from_slice(cand);
                e.extend_from_slice(&ids[j..]);
                texts.push(e);
                let jobs: Vec<Job> = (0..i)
                    .chain(j..ids.len())
                    .map(|k| {
                        let (k2, d) = if k < i {
                            (k, i - k)
                        } else {
                            (k - j + i + cand.len(), k + 1 - j)
                        };
                        Job {
                            k,
                            k2,
                            w: self.mu.powi(d as i32),
                            d,
                        }
                    })
                    .collect();
                let mut order: Vec<usize> = (0..jobs.len()).collect();
                order.sort_by_key(|&x| (jobs[x].d, x));
                per.push(Tally {
                    div: vec![0.0; jobs.len()],
                    jobs,
                    order,
                    done: 0,
                    partial: 0.0,
                    pruned: false,
                });
            }
            edited.push(texts);
            tallies.push(per);
        }
        State {
            ids,
            edited,
            tallies,
            originals: vec![None; ids.len()],
        }
    }

    /// Runs the next `take(tally)` jobs (nearest first) of each candidate
    /// of every window, all in shared batches, with the masked copies of
    /// the original they compare with when not computed yet (a position no
    /// job needs, such as one inside the only span, is never run). Rows
    /// are built one batch at a time, so memory holds one batch of rows and
    /// one of logits.
    fn advance(
        &self,
        states: &mut [State<'_>],
        take: impl Fn(&[Tally], usize) -> usize,
    ) -> Result<()> {
        let mut work: Vec<Item> = Vec::new();
        for (w, st) in states.iter().enumerate() {
            let mut wanted = vec![false; st.ids.len()];
            for (s, per) in st.tallies.iter().enumerate() {
                for (c, t) in per.iter().enumerate() {
                    let n = take(per, c).min(t.jobs.len() - t.done);
                    for &x in &t.order[t.done..t.done + n] {
                        work.push(Item::Edit(w, s, c, x));
                        let k = t.jobs[x].k;
                        if st.originals[k].is_none() && !wanted[k] {
                            wanted[k] = true;
                            work.push(Item::Original(w, k));
                        }
                    }
                }
            }
        }
        // The originals first, then the edits that compare with them; each
        // sorted by row length, so that a call pads little.
        let (mut originals, mut edits): (Vec<Item>, Vec<Item>) = work
            .into_iter()
            .partition(|item| matches!(item, Item::Original(..)));
        originals.sort_by_key(|item| item.len(states));
        edits.sort_by_key(|item| item.len(states));
        let logp = self.run_items(states, &originals, |_, z, scratch| {
            let mut lp = Vec::with_capacity(z.len());
            math::push_log_softmax(z, &mut lp, scratch);
            lp
        })?;
        for (item, lp) in originals.iter().zip(logp) {
            if let Item::Original(w, k) = *item {
                states[w].originals[k] = Some(lp);
            }
        }
        let view: &[State<'_>] = states;
        let divs = self.run_items(view, &edits, |item, z, scratch| match *item {
            Item::Edit(w, s, c, x) => {
                let st = &view[w];
                let k = st.tallies[s][c].jobs[x].k;
                st.originals[k]
                    .as_ref()
                    .map(|log_q| divergence(z, log_q, self.divergence, scratch))
            }
            Item::Original(..) => None,
        })?;
        for (item, d) in edits.iter().zip(divs) {
            let (Item::Edit(w, s, c, x), Some(d)) = (*item, d) else {
                return Err(Error::Model(
                    "a masked copy was scored before its original".into(),
                ));
            };
            let t = &mut states[w].tallies[s][c];
            t.div[x] = d;
            t.partial += t.jobs[x].w * d;
            t.done += 1;
        }
        Ok(())
    }

    /// Runs the masked copies `items` (sorted by length) in calls spread
    /// over the model's sessions, `f` applied to each row's logits on the
    /// thread that ran it; the values in the order of `items`.
    fn run_items<T: Send>(
        &self,
        states: &[State<'_>],
        items: &[Item],
        f: impl Fn(&Item, &[f32], &mut Vec<f32>) -> T + Sync,
    ) -> Result<Vec<T>> {
        if items.is_empty() {
            return Ok(Vec::new());
        }
        let lens: Vec<usize> = items.iter().map(|item| item.len(states)).collect();
        let cuts = batch_cuts(&lens, self.mlm.rows_per_call(items.len()));
        let chunk = |i: usize| &items[cuts[i]..cuts[i + 1]];
        let out = self.mlm.map_calls(
            cuts.len() - 1,
            |i| {
                chunk(i)
                    .iter()
                    .map(|item| match *item {
                        Item::Original(w, k) => self.masked_row(states[w].ids, k),
                        Item::Edit(w, s, c, x) => {
                            let st = &states[w];
                            self.masked_row(&st.edited[s][c], st.tallies[s][c].jobs[x].k2)
                        }
                    })
                    .collect()
            },
            |i, r, z, scratch| f(&chunk(i)[r], z, scratch),
        )?;
        Ok(out.into_iter().flatten().collect())
    }

    /// NDD of every candidate of every span of `window` (which must fit the
    /// model with any candidate in place): the original's distributions
    /// once, and all masked copies in batches.
    pub fn score(&self, window: &Window) -> Result<Vec<Vec<f64>>> {
        Ok(self
            .evaluate(window)?
            .iter()
            .map(|per| per.iter().map(Tally::total).collect())
            .collect())
    }

    /// The terms of every candidate's NDD, per span and candidate, in the
    /// order [`Scorer::score`] sums them (by neighbour position): what the
    /// schedule analyses of the NDD benchmark read (`NDD_BENCH_DUMP`).
    pub fn score_terms(&self, window: &Window) -> Result<Vec<Vec<Vec<Term>>>> {
        Ok(self
            .evaluate(window)?
            .iter()
            .map(|per| {
                per.iter()
                    .map(|t| {
                        t.jobs
                            .iter()
                            .zip(&t.div)
                            .map(|(j, &divergence)| Term {
                                position: j.k,
                                distance: j.d,
                                weight: j.w,
                                divergence,
                            })
                            .collect()
                    })
                    .collect()
            })
            .collect())
    }

    /// Every job of every candidate of `window` run: its tallies, complete.
    fn evaluate(&self, window: &Window) -> Result<Vec<Vec<Tally>>> {
        let mut states = [self.plan(window)];
        self.advance(&mut states, |per, c| per[c].jobs.len())?;
        let [st] = states;
        Ok(st.tallies)
    }

    /// The candidate with the smallest NDD for each span of each window
    /// (`None` for a span without candidates): the same winner and the same
    /// NDD as taking the smallest of [`Scorer::score`], with fewer masked
    /// copies.
    ///
    /// Every term of the sum is a weighted divergence, never negative, so a
    /// candidate's partial sum is a lower bound of its NDD, whatever terms
    /// it holds. Each candidate first gets its two nearest neighbours (the
    /// heaviest weights); the lowest of each span is completed; then the
    /// others continue with the neighbours where that complete candidate's
    /// terms were largest (see [`reorder`]), and a candidate whose lower
    /// bound exceeds a complete candidate's NDD is dropped. Each round is
    /// one set of batches shared by all spans of all windows, and its step
    /// grows by half (1, 1, 2, 3, 5, ... per survivor): on the CPU a model
    /// call costs about as much as three rows (more when its weights have
    /// left the cache), so rounds stay few. A best-first order (one
    /// candidate per span and round) ran fewer rows but 2.5 times the
    /// calls, and was no faster (docs/benchmarks.md).
    pub fn choose(&self, windows: &[Window]) -> Result<Vec<Vec<Option<Choice>>>> {
        let mut states: Vec<State<'_>> = windows.iter().map(|w| self.plan(w)).collect();
        // Round 1: each candidate's two nearest neighbours, with the masked
        // copies of the original they compare with.
        self.advance(&mut states, |per, c| per[c].order.len().min(FIRST_JOBS))?;
        // Round 2: each span's lowest partial sum completed.
        self.advance(&mut states, |per, c| {
            let leader = per
                .iter()
                .enumerate()
                .min_by(|a, b| a.1.partial.total_cmp(&b.1.partial))
                .map(|(c, _)| c);
            if Some(c) == leader {
                per[c].jobs.len()
            } else {
                0
            }
        })?;
        // Later rounds: the survivors, heaviest terms of the best complete
        // candidate first, in steps growing by half.
        let mut step = 1.0_f64;
        loop {
            crate::cancel::check()?;
            let mut more = false;
            for per in states.iter_mut().flat_map(|st| st.tallies.iter_mut()) {
                prune(per);
                reorder(per);
                more |= per.iter().any(|t| !t.pruned && !t.complete());
            }
            if !more {
                break;
            }
            let n = step as usize;
            self.advance(&mut states, |per, c| {
                let t = &per[c];
                if t.pruned || t.complete() {
                    0
                } else {
                    n
                }
            })?;
            step *= STEP_GROWTH;
        }
        Ok(states
            .iter()
            .map(|st| {
                st.tallies
                    .iter()
                    .map(|per| {
                        per.iter()
                            .enumerate()
                            .filter(|(_, t)| !t.pruned)
                            .map(|(c, t)| Choice {
                                index: c,
                                ndd: t.total(),
                            })
                            .min_by(|a, b| a.ndd.total_cmp(&b.ndd))
                    })
                    .collect()
            })
            .collect())
    }

    /// The naive computation the benchmark compares with: per candidate,
    /// the original's masked copies recomputed and run in one batch with
    /// the candidate's. Same numbers as [`Scorer::score`].
    pub fn score_naive(&self, window: &Window) -> Result<Vec<Vec<f64>>> {
        let mut out = Vec::new();
        for sc in &window.spans {
            let mut scores = Vec::new();
            for cand in &sc.candidates {
                let one = Window {
                    ids: window.ids.clone(),
                    spans: vec![SpanCandidates {
                        start: sc.start,
                        end: sc.end,
                        candidates: vec![cand.clone()],
                    }],
                };
                scores.push(self.score(&one)?[0][0]);
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
        let one = Window {
            ids: w[lo..hi].to_vec(),
            spans: vec![SpanCandidates {
                start: i - lo,
                end: j - lo,
                candidates: vec![cand],
            }],
        };
        Ok(self.score(&one)?[0][0])
    }
}

/// The complete candidate with the smallest NDD, if any is complete.
fn best_complete(per: &[Tally]) -> Option<&Tally> {
    per.iter()
        .filter(|t| t.complete())
        .min_by(|a, b| a.total().total_cmp(&b.total()))
}

/// Drops the incomplete candidates whose lower bound exceeds the smallest
/// complete NDD (by more than [`PRUNE_MARGIN`]: sums of the same terms in
/// another order may differ in their last bits).
fn prune(per: &mut [Tally]) {
    let bound = best_complete(per).map_or(f64::INFINITY, Tally::total);
    for t in per.iter_mut().filter(|t| !t.complete()) {
        if t.partial > bound * (1.0 + PRUNE_MARGIN) {
            t.pruned = true;
        }
    }
}

/// Jobs per candidate in the first round of [`Scorer::choose`]: the nearest
/// neighbour on each side.
const FIRST_JOBS: usize = 2;

/// How the step of [`Scorer::choose`]'s later rounds grows (1, 1, 2, 3, 5,
/// 7, 11, ... jobs per survivor and round).
const STEP_GROWTH: f64 = 1.5;

/// Orders the jobs left to each survivor by the weighted divergence the
/// best complete candidate got at the same neighbour (largest first,
/// nearest among equals). Candidates of one span share their neighbours
/// (job `x` is the same position `k` in all of them), and a neighbour the
/// edit moved a lot in one candidate tends to move in the others, so the
/// lower bounds pass the best NDD after fewer jobs. Any order is exact:
/// every term is non-negative.
fn reorder(per: &mut [Tally]) {
    let Some(best) = best_complete(per) else {
        return;
    };
    let key: Vec<f64> = best
        .jobs
        .iter()
        .zip(&best.div)
        .map(|(j, d)| j.w * d)
        .collect();
    for t in per.iter_mut().filter(|t| !t.pruned && !t.complete()) {
        let jobs = &t.jobs;
        t.order[t.done..].sort_by(|&a, &b| {
            key[b]
                .total_cmp(&key[a])
                .then((jobs[a].d, a).cmp(&(jobs[b].d, b)))
        });
    }
}

/// What a model call costs beyond its rows, in padded tokens: on the CPU a
/// call of one 16-token row costs about as much as three rows of a full
/// batch (measured with the default model).
const CALL_TOKENS: usize = 32;

/// Where to cut rows of ascending `lens` into model calls: at most `batch`
/// rows each, and a new call where padding the current one up to the next
/// row's length would waste more than a call costs.
fn batch_cuts(lens: &[usize], batch: usize) -> Vec<usize> {
    let mut cuts = vec![0];
    let mut max = 0;
    for (i, &l) in lens.iter().enumerate() {
        let start = cuts[cuts.len() - 1];
        let n = i - start;
        if n > 0 && (n >= batch || n * l.saturating_sub(max) > CALL_TOKENS) {
            cuts.push(i);
            max = l;
        } else {
            max = max.max(l);
        }
    }
    if lens.len() > cuts[cuts.len() - 1] {
        cuts.push(lens.len());
    }
    cuts
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

fn best(texts: &[String], choice: Option<Choice>) -> String {
    choice
        .and_then(|c| texts.get(c.index).cloned())
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

    fn uses_detection(&self) -> bool {
        true
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
