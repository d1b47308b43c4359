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
//!
//! The module splits by job: [`scorer`] computes NDDs (batched, pruned),
//! `tally` holds a candidate's partial sums and the pruning rules,
//! [`distort`] makes candidates and keeps the winner, and `spec` holds
//! the parameters ([`NddSpec`]).

use crate::error::{Error, Result};
use crate::mlm::math;

pub mod distort;
pub mod scorer;
mod spec;
mod tally;

pub use distort::{sentences, NddDistort};
pub use scorer::{Choice, Scorer, SpanCandidates, Term, Window};
pub use spec::NddSpec;

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

/// Whether an edit of `len` tokens can be scored in a model window of
/// `max` tokens: it must leave at least two tokens of context.
fn fits_window(len: usize, max: usize) -> bool {
    max.checked_sub(len).is_some_and(|b| b >= 2)
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
    let edit = span.max(cand_len);
    let budget = fits_window(edit, max).then(|| max - edit).ok_or_else(|| {
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

#[cfg(test)]
mod tests;
