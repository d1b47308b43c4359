//! Names for computed-once outputs: what a store of sanitized values (the
//! extension's `dptext.store`, docs/masking.md "Computed once") files each
//! output under.
//!
//! Under a secret key a mechanism's output is a function of (value, rule,
//! key), so a model-based rule needs to run once per value, not once per
//! read. A stored output is filed under a **tag**: an HMAC-SHA256, under a
//! key derived from the masking key with its own domain, of the rule's
//! identity ([`rule_id`]), the grouping value and the raw value. So:
//!
//! - the store's rows reveal nothing about raw values to whoever lacks the
//!   key: no digest of a raw value that a guess could be matched against;
//! - no SQL-callable function computes a tag (the derivation's domain is
//!   used nowhere else), so a tag cannot be computed for a guessed value;
//! - a changed rule (mechanism, parameters, model or list versions, the
//!   user's recognizers) or a changed key gives other tags: an output is
//!   never served to a rule or key it was not computed for.

use hmac::{Hmac, Mac};
use sha2::{Digest, Sha256};

use crate::rng::Secret;

/// The domain of the key that tags are computed under.
const TAG_DOMAIN: &[u8] = b"dptext computed-once store tag v1";

/// The identity of a rule for the store: a hex SHA-256 of every part that
/// decides its outputs (mechanism name, canonical parameters, versions of
/// the models and lists, a fingerprint of the user's recognizers), each
/// part length-prefixed so that no two lists collide.
///
/// ```
/// let a = dptext_core::store::rule_id(&[b"deidentify", b"{}"]);
/// assert_eq!(a.len(), 32);
/// assert_ne!(a, dptext_core::store::rule_id(&[b"deidentify", b"{\"p\":0.5}"]));
/// ```
pub fn rule_id(parts: &[&[u8]]) -> String {
    let mut h = Sha256::new();
    h.update(b"dptext store rule v1\0");
    for part in parts {
        h.update((part.len() as u64).to_le_bytes());
        h.update(part);
    }
    hex::encode(&h.finalize()[..16])
}

/// The key tags are computed under, derived once from the masking key.
#[derive(Clone)]
pub struct TagKey(Hmac<Sha256>);

impl TagKey {
    /// Derives the tag key from the masking key.
    pub fn new(secret: &Secret) -> Self {
        let derived = secret.derive(TAG_DOMAIN);
        // HMAC accepts keys of any length: this cannot fail.
        TagKey(Hmac::<Sha256>::new_from_slice(&derived).unwrap_or_else(|_| unreachable!()))
    }

    /// The tag of `value` under the rule `rule` ([`rule_id`]) with the
    /// grouping value `group` (`None`: no group; distinct from an empty one).
    ///
    /// ```
    /// use dptext_core::{rng::Secret, store::TagKey};
    /// let k = TagKey::new(&Secret::new("0123456789abcdef0123"));
    /// let t = k.tag("r1", None, "Seen by Dr. Smith");
    /// assert_eq!(t, k.tag("r1", None, "Seen by Dr. Smith"));
    /// assert_ne!(t, k.tag("r2", None, "Seen by Dr. Smith"));
    /// assert_ne!(t, k.tag("r1", Some(""), "Seen by Dr. Smith"));
    /// ```
    pub fn tag(&self, rule: &str, group: Option<&str>, value: &str) -> [u8; 32] {
        let mut mac = self.0.clone();
        for part in [Some(rule), group, Some(value)] {
            match part {
                Some(p) => {
                    mac.update(&[1]);
                    mac.update(&(p.len() as u64).to_le_bytes());
                    mac.update(p.as_bytes());
                }
                None => mac.update(&[0]),
            }
        }
        mac.finalize().into_bytes().into()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::RandomMode;

    #[test]
    fn tags_depend_on_key_rule_group_and_value() {
        let k1 = TagKey::new(&Secret::new("0123456789abcdef0123"));
        let k2 = TagKey::new(&Secret::new("0123456789abcdef0124"));
        let t = k1.tag("r", Some("g"), "v");
        assert_ne!(t, k2.tag("r", Some("g"), "v"));
        assert_ne!(t, k1.tag("r", Some("h"), "v"));
        assert_ne!(t, k1.tag("r", None, "v"));
        assert_ne!(t, k1.tag("r", Some("g"), "w"));
        // Length prefixes keep ("gv", "") apart from ("g", "v").
        assert_ne!(k1.tag("r", Some("gv"), ""), k1.tag("r", Some("g"), "v"));
    }

    /// No keyed random stream a mechanism draws from equals a tag: the
    /// derivation's domain is the store's own.
    #[test]
    fn tags_are_not_a_mechanism_stream() {
        use rand::RngCore;
        let secret = Secret::new("0123456789abcdef0123");
        let k = TagKey::new(&secret);
        let tag = k.tag("r", None, "v");
        let mut rng = RandomMode::Keyed(secret).rng_for(&[b"r", b"v"]);
        let mut drawn = [0u8; 32];
        rng.fill_bytes(&mut drawn);
        assert_ne!(tag, drawn);
    }
}
