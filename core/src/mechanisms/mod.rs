//! The sanitization mechanisms, all behind one trait.
//!
//! A [`Mechanism`] takes a text and a random source and returns the
//! sanitized text with its [`Cost`]. [`MechanismSpec`] parses a mechanism
//! name plus JSON parameters (what SQL's `sanitize(t, mechanism, params)`
//! receives) and validates them before any text is touched.

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

pub mod chain;
pub mod custext;
pub mod dateshift;
pub mod deidentify;
mod exponential;
pub mod ndd;
pub mod operators;
mod params;
pub mod replace;
mod santext;
pub mod surrogates;
mod vocabulary;

#[cfg(test)]
mod tests;

pub use custext::CusText;
pub use exponential::ExpSampler;
pub use params::parse_params;
pub use santext::{SanText, SanTextPlus};
pub use vocabulary::Vocabulary;

use rand::RngCore;
use serde::{Deserialize, Serialize};

use crate::cost::{Cost, Guarantee};
use crate::error::{Error, Result};

/// A sanitized text and what producing it cost.
#[derive(Debug, Clone, Serialize)]
pub struct Sanitized {
    /// The sanitized text.
    pub text: String,
    /// Privacy spent on it.
    pub cost: Cost,
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
    /// Sanitizes `text` with randomness from `rng`.
    fn sanitize(&self, text: &str, rng: &mut dyn RngCore) -> Result<Sanitized>;
    /// Like [`Mechanism::sanitize`], for mechanisms that also derive streams
    /// of their own from the random mode (CusText's dataset level).
    fn sanitize_in(
        &self,
        text: &str,
        rng: &mut dyn RngCore,
        _mode: &crate::rng::RandomMode,
    ) -> Result<Sanitized> {
        self.sanitize(text, rng)
    }

    /// [`Mechanism::sanitize_in`] of several values, each with its own
    /// random source, results in order; one value's error leaves the others
    /// alone. Mechanisms that run detection override it to share the
    /// model's calls among the values; the outputs stay those of
    /// `sanitize_in` value by value.
    fn sanitize_many_in(
        &self,
        values: &mut [(&str, &mut dyn RngCore)],
        mode: &crate::rng::RandomMode,
    ) -> Vec<Result<Sanitized>> {
        values
            .iter_mut()
            .map(|(text, rng)| self.sanitize_in(text, &mut **rng, mode))
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

/// A mechanism with validated parameters, not yet bound to a vocabulary.
#[derive(Debug, Clone, PartialEq)]
pub enum MechanismSpec {
    /// SanText at `eps`.
    SanText {
        /// Privacy parameter (> 0).
        eps: f64,
        /// Embedding set.
        embedding: EmbeddingChoice,
        /// A released vocabulary to restrict the words to ([`crate::vocab`]).
        vocabulary: Option<String>,
    },
    /// SanText+ at `eps` with replacement probability `p` and sensitive fraction `w`.
    SanTextPlus {
        /// Privacy parameter (> 0).
        eps: f64,
        /// Probability of re-drawing a non-sensitive word, in [0, 1].
        p: f64,
        /// Least frequent fraction of the vocabulary that is sensitive, in (0, 1].
        w: f64,
        /// Embedding set.
        embedding: EmbeddingChoice,
        /// A released vocabulary to restrict the words to ([`crate::vocab`]).
        vocabulary: Option<String>,
    },
    /// Entity replacement over detected spans (no embedding involved).
    Deidentify(operators::DeidentifySpec),
    /// Mechanisms applied in order (`deidentify THEN santext_plus`).
    Chain(Vec<MechanismSpec>),
    /// NDD distortion of detected spans (no formal guarantee).
    Ndd {
        /// How candidates are made.
        mode: ndd::Mode,
        /// Candidates per span.
        candidates: usize,
        /// Distance weight base, in (0, 1].
        mu: f64,
        /// Divergence between distributions.
        divergence: ndd::Divergence,
    },
    /// CusText at `eps` with output sets of `k` tokens.
    CusText {
        /// Privacy parameter (> 0).
        eps: f64,
        /// Output set size.
        k: usize,
        /// Mapping strategy of Alg. 1.
        mapping: custext::MappingStrategy,
        /// Score metric.
        metric: custext::Metric,
        /// Which repeats share a draw.
        level: custext::Level,
        /// Keep the shipped stopwords unchanged (CusText+).
        keep_stopwords: bool,
        /// Embedding set.
        embedding: EmbeddingChoice,
        /// A released vocabulary to restrict the words to ([`crate::vocab`]).
        vocabulary: Option<String>,
    },
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct DeidentifyParams {
    #[serde(default)]
    strategy: Option<String>,
    #[serde(default = "default_one")]
    p: f64,
    #[serde(default)]
    consistent: bool,
    #[serde(default)]
    operators: serde_json::Value,
    #[serde(default)]
    whole: bool,
    #[serde(default = "default_shift_days")]
    shift_days: i64,
    #[serde(default)]
    group: Option<String>,
}

fn default_shift_days() -> i64 {
    365
}

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

fn default_candidates() -> i64 {
    8
}
fn default_mu() -> f64 {
    0.9
}

fn default_one() -> f64 {
    1.0
}

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

fn default_k() -> i64 {
    20
}
fn default_true() -> bool {
    true
}

/// Largest accepted CusText K.
pub const MAX_K: usize = 2000;

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct SanTextParams {
    eps: f64,
    #[serde(default)]
    embedding: Option<String>,
    #[serde(default)]
    vocabulary: Option<String>,
}

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

fn default_p() -> f64 {
    0.3
}
fn default_w() -> f64 {
    0.9
}

impl MechanismSpec {
    /// Parses a mechanism name and its JSON parameters.
    ///
    /// ```
    /// use dptext_core::mechanisms::MechanismSpec;
    /// let spec = MechanismSpec::parse("santext_plus", &serde_json::json!({"eps": 3})).unwrap();
    /// assert!(matches!(spec, MechanismSpec::SanTextPlus { p, w, .. } if p == 0.3 && w == 0.9));
    /// assert!(MechanismSpec::parse("santext", &serde_json::json!({"eps": -1})).is_err());
    /// ```
    pub fn parse(name: &str, params: &serde_json::Value) -> Result<Self> {
        let bad = |e: serde_json::Error| Error::invalid("params", e.to_string());
        let embedding = |e: Option<String>| -> Result<EmbeddingChoice> {
            e.map_or(Ok(EmbeddingChoice::default()), |s| s.parse())
        };
        let spec = match name.trim().to_ascii_lowercase().as_str() {
            "santext" => {
                let p: SanTextParams = serde_json::from_value(params.clone()).map_err(bad)?;
                MechanismSpec::SanText {
                    eps: p.eps,
                    embedding: embedding(p.embedding)?,
                    vocabulary: p.vocabulary,
                }
            }
            "santext_plus" | "santext+" => {
                let p: SanTextPlusParams = serde_json::from_value(params.clone()).map_err(bad)?;
                MechanismSpec::SanTextPlus {
                    eps: p.eps,
                    p: p.p,
                    w: p.w,
                    embedding: embedding(p.embedding)?,
                    vocabulary: p.vocabulary,
                }
            }
            "custext" => {
                let p: CusTextParams = serde_json::from_value(params.clone()).map_err(bad)?;
                MechanismSpec::custext(
                    p.eps,
                    p.k,
                    p.mapping.as_deref().unwrap_or("balanced"),
                    p.metric.as_deref().unwrap_or("euclidean"),
                    p.level.as_deref().unwrap_or("record"),
                    p.keep_stopwords,
                    p.embedding.as_deref().unwrap_or("glove"),
                )?
                .with_vocabulary(p.vocabulary)?
            }
            "deidentify" => {
                let p: DeidentifyParams = serde_json::from_value(params.clone()).map_err(bad)?;
                MechanismSpec::Deidentify(operators::DeidentifySpec {
                    strategy: p.strategy.as_deref().unwrap_or("full_entity").parse()?,
                    p: p.p,
                    consistent: p.consistent,
                    operators: operators::Operators::parse(&p.operators)?,
                    whole: p.whole,
                    shift_days: u32::try_from(p.shift_days).unwrap_or(0),
                    group: p.group,
                })
            }
            "ndd" => {
                let p: NddParams = serde_json::from_value(params.clone()).map_err(bad)?;
                MechanismSpec::ndd(
                    p.mode.as_deref().unwrap_or("substitutive"),
                    p.candidates,
                    p.mu,
                    p.divergence.as_deref().unwrap_or("kl"),
                )?
            }
            "chain" => {
                let stages = params
                    .get("stages")
                    .and_then(|v| v.as_array())
                    .ok_or_else(|| {
                        Error::invalid("stages", "a chain needs {\"stages\": [{\"mechanism\": ..., \"params\": {...}}, ...]}")
                    })?;
                if params.as_object().is_some_and(|o| o.len() != 1) {
                    return Err(Error::invalid("params", "a chain takes only \"stages\""));
                }
                let stages = stages
                    .iter()
                    .map(|st| {
                        let name =
                            st.get("mechanism")
                                .and_then(|m| m.as_str())
                                .ok_or_else(|| {
                                    Error::invalid(
                                        "stages",
                                        format!("stage {st} has no \"mechanism\""),
                                    )
                                })?;
                        let empty = serde_json::json!({});
                        MechanismSpec::parse(name, st.get("params").unwrap_or(&empty))
                    })
                    .collect::<Result<Vec<_>>>()?;
                MechanismSpec::Chain(stages)
            }
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
        let spec = MechanismSpec::CusText {
            eps,
            k: usize::try_from(k)
                .ok()
                .filter(|k| (1..=MAX_K).contains(k))
                .ok_or_else(|| Error::invalid("k", format!("must be in [1, {MAX_K}], got {k}")))?,
            mapping: mapping.parse()?,
            metric: metric.parse()?,
            level: level.parse()?,
            keep_stopwords,
            embedding: embedding.parse()?,
            vocabulary: None,
        };
        spec.validate()?;
        Ok(spec)
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
        match self {
            MechanismSpec::SanText {
                ref mut vocabulary, ..
            }
            | MechanismSpec::SanTextPlus {
                ref mut vocabulary, ..
            }
            | MechanismSpec::CusText {
                ref mut vocabulary, ..
            } => *vocabulary = name,
            _ if name.is_none() => {}
            _ => {
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
            MechanismSpec::SanText { vocabulary, .. }
            | MechanismSpec::SanTextPlus { vocabulary, .. }
            | MechanismSpec::CusText { vocabulary, .. } => vocabulary.as_deref(),
            MechanismSpec::Chain(stages) => stages.iter().find_map(MechanismSpec::vocabulary),
            MechanismSpec::Deidentify(_) | MechanismSpec::Ndd { .. } => None,
        }
    }

    /// True when the spec (or a stage of it) is entity replacement, whose
    /// date shift a grouping value fixes.
    pub fn has_deidentify(&self) -> bool {
        match self {
            MechanismSpec::Deidentify(_) => true,
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
                d.group = group.map(|g| {
                    if g.len() > operators::MAX_GROUP_BYTES {
                        use sha2::Digest;
                        hex::encode(sha2::Sha256::digest(g.as_bytes()))
                    } else {
                        g.to_string()
                    }
                });
                MechanismSpec::Deidentify(d)
            }
            MechanismSpec::Chain(stages) => {
                MechanismSpec::Chain(stages.into_iter().map(|s| s.with_group(group)).collect())
            }
            other => other,
        }
    }

    /// An NDD distortion spec from its SQL-level parameters, validated.
    pub fn ndd(mode: &str, candidates: i64, mu: f64, divergence: &str) -> Result<Self> {
        let spec = MechanismSpec::Ndd {
            mode: mode.parse()?,
            candidates: usize::try_from(candidates).unwrap_or(0),
            mu,
            divergence: divergence.parse()?,
        };
        if candidates < 1 {
            return Err(Error::invalid(
                "candidates",
                format!("must be in [1, {}], got {candidates}", ndd::MAX_CANDIDATES),
            ));
        }
        spec.validate()?;
        Ok(spec)
    }

    /// Checks every parameter's domain.
    pub fn validate(&self) -> Result<()> {
        if let MechanismSpec::SanText {
            vocabulary: Some(v),
            embedding,
            ..
        }
        | MechanismSpec::SanTextPlus {
            vocabulary: Some(v),
            embedding,
            ..
        }
        | MechanismSpec::CusText {
            vocabulary: Some(v),
            embedding,
            ..
        } = self
        {
            crate::vocab::check_name(v)?;
            if *embedding != EmbeddingChoice::Glove {
                return Err(Error::invalid(
                    "vocabulary",
                    "a released vocabulary applies to the 'glove' embedding only",
                ));
            }
        }
        match *self {
            MechanismSpec::SanText { eps, .. } | MechanismSpec::CusText { eps, .. } => {
                check_eps(eps)
            }
            MechanismSpec::Deidentify(ref d) => d.validate(),
            MechanismSpec::Chain(ref stages) => {
                if !(2..=chain::MAX_STAGES).contains(&stages.len()) {
                    return Err(Error::invalid(
                        "stages",
                        format!(
                            "a chain has 2 to {} stages, got {}",
                            chain::MAX_STAGES,
                            stages.len()
                        ),
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
            MechanismSpec::Ndd { candidates, mu, .. } => {
                ndd::check_candidates(candidates)?;
                ndd::check_mu(mu)
            }
            MechanismSpec::SanTextPlus { eps, p, w, .. } => {
                check_eps(eps)?;
                check_unit("p", p)?;
                check_unit("w", w)?;
                if w == 0.0 {
                    return Err(Error::invalid(
                        "w",
                        "must be > 0: with w = 0 no word is sensitive",
                    ));
                }
                Ok(())
            }
        }
    }

    /// The mechanism's name as SQL and labels spell it.
    pub fn name(&self) -> &'static str {
        match self {
            MechanismSpec::SanText { .. } => "santext",
            MechanismSpec::SanTextPlus { .. } => "santext_plus",
            MechanismSpec::CusText { .. } => "custext",
            MechanismSpec::Deidentify(_) => "deidentify",
            MechanismSpec::Chain(_) => "chain",
            MechanismSpec::Ndd { .. } => "ndd",
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
        use serde_json::json;
        let mut out = match *self {
            MechanismSpec::SanText { eps, embedding, .. } => {
                json!({"eps": eps, "embedding": embedding.name()})
            }
            MechanismSpec::SanTextPlus {
                eps,
                p,
                w,
                embedding,
                ..
            } => json!({"eps": eps, "p": p, "w": w, "embedding": embedding.name()}),
            MechanismSpec::CusText {
                eps,
                k,
                mapping,
                metric,
                level,
                keep_stopwords,
                embedding,
                ..
            } => json!({
                "eps": eps,
                "k": k,
                "mapping": mapping.name(),
                "metric": metric.name(),
                "level": level.name(),
                "keep_stopwords": keep_stopwords,
                "embedding": embedding.name(),
            }),
            MechanismSpec::Deidentify(ref d) => d.params_json(),
            MechanismSpec::Chain(ref stages) => json!({
                "stages": stages
                    .iter()
                    .map(|s| json!({"mechanism": s.name(), "params": s.params_json()}))
                    .collect::<Vec<_>>()
            }),
            MechanismSpec::Ndd {
                mode,
                candidates,
                mu,
                divergence,
            } => json!({
                "mode": mode.name(),
                "candidates": candidates,
                "mu": mu,
                "divergence": divergence.name(),
            }),
        };
        // Only when set, so that rules and provenance without one read as before.
        if let (
            Some(v),
            MechanismSpec::SanText { .. }
            | MechanismSpec::SanTextPlus { .. }
            | MechanismSpec::CusText { .. },
        ) = (self.vocabulary(), self)
        {
            out["vocabulary"] = v.into();
        }
        out
    }

    /// The per-token (per-span for entity replacement) guarantee of every
    /// call, known before any text is seen: what accounting composes.
    /// Entity replacement states the lemma's eps over the shipped surrogate
    /// lists ([`replace::strategy_epsilon`]).
    pub fn guarantee(&self) -> Result<Guarantee> {
        Ok(match *self {
            MechanismSpec::SanText { eps, .. } => Guarantee::MetricLdp { eps },
            MechanismSpec::SanTextPlus { eps, p, .. } => Guarantee::Umldp {
                eps,
                eps0: if p > 0.0 {
                    (1.0 / p).ln()
                } else {
                    f64::INFINITY
                },
            },
            MechanismSpec::CusText { eps, .. } => Guarantee::Dp { eps },
            MechanismSpec::Deidentify(ref d) => d.guarantee()?,
            // Later stages post-process the first one's output.
            MechanismSpec::Chain(ref stages) => stages
                .first()
                .ok_or_else(|| Error::invalid("stages", "a chain has no stage"))?
                .guarantee()?,
            MechanismSpec::Ndd { .. } => Guarantee::None {
                reason: "NDD distortion picks the candidate closest to the original's context: it carries no formal differential privacy guarantee".to_string(),
            },
        })
    }

    /// The embedding set the mechanism needs, if any.
    pub fn embedding(&self) -> Option<EmbeddingChoice> {
        match *self {
            MechanismSpec::SanText { embedding, .. }
            | MechanismSpec::SanTextPlus { embedding, .. }
            | MechanismSpec::CusText { embedding, .. } => Some(embedding),
            MechanismSpec::Deidentify(_) | MechanismSpec::Ndd { .. } => None,
            MechanismSpec::Chain(ref stages) => stages.iter().find_map(MechanismSpec::embedding),
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
