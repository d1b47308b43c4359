//! The parameters of SanText and SanText+: JSON keys and defaults, checks,
//! canonical JSON and guarantee.

use serde::Deserialize;

use crate::cost::Guarantee;
use crate::error::{Error, Result};
use crate::mechanisms::params::read;
use crate::mechanisms::words::Words;
use crate::mechanisms::{check_eps, check_unit};

/// SanText's parameters.
#[derive(Debug, Clone, PartialEq)]
pub struct SanTextSpec {
    /// Privacy parameter (> 0).
    pub eps: f64,
    /// The words drawn from.
    pub words: Words,
}

/// SanText's JSON keys (`eps` required).
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct SanTextParams {
    eps: f64,
    #[serde(default)]
    embedding: Option<String>,
    #[serde(default)]
    vocabulary: Option<String>,
}

impl SanTextSpec {
    /// SanText at `eps` over the words of `words`.
    pub fn new(eps: f64, words: Words) -> Self {
        SanTextSpec { eps, words }
    }

    /// The spec of SanText's JSON parameters (not yet validated).
    pub(in crate::mechanisms) fn parse(params: &serde_json::Value) -> Result<Self> {
        let p: SanTextParams = read(params)?;
        Ok(SanTextSpec {
            eps: p.eps,
            words: Words::parse(p.embedding.as_deref(), p.vocabulary)?,
        })
    }

    /// Checks every parameter's domain.
    pub fn validate(&self) -> Result<()> {
        self.words.validate()?;
        check_eps(self.eps)
    }

    /// Every parameter, as the JSON object `parse` accepts.
    pub fn params_json(&self) -> serde_json::Value {
        self.words.extend(serde_json::json!({"eps": self.eps}))
    }

    /// The canonical parameter string of keyed randomness
    /// ([`crate::mechanisms::Mechanism::params`]) over the embedding set
    /// named `embedding` (the installed set's own name, which a released
    /// vocabulary changes).
    pub fn key_params(&self, embedding: &str) -> String {
        format!("eps={:?};embedding={embedding}", self.eps)
    }

    /// The per-token guarantee: eps·d-metric LDP.
    pub fn guarantee(&self) -> Guarantee {
        Guarantee::MetricLdp { eps: self.eps }
    }
}

/// SanText+'s parameters.
#[derive(Debug, Clone, PartialEq)]
pub struct SanTextPlusSpec {
    /// Privacy parameter (> 0).
    pub eps: f64,
    /// Probability of re-drawing a non-sensitive word, in [0, 1].
    pub p: f64,
    /// Least frequent fraction of the vocabulary that is sensitive, in (0, 1].
    pub w: f64,
    /// The words drawn from.
    pub words: Words,
}

/// SanText+'s JSON keys (`eps` required) and their defaults.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct SanTextPlusParams {
    eps: f64,
    #[serde(default = "default_p")]
    p: f64,
    #[serde(default = "default_w")]
    w: f64,
    #[serde(default)]
    embedding: Option<String>,
    #[serde(default)]
    vocabulary: Option<String>,
}

/// Default `p`, the paper's setting.
fn default_p() -> f64 {
    0.3
}

/// Default `w`, the paper's setting.
fn default_w() -> f64 {
    0.9
}

impl SanTextPlusSpec {
    /// SanText+ at `eps` with `p` and `w` over the words of `words`.
    pub fn new(eps: f64, p: f64, w: f64, words: Words) -> Self {
        SanTextPlusSpec { eps, p, w, words }
    }

    /// The spec of SanText+'s JSON parameters (not yet validated).
    pub(in crate::mechanisms) fn parse(params: &serde_json::Value) -> Result<Self> {
        let p: SanTextPlusParams = read(params)?;
        Ok(SanTextPlusSpec {
            eps: p.eps,
            p: p.p,
            w: p.w,
            words: Words::parse(p.embedding.as_deref(), p.vocabulary)?,
        })
    }

    /// Checks every parameter's domain.
    pub fn validate(&self) -> Result<()> {
        self.words.validate()?;
        check_eps(self.eps)?;
        check_unit("p", self.p)?;
        check_unit("w", self.w)?;
        if self.w == 0.0 {
            return Err(Error::invalid(
                "w",
                "must be > 0: with w = 0 no word is sensitive",
            ));
        }
        Ok(())
    }

    /// Every parameter, as the JSON object `parse` accepts.
    pub fn params_json(&self) -> serde_json::Value {
        self.words
            .extend(serde_json::json!({"eps": self.eps, "p": self.p, "w": self.w}))
    }

    /// The canonical parameter string of keyed randomness, as
    /// [`SanTextSpec::key_params`].
    pub fn key_params(&self, embedding: &str) -> String {
        format!(
            "eps={:?};p={:?};w={:?};embedding={embedding}",
            self.eps, self.p, self.w
        )
    }

    /// The per-token guarantee: `(V_S, V_P, eps, ln(1/p))`-UMLDP.
    pub fn guarantee(&self) -> Guarantee {
        Guarantee::Umldp {
            eps: self.eps,
            eps0: if self.p > 0.0 {
                (1.0 / self.p).ln()
            } else {
                f64::INFINITY
            },
        }
    }
}
