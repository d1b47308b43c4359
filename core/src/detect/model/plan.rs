//! How the model reads texts, alone or many at a time.
//!
//! Each text is cut into pieces: the whole text, and for the per-line
//! pass each line with letters (a line mostly in capitals read in title
//! case). A piece is tokenized and cut into windows of at most
//! [`WINDOW`] tokens overlapping by [`OVERLAP`]; every window is one row
//! of the model's input. The rows of every text are sorted by length and
//! sent in calls of up to the batch size rows (padded to the longest row
//! of the call, masked), so that many short values share one call instead
//! of making one or two each. Then each text is finished as if it had been
//! read alone: a piece's windows are merged in window order (each token
//! keeps the prediction of the window where it sits most centrally, the
//! earlier window on a tie), and pieces come out in a fixed order (the
//! whole text; lines longer than a window, in line order; the other lines,
//! shortest first), whatever the other texts were.

use std::borrow::Cow;
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

/// Where the call that starts at `rows[i]` ends: at most `cap` rows and
/// [`BATCH_TOKENS`] padded tokens (rows are sorted by length, so the last
/// one is the longest).
fn batch_end(rows: &[Row], i: usize, cap: usize) -> usize {
    let mut j = i + 1;
    while j < rows.len() && j - i < cap && (j + 1 - i) * (rows[j].len + 2) <= BATCH_TOKENS {
        j += 1;
    }
    j
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
        let mut rows = Vec::new();
        for (text, plan) in plans.iter().enumerate() {
            for (piece, p) in plan.iter().flatten().enumerate() {
                for (window, &(s, e)) in p.windows.iter().enumerate() {
                    rows.push(Row {
                        text,
                        piece,
                        window,
                        len: e - s,
                    });
                }
            }
        }
        // Similar lengths together: less padding. Stable, so that equal
        // lengths keep the texts' order.
        rows.sort_by_key(|r| r.len);
        let cap = self.batch.load(Ordering::Relaxed).max(1);
        let mut i = 0;
        while i < rows.len() {
            let j = batch_end(&rows, i, cap);
            // Rows of a text that failed already are not run.
            let live: Vec<Row> = rows[i..j]
                .iter()
                .copied()
                .filter(|r| plans[r.text].is_ok())
                .collect();
            if live.is_empty() {
                i = j;
                continue;
            }
            let out = crate::cancel::check().and_then(|()| {
                let windows: Vec<&[u32]> = live
                    .iter()
                    .filter_map(|r| {
                        let p = plans[r.text].as_ref().ok()?.get(r.piece)?;
                        let (s, e) = *p.windows.get(r.window)?;
                        p.ids.get(s..e)
                    })
                    .collect();
                self.classify_batch(&windows)
            });
            match out {
                Ok(preds) => {
                    for (r, pred) in live.iter().zip(preds) {
                        if let Ok(pieces) = &mut plans[r.text] {
                            pieces[r.piece].preds[r.window] = pred;
                        }
                    }
                }
                Err(e) => {
                    let cancelled = matches!(e, crate::Error::Cancelled);
                    // A cancel stops every text still waiting for a row.
                    let failed = if cancelled { &rows[i..] } else { &live[..] };
                    for r in failed {
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
        let rows: Vec<Row> = [3, 3, 5, 9, 500, 510, 510]
            .iter()
            .map(|&len| Row {
                text: 0,
                piece: 0,
                window: 0,
                len,
            })
            .collect();
        assert_eq!(batch_end(&rows, 0, 4), 4);
        assert_eq!(batch_end(&rows, 0, 1), 1);
        // 16 rows of 512 padded tokens would be 8,192: all three fit.
        assert_eq!(batch_end(&rows, 4, 32), 7);
    }
}
