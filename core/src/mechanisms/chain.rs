//! A chain of mechanisms applied in order (`deidentify THEN santext_plus`):
//! names replaced by surrogates before word-level DP, so that frequent
//! names (which SanText+ treats as non-sensitive) never pass verbatim.
//!
//! The cost lists every stage's own cost. The chain's guarantee is the
//! first stage's: every later stage only post-processes its output, which
//! cannot weaken it. Each later stage's guarantee holds with respect to its
//! own input (the previous stage's output) and is stated in `stages`.

use rand::RngCore;

use crate::cost::Cost;
use crate::error::{Error, Result};
use crate::mechanisms::{Mechanism, Sanitized};
use crate::rng::RandomMode;

/// Most stages in one chain.
pub const MAX_STAGES: usize = 4;

/// Mechanisms applied one after the other.
pub struct Chain {
    stages: Vec<Box<dyn Mechanism>>,
}

impl std::fmt::Debug for Chain {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Chain")
            .field("params", &self.params())
            .finish()
    }
}

impl Chain {
    /// A chain of two to [`MAX_STAGES`] built mechanisms.
    pub fn new(stages: Vec<Box<dyn Mechanism>>) -> Result<Self> {
        if !(2..=MAX_STAGES).contains(&stages.len()) {
            return Err(Error::invalid(
                "stages",
                format!("a chain has 2 to {MAX_STAGES} stages, got {}", stages.len()),
            ));
        }
        Ok(Chain { stages })
    }
}

const COMPOSITION: &str = "stages run in order; the chain's guarantee is the first stage's (later stages post-process its output); each later stage's guarantee holds for its own input and is listed under stages";

impl Mechanism for Chain {
    fn name(&self) -> &'static str {
        "chain"
    }

    fn params(&self) -> String {
        self.stages
            .iter()
            .map(|s| format!("{}({})", s.name(), s.params()))
            .collect::<Vec<_>>()
            .join(" THEN ")
    }

    fn uses_detection(&self) -> bool {
        self.stages.iter().any(|s| s.uses_detection())
    }

    fn sanitize(&self, text: &str, rng: &mut dyn RngCore) -> Result<Sanitized> {
        self.sanitize_in(text, rng, &RandomMode::Os)
    }

    fn sanitize_in(
        &self,
        text: &str,
        rng: &mut dyn RngCore,
        mode: &RandomMode,
    ) -> Result<Sanitized> {
        let mut current = text.to_string();
        let mut costs = Vec::with_capacity(self.stages.len());
        for stage in &self.stages {
            crate::cancel::check()?;
            let out = stage.sanitize_in(&current, rng, mode)?;
            current = out.text;
            costs.push(out.cost);
        }
        let (Some(first), Some(last)) = (costs.first(), costs.last()) else {
            return Err(Error::invalid("stages", "a chain has no stage"));
        };
        let cost = Cost {
            mechanism: "chain",
            guarantee: first.guarantee.clone(),
            tokens: last.tokens,
            oov_tokens: last.oov_tokens,
            kept_tokens: last.kept_tokens,
            composition: COMPOSITION.to_string(),
            worst_case_eps: first.worst_case_eps,
            diameter_bound: 0.0,
            embedding: String::new(),
            output_set_size: last.output_set_size,
            labels: Vec::new(),
            // A vocabulary any stage drew from is spent with the chain.
            vocabulary: costs.iter().find_map(|c| c.vocabulary.clone()),
            stages: costs,
        };
        Ok(Sanitized {
            text: current,
            cost,
        })
    }
}

#[cfg(test)]
mod tests {
    use crate::mechanisms::MechanismSpec;
    use crate::{Engine, EngineConfig};
    use rand::SeedableRng;

    #[test]
    fn names_are_replaced_before_word_level_dp_and_every_stage_is_costed() {
        let dir = crate::assets::resolve_dir(None);
        let engine = Engine::new(EngineConfig::new(dir));
        let spec = MechanismSpec::parse(
            "chain",
            &serde_json::json!({"stages": [
                {"mechanism": "deidentify", "params": {"strategy": "typed_placeholder"}},
                {"mechanism": "santext_plus", "params": {"eps": 3, "p": 0.0}}]}),
        )
        .unwrap();
        let Some(m) = crate::assets::load_or_skip(|_| engine.build(&spec)) else {
            return;
        };
        let mut rng = rand_chacha::ChaCha20Rng::seed_from_u64(2);
        // p = 0: SanText+ keeps every non-sensitive word, so only the first
        // stage can have removed the (common, hence non-sensitive) name.
        let out = m.sanitize("John Smith was seen today.", &mut rng).unwrap();
        assert!(
            !out.text.contains("John") && !out.text.contains("Smith"),
            "{}",
            out.text
        );
        assert_eq!(out.cost.stages.len(), 2);
        assert_eq!(out.cost.stages[0].mechanism, "deidentify");
        assert_eq!(out.cost.stages[1].mechanism, "santext_plus");
        assert_eq!(out.cost.guarantee, out.cost.stages[0].guarantee);
        assert_eq!(
            spec.guarantee().unwrap(),
            MechanismSpec::parse(
                "deidentify",
                &serde_json::json!({"strategy": "typed_placeholder"})
            )
            .unwrap()
            .guarantee()
            .unwrap()
        );
        assert!(m.uses_detection());
    }
}
