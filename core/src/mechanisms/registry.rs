//! The names of the mechanisms: a leaf module, so that the crate's error
//! type can list them without importing the mechanisms themselves.

/// Every mechanism a rule, `sanitize()` or the CLI may name, in the order
/// the documents list them: the one list that error messages,
/// `dptext_info()` and the front ends read (a test checks that each parses
/// under its name, and that [`super::MechanismSpec::parse`] knows no other).
/// `chain` is not among them: chains are written with `THEN`.
pub const MECHANISMS: &[&str] = &["santext", "santext_plus", "custext", "deidentify", "ndd"];
