//! CusText's parameters: JSON keys and defaults, checks, canonical JSON and
//! guarantee.

use serde::Deserialize;

use super::{Level, MappingStrategy, Metric};
use crate::cost::Guarantee;
use crate::error::{Error, Result};
use crate::mechanisms::check_eps;
use crate::mechanisms::params::read;
use crate::mechanisms::words::Words;

/// Largest accepted CusText K.
pub const MAX_K: usize = 2000;

/// CusText's parameters.
#[derive(Debug, Clone, PartialEq)]
pub struct CusTextSpec {
    /// Privacy parameter (> 0).
    pub eps: f64,
    /// Output set size.
    pub k: usize,
    /// Mapping strategy of Alg. 1.
    pub mapping: MappingStrategy,
    /// Score metric.
    pub metric: Metric,
    /// Which repeats share a draw.
    pub level: Level,
    /// Keep the shipped stopwords unchanged (CusText+).
    pub keep_stopwords: bool,
    /// The words drawn from.
    pub words: Words,
}

/// CusText's JSON keys (`eps` required) and their defaults.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct CusTextParams {
    eps: f64,
    #[serde(default = "default_k")]
    k: i64,
    #[serde(default)]
    mapping: Option<String>,
    #[serde(default)]
    metric: Option<String>,
    #[serde(default)]
    level: Option<String>,
    #[serde(default = "default_true")]
    keep_stopwords: bool,
    #[serde(default)]
    embedding: Option<String>,
    #[serde(default)]
    vocabulary: Option<String>,
}

/// Default K, the paper's setting.
fn default_k() -> i64 {
    20
}

fn default_true() -> bool {
    true
}

impl CusTextSpec {
    /// A CusText spec from its SQL-level parameters (enums by name, `k` as
    /// SQL passes it), not yet validated.
    pub fn new(
        eps: f64,
        k: i64,
        mapping: &str,
        metric: &str,
        level: &str,
        keep_stopwords: bool,
        embedding: &str,
    ) -> Result<Self> {
        Ok(CusTextSpec {
            eps,
            k: usize::try_from(k)
                .ok()
                .filter(|k| (1..=MAX_K).contains(k))
                .ok_or_else(|| Error::invalid("k", format!("must be in [1, {MAX_K}], got {k}")))?,
            mapping: mapping.parse()?,
            metric: metric.parse()?,
            level: level.parse()?,
            keep_stopwords,
            words: Words::parse(Some(embedding), None)?,
        })
    }

    /// The spec of CusText's JSON parameters (not yet validated).
    pub(in crate::mechanisms) fn parse(params: &serde_json::Value) -> Result<Self> {
        let p: CusTextParams = read(params)?;
        let mut spec = CusTextSpec::new(
            p.eps,
            p.k,
            p.mapping.as_deref().unwrap_or("balanced"),
            p.metric.as_deref().unwrap_or("euclidean"),
            p.level.as_deref().unwrap_or("record"),
            p.keep_stopwords,
            p.embedding.as_deref().unwrap_or("glove"),
        )?;
        spec.words.vocabulary = p.vocabulary.filter(|v| !v.is_empty());
        Ok(spec)
    }

    /// Checks every parameter's domain.
    pub fn validate(&self) -> Result<()> {
        self.words.validate()?;
        check_eps(self.eps)
    }

    /// The canonical parameter string of keyed randomness
    /// ([`crate::mechanisms::Mechanism::params`]) over the embedding set
    /// named `embedding`.
    pub fn key_params(&self, embedding: &str) -> String {
        format!(
            "eps={:?};k={};mapping={};metric={};level={};keep_stopwords={};embedding={embedding}",
            self.eps,
            self.k,
            self.mapping.name(),
            self.metric.name(),
            self.level.name(),
            self.keep_stopwords,
        )
    }

    /// Every parameter, as the JSON object `parse` accepts.
    pub fn params_json(&self) -> serde_json::Value {
        self.words.extend(serde_json::json!({
            "eps": self.eps,
            "k": self.k,
            "mapping": self.mapping.name(),
            "metric": self.metric.name(),
            "level": self.level.name(),
            "keep_stopwords": self.keep_stopwords,
        }))
    }

    /// The per-replacement guarantee: eps-DP among the words sharing an
    /// output set.
    pub fn guarantee(&self) -> Guarantee {
        Guarantee::Dp { eps: self.eps }
    }
}
