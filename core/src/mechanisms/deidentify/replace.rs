//! Entity replacement with a stated epsilon (Adelani et al. 2020; docs/mechanisms.md).
//!
//! Each span the detector finds is replaced with probability `p`, else
//! kept. The replacement never depends on the original value (only on its
//! label and, for contacts, IDs and ages, on its format: which characters
//! are digits or letters), so the lemma gives
//! `eps = max_t log((1 - p + p * pi(t)) / (p * pi(t)))` over the surrogates
//! `t` of the strategy, where `pi(t)` is `t`'s probability of being drawn.
//! It is 0 for `p = 1` and infinite for `p = 0`. Consistent replacement
//! (the same original maps to the same surrogate within a value, and across
//! values when a secret key is set) makes the replacement depend on the
//! original and voids the lemma: its cost says so.
//!
//! This file holds the strategies and the lemma; the surrogates they draw
//! are [`super::surrogates`], and the mechanism that applies them to
//! detected spans is [`super`].

use crate::error::{Error, Result};
use crate::mechanisms::check_unit;
use crate::mechanisms::surrogates::{lists, DATE_CHOICES};

/// How a span is replaced.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ReplaceStrategy {
    /// `[REDACTED]`.
    Redact,
    /// The label, e.g. `<PERSON>`.
    TypedPlaceholder,
    /// One fixed surrogate per label, e.g. every person becomes `Jane Doe`.
    NamedPlaceholder,
    /// Each word of the span replaced by a surrogate word of the label.
    WordByWord,
    /// The whole span replaced by a surrogate entity of the label.
    FullEntity,
}

impl std::str::FromStr for ReplaceStrategy {
    type Err = Error;
    fn from_str(s: &str) -> Result<Self> {
        Ok(match s.trim().to_ascii_lowercase().as_str() {
            "redact" => ReplaceStrategy::Redact,
            "typed_placeholder" => ReplaceStrategy::TypedPlaceholder,
            "named_placeholder" => ReplaceStrategy::NamedPlaceholder,
            "word_by_word" => ReplaceStrategy::WordByWord,
            "full_entity" => ReplaceStrategy::FullEntity,
            other => {
                return Err(Error::invalid(
                    "strategy",
                    format!("\"{other}\" is not one of 'redact', 'typed_placeholder', 'named_placeholder', 'word_by_word', 'full_entity'"),
                ))
            }
        })
    }
}

impl ReplaceStrategy {
    /// The name used in SQL.
    pub fn name(self) -> &'static str {
        match self {
            ReplaceStrategy::Redact => "redact",
            ReplaceStrategy::TypedPlaceholder => "typed_placeholder",
            ReplaceStrategy::NamedPlaceholder => "named_placeholder",
            ReplaceStrategy::WordByWord => "word_by_word",
            ReplaceStrategy::FullEntity => "full_entity",
        }
    }
}

/// The lemma's eps for replacement probability `p` and smallest pi(t).
pub fn lemma_eps(p: f64, min_pi: f64) -> f64 {
    if p <= 0.0 {
        return f64::INFINITY;
    }
    ((1.0 - p + p * min_pi) / (p * min_pi)).ln()
}

/// Longest format-preserving redraw [`strategy_epsilon`] accounts for, in
/// redrawn characters (digits and letters).
pub const MAX_REDRAWN_CHARS: i32 = 16;

/// The smallest pi(t) over every surrogate `strategy` can produce for any
/// label, with format-preserving redraws of up to [`MAX_REDRAWN_CHARS`]
/// letters (26 choices each; digits have 10).
pub fn strategy_min_pi(strategy: ReplaceStrategy) -> f64 {
    let l = lists();
    let redraw = (1.0 / 26.0f64).powi(MAX_REDRAWN_CHARS);
    match strategy {
        ReplaceStrategy::Redact
        | ReplaceStrategy::TypedPlaceholder
        | ReplaceStrategy::NamedPlaceholder => 1.0,
        ReplaceStrategy::WordByWord => {
            // A span of up to MAX_REDRAWN_CHARS words, each from the rarest list.
            let word = [
                l.given.min_pi(),
                l.surnames.min_pi(),
                l.cities.min_pi(),
                l.organizations.min_pi(),
                1.0 / 26.0,
            ]
            .into_iter()
            .fold(1.0, f64::min);
            word.powi(MAX_REDRAWN_CHARS).min(redraw)
        }
        ReplaceStrategy::FullEntity => [
            l.given.min_pi() * l.surnames.min_pi(),
            l.streets.min_pi() * l.cities.min_pi() / 9_999.0,
            l.cities.min_pi(),
            l.organizations.min_pi(),
            1.0 / DATE_CHOICES,
            l.given.min_pi() * l.surnames.min_pi() / 100_000.0,
            redraw,
        ]
        .into_iter()
        .fold(1.0, f64::min),
    }
}

/// The lemma's eps for `strategy` at replacement probability `p` over the
/// shipped surrogate lists: 0 at `p = 1`, infinite at `p = 0`.
pub fn strategy_epsilon(strategy: ReplaceStrategy, p: f64) -> Result<f64> {
    check_unit("p", p)?;
    Ok(lemma_eps(p, strategy_min_pi(strategy)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lemma_values() {
        assert_eq!(lemma_eps(1.0, 0.01), 0.0);
        assert_eq!(lemma_eps(0.0, 0.5), f64::INFINITY);
        let e = lemma_eps(0.5, 0.1);
        assert!((e - (0.55f64 / 0.05).ln()).abs() < 1e-12);
        // Smaller pi(t) means a larger eps.
        assert!(lemma_eps(0.9, 0.001) > lemma_eps(0.9, 0.1));
    }

    #[test]
    fn strategy_epsilon_matches_the_lemma_on_the_lists() {
        // Computed independently from the shipped files.
        let count = |t: &str| {
            t.lines()
                .filter(|l| !l.trim().is_empty() && !l.starts_with('#'))
                .count() as f64
        };
        let given = count(include_str!("surrogates/given_names.txt"));
        let surnames = count(include_str!("surrogates/surnames.txt"));
        assert_eq!(
            strategy_epsilon(ReplaceStrategy::FullEntity, 1.0).unwrap(),
            0.0
        );
        assert_eq!(
            strategy_epsilon(ReplaceStrategy::Redact, 0.0).unwrap(),
            f64::INFINITY
        );
        let p = 0.8;
        assert!(
            (strategy_epsilon(ReplaceStrategy::Redact, p).unwrap() - (1.0f64 / p).ln()).abs()
                < 1e-12
        );
        // A person is the rarest list draw; the 16-letter redraw is rarer still.
        let person = 1.0 / (given * surnames);
        assert!((lemma_eps(p, person) - ((1.0 - p + p * person) / (p * person)).ln()).abs() < 1e-9);
        let full = strategy_epsilon(ReplaceStrategy::FullEntity, p).unwrap();
        assert!(full >= lemma_eps(p, person));
        let redraw = 26f64.powi(-16);
        assert!((full - ((1.0 - p + p * redraw) / (p * redraw)).ln()).abs() < 1e-9);
        assert!(strategy_epsilon(ReplaceStrategy::FullEntity, 1.5).is_err());
    }

    #[test]
    fn strategy_names_parse() {
        assert!(
            "word_by_word".parse::<ReplaceStrategy>().is_ok()
                && "mask".parse::<ReplaceStrategy>().is_err()
        );
    }
}
