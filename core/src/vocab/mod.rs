//! Vocabularies drawn from the data itself, released with differential
//! privacy (docs/vocabulary.md).
//!
//! SanText and CusText take their vocabulary from the task corpus, so a
//! replacement stays on topic; taking it from private data is itself a
//! release. This module makes that release differentially private and
//! keeps it as a named asset:
//!
//! - [`dpsu`]: the release, thresholded noisy counts of the distinct words
//!   of each value (differentially private set union, the baseline of
//!   Gopi et al., ICML 2020, after Korolova et al., WWW 2009);
//! - [`asset`]: a released vocabulary with its (eps, delta), saved under
//!   `<assets>/vocabularies/<name>.json`, loaded and checked by name;
//! - [`time`]: the creation time in RFC 3339 without a date library.
//!
//! The mechanisms restrict both their input and their output set to the
//! vocabulary ([`crate::mechanisms::Vocabulary::restricted`]).

pub mod asset;
pub mod dpsu;
mod time;

pub use asset::{VocabularyAsset, VOCABULARIES_DIR};
pub use dpsu::{Counter, Noise, Release, ReleaseParams};

use crate::error::{Error, Result};

/// Longest vocabulary name accepted, in bytes.
pub const MAX_NAME_BYTES: usize = 63;

/// Checks a vocabulary name: 1 to 63 ASCII letters, digits, `_` or `-`,
/// starting with a letter or digit, so that it is a file name on every
/// system and never a path.
///
/// ```
/// use dptext_core::vocab::check_name;
/// assert!(check_name("clinical_notes-2024").is_ok());
/// assert!(check_name("../etc/passwd").is_err());
/// assert!(check_name("").is_err());
/// ```
pub fn check_name(name: &str) -> Result<()> {
    let ok_char = |c: char| c.is_ascii_alphanumeric() || c == '_' || c == '-';
    let starts_well = name
        .chars()
        .next()
        .is_some_and(|c| c.is_ascii_alphanumeric());
    if name.len() > MAX_NAME_BYTES || !starts_well || !name.chars().all(ok_char) {
        return Err(Error::invalid(
            "vocabulary",
            format!(
                "{name:?} is not a vocabulary name: use 1 to {MAX_NAME_BYTES} letters, digits, '_' or '-', starting with a letter or digit"
            ),
        ));
    }
    Ok(())
}

#[cfg(test)]
mod engine_tests;
