//! Built mechanisms by spec, most recently used first: what
//! [`crate::Engine::mechanism`] serves from, so that a front end calling
//! with the same parameters row after row builds the mechanism once.
//!
//! A short list searched by equality rather than a hash map: specs hold
//! floats (no `Hash`), a workload uses a handful of specs at a time, and
//! comparing a few fields is cheaper than writing a canonical key per call.

use std::sync::{Arc, Mutex, PoisonError};

use super::{Mechanism, MechanismSpec};

/// Specs kept; the least recently used goes first.
pub const CAPACITY: usize = 32;

/// A bounded, most-recently-used-first list of built mechanisms.
#[derive(Default)]
pub struct MechanismCache {
    entries: Mutex<Vec<(MechanismSpec, Arc<dyn Mechanism>)>>,
}

impl std::fmt::Debug for MechanismCache {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MechanismCache")
            .field("len", &self.len())
            .finish()
    }
}

impl MechanismCache {
    /// The mechanism built for a spec equal to `spec`, moved to the front.
    pub fn get(&self, spec: &MechanismSpec) -> Option<Arc<dyn Mechanism>> {
        let mut entries = self.entries.lock().unwrap_or_else(PoisonError::into_inner);
        let i = entries.iter().position(|(s, _)| s == spec)?;
        let m = entries[i].1.clone();
        if i > 0 {
            let e = entries.remove(i);
            entries.insert(0, e);
        }
        Some(m)
    }

    /// Keeps `mechanism` for `spec` at the front (replacing an equal
    /// spec's), dropping the least recently used beyond [`CAPACITY`].
    pub fn insert(&self, spec: MechanismSpec, mechanism: Arc<dyn Mechanism>) {
        let mut entries = self.entries.lock().unwrap_or_else(PoisonError::into_inner);
        entries.retain(|(s, _)| *s != spec);
        entries.insert(0, (spec, mechanism));
        entries.truncate(CAPACITY);
    }

    /// Forgets every built mechanism (a resource they hold was replaced).
    pub fn clear(&self) {
        self.entries
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clear();
    }

    /// How many specs are kept.
    pub fn len(&self) -> usize {
        self.entries
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .len()
    }

    /// True when nothing is kept.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::mechanisms::Sanitized;

    /// A mechanism that only says which spec it was built for.
    struct Named(String);

    impl Mechanism for Named {
        fn name(&self) -> &'static str {
            "named"
        }
        fn params(&self) -> String {
            self.0.clone()
        }
        fn sanitize(
            &self,
            _: &str,
            _: &mut dyn rand::RngCore,
            _: &crate::RandomMode,
        ) -> crate::Result<Sanitized> {
            Err(crate::Error::invalid("params", "not a real mechanism"))
        }
    }

    fn spec(eps: f64) -> MechanismSpec {
        MechanismSpec::parse("santext", &serde_json::json!({ "eps": eps })).expect("valid")
    }

    #[test]
    fn equal_specs_share_one_build_and_the_oldest_goes_first() {
        let cache = MechanismCache::default();
        assert!(cache.get(&spec(1.0)).is_none());
        for i in 0..CAPACITY {
            let eps = 1.0 + i as f64;
            cache.insert(spec(eps), Arc::new(Named(format!("{eps}"))));
        }
        assert_eq!(cache.len(), CAPACITY);
        // Using eps 1 makes eps 2 the least recently used.
        assert_eq!(cache.get(&spec(1.0)).expect("kept").params(), "1");
        cache.insert(spec(100.0), Arc::new(Named("100".into())));
        assert_eq!(cache.len(), CAPACITY);
        assert!(
            cache.get(&spec(2.0)).is_none(),
            "the least recently used is dropped"
        );
        assert!(cache.get(&spec(1.0)).is_some());
        assert_eq!(cache.get(&spec(100.0)).expect("kept").params(), "100");
        // Another parameter is another spec.
        let other = MechanismSpec::parse(
            "santext",
            &serde_json::json!({"eps": 1.0, "embedding": "wordpiece"}),
        )
        .expect("valid");
        assert!(cache.get(&other).is_none());
        cache.insert(spec(1.0), Arc::new(Named("again".into())));
        assert_eq!(cache.get(&spec(1.0)).expect("kept").params(), "again");
        assert_eq!(cache.len(), CAPACITY);
        cache.clear();
        assert!(cache.is_empty());
    }
}
