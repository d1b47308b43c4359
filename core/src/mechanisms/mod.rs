//! The sanitization mechanisms, all behind one trait.
//!
//! A [`Mechanism`] takes a text and a random source and returns the
//! sanitized text with its [`Cost`]. [`MechanismSpec`] (`spec`) parses a
//! mechanism name plus JSON parameters (what SQL's `sanitize(t, mechanism,
//! params)` receives) and validates them before any text is touched; each
//! mechanism's own parameters are a struct beside it ([`SanTextSpec`],
//! [`SanTextPlusSpec`], [`CusTextSpec`], [`DeidentifySpec`], [`NddSpec`]),
//! and the mechanism is built from that struct whole.

/// `FromStr` (case-insensitive, an error naming the parameter and the
/// allowed values) and `name()` for a parameter enum.
macro_rules! named_enum {
    ($t:ident, $param:literal, $($name:literal => $v:ident),+) => {
        impl std::str::FromStr for $t {
            type Err = $crate::error::Error;
            fn from_str(s: &str) -> $crate::error::Result<Self> {
                match s.trim().to_ascii_lowercase().as_str() {
                    $($name => Ok($t::$v),)+
                    other => Err($crate::error::Error::invalid(
                        $param,
                        format!("\"{other}\" is not one of {}", [$(concat!("'", $name, "'")),+].join(", ")),
                    )),
                }
            }
        }
        impl $t {
            /// The name used in SQL and parameters.
            pub fn name(self) -> &'static str {
                match self { $($t::$v => $name,)+ }
            }
        }
    };
}

pub mod cache;
pub mod chain;
pub mod custext;
pub mod deidentify;
mod exponential;
pub mod ndd;
mod params;
pub mod registry;
mod santext;
mod spec;
mod vocabulary;
mod words;

#[cfg(test)]
mod params_golden;
#[cfg(test)]
mod tests;

pub use custext::{CusText, CusTextSpec, MAX_K};
// Entity replacement's parts, where they were before it had a folder.
pub use deidentify::{dateshift, operators, replace, surrogates};
pub use exponential::ExpSampler;
pub use ndd::NddSpec;
pub use operators::DeidentifySpec;
pub use params::parse_params;
pub use registry::MECHANISMS;
pub use santext::{SanText, SanTextPlus, SanTextPlusSpec, SanTextSpec};
pub use spec::MechanismSpec;
pub use vocabulary::Vocabulary;
pub use words::Words;

use std::ops::Range;

use rand::RngCore;
use serde::{Deserialize, Serialize};

use crate::cost::Cost;
use crate::error::{Error, Result};

/// A sanitized text and what producing it cost.
#[derive(Debug, Clone, Serialize)]
pub struct Sanitized {
    /// The sanitized text.
    pub text: String,
    /// Privacy spent on it.
    pub cost: Cost,
    /// Byte ranges of `text`, sorted and disjoint, that a later stage of a
    /// chain leaves alone: the spans a detection-based mechanism replaced
    /// (surrogates, shifted dates, redactions) and the ranges it was asked
    /// to keep, where they moved to. Empty for the word mechanisms.
    #[serde(skip)]
    pub protected: Vec<Range<usize>>,
}

/// Where byte offset `at` of a text moved to after `edits` (each an input
/// range and the output range that replaced it, in text order, disjoint)
/// rewrote parts of it; `at` is outside every edited input range, or at
/// one's boundary.
pub fn moved(at: usize, edits: &[(Range<usize>, Range<usize>)]) -> usize {
    let mut shift: isize = 0;
    for (i, o) in edits {
        if i.end > at {
            break;
        }
        shift += o.len() as isize - i.len() as isize;
    }
    at.checked_add_signed(shift).unwrap_or(0)
}

/// True when `span` overlaps one of `ranges`.
pub fn overlaps(span: &Range<usize>, ranges: &[Range<usize>]) -> bool {
    ranges
        .iter()
        .any(|r| r.start < span.end && span.start < r.end)
}

/// `ranges` (input offsets, outside every edit) where `edits` moved them,
/// with the output ranges of the edits that `replaced` marks, sorted.
pub fn protected_after(
    ranges: &[Range<usize>],
    edits: &[(Range<usize>, Range<usize>)],
    replaced: &[bool],
) -> Vec<Range<usize>> {
    let mut out: Vec<Range<usize>> = ranges
        .iter()
        .map(|r| moved(r.start, edits)..moved(r.end, edits))
        .chain(
            edits
                .iter()
                .zip(replaced)
                .filter(|(_, &r)| r)
                .map(|((_, o), _)| o.clone()),
        )
        .filter(|r| !r.is_empty())
        .collect();
    out.sort_by_key(|r| r.start);
    out
}

/// A randomized text-to-text function with a privacy cost.
pub trait Mechanism: Send + Sync {
    /// Short name (`santext`, `santext_plus`, ...).
    fn name(&self) -> &'static str;
    /// Canonical parameter string: part of the keyed-randomness context, so
    /// two calls with different parameters never share a random stream.
    fn params(&self) -> String;
    /// True for mechanisms that run detection (or another model) over the
    /// whole text: the engine holds their inputs to `max_detect_bytes`.
    fn uses_detection(&self) -> bool {
        false
    }
    /// What this mechanism's parameters promise that only a secret key can
    /// deliver (a rule `GROUPED BY` a column: one date shift per group), if
    /// anything: [`crate::Engine::run`] refuses other random modes rather
    /// than break the promise silently.
    fn needs_key(&self) -> Option<&'static str> {
        None
    }
    /// Sanitizes `text` with randomness from `rng`, drawn in the random
    /// mode `mode`: mechanisms that derive streams of their own from the
    /// mode (CusText's dataset level, date shifts of a group under a key)
    /// read it; the others draw from `rng` alone.
    fn sanitize(
        &self,
        text: &str,
        rng: &mut dyn RngCore,
        mode: &crate::rng::RandomMode,
    ) -> Result<Sanitized>;

    /// [`Mechanism::sanitize_many`] in a chain after a stage that
    /// replaced spans: `keep[i]` (sorted, disjoint byte ranges of value
    /// `i`) is what earlier stages wrote, which this stage leaves as it is.
    /// Mechanisms that detect spans override it to drop the spans that
    /// overlap a kept range; the chain gives word mechanisms only the text
    /// between kept ranges, and never calls this for them. Each output's
    /// `protected` says where the kept ranges moved, with this stage's own
    /// replacements.
    fn sanitize_many_keeping(
        &self,
        values: &mut [(&str, &mut dyn RngCore)],
        keep: &[Vec<Range<usize>>],
        mode: &crate::rng::RandomMode,
    ) -> Vec<Result<Sanitized>> {
        let _ = keep;
        self.sanitize_many(values, mode)
    }

    /// [`Mechanism::sanitize`] of several values, each with its own
    /// random source, results in order; one value's error leaves the others
    /// alone. Mechanisms that run detection override it to share the
    /// model's calls among the values; the outputs stay those of
    /// `sanitize` value by value.
    fn sanitize_many(
        &self,
        values: &mut [(&str, &mut dyn RngCore)],
        mode: &crate::rng::RandomMode,
    ) -> Vec<Result<Sanitized>> {
        values
            .iter_mut()
            .map(|(text, rng)| self.sanitize(text, &mut **rng, mode))
            .collect()
    }
}

/// Which embedding set a word mechanism uses.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, Default)]
#[serde(rename_all = "lowercase")]
pub enum EmbeddingChoice {
    /// GloVe 6B 50d words (default).
    #[default]
    Glove,
    /// The WordPiece vocabulary of all-MiniLM-L6-v2 (30,522 x 384).
    Wordpiece,
}

impl EmbeddingChoice {
    /// The name used in SQL and parameters.
    pub fn name(self) -> &'static str {
        match self {
            EmbeddingChoice::Glove => "glove",
            EmbeddingChoice::Wordpiece => "wordpiece",
        }
    }
}

impl std::str::FromStr for EmbeddingChoice {
    type Err = Error;
    fn from_str(s: &str) -> Result<Self> {
        match s.trim().to_ascii_lowercase().as_str() {
            "glove" => Ok(EmbeddingChoice::Glove),
            "wordpiece" => Ok(EmbeddingChoice::Wordpiece),
            other => Err(Error::invalid(
                "embedding",
                format!("\"{other}\" is not one of 'glove', 'wordpiece'"),
            )),
        }
    }
}

/// Checks that eps is a finite number > 0 (error names the parameter).
pub fn check_eps(eps: f64) -> Result<()> {
    if eps.is_nan() {
        return Err(Error::invalid("eps", "must be a number > 0, got NaN"));
    }
    if !eps.is_finite() {
        return Err(Error::invalid("eps", "must be finite"));
    }
    if eps <= 0.0 {
        return Err(Error::invalid("eps", format!("must be > 0, got {eps}")));
    }
    Ok(())
}

/// Checks that a probability or fraction is in [0, 1] (error names it).
pub fn check_unit(name: &'static str, v: f64) -> Result<()> {
    if !(0.0..=1.0).contains(&v) {
        return Err(Error::invalid(name, format!("must be in [0, 1], got {v}")));
    }
    Ok(())
}
