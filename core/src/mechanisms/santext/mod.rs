//! SanText and SanText+ (Yue et al. 2021, Alg. 1 and 2; docs/mechanisms.md-2).
//!
//! - **SanText**: every token `x` is replaced by `y` drawn from the whole
//!   vocabulary with `Pr[y] ∝ exp(-eps/2 * d(x, y))`: eps·d-metric LDP per
//!   token, composing to `eps * sum_i d(x_i, x'_i)` over a value.
//! - **SanText+**: the least frequent fraction `w` of the vocabulary is
//!   sensitive (`V_S`) and is also the output set (`V_P = V_S`). A sensitive
//!   token is always re-drawn from `V_P`; a non-sensitive token is kept with
//!   probability `1 - p`, else re-drawn from `V_P`. Guarantee:
//!   `(V_S, V_P, eps, ln(1/p))`-UMLDP (Theorem 2).
//!
//! Words outside the vocabulary are treated as sensitive and replaced by a
//! uniform draw from the output set: that draw does not depend on the word,
//! so it costs eps 0 among out-of-vocabulary words (documented in
//! `docs/mechanisms.md`).

use std::sync::Arc;

use rand::{Rng, RngCore};

use crate::cost::{Cost, Guarantee};
use crate::error::{Error, Result};
use crate::mechanisms::exponential::ExpSampler;
use crate::mechanisms::vocabulary::Vocabulary;
use crate::mechanisms::words::Words;
use crate::mechanisms::{check_eps, check_unit, Mechanism, Sanitized};
use crate::rng::RandomMode;
use crate::text::Segmented;

mod spec;

pub use spec::{SanTextPlusSpec, SanTextSpec};

/// SanText over one vocabulary at one eps.
#[derive(Debug)]
pub struct SanText {
    vocab: Arc<Vocabulary>,
    sampler: Arc<ExpSampler>,
    eps: f64,
    /// [`Mechanism::params`], from the spec.
    key: String,
}

impl SanText {
    /// SanText as `spec` says, over `vocab` (the words `spec.words` names).
    pub fn from_spec(vocab: Arc<Vocabulary>, spec: &SanTextSpec) -> Result<Self> {
        Self::new(vocab, spec.eps)
    }

    /// SanText at `eps` (> 0, finite) over `vocab`.
    pub fn new(vocab: Arc<Vocabulary>, eps: f64) -> Result<Self> {
        check_eps(eps)?;
        Self::new_allowing_zero(vocab, eps)
    }

    /// SanText that also accepts eps = 0 (the uniform mechanism); for tests
    /// of the mechanism's limits, not exposed through SQL.
    pub fn new_allowing_zero(vocab: Arc<Vocabulary>, eps: f64) -> Result<Self> {
        if eps != 0.0 {
            check_eps(eps)?;
        }
        let sampler = vocab.sampler(0)?;
        let key = SanTextSpec::new(eps, Words::default()).key_params(vocab.embeddings().name());
        Ok(SanText {
            vocab,
            sampler,
            eps,
            key,
        })
    }

    /// The sampler (its exact distributions are used by tests and audits).
    pub fn sampler(&self) -> &Arc<ExpSampler> {
        &self.sampler
    }
}

impl Mechanism for SanText {
    fn name(&self) -> &'static str {
        "santext"
    }

    fn params(&self) -> String {
        self.key.clone()
    }

    fn sanitize(&self, text: &str, rng: &mut dyn RngCore, _: &RandomMode) -> Result<Sanitized> {
        let (text, n) = redraw_words(&self.vocab, &self.sampler, text, rng, |x, rng| {
            Some(self.sampler.sample(x, self.eps, rng))
        })?;
        let emb = self.vocab.embeddings();
        let diameter = f64::from(emb.diameter_bound());
        let cost = Cost {
            mechanism: "santext",
            guarantee: Guarantee::MetricLdp { eps: self.eps },
            tokens: n.tokens,
            oov_tokens: n.oov,
            kept_tokens: n.kept,
            composition: "eps * sum_i d(x_i, x'_i) over the value's tokens".to_string(),
            // Out-of-vocabulary words count too: against an in-vocabulary
            // neighbour their uniform draw costs up to eps * D / 2.
            worst_case_eps: self.eps * diameter * n.tokens as f64,
            diameter_bound: diameter,
            embedding: emb.name().to_string(),
            output_set_size: emb.len(),
            labels: Vec::new(),
            stages: Vec::new(),
            vocabulary: self.vocab.release().cloned(),
        };
        Ok(Sanitized {
            text,
            cost,
            protected: Vec::new(),
        })
    }
}

/// SanText+ over one vocabulary.
#[derive(Debug)]
pub struct SanTextPlus {
    vocab: Arc<Vocabulary>,
    sampler: Arc<ExpSampler>,
    eps: f64,
    p: f64,
    /// First row of `V_S = V_P`; rows below it are non-sensitive.
    split: u32,
    /// [`Mechanism::params`], from the spec.
    key: String,
}

impl SanTextPlus {
    /// SanText+ as `spec` says, over `vocab` (the words `spec.words` names).
    pub fn from_spec(vocab: Arc<Vocabulary>, spec: &SanTextPlusSpec) -> Result<Self> {
        Self::new(vocab, spec.eps, spec.p, spec.w)
    }

    /// SanText+ at `eps` (> 0), replacing non-sensitive words with
    /// probability `p` in [0, 1], with the least frequent fraction `w` in
    /// (0, 1] of the vocabulary sensitive.
    pub fn new(vocab: Arc<Vocabulary>, eps: f64, p: f64, w: f64) -> Result<Self> {
        check_eps(eps)?;
        check_unit("p", p)?;
        check_unit("w", w)?;
        let n = vocab.embeddings().len();
        let sensitive = (w * n as f64).round() as usize;
        if sensitive == 0 {
            return Err(Error::invalid(
                "w",
                format!(
                    "w = {w} makes no word of the {n}-word vocabulary sensitive; use a larger w"
                ),
            ));
        }
        let split = (n - sensitive) as u32;
        let sampler = vocab.sampler(split)?;
        let key =
            SanTextPlusSpec::new(eps, p, w, Words::default()).key_params(vocab.embeddings().name());
        Ok(SanTextPlus {
            vocab,
            sampler,
            eps,
            p,
            split,
            key,
        })
    }

    /// True when row `id` is in the sensitive set `V_S`.
    pub fn is_sensitive(&self, id: u32) -> bool {
        id >= self.split
    }

    /// The sampler over `V_P`.
    pub fn sampler(&self) -> &Arc<ExpSampler> {
        &self.sampler
    }
}

impl Mechanism for SanTextPlus {
    fn name(&self) -> &'static str {
        "santext_plus"
    }

    fn params(&self) -> String {
        self.key.clone()
    }

    fn sanitize(&self, text: &str, rng: &mut dyn RngCore, _: &RandomMode) -> Result<Sanitized> {
        let (text, n) = redraw_words(&self.vocab, &self.sampler, text, rng, |x, rng| {
            if !self.is_sensitive(x) && rng.random::<f64>() >= self.p {
                None
            } else {
                Some(self.sampler.sample(x, self.eps, rng))
            }
        })?;
        let emb = self.vocab.embeddings();
        let diameter = f64::from(emb.diameter_bound());
        let eps0 = if self.p > 0.0 {
            (1.0 / self.p).ln()
        } else {
            f64::INFINITY
        };
        let cost = Cost {
            mechanism: "santext_plus",
            guarantee: Guarantee::Umldp {
                eps: self.eps,
                eps0,
            },
            tokens: n.tokens,
            oov_tokens: n.oov,
            kept_tokens: n.kept,
            composition: "eps * sum_i d(x_i, x'_i) + eps0 * tokens, for outputs in V_P".to_string(),
            worst_case_eps: (self.eps * diameter + eps0) * n.tokens as f64,
            diameter_bound: diameter,
            embedding: emb.name().to_string(),
            output_set_size: emb.len() - self.split as usize,
            labels: Vec::new(),
            stages: Vec::new(),
            vocabulary: self.vocab.release().cloned(),
        };
        Ok(Sanitized {
            text,
            cost,
            protected: Vec::new(),
        })
    }
}

/// Token counts of one value.
struct Counts {
    tokens: usize,
    oov: usize,
    kept: usize,
}

/// The loop both mechanisms share: cut `text` into words, map each word to
/// its tokens, let `draw` decide each in-vocabulary token (`None` keeps it),
/// replace out-of-vocabulary words by a uniform draw from the sampler's
/// output set, and re-assemble with the original layout and casing.
fn redraw_words(
    vocab: &Vocabulary,
    sampler: &ExpSampler,
    text: &str,
    rng: &mut dyn RngCore,
    mut draw: impl FnMut(u32, &mut dyn RngCore) -> Option<u32>,
) -> Result<(String, Counts)> {
    let seg = Segmented::new(text);
    let mut n = Counts {
        tokens: 0,
        oov: 0,
        kept: 0,
    };
    let mut replacements = Vec::with_capacity(seg.len());
    let mut xs = Vec::new();
    let mut ids = Vec::new();
    for (i, w) in seg.words().enumerate() {
        crate::cancel::check_every(i, 256)?;
        xs.clear();
        ids.clear();
        if vocab.tokens_into(seg.word_str(w), &mut xs) {
            for &x in &xs {
                n.tokens += 1;
                ids.push(draw(x, rng).unwrap_or_else(|| {
                    n.kept += 1;
                    x
                }));
            }
        } else {
            n.oov += 1;
            n.tokens += 1;
            ids.push(sampler.uniform(rng));
        }
        replacements.push(Some(vocab.render(&ids)));
    }
    Ok((seg.render(&replacements), n))
}
