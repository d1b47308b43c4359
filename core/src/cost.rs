//! Privacy accounting: what one call of a mechanism spent (MECHANISMS.md 8).
//!
//! Every mechanism returns a [`Cost`] with its text. It states the per-token
//! guarantee, how it composes over the value, and a worst-case number for
//! people who need a single epsilon. It serialises to the JSON that SQL's
//! `sanitize()` returns under `"cost"`.

use serde::Serialize;

/// The formal guarantee a mechanism gives per token.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Guarantee {
    /// Metric local DP: `Pr[M(x)=y] <= exp(eps * d(x, x')) * Pr[M(x')=y]`.
    MetricLdp {
        /// eps per unit of embedding distance.
        eps: f64,
    },
    /// Pure eps-DP per replaced token among the inputs that share an output
    /// set (CusText, Eq. 9 with sensitivity 1).
    Dp {
        /// eps per replaced token.
        eps: f64,
    },
    /// Entity replacement (Adelani et al.): each span replaced with
    /// probability `p` by a surrogate independent of the original;
    /// `eps = max_t log((1 - p + p pi(t)) / (p pi(t)))` per span.
    Replacement {
        /// The lemma's eps per span.
        eps: f64,
        /// Replacement probability.
        p: f64,
    },
    /// No formal guarantee, with the reason.
    None {
        /// Why there is none.
        reason: String,
    },
    /// Utility-optimised metric LDP (SanText+, Theorem 2):
    /// `Pr[M(x)=y] <= exp(eps * d(x, x') + eps0) * Pr[M(x')=y]` for `y` in
    /// the protected set; non-sensitive tokens may be output unchanged.
    Umldp {
        /// eps per unit of embedding distance.
        eps: f64,
        /// The additive term `ln(1/p)`.
        eps0: f64,
    },
}

/// What one call spent.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Cost {
    /// Mechanism name (`santext`, `santext_plus`, ...).
    pub mechanism: &'static str,
    /// Per-token guarantee.
    pub guarantee: Guarantee,
    /// Number of tokens the mechanism was applied to.
    pub tokens: usize,
    /// Tokens outside the vocabulary: replaced by a uniform draw from the
    /// protected set, independent of the input (eps 0 among such tokens).
    pub oov_tokens: usize,
    /// Tokens released unchanged without randomisation (SanText+ keeps
    /// non-sensitive words with probability 1 - p; those are counted here
    /// only when they were actually kept).
    pub kept_tokens: usize,
    /// How the per-token guarantee composes over the value.
    pub composition: String,
    /// The composed bound with every distance at its largest possible value
    /// (the embedding's diameter bound): a single, pessimistic epsilon.
    pub worst_case_eps: f64,
    /// Upper bound on the embedding distance between two tokens.
    pub diameter_bound: f64,
    /// Embedding set used.
    pub embedding: String,
    /// Vocabulary size the mechanism drew from.
    pub output_set_size: usize,
}
