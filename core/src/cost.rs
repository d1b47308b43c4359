//! Privacy accounting: what one call of a mechanism spent (docs/mechanisms.md).
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
    /// Upper bound on the embedding distance between two tokens (0, and
    /// left out of the JSON, for mechanisms that use no embedding).
    #[serde(skip_serializing_if = "is_zero")]
    pub diameter_bound: f64,
    /// Embedding set used (empty, and left out of the JSON, for mechanisms
    /// that use none).
    #[serde(skip_serializing_if = "String::is_empty")]
    pub embedding: String,
    /// Vocabulary size the mechanism drew from.
    pub output_set_size: usize,
    /// Per detected label, what `deidentify` did and what it guarantees
    /// (left out of the JSON for the other mechanisms).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub labels: Vec<LabelCost>,
    /// For a chain of mechanisms, each stage's own cost, in order (left
    /// out of the JSON otherwise).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub stages: Vec<Cost>,
    /// The released vocabulary the mechanism drew from, when it was not
    /// the embedding's own (left out of the JSON otherwise).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub vocabulary: Option<VocabularyCost>,
}

/// The release of a vocabulary drawn from private data
/// ([`crate::vocab`]): spent once, when it was built, for every value of
/// its source; every mechanism that uses it adds it once, not per call.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct VocabularyCost {
    /// The vocabulary's name.
    pub name: String,
    /// eps of its release (per value of the source).
    pub eps: f64,
    /// delta of its release.
    pub delta: f64,
    /// SHA-256 of its word list: which version was used.
    pub digest: String,
}

/// What entity replacement did to the spans of one label.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct LabelCost {
    /// The detector's label (`PERSON`, `DATE`, ...).
    pub label: &'static str,
    /// The operator applied (`full_entity`, `shift`, `keep`, ...).
    pub operator: &'static str,
    /// Spans of this label in the value.
    pub spans: usize,
    /// The guarantee for these spans: the lemma's eps for replacement
    /// operators, none for `shift` and `keep`.
    pub guarantee: Guarantee,
}

/// True for 0.0: a field that does not apply to the mechanism.
#[allow(clippy::trivially_copy_pass_by_ref)] // serde passes fields by reference
fn is_zero(x: &f64) -> bool {
    *x == 0.0
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A cost without an embedding says nothing about one.
    #[test]
    fn fields_that_do_not_apply_are_left_out() {
        let c = Cost {
            mechanism: "deidentify",
            guarantee: Guarantee::Replacement { eps: 0.0, p: 1.0 },
            tokens: 2,
            oov_tokens: 0,
            kept_tokens: 0,
            composition: String::new(),
            worst_case_eps: 0.0,
            diameter_bound: 0.0,
            embedding: String::new(),
            output_set_size: 2,
            labels: Vec::new(),
            stages: Vec::new(),
            vocabulary: None,
        };
        let json = serde_json::to_value(&c).unwrap();
        assert!(json.get("embedding").is_none(), "{json}");
        assert!(json.get("diameter_bound").is_none(), "{json}");
        assert!(json.get("tokens").is_some(), "{json}");
        assert!(json.get("labels").is_none(), "{json}");
    }
}
