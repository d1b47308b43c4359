//! [`MechanismSpec`]: a mechanism's name and validated parameters, not yet
//! bound to a vocabulary or a model.
//!
//! Each mechanism's parameters are one struct that lives beside the
//! mechanism ([`SanTextSpec`], [`SanTextPlusSpec`], [`CusTextSpec`],
//! [`DeidentifySpec`], [`NddSpec`]): its JSON keys and defaults, its checks,
//! its canonical JSON and its guarantee. The mechanism is built from that
//! struct whole (`from_spec`), so a new parameter touches the struct and
//! the mechanism only (docs/architecture.md, "Adding a mechanism
//! parameter"). This enum dispatches between them and adds what is shared:
//! chains, released vocabularies and date-shift groups.

use super::chain::MAX_STAGES;
use super::custext::CusTextSpec;
use super::ndd::NddSpec;
use super::operators::{self, DeidentifySpec};
use super::santext::{SanTextPlusSpec, SanTextSpec};
use super::words::Words;
use super::EmbeddingChoice;
use crate::cost::Guarantee;
use crate::error::{Error, Result};

/// A mechanism with validated parameters, not yet bound to a vocabulary.
#[derive(Debug, Clone, PartialEq)]
pub enum MechanismSpec {
    /// SanText at `eps`.
    SanText(SanTextSpec),
    /// SanText+ at `eps` with replacement probability `p` and sensitive fraction `w`.
    SanTextPlus(SanTextPlusSpec),
    /// Entity replacement over detected spans (no embedding involved).
    Deidentify(DeidentifySpec),
    /// Mechanisms applied in order (`deidentify THEN santext_plus`).
    Chain(Vec<MechanismSpec>),
    /// NDD distortion of detected spans (no formal guarantee).
    Ndd(NddSpec),
    /// CusText at `eps` with output sets of `k` tokens.
    CusText(CusTextSpec),
}

/// What the shipped detector achieved on notes it was never tuned on:
/// what a detection-based guarantee's "misses pass unchanged" amounts to
/// (docs/detection.md has the tables).
pub const DETECTION_RECALL: &str =
    "the shipped detector's span recall on held-out clinical notes: 0.90 to 0.97, docs/detection.md";

impl MechanismSpec {
    /// Parses a mechanism name and its JSON parameters.
    ///
    /// ```
    /// use dptext_core::mechanisms::MechanismSpec;
    /// let spec = MechanismSpec::parse("santext_plus", &serde_json::json!({"eps": 3})).unwrap();
    /// assert!(matches!(spec, MechanismSpec::SanTextPlus(ref s) if s.p == 0.3 && s.w == 0.9));
    /// assert!(MechanismSpec::parse("santext", &serde_json::json!({"eps": -1})).is_err());
    /// ```
    pub fn parse(name: &str, params: &serde_json::Value) -> Result<Self> {
        let spec = match name.trim().to_ascii_lowercase().as_str() {
            "santext" => MechanismSpec::SanText(SanTextSpec::parse(params)?),
            "santext_plus" | "santext+" => {
                MechanismSpec::SanTextPlus(SanTextPlusSpec::parse(params)?)
            }
            "custext" => MechanismSpec::CusText(CusTextSpec::parse(params)?),
            "deidentify" => MechanismSpec::Deidentify(DeidentifySpec::parse(params)?),
            "ndd" => MechanismSpec::Ndd(NddSpec::parse(params)?),
            "chain" => MechanismSpec::Chain(parse_stages(params)?),
            _ => return Err(Error::UnknownMechanism(name.to_string())),
        };
        spec.validate()?;
        Ok(spec)
    }

    /// A chain of specs (one spec alone is itself), validated.
    pub fn chain(mut stages: Vec<MechanismSpec>) -> Result<Self> {
        if stages.len() == 1 {
            return Ok(stages.remove(0));
        }
        let spec = MechanismSpec::Chain(stages);
        spec.validate()?;
        Ok(spec)
    }

    /// A CusText spec from its SQL-level parameters, validated.
    pub fn custext(
        eps: f64,
        k: i64,
        mapping: &str,
        metric: &str,
        level: &str,
        keep_stopwords: bool,
        embedding: &str,
    ) -> Result<Self> {
        let spec = MechanismSpec::CusText(CusTextSpec::new(
            eps,
            k,
            mapping,
            metric,
            level,
            keep_stopwords,
            embedding,
        )?);
        spec.validate()?;
        Ok(spec)
    }

    /// An NDD distortion spec from its SQL-level parameters, validated.
    pub fn ndd(mode: &str, candidates: i64, mu: f64, divergence: &str) -> Result<Self> {
        let spec = MechanismSpec::Ndd(NddSpec::new(mode, candidates, mu, divergence)?);
        spec.validate()?;
        Ok(spec)
    }

    /// The words of a word mechanism (`None` for the others and chains).
    fn words(&self) -> Option<&Words> {
        match self {
            MechanismSpec::SanText(s) => Some(&s.words),
            MechanismSpec::SanTextPlus(s) => Some(&s.words),
            MechanismSpec::CusText(s) => Some(&s.words),
            MechanismSpec::Deidentify(_) | MechanismSpec::Ndd(_) | MechanismSpec::Chain(_) => None,
        }
    }

    /// This spec drawing from the released vocabulary `name` (`None` or an
    /// empty name: the embedding's own), validated. Only SanText, SanText+
    /// and CusText take one.
    ///
    /// ```
    /// use dptext_core::mechanisms::MechanismSpec;
    /// let spec = MechanismSpec::parse("santext", &serde_json::json!({"eps": 3})).unwrap();
    /// let spec = spec.with_vocabulary(Some("notes".into())).unwrap();
    /// assert_eq!(spec.vocabulary(), Some("notes"));
    /// assert_eq!(spec.params_json()["vocabulary"], "notes");
    /// ```
    pub fn with_vocabulary(mut self, name: Option<String>) -> Result<Self> {
        let name = name.filter(|n| !n.is_empty());
        let words = match self {
            MechanismSpec::SanText(ref mut s) => Some(&mut s.words),
            MechanismSpec::SanTextPlus(ref mut s) => Some(&mut s.words),
            MechanismSpec::CusText(ref mut s) => Some(&mut s.words),
            _ => None,
        };
        match words {
            Some(w) => w.vocabulary = name,
            None if name.is_none() => {}
            None => {
                return Err(Error::invalid(
                    "vocabulary",
                    format!("{} takes no vocabulary", self.name()),
                ))
            }
        }
        self.validate()?;
        Ok(self)
    }

    /// The released vocabulary this spec (or a stage of it) draws from.
    pub fn vocabulary(&self) -> Option<&str> {
        match self {
            MechanismSpec::Chain(stages) => stages.iter().find_map(MechanismSpec::vocabulary),
            other => other.words().and_then(|w| w.vocabulary.as_deref()),
        }
    }

    /// The embedding set the mechanism needs, if any.
    pub fn embedding(&self) -> Option<EmbeddingChoice> {
        match self {
            MechanismSpec::Chain(stages) => stages.iter().find_map(MechanismSpec::embedding),
            other => other.words().map(|w| w.embedding),
        }
    }

    /// True when the spec (or a stage of it) is entity replacement, whose
    /// date shift a grouping value fixes.
    pub fn has_deidentify(&self) -> bool {
        match self {
            MechanismSpec::Deidentify(_) => true,
            // NDD with operators replaces those labels as deidentify does.
            MechanismSpec::Ndd(n) => !n.operators.is_empty(),
            MechanismSpec::Chain(stages) => stages.iter().any(MechanismSpec::has_deidentify),
            _ => false,
        }
    }

    /// The spec with `group` as the grouping value of every entity
    /// replacement stage (`None`: no group). A value longer than
    /// [`operators::MAX_GROUP_BYTES`] is replaced by its SHA-256 (hex): a
    /// group read from a column can be any length, and only equality
    /// matters.
    ///
    /// ```
    /// use dptext_core::mechanisms::MechanismSpec;
    /// let spec = MechanismSpec::parse("deidentify", &serde_json::json!({"operators": "DATE:shift"})).unwrap();
    /// let grouped = spec.with_group(Some("patient 17"));
    /// assert_eq!(grouped.params_json()["group"], "patient 17");
    /// ```
    pub fn with_group(self, group: Option<&str>) -> Self {
        match self {
            MechanismSpec::Deidentify(mut d) => {
                d.group = group.map(group_value);
                MechanismSpec::Deidentify(d)
            }
            MechanismSpec::Ndd(mut n) if !n.operators.is_empty() => {
                n.group = group.map(group_value);
                MechanismSpec::Ndd(n)
            }
            MechanismSpec::Chain(stages) => {
                MechanismSpec::Chain(stages.into_iter().map(|s| s.with_group(group)).collect())
            }
            other => other,
        }
    }

    /// Checks every parameter's domain.
    pub fn validate(&self) -> Result<()> {
        match self {
            MechanismSpec::SanText(s) => s.validate(),
            MechanismSpec::SanTextPlus(s) => s.validate(),
            MechanismSpec::CusText(s) => s.validate(),
            MechanismSpec::Deidentify(d) => d.validate(),
            MechanismSpec::Ndd(s) => s.validate(),
            MechanismSpec::Chain(stages) => validate_stages(stages),
        }
    }

    /// Whether the mechanism runs a model on every value (the detection
    /// model, and for NDD the masked LM): entity replacement unless it
    /// replaces whole values, NDD, and chains with either. What makes a
    /// value worth computing once and storing.
    ///
    /// ```
    /// use dptext_core::mechanisms::MechanismSpec;
    /// let p = |n: &str, j: serde_json::Value| MechanismSpec::parse(n, &j).unwrap();
    /// assert!(p("deidentify", serde_json::json!({})).runs_model());
    /// assert!(!p("deidentify", serde_json::json!({"whole": true})).runs_model());
    /// assert!(!p("santext", serde_json::json!({"eps": 3})).runs_model());
    /// ```
    pub fn runs_model(&self) -> bool {
        match self {
            MechanismSpec::Deidentify(d) => !d.whole,
            MechanismSpec::Ndd(_) => true,
            MechanismSpec::Chain(stages) => stages.iter().any(MechanismSpec::runs_model),
            MechanismSpec::SanText(_)
            | MechanismSpec::SanTextPlus(_)
            | MechanismSpec::CusText(_) => false,
        }
    }

    /// The mechanism's name as SQL and labels spell it.
    pub fn name(&self) -> &'static str {
        match self {
            MechanismSpec::SanText(_) => "santext",
            MechanismSpec::SanTextPlus(_) => "santext_plus",
            MechanismSpec::CusText(_) => "custext",
            MechanismSpec::Deidentify(_) => "deidentify",
            MechanismSpec::Chain(_) => "chain",
            MechanismSpec::Ndd(_) => "ndd",
        }
    }

    /// Every parameter, defaults filled in, as the JSON object that
    /// [`MechanismSpec::parse`] accepts: `parse(spec.name(), &spec.params_json())`
    /// gives the same spec back.
    ///
    /// ```
    /// use dptext_core::mechanisms::MechanismSpec;
    /// let spec = MechanismSpec::parse("santext_plus", &serde_json::json!({"eps": 3})).unwrap();
    /// assert_eq!(
    ///     spec.params_json(),
    ///     serde_json::json!({"eps": 3.0, "p": 0.3, "w": 0.9, "embedding": "glove"})
    /// );
    /// ```
    pub fn params_json(&self) -> serde_json::Value {
        match self {
            MechanismSpec::SanText(s) => s.params_json(),
            MechanismSpec::SanTextPlus(s) => s.params_json(),
            MechanismSpec::CusText(s) => s.params_json(),
            MechanismSpec::Deidentify(d) => d.params_json(),
            MechanismSpec::Ndd(s) => s.params_json(),
            MechanismSpec::Chain(stages) => serde_json::json!({
                "stages": stages
                    .iter()
                    .map(|s| serde_json::json!({"mechanism": s.name(), "params": s.params_json()}))
                    .collect::<Vec<_>>()
            }),
        }
    }

    /// The per-token (per-span for entity replacement) guarantee of every
    /// call, known before any text is seen: what accounting composes.
    /// Entity replacement states the lemma's eps over the shipped surrogate
    /// lists ([`super::replace::strategy_epsilon`]).
    pub fn guarantee(&self) -> Result<Guarantee> {
        Ok(match self {
            MechanismSpec::SanText(s) => s.guarantee(),
            MechanismSpec::SanTextPlus(s) => s.guarantee(),
            MechanismSpec::CusText(s) => s.guarantee(),
            MechanismSpec::Deidentify(d) => d.guarantee()?,
            // Later stages post-process the first one's output, so its
            // guarantee holds for the chain; when it has none, the last
            // stage with one still bounds what it releases of the text it
            // receives (detection's misses included): [`Self::rests_on`]
            // says which.
            MechanismSpec::Chain(stages) => {
                let first = stages
                    .first()
                    .ok_or_else(|| Error::invalid("stages", "a chain has no stage"))?
                    .guarantee()?;
                if !matches!(first, Guarantee::None { .. }) {
                    return Ok(first);
                }
                let mut last_formal = None;
                for s in stages {
                    let g = s.guarantee()?;
                    if !matches!(g, Guarantee::None { .. }) {
                        last_formal = Some(g);
                    }
                }
                last_formal.unwrap_or(first)
            }
            MechanismSpec::Ndd(s) => s.guarantee(),
        })
    }

    /// What the guarantee rests on, in words a privacy officer can check:
    /// which tokens or spans it covers, what passes unchanged, and for
    /// mechanisms without one what to read instead. `dptext.rules`,
    /// provenance, the budget and every call's cost carry it.
    pub fn rests_on(&self) -> String {
        match self {
            MechanismSpec::SanText(_) => "every token re-drawn near itself in embedding space: metric local DP per token, eps per unit of distance; it composes over the value's tokens (the cost's worst_case_eps)".into(),
            MechanismSpec::SanTextPlus(_) => "every rare (sensitive) token re-drawn, common tokens kept unchanged with probability 1 - p (the eps0 term): utility-optimised metric local DP per token, composing over the value's tokens; no detection involved".into(),
            MechanismSpec::CusText(_) => "each token drawn from its customized output set: eps-DP among the tokens that share the set, per token, composing over the value's tokens; no detection involved".into(),
            MechanismSpec::Deidentify(d) if d.whole => d.whole_rests_on(),
            MechanismSpec::Deidentify(d) => {
                let mut s = format!(
                    "replacement of the spans detection finds; spans it misses pass unchanged ({DETECTION_RECALL})"
                );
                if matches!(d.guarantee(), Ok(Guarantee::None { .. })) {
                    s.push_str("; no formal guarantee for the whole value (shifted or kept spans are outside the lemma): read each label's eps under the cost's labels, or add a word-level stage (THEN santext_plus) for a bound on every token");
                }
                s
            }
            MechanismSpec::Ndd(n) => {
                let ops = if n.operators.is_empty() {
                    String::new()
                } else {
                    format!(
                        "; spans of {} get their operator instead",
                        n.operators.canonical()
                    )
                };
                format!(
                    "no formal guarantee: detected spans replaced by the masked language model's best-fitting candidate, which depends on the context{ops}; spans detection misses pass unchanged ({DETECTION_RECALL}); for a bound on every token add a word-level stage (THEN santext_plus)"
                )
            }
            MechanismSpec::Chain(stages) => {
                let first_formal = stages
                    .first()
                    .is_some_and(|s| !matches!(s.guarantee(), Ok(Guarantee::None { .. })));
                let which = if first_formal {
                    "the chain's guarantee is its first stage's (later stages post-process its output)".to_string()
                } else {
                    match stages
                        .iter()
                        .rev()
                        .find(|s| !matches!(s.guarantee(), Ok(Guarantee::None { .. })))
                    {
                        Some(s) => format!(
                            "the chain's guarantee is its {} stage's, for the text the stages before it leave: every token that reaches it, detection's misses included, is covered; what an earlier stage replaced (surrogates, shifted dates, redactions) is left as that stage wrote it, under that stage's own guarantee",
                            s.name()
                        ),
                        None => "no stage has a formal guarantee".to_string(),
                    }
                };
                let each: Vec<String> = stages
                    .iter()
                    .enumerate()
                    .map(|(i, s)| format!("stage {} ({}): {}", i + 1, s.name(), s.rests_on()))
                    .collect();
                format!("{which}; {}", each.join("; "))
            }
        }
    }

    /// [`Self::guarantee`] as JSON with [`Self::rests_on`] beside its fields:
    /// what rules, provenance and the budget show.
    pub fn stated_guarantee(&self) -> Result<serde_json::Value> {
        let mut g = serde_json::to_value(self.guarantee()?)?;
        if let Some(o) = g.as_object_mut() {
            o.insert("rests_on".into(), self.rests_on().into());
        }
        Ok(g)
    }
}

/// A grouping value as a spec keeps it: itself, or its SHA-256 (hex) when
/// longer than [`operators::MAX_GROUP_BYTES`] (only equality matters).
fn group_value(g: &str) -> String {
    if g.len() > operators::MAX_GROUP_BYTES {
        use sha2::Digest;
        hex::encode(sha2::Sha256::digest(g.as_bytes()))
    } else {
        g.to_string()
    }
}

/// The stages of `{"stages": [{"mechanism": ..., "params": {...}}, ...]}`,
/// each parsed and validated (the chain itself is checked by
/// [`validate_stages`]).
fn parse_stages(params: &serde_json::Value) -> Result<Vec<MechanismSpec>> {
    let stages = params
        .get("stages")
        .and_then(|v| v.as_array())
        .ok_or_else(|| {
            Error::invalid(
                "stages",
                "a chain needs {\"stages\": [{\"mechanism\": ..., \"params\": {...}}, ...]}",
            )
        })?;
    if params.as_object().is_some_and(|o| o.len() != 1) {
        return Err(Error::invalid("params", "a chain takes only \"stages\""));
    }
    stages
        .iter()
        .map(|st| {
            let name = st
                .get("mechanism")
                .and_then(|m| m.as_str())
                .ok_or_else(|| {
                    Error::invalid("stages", format!("stage {st} has no \"mechanism\""))
                })?;
            let empty = serde_json::json!({});
            MechanismSpec::parse(name, st.get("params").unwrap_or(&empty))
        })
        .collect()
}

/// Checks a chain: 2 to [`MAX_STAGES`] stages, none a chain, each valid.
fn validate_stages(stages: &[MechanismSpec]) -> Result<()> {
    if !(2..=MAX_STAGES).contains(&stages.len()) {
        return Err(Error::invalid(
            "stages",
            format!("a chain has 2 to {MAX_STAGES} stages, got {}", stages.len()),
        ));
    }
    if stages.iter().any(|s| matches!(s, MechanismSpec::Chain(_))) {
        return Err(Error::invalid(
            "stages",
            "a chain's stage cannot be a chain",
        ));
    }
    stages.iter().try_for_each(MechanismSpec::validate)
}

#[cfg(test)]
mod registry_tests {
    use super::*;
    use crate::mechanisms::MECHANISMS;

    /// Each listed name parses (its default parameters, an `eps` for the
    /// word mechanisms) to a spec of that name, and a name outside the list
    /// is unknown, its message listing exactly the registry.
    #[test]
    fn the_registry_is_what_parse_knows() {
        for name in MECHANISMS {
            let params = match *name {
                "santext" | "santext_plus" | "custext" => serde_json::json!({"eps": 3}),
                _ => serde_json::json!({}),
            };
            let spec =
                MechanismSpec::parse(name, &params).unwrap_or_else(|e| panic!("{name}: {e}"));
            assert_eq!(spec.name(), *name);
        }
        let e = MechanismSpec::parse("rot13", &serde_json::json!({})).unwrap_err();
        assert_eq!(
            e.to_string(),
            format!(
                "unknown mechanism \"rot13\": expected one of {}",
                MECHANISMS.join(", ")
            )
        );
    }
}
