//! NDD scoring: every masked copy of every candidate of every span of a
//! window goes to the model in batches ([`Scorer::score`]), or only as many
//! as it takes to find each span's winner ([`Scorer::choose`]).

use super::tally::{prune, reorder, Job, Tally, FIRST_JOBS, STEP_GROWTH};
use super::{check_mu, divergence, window, Divergence};
use crate::error::{Error, Result};
use crate::mlm::{math, MaskedLm, Row};

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

    pub(super) fn masked_row(&self, ids: &[u32], k: usize) -> Row {
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
