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
//! This file holds the surrogates, the strategies and the lemma; the
//! mechanism that applies them to detected spans is [`super::deidentify`].

use std::collections::HashMap;
use std::sync::OnceLock;

use rand::{Rng, RngCore};

use crate::detect::Label;
use crate::error::{Error, Result};
use crate::mechanisms::check_unit;

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

/// A surrogate list: entries and their draw probabilities (relative
/// frequency in the list).
pub(crate) struct List {
    entries: Vec<&'static str>,
    /// The smallest pi(t) of the list, computed once when parsed.
    min_pi: f64,
}

impl List {
    fn parse(text: &'static str) -> List {
        let entries: Vec<&'static str> = text
            .lines()
            .map(str::trim)
            .filter(|l| !l.is_empty() && !l.starts_with('#'))
            .collect();
        let mut counts: HashMap<&str, usize> = HashMap::new();
        for e in &entries {
            *counts.entry(e).or_default() += 1;
        }
        let min = counts.values().copied().min().unwrap_or(1);
        let min_pi = min as f64 / entries.len().max(1) as f64;
        List { entries, min_pi }
    }

    fn draw(&self, rng: &mut dyn RngCore) -> &'static str {
        self.entries[rng.random_range(0..self.entries.len())]
    }

    /// The smallest pi(t) of the list.
    pub(crate) fn min_pi(&self) -> f64 {
        self.min_pi
    }
}

pub(crate) struct Lists {
    pub(crate) given: List,
    pub(crate) surnames: List,
    pub(crate) cities: List,
    pub(crate) streets: List,
    pub(crate) organizations: List,
}

pub(crate) fn lists() -> &'static Lists {
    static L: OnceLock<Lists> = OnceLock::new();
    L.get_or_init(|| Lists {
        given: List::parse(include_str!("surrogates/given_names.txt")),
        surnames: List::parse(include_str!("surrogates/surnames.txt")),
        cities: List::parse(include_str!("surrogates/cities.txt")),
        streets: List::parse(include_str!("surrogates/streets.txt")),
        organizations: List::parse(include_str!("surrogates/organizations.txt")),
    })
}

use crate::mechanisms::dateshift::MONTHS;
/// Surrogate dates are drawn uniformly from 1940-01-01 .. 2025-12-28 (days 1-28).
const DATE_CHOICES: f64 = (2025 - 1940 + 1) as f64 * 12.0 * 28.0;

/// Replaces every ASCII digit with a uniform digit and every ASCII letter
/// with a uniform letter of the same case; keeps everything else (the
/// format). Returns the text and the probability of that exact draw.
fn redraw_format(original: &str, rng: &mut dyn RngCore) -> (String, f64) {
    let mut pi = 1.0;
    let s = original
        .chars()
        .map(|c| {
            if c.is_ascii_digit() {
                pi /= 10.0;
                char::from(b'0' + rng.random_range(0..10u8))
            } else if c.is_ascii_lowercase() {
                pi /= 26.0;
                char::from(b'a' + rng.random_range(0..26u8))
            } else if c.is_ascii_uppercase() {
                pi /= 26.0;
                char::from(b'A' + rng.random_range(0..26u8))
            } else {
                c
            }
        })
        .collect();
    (s, pi)
}

/// A surrogate for a whole span of `label`; with its pi(t) (the smallest
/// possible for the label's list, used for the lemma's max). Also the
/// phrase bank of substitutive NDD distortion.
pub fn full_entity(label: Label, original: &str, rng: &mut dyn RngCore) -> (String, f64) {
    let l = lists();
    match label {
        Label::Person => (
            format!("{} {}", l.given.draw(rng), l.surnames.draw(rng)),
            l.given.min_pi() * l.surnames.min_pi(),
        ),
        Label::Location => {
            if original.chars().next().is_some_and(|c| c.is_ascii_digit()) {
                // Looks like a street address: number, street, city.
                let n = rng.random_range(1..10_000u32);
                (
                    format!("{n} {}, {}", l.streets.draw(rng), l.cities.draw(rng)),
                    l.streets.min_pi() * l.cities.min_pi() / 9_999.0,
                )
            } else {
                (l.cities.draw(rng).to_string(), l.cities.min_pi())
            }
        }
        Label::Organization => (
            l.organizations.draw(rng).to_string(),
            l.organizations.min_pi(),
        ),
        Label::Date => {
            let (y, m, d) = (
                rng.random_range(1940..=2025u32),
                rng.random_range(0..12usize),
                rng.random_range(1..=28u32),
            );
            (format!("{} {d}, {y}", MONTHS[m]), 1.0 / DATE_CHOICES)
        }
        Label::Contact if original.contains('@') => {
            let n = rng.random_range(0..100_000u32);
            (
                format!(
                    "{}.{}{n}@example.org",
                    l.given.draw(rng).to_lowercase(),
                    l.surnames.draw(rng).to_lowercase()
                ),
                l.given.min_pi() * l.surnames.min_pi() / 100_000.0,
            )
        }
        Label::Contact | Label::Id | Label::Age => redraw_format(original, rng),
    }
}

/// One surrogate word for a word of a span of `label`.
pub(crate) fn surrogate_word(
    label: Label,
    word: &str,
    index: usize,
    rng: &mut dyn RngCore,
) -> (String, f64) {
    let l = lists();
    match label {
        Label::Person if index == 0 => (l.given.draw(rng).to_string(), l.given.min_pi()),
        Label::Person => (l.surnames.draw(rng).to_string(), l.surnames.min_pi()),
        Label::Location if word.chars().all(|c| c.is_ascii_digit()) => redraw_format(word, rng),
        Label::Location => (l.cities.draw(rng).to_string(), l.cities.min_pi()),
        Label::Organization => {
            let o = l.organizations.draw(rng);
            let w = o.split(' ').next().unwrap_or(o);
            (w.to_string(), l.organizations.min_pi())
        }
        _ => redraw_format(word, rng),
    }
}

pub(crate) fn named(label: Label) -> &'static str {
    match label {
        Label::Person => "Jane Doe",
        Label::Location => "Springfield",
        Label::Organization => "General Hospital",
        Label::Date => "January 1, 2000",
        Label::Age => "90",
        Label::Contact => "contact@example.org",
        Label::Id => "000-00-0000",
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
    use rand::SeedableRng;
    use rand_chacha::ChaCha20Rng;

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
    fn surrogates_keep_the_labels_shape() {
        let mut rng = ChaCha20Rng::seed_from_u64(6);
        for _ in 0..50 {
            let (person, _) = full_entity(Label::Person, "John Smith", &mut rng);
            assert_eq!(person.split(' ').count(), 2, "{person}");
            let (email, _) = full_entity(Label::Contact, "a@b.org", &mut rng);
            assert!(email.contains('@') && email.ends_with(".org"), "{email}");
            let (date, _) = full_entity(Label::Date, "May 3, 2024", &mut rng);
            assert!(MONTHS.iter().any(|m| date.starts_with(m)), "{date}");
            let (id, _) = full_entity(Label::Id, "123-45-6789", &mut rng);
            assert!(
                id.len() == 11 && &id[3..4] == "-" && &id[6..7] == "-",
                "{id}"
            );
            let (addr, _) = full_entity(Label::Location, "42 Oak Street", &mut rng);
            assert!(
                addr.chars().next().is_some_and(|c| c.is_ascii_digit()),
                "{addr}"
            );
        }
    }

    #[test]
    fn format_redraw_keeps_the_shape_only() {
        let mut rng = ChaCha20Rng::seed_from_u64(2);
        let (s, pi) = redraw_format("(555) 123-4567", &mut rng);
        assert_eq!(s.len(), 14);
        assert_eq!(&s[0..1], "(");
        assert_eq!(&s[9..10], "-");
        assert!((pi - 1e-10).abs() < 1e-20);
        assert!(
            "word_by_word".parse::<ReplaceStrategy>().is_ok()
                && "mask".parse::<ReplaceStrategy>().is_err()
        );
    }
}
