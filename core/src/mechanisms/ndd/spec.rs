//! NDD distortion's parameters: JSON keys and defaults, checks, canonical
//! JSON and (absent) guarantee.

use serde::Deserialize;

use super::{check_candidates, check_mu, Divergence, Mode, MAX_CANDIDATES};
use crate::cost::Guarantee;
use crate::error::{Error, Result};
use crate::mechanisms::params::read;

/// NDD distortion's parameters.
#[derive(Debug, Clone, PartialEq)]
pub struct NddSpec {
    /// How candidates are made.
    pub mode: Mode,
    /// Candidates per span.
    pub candidates: usize,
    /// Distance weight base, in (0, 1].
    pub mu: f64,
    /// Divergence between distributions.
    pub divergence: Divergence,
}

/// NDD's JSON keys and their defaults.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct NddParams {
    #[serde(default)]
    mode: Option<String>,
    #[serde(default = "default_candidates")]
    candidates: i64,
    #[serde(default = "default_mu")]
    mu: f64,
    #[serde(default)]
    divergence: Option<String>,
}

/// Default candidates per span.
fn default_candidates() -> i64 {
    8
}

/// Default distance weight base.
fn default_mu() -> f64 {
    0.9
}

impl NddSpec {
    /// An NDD spec from its SQL-level parameters (enums by name,
    /// `candidates` as SQL passes it), not yet validated.
    pub fn new(mode: &str, candidates: i64, mu: f64, divergence: &str) -> Result<Self> {
        let spec = NddSpec {
            mode: mode.parse()?,
            candidates: usize::try_from(candidates).unwrap_or(0),
            mu,
            divergence: divergence.parse()?,
        };
        if candidates < 1 {
            return Err(Error::invalid(
                "candidates",
                format!("must be in [1, {MAX_CANDIDATES}], got {candidates}"),
            ));
        }
        Ok(spec)
    }

    /// The spec of NDD's JSON parameters (not yet validated).
    pub(in crate::mechanisms) fn parse(params: &serde_json::Value) -> Result<Self> {
        let p: NddParams = read(params)?;
        NddSpec::new(
            p.mode.as_deref().unwrap_or("substitutive"),
            p.candidates,
            p.mu,
            p.divergence.as_deref().unwrap_or("kl"),
        )
    }

    /// Checks every parameter's domain.
    pub fn validate(&self) -> Result<()> {
        check_candidates(self.candidates)?;
        check_mu(self.mu)
    }

    /// Every parameter, as the JSON object `parse` accepts.
    pub fn params_json(&self) -> serde_json::Value {
        serde_json::json!({
            "mode": self.mode.name(),
            "candidates": self.candidates,
            "mu": self.mu,
            "divergence": self.divergence.name(),
        })
    }

    /// None: NDD distortion keeps the candidate closest to the original.
    pub fn guarantee(&self) -> Guarantee {
        Guarantee::None {
            reason: "NDD distortion picks the candidate closest to the original's context: it carries no formal differential privacy guarantee".to_string(),
        }
    }
}
