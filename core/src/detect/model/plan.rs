//! How the model reads texts, alone or many at a time.
//!
//! Each text is cut into pieces: the whole text, and for the per-line
//! pass each line with letters (a line mostly in capitals read in title
//! case). A piece is tokenized and cut into windows of at most
//! [`WINDOW`] tokens overlapping by [`OVERLAP`]; every window is one row
//! of the model's input. Rows with the same tokens run once (a one-line
//! value is read twice, as a text and as a line; headings recur from note
//! to note). The rows of every text are sorted by length and sent in calls
//! of up to the batch size rows of similar lengths (padded to the longest
//! row of the call, masked), so that many short values share one call
//! instead of making one or two each. Then each text is finished as if it had been
//! read alone: a piece's windows are merged in window order (each token
//! keeps the prediction of the window where it sits most centrally, the
//! earlier window on a tie), and pieces come out in a fixed order (the
//! whole text; lines longer than a window, in line order; the other lines,
//! shortest first), whatever the other texts were.

use std::borrow::Cow;
use std::collections::hash_map::{Entry, HashMap};
use std::sync::atomic::Ordering;

use super::{title_case, NerModel, BATCH_TOKENS, OVERLAP, WINDOW};
use crate::detect::Span;
use crate::error::Result;

/// Which passes the model makes over a text.
#[derive(Debug, Clone, Copy)]
pub(super) struct Passes {
    /// The whole text, in windows.
    pub(super) windows: bool,
    /// Each line on its own.
    pub(super) lines: bool,
}

/// One stretch of a text as the model reads it.
struct Piece<'a> {
    /// Byte offset of `read` in the text.
    base: usize,
    /// What the model reads: the text, a line, or a line in title case
    /// (byte for byte as long, so offsets carry over).
    read: Cow<'a, str>,
    ids: Vec<u32>,
    offsets: Vec<(usize, usize)>,
    /// Token ranges of the windows, in order.
    windows: Vec<(usize, usize)>,
    /// Each window's per-token (class, probability), once its row has run.
    preds: Vec<Vec<(usize, f32)>>,
}

/// Tokens a row may be longer than a quarter over its call's first row.
const PAD_SLACK: usize = 8;

/// One row of the model's input: window `window` of piece `piece` of text
/// `text`, `len` tokens.
#[derive(Clone, Copy)]
struct Row {
    text: usize,
    piece: usize,
    window: usize,
    len: usize,
}

/// Token ranges of the windows over `n` tokens.
fn windows(n: usize) -> Vec<(usize, usize)> {
    let mut out = Vec::new();
    let mut start = 0;
    loop {
        let end = (start + WINDOW).min(n);
        out.push((start, end));
        if end == n {
            return out;
        }
        start = end - OVERLAP;
    }
}

/// Where the call that starts at row `i` ends, rows given by their
/// lengths: at most `cap` rows, [`BATCH_TOKENS`] padded tokens, and rows of
/// similar lengths: none more than a quarter (plus [`PAD_SLACK`] tokens)
/// longer than the first, since on a CPU the padding costs as much as real
/// tokens (a note's whole-text window padded three of its lines to 510
/// tokens). Rows are sorted by length, so the last one is the longest.
fn batch_end(lens: &[usize], i: usize, cap: usize) -> usize {
    let longest = lens[i] + lens[i] / 4 + PAD_SLACK;
    let mut j = i + 1;
    while j < lens.len()
        && j - i < cap
        && lens[j] <= longest
        && (j + 1 - i) * (lens[j] + 2) <= BATCH_TOKENS
    {
        j += 1;
    }
    j
}

/// The token ids of a row.
fn window<'p>(plans: &'p [Result<Vec<Piece>>], r: &Row) -> Option<&'p [u32]> {
    let p = plans[r.text].as_ref().ok()?.get(r.piece)?;
    let (s, e) = *p.windows.get(r.window)?;
    p.ids.get(s..e)
}

/// Every row of the planned texts, those with the same tokens in one group
/// that runs once (a one-line value's line is its whole text; headings and
/// repeated values recur across texts), groups sorted by length so that
/// similar lengths share calls (stable: equal lengths keep the texts' order).
fn same_tokens(plans: &[Result<Vec<Piece>>]) -> Vec<Vec<Row>> {
    let mut groups: Vec<Vec<Row>> = Vec::new();
    let mut seen: HashMap<&[u32], usize> = HashMap::new();
    for (text, plan) in plans.iter().enumerate() {
        for (piece, p) in plan.iter().flatten().enumerate() {
            for (window, &(s, e)) in p.windows.iter().enumerate() {
                let row = Row {
                    text,
                    piece,
                    window,
                    len: e - s,
                };
                match seen.entry(&p.ids[s..e]) {
                    Entry::Occupied(g) => groups[*g.get()].push(row),
                    Entry::Vacant(v) => {
                        v.insert(groups.len());
                        groups.push(vec![row]);
                    }
                }
            }
        }
    }
    groups.sort_by_key(|g| g[0].len);
    groups
}

impl NerModel {
    /// The model's spans of each of `texts` with the given passes (the
    /// whole-text windows' spans first, then the lines'), the rows of all
    /// texts sharing model calls. A text whose tokenizing fails, or whose
    /// rows were in a failed call, gets that error; the others go on. A
    /// cancel stops every text not finished yet.
    pub(super) fn read_many(&self, texts: &[&str], passes: Passes) -> Vec<Result<Vec<Span>>> {
        let mut plans: Vec<Result<Vec<Piece>>> =
            texts.iter().map(|t| self.plan(t, passes)).collect();
        let groups = same_tokens(&plans);
        let lens: Vec<usize> = groups.iter().map(|g| g[0].len).collect();
        let cap = self.batch.load(Ordering::Relaxed).max(1);
        let mut i = 0;
        while i < groups.len() {
            let j = batch_end(&lens, i, cap);
            // Each group run once, for a member whose text has not failed.
            let live: Vec<(&[Row], Row)> = groups[i..j]
                .iter()
                .filter_map(|g| Some((g.as_slice(), *g.iter().find(|r| plans[r.text].is_ok())?)))
                .collect();
            if live.is_empty() {
                i = j;
                continue;
            }
            let out = crate::cancel::check().and_then(|()| {
                let windows: Vec<&[u32]> =
                    live.iter().filter_map(|(_, r)| window(&plans, r)).collect();
                self.classify_batch(&windows)
            });
            match out {
                Ok(preds) => {
                    for ((group, _), pred) in live.iter().zip(preds) {
                        for r in *group {
                            if let Ok(pieces) = &mut plans[r.text] {
                                pieces[r.piece].preds[r.window] = pred.clone();
                            }
                        }
                    }
                }
                Err(e) => {
                    let cancelled = matches!(e, crate::Error::Cancelled);
                    // A cancel stops every text still waiting for a row.
                    let failed: Vec<&[Row]> = if cancelled {
                        groups[i..].iter().map(Vec::as_slice).collect()
                    } else {
                        live.iter().map(|(g, _)| *g).collect()
                    };
                    for r in failed.into_iter().flatten() {
                        if plans[r.text].is_ok() {
                            plans[r.text] = Err(e.again());
                        }
                    }
                    if cancelled {
                        break;
                    }
                }
            }
            i = j;
        }
        plans
            .into_iter()
            .map(|plan| Ok(plan?.into_iter().flat_map(|p| self.finish(p)).collect()))
            .collect()
    }

    /// The pieces of `text` the passes read, in output order.
    fn plan<'a>(&self, text: &'a str, passes: Passes) -> Result<Vec<Piece<'a>>> {
        crate::cancel::check()?;
        let mut pieces = Vec::new();
        if passes.windows {
            pieces.extend(self.piece(0, Cow::Borrowed(text))?);
        }
        if !passes.lines {
            return Ok(pieces);
        }
        let mut short = Vec::new();
        let mut at = 0;
        for line in text.split_inclusive('\n') {
            let start = at;
            at += line.len();
            let letters = line.chars().filter(|c| c.is_alphabetic()).count();
            if letters < 2 {
                continue;
            }
            crate::cancel::check()?;
            let upper = line.chars().filter(|c| c.is_uppercase()).count();
            let read = if upper * 10 >= letters * 6 && letters >= 4 {
                Cow::Owned(title_case(line))
            } else {
                Cow::Borrowed(line)
            };
            match self.piece(start, read)? {
                // A long line is windowed on its own.
                Some(p) if p.windows.len() > 1 => pieces.push(p),
                Some(p) => short.push(p),
                None => {}
            }
        }
        short.sort_by_key(|p| p.ids.len());
        pieces.extend(short);
        Ok(pieces)
    }

    /// `read` (at `base` in its text) tokenized and windowed; `None` when
    /// it has no token.
    fn piece<'a>(&self, base: usize, read: Cow<'a, str>) -> Result<Option<Piece<'a>>> {
        let (ids, offsets) = self.tokens(&read)?;
        if ids.is_empty() {
            return Ok(None);
        }
        let windows = windows(ids.len());
        Ok(Some(Piece {
            base,
            read,
            preds: vec![Vec::new(); windows.len()],
            ids,
            offsets,
            windows,
        }))
    }

    /// A piece's spans, offsets into its text: its windows merged, each
    /// token keeping the prediction of the window where it sits most
    /// centrally.
    fn finish(&self, p: Piece) -> Vec<Span> {
        // For each token: (class, probability, distance from its window's edge).
        let mut best: Vec<(usize, f32, usize)> = vec![(0, 0.0, 0); p.ids.len()];
        for (&(start, end), pred) in p.windows.iter().zip(&p.preds) {
            for (i, &(class, prob)) in pred.iter().enumerate() {
                let centrality = i.min(end - start - 1 - i) + 1;
                if let Some(slot) = best.get_mut(start + i) {
                    if centrality > slot.2 {
                        *slot = (class, prob, centrality);
                    }
                }
            }
        }
        let best: Vec<(usize, f32)> = best.into_iter().map(|(c, prob, _)| (c, prob)).collect();
        let mut spans = self.assemble(&p.read, &p.offsets, &best);
        for s in &mut spans {
            s.start += p.base;
            s.end += p.base;
        }
        spans
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn windows_cover_every_token_and_overlap() {
        assert_eq!(windows(1), [(0, 1)]);
        assert_eq!(windows(WINDOW), [(0, WINDOW)]);
        let w = windows(1500);
        assert_eq!(w.first().map(|w| w.0), Some(0));
        assert_eq!(w.last().map(|w| w.1), Some(1500));
        for pair in w.windows(2) {
            assert_eq!(pair[0].1 - pair[1].0, OVERLAP);
        }
    }

    #[test]
    fn calls_hold_at_most_the_batch_and_the_token_budget() {
        let rows = [3, 3, 5, 9, 12, 40, 500, 510, 510];
        assert_eq!(batch_end(&rows, 0, 4), 4);
        assert_eq!(batch_end(&rows, 0, 1), 1);
        // 12 is more than 3 + 3/4 + 8 tokens: a new call.
        assert_eq!(batch_end(&rows, 0, 32), 4);
        // Lines are not padded to a window's length.
        assert_eq!(batch_end(&rows, 5, 32), 6);
        // 16 rows of 512 padded tokens would be 8,192: all three fit.
        assert_eq!(batch_end(&rows, 6, 32), 9);
        let many = [510; 20];
        assert_eq!(batch_end(&many, 0, 32), 16);
    }
}
