//! Surrogates for entity replacement: the shipped lists (the `.txt` files
//! beside this one, each entry drawn with its relative frequency `pi(t)`),
//! whole-entity and word-by-word draws per label, format-preserving redraws
//! of contacts, IDs and ages, and the fixed named placeholders. Every draw
//! returns the `pi(t)` the lemma needs ([`super::replace`]); none depends
//! on the original value beyond its label and format.

use std::collections::HashMap;
use std::sync::OnceLock;

use rand::{Rng, RngCore};

use crate::detect::Label;
use crate::mechanisms::dateshift::MONTHS;

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
        given: List::parse(include_str!("given_names.txt")),
        surnames: List::parse(include_str!("surnames.txt")),
        cities: List::parse(include_str!("cities.txt")),
        streets: List::parse(include_str!("streets.txt")),
        organizations: List::parse(include_str!("organizations.txt")),
    })
}

/// Surrogate dates are drawn uniformly from 1940-01-01 .. 2025-12-28 (days 1-28).
pub(crate) const DATE_CHOICES: f64 = (2025 - 1940 + 1) as f64 * 12.0 * 28.0;

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

/// The one fixed surrogate of `label` (strategy `named_placeholder`).
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

#[cfg(test)]
mod tests {
    use super::*;
    use rand::SeedableRng;
    use rand_chacha::ChaCha20Rng;

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
    }
}
