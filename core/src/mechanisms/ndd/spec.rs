//! NDD distortion's parameters: JSON keys and defaults, checks, canonical
//! JSON and (absent) guarantee.

use serde::Deserialize;

use super::{check_candidates, check_mu, Divergence, Mode, MAX_CANDIDATES};
use crate::cost::Guarantee;
use crate::error::{Error, Result};
use crate::mechanisms::operators::{DeidentifySpec, Operators};
use crate::mechanisms::params::read;
use crate::mechanisms::replace::ReplaceStrategy;

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
    /// Per-label operators, as `deidentify` takes them (`DATE:shift`,
    /// `ID:redact`, `PERSON:keep`...): a span of such a label gets its
    /// operator instead of distortion. Empty: every span is distorted.
    pub operators: Operators,
    /// Dates shift by a non-zero number of days in `[-shift_days, shift_days]`.
    pub shift_days: u32,
    /// The value that fixes the date shift under a key (a patient id).
    pub group: Option<String>,
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
    #[serde(default)]
    operators: serde_json::Value,
    #[serde(default = "default_shift_days")]
    shift_days: i64,
    #[serde(default)]
    group: Option<String>,
}

fn default_shift_days() -> i64 {
    365
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
            operators: Operators::default(),
            shift_days: 365,
            group: None,
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
        let mut spec = NddSpec::new(
            p.mode.as_deref().unwrap_or("substitutive"),
            p.candidates,
            p.mu,
            p.divergence.as_deref().unwrap_or("kl"),
        )?;
        spec.operators = Operators::parse(&p.operators)?;
        spec.shift_days = u32::try_from(p.shift_days).unwrap_or(0);
        spec.group = p.group;
        Ok(spec)
    }

    /// Checks every parameter's domain.
    pub fn validate(&self) -> Result<()> {
        check_candidates(self.candidates)?;
        check_mu(self.mu)?;
        self.replacement().validate()
    }

    /// What the spans of labels with an operator get: `deidentify` with
    /// those operators (the others never reach it).
    pub fn replacement(&self) -> DeidentifySpec {
        let mut d = DeidentifySpec::new(ReplaceStrategy::FullEntity);
        d.operators = self.operators;
        d.shift_days = self.shift_days;
        d.group = self.group.clone();
        d
    }

    /// The canonical parameter string of keyed randomness
    /// ([`crate::mechanisms::Mechanism::params`]). Operators and their
    /// shift appear only when there are operators, so that outputs of
    /// rules written before operators existed stay as they were; the
    /// grouping value is not in it (it keys the shift).
    pub fn key_params(&self) -> String {
        let mut p = format!(
            "mode={},candidates={},mu={},divergence={}",
            self.mode.name(),
            self.candidates,
            self.mu,
            self.divergence.name()
        );
        if !self.operators.is_empty() {
            p.push_str(&format!(";operators={}", self.operators.canonical()));
            if self.shift_days != 365 {
                p.push_str(&format!(";shift_days={}", self.shift_days));
            }
        }
        p
    }

    /// Every parameter, as the JSON object `parse` accepts.
    pub fn params_json(&self) -> serde_json::Value {
        let mut v = serde_json::json!({
            "mode": self.mode.name(),
            "candidates": self.candidates,
            "mu": self.mu,
            "divergence": self.divergence.name(),
        });
        // Only when set, so that rules written before operators existed
        // read as they did.
        if let Some(m) = v.as_object_mut() {
            if !self.operators.is_empty() {
                m.insert("operators".into(), self.operators.canonical().into());
            }
            if self.shift_days != 365 {
                m.insert("shift_days".into(), self.shift_days.into());
            }
            if let Some(g) = &self.group {
                m.insert("group".into(), g.clone().into());
            }
        }
        v
    }

    /// None: NDD distortion keeps the candidate closest to the original.
    pub fn guarantee(&self) -> Guarantee {
        Guarantee::None {
            reason: "NDD distortion picks the candidate closest to the original's context: it carries no formal differential privacy guarantee".to_string(),
        }
    }
}
