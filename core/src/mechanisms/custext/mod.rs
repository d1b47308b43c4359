//! CusText (Chen et al., Alg. 1, Eq. 3-9; docs/mechanisms.md).
//!
//! Every input token `x` gets a customized output set `f_map(x)` of `K`
//! tokens near it (itself included), built once per vocabulary by Alg. 1
//! under one of three strategies:
//!
//! - `aggressive`: each `x` gets its own K nearest tokens;
//! - `balanced` (default): the K nearest set of `x` is also assigned to
//!   those of its members that have no set yet;
//! - `conservative`: balanced, and the members are removed from the pool of
//!   outputs, so output sets are pairwise disjoint.
//!
//! A token is replaced by `y` in `f_map(x)` with probability
//! `exp(eps * u(x, y) / 2) / sum_y' exp(eps * u(x, y') / 2)`, where the score
//! `u` is `1 - ` the min-max normalised Euclidean distance (Eq. 4-5) or the
//! min-max normalised cosine similarity (Eq. 7) over `f_map(x)`: sensitivity
//! 1, so each replacement is eps-DP among the inputs that share an output
//! set.
//!
//! The mapping costs one exact K-nearest-neighbour search per token over the
//! vocabulary (all cores); [`Mapping::load_or_build`] caches it on disk.//!
//! The module splits by job: [`mapping`] builds, caches and samples
//! `f_map` (`knn` holds its nearest-neighbour search), [`mechanism`] is the
//! [`CusText`] mechanism that applies it to text, and `spec` its
//! parameters ([`CusTextSpec`]).

mod knn;
pub mod mapping;
pub mod mechanism;
mod spec;

pub use mapping::{cache_file, Mapping};
pub use mechanism::CusText;
pub use spec::{CusTextSpec, MAX_K};

/// The stopwords CusText+ keeps (one a line, `#` comments).
pub const STOPWORDS: &str = include_str!("../stopwords.txt");

/// How output sets are assigned (Alg. 1).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum MappingStrategy {
    /// Each token its own K nearest.
    Aggressive,
    /// K nearest of x also given to its members without a set.
    Balanced,
    /// Balanced, with members removed from the pool: disjoint sets.
    Conservative,
}

/// The similarity the score function is built from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Metric {
    /// Euclidean distance, Eq. 4-5.
    Euclidean,
    /// Cosine similarity, Eq. 7.
    Cosine,
}

/// Which repeats share one draw.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Level {
    /// Every occurrence drawn afresh.
    Token,
    /// Repeats of a token inside one value get the same output.
    Record,
    /// Repeats across all values get the same output (needs a key or seed).
    Dataset,
}

named_enum!(MappingStrategy, "mapping", "aggressive" => Aggressive, "balanced" => Balanced, "conservative" => Conservative);
named_enum!(Metric, "metric", "euclidean" => Euclidean, "cosine" => Cosine);
named_enum!(Level, "level", "token" => Token, "record" => Record, "dataset" => Dataset);

#[cfg(test)]
mod tests;
