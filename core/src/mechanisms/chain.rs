//! A chain of mechanisms applied in order (`deidentify THEN santext_plus`):
//! names replaced by surrogates before word-level DP, so that frequent
//! names (which SanText+ treats as non-sensitive) never pass verbatim.
//!
//! The cost lists every stage's own cost. The chain's guarantee is the
//! first stage's: every later stage only post-processes its output, which
//! cannot weaken it. Each later stage's guarantee holds with respect to its
//! own input (the previous stage's output) and is stated in `stages`.

use rand::RngCore;

use std::ops::Range;

use crate::cost::{Cost, Guarantee};
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

const COMPOSITION: &str = "stages run in order, each leaving alone what an earlier stage replaced; the chain's guarantee is the first stage's (later stages post-process its output) or, when it has none, the last stage's that has one, for the text that stage receives; each stage's guarantee holds for its own input and is listed under stages";

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

    fn needs_key(&self) -> Option<&'static str> {
        self.stages.iter().find_map(|s| s.needs_key())
    }

    fn sanitize(&self, text: &str, rng: &mut dyn RngCore, mode: &RandomMode) -> Result<Sanitized> {
        self.sanitize_many(&mut [(text, rng)], mode)
            .pop()
            .unwrap_or_else(|| Err(Error::invalid("stages", "a chain has no stage")))
    }

    /// Each stage over every value still going, so that a stage that runs
    /// detection shares its model calls among the values. What a stage
    /// replaced (a detection-based stage's surrogates, shifted dates,
    /// redactions) later stages leave alone: a stage that detects drops the
    /// spans overlapping it, a word mechanism is run on the text between.
    fn sanitize_many(
        &self,
        values: &mut [(&str, &mut dyn RngCore)],
        mode: &RandomMode,
    ) -> Vec<Result<Sanitized>> {
        // Each value's text so far, what later stages leave alone in it,
        // and its stages' costs; or its error.
        let mut state: Vec<Result<Progress>> = values
            .iter()
            .map(|(t, _)| {
                Ok(Progress {
                    text: t.to_string(),
                    protected: Vec::new(),
                    costs: Vec::with_capacity(self.stages.len()),
                })
            })
            .collect();
        for stage in &self.stages {
            if let Err(e) = crate::cancel::check() {
                for s in state.iter_mut().filter(|s| s.is_ok()) {
                    *s = Err(e.again());
                }
                break;
            }
            let live: Vec<usize> = (0..state.len()).filter(|&i| state[i].is_ok()).collect();
            let outs: Vec<Result<Sanitized>> = if stage.uses_detection() {
                let keep: Vec<Vec<Range<usize>>> = live
                    .iter()
                    .filter_map(|&i| state[i].as_ref().ok().map(|p| p.protected.clone()))
                    .collect();
                let mut batch: Vec<(&str, &mut dyn RngCore)> = values
                    .iter_mut()
                    .zip(&state)
                    .filter_map(|((_, rng), s)| {
                        Some((
                            s.as_ref().ok()?.text.as_str(),
                            &mut **rng as &mut dyn RngCore,
                        ))
                    })
                    .collect();
                stage.sanitize_many_keeping(&mut batch, &keep, mode)
            } else {
                live.iter()
                    .map(|&i| {
                        let p = state[i].as_ref().map_err(|e| e.again())?;
                        between(
                            stage.as_ref(),
                            &p.text,
                            &p.protected,
                            &mut *values[i].1,
                            mode,
                        )
                    })
                    .collect()
            };
            for (i, out) in live.into_iter().zip(outs) {
                match (out, &mut state[i]) {
                    (Ok(o), Ok(p)) => {
                        p.text = o.text;
                        p.protected = o.protected;
                        p.costs.push(o.cost);
                    }
                    (Err(e), s) => *s = Err(e),
                    (Ok(_), Err(_)) => {}
                }
            }
        }
        state
            .into_iter()
            .map(|s| s.and_then(|p| combine(p.text, p.protected, p.costs)))
            .collect()
    }
}

/// One value on its way through the chain.
struct Progress {
    text: String,
    protected: Vec<Range<usize>>,
    costs: Vec<Cost>,
}

/// A word mechanism over `text` but for its `protected` ranges (what an
/// earlier stage replaced): each stretch between them is sanitized on its
/// own, in order, with the value's random source, and the protected text
/// is kept; the stretches' costs add up. Without protected ranges, the
/// mechanism over the whole text, as before chains kept anything.
fn between(
    stage: &dyn Mechanism,
    text: &str,
    protected: &[Range<usize>],
    rng: &mut dyn RngCore,
    mode: &RandomMode,
) -> Result<Sanitized> {
    if protected.is_empty() {
        return stage.sanitize(text, rng, mode);
    }
    let mut out = String::with_capacity(text.len());
    let mut kept = Vec::with_capacity(protected.len());
    let mut cost: Option<Cost> = None;
    let mut pos = 0;
    for r in protected
        .iter()
        .chain(std::iter::once(&(text.len()..text.len())))
    {
        let stretch = &text[pos..r.start.max(pos)];
        if !stretch.is_empty() {
            let s = stage.sanitize(stretch, rng, mode)?;
            out.push_str(&s.text);
            cost = Some(match cost {
                None => s.cost,
                Some(mut c) => {
                    c.tokens += s.cost.tokens;
                    c.oov_tokens += s.cost.oov_tokens;
                    c.kept_tokens += s.cost.kept_tokens;
                    c.worst_case_eps += s.cost.worst_case_eps;
                    c
                }
            });
        }
        let at = out.len();
        out.push_str(&text[r.start.max(pos)..r.end]);
        if r.end > r.start {
            kept.push(at..out.len());
        }
        pos = r.end.max(pos);
    }
    let cost = match cost {
        Some(c) => c,
        // Nothing but protected text: the stage's cost of an empty value.
        None => stage.sanitize("", rng, mode)?.cost,
    };
    Ok(Sanitized {
        text: out,
        cost,
        protected: kept,
    })
}

/// The chain's output: the last stage's text, every stage's cost.
fn combine(text: String, protected: Vec<Range<usize>>, costs: Vec<Cost>) -> Result<Sanitized> {
    let (Some(first), Some(last)) = (costs.first(), costs.last()) else {
        return Err(Error::invalid("stages", "a chain has no stage"));
    };
    // As `MechanismSpec::guarantee` states it: the first stage's, or when
    // it has none the last stage's that has one.
    let formal = |c: &&Cost| !matches!(c.guarantee, Guarantee::None { .. });
    let stated = if formal(&first) {
        first
    } else {
        costs.iter().rev().find(formal).unwrap_or(first)
    };
    let cost = Cost {
        mechanism: "chain",
        guarantee: stated.guarantee.clone(),
        tokens: last.tokens,
        oov_tokens: last.oov_tokens,
        kept_tokens: last.kept_tokens,
        composition: COMPOSITION.to_string(),
        worst_case_eps: stated.worst_case_eps,
        diameter_bound: 0.0,
        embedding: String::new(),
        output_set_size: last.output_set_size,
        labels: Vec::new(),
        // A vocabulary any stage drew from is spent with the chain.
        vocabulary: costs.iter().find_map(|c| c.vocabulary.clone()),
        stages: costs,
    };
    Ok(Sanitized {
        text,
        cost,
        protected,
    })
}

#[cfg(test)]
mod tests {
    use crate::cost::Guarantee;
    use crate::mechanisms::MechanismSpec;
    use crate::{Engine, EngineConfig};
    use rand::SeedableRng;

    /// A chain whose first stage shifts dates (no formal guarantee) states
    /// its word-level stage's guarantee and what it rests on, never none.
    #[test]
    fn a_word_level_stage_after_detection_gives_the_chain_its_guarantee() {
        let chain = |first: serde_json::Value| {
            MechanismSpec::parse(
                "chain",
                &serde_json::json!({"stages": [
                    {"mechanism": "deidentify", "params": first},
                    {"mechanism": "santext_plus", "params": {"eps": 3}}]}),
            )
            .unwrap()
        };
        let shifted = chain(serde_json::json!({"operators": "DATE:shift,ID:redact"}));
        assert!(
            matches!(shifted.guarantee().unwrap(), Guarantee::Umldp { eps, .. } if eps == 3.0),
            "{:?}",
            shifted.guarantee()
        );
        let why = shifted.rests_on();
        assert!(why.contains("santext_plus stage's"), "{why}");
        assert!(why.contains("misses pass unchanged"), "{why}");
        // A first stage with a guarantee keeps giving it (post-processing).
        let replaced = chain(serde_json::json!({}));
        assert!(matches!(
            replaced.guarantee().unwrap(),
            Guarantee::Replacement { .. }
        ));
        assert!(replaced.rests_on().contains("first stage's"));
        let stated = shifted.stated_guarantee().unwrap();
        assert_eq!(stated["kind"], "umldp");
        assert!(stated["rests_on"].as_str().unwrap().contains("stage 2"));
        // Detection-based and whole-value rules say which they are.
        let d = MechanismSpec::parse("deidentify", &serde_json::json!({})).unwrap();
        assert!(d.rests_on().contains("spans it misses pass unchanged"));
        let w = MechanismSpec::parse("deidentify", &serde_json::json!({"whole": true})).unwrap();
        assert!(w.rests_on().contains("no detection involved"));
    }

    fn run(engine: &Engine, name: &str, params: serde_json::Value, text: &str) -> Option<String> {
        let spec = MechanismSpec::parse(name, &params).unwrap();
        let m = crate::assets::load_or_skip(|_| engine.build(&spec))?;
        let key = crate::RandomMode::Keyed(crate::rng::Secret::new("chain test key"));
        Some(engine.run(m.as_ref(), text, &key, &[]).unwrap().text)
    }

    const NOTE: &str = "Maria Lopez was seen on 03/04/2021 and again on 03/09/2021. \
        Record MRN-580486. She lives in Springfield.";

    fn dates(s: &str) -> Vec<String> {
        s.split(|c: char| c.is_whitespace() || c == '.')
            .filter(|w| w.len() == 10 && w.chars().filter(|c| *c == '/').count() == 2)
            .map(str::to_string)
            .collect()
    }

    /// NDD takes deidentify's operators: dates shift (by the shift
    /// deidentify draws for the same group and key, so both rules keep one
    /// patient's timeline alike), IDs are redacted, the rest is distorted.
    #[test]
    fn ndd_keeps_timelines_with_operators() {
        let engine = Engine::new(EngineConfig::new(crate::assets::resolve_dir(None)));
        let ops = serde_json::json!({"operators": "DATE:shift,ID:redact", "group": "patient 7"});
        let Some(ndd) = run(&engine, "ndd", ops.clone(), NOTE) else {
            return;
        };
        let Some(deid) = run(&engine, "deidentify", ops, NOTE) else {
            return;
        };
        let (got, want) = (dates(&ndd), dates(&deid));
        assert_eq!(got.len(), 2, "{ndd}");
        assert_eq!(got, want, "{ndd} / {deid}");
        assert_ne!(got, dates(NOTE), "{ndd}");
        assert!(
            ndd.contains("[REDACTED]") && !ndd.contains("580486"),
            "{ndd}"
        );
        assert!(!ndd.contains("Maria Lopez"), "{ndd}");
        // Without operators NDD is as it was: every span distorted.
        let Some(plain) = run(&engine, "ndd", serde_json::json!({}), NOTE) else {
            return;
        };
        assert!(!plain.contains("[REDACTED]"), "{plain}");
    }

    /// A later stage leaves alone what an earlier stage replaced: the
    /// shifted dates survive an NDD stage and a SanText+ stage, and
    /// placeholders are not re-drawn into words.
    #[test]
    fn later_stages_leave_alone_what_earlier_ones_replaced() {
        let engine = Engine::new(EngineConfig::new(crate::assets::resolve_dir(None)));
        let shift = serde_json::json!({"operators": "DATE:shift", "group": "patient 7"});
        let Some(alone) = run(&engine, "deidentify", shift.clone(), NOTE) else {
            return;
        };
        for second in [
            serde_json::json!({"mechanism": "ndd", "params": {}}),
            serde_json::json!({"mechanism": "santext_plus", "params": {"eps": 3}}),
        ] {
            let chain = serde_json::json!({"stages": [
                {"mechanism": "deidentify", "params": shift.clone()}, second.clone()]});
            let Some(out) = run(&engine, "chain", chain, NOTE) else {
                return;
            };
            assert_eq!(dates(&out), dates(&alone), "{second}: {out} / {alone}");
        }
        let placeholders = serde_json::json!({"stages": [
            {"mechanism": "deidentify", "params": {"strategy": "typed_placeholder"}},
            {"mechanism": "santext", "params": {"eps": 1}}]});
        let Some(out) = run(&engine, "chain", placeholders, NOTE) else {
            return;
        };
        assert!(out.contains("<PERSON>") && out.contains("<DATE>"), "{out}");
    }

    /// A grouped date shift without a key would move each value by its
    /// own shift: refused in every mode but keyed, naming the setting.
    #[test]
    fn a_grouped_shift_needs_a_key() {
        let engine = Engine::new(EngineConfig::new(crate::assets::resolve_dir(None)));
        let spec = MechanismSpec::parse(
            "deidentify",
            &serde_json::json!({"operators": "DATE:shift", "group": "patient 7"}),
        )
        .unwrap();
        let Some(m) = crate::assets::load_or_skip(|_| engine.build(&spec)) else {
            return;
        };
        for mode in [crate::RandomMode::Os, crate::RandomMode::Seeded(1)] {
            let err = engine
                .run(m.as_ref(), "Seen 2019-03-14.", &mode, &[])
                .unwrap_err();
            assert!(err.to_string().contains("dptext.key_file"), "{err}");
            assert_eq!(err.kind(), crate::ErrorKind::InvalidParameter);
            let many = engine.run_many(m.as_ref(), &["a", "b"], &mode, &[]);
            assert_eq!(many.len(), 2);
            assert!(many.iter().all(|r| r.is_err()));
        }
        let key = crate::RandomMode::Keyed(crate::rng::Secret::new("k"));
        assert!(engine
            .run(m.as_ref(), "Seen 2019-03-14.", &key, &[])
            .is_ok());
        // Without a group value (a NULL grouping column) nothing is promised.
        let plain = MechanismSpec::parse(
            "deidentify",
            &serde_json::json!({"operators": "DATE:shift"}),
        )
        .unwrap();
        let p = engine.build(&plain).unwrap();
        assert!(engine
            .run(p.as_ref(), "Seen 2019-03-14.", &crate::RandomMode::Os, &[])
            .is_ok());
    }

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
        let out = m
            .sanitize(
                "John Smith was seen today.",
                &mut rng,
                &crate::RandomMode::Os,
            )
            .unwrap();
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

    /// `Engine::run_many` gives each value what `Engine::run` gives it, for
    /// the mechanisms that batch detection (entity replacement, a chain
    /// starting with it, whole values) and for one that does not; a value
    /// over the limit fails alone.
    #[test]
    fn run_many_gives_each_value_what_run_gives() {
        let mut config = EngineConfig::new(crate::assets::resolve_dir(None));
        config.max_detect_bytes = 200;
        let engine = Engine::new(config);
        let long = "Maria Lopez was seen. ".repeat(20);
        let texts = [
            "John Smith was seen on 2024-03-01 at 42 Oak Street, Springfield.",
            "",
            long.as_str(),
            "KOWALCZYK, HELENA M\nDOB: 04/11/1931",
            "the patient is stable",
        ];
        let specs = [
            ("deidentify", serde_json::json!({"operators": "DATE:shift"})),
            ("deidentify", serde_json::json!({"whole": true})),
            (
                "chain",
                serde_json::json!({"stages": [
                    {"mechanism": "deidentify", "params": {"strategy": "typed_placeholder"}},
                    {"mechanism": "santext_plus", "params": {"eps": 3}}]}),
            ),
            ("santext", serde_json::json!({"eps": 3})),
        ];
        let mode = crate::RandomMode::Seeded(7);
        for (name, params) in specs {
            let spec = MechanismSpec::parse(name, &params).unwrap();
            let Some(m) = crate::assets::load_or_skip(|_| engine.build(&spec)) else {
                return;
            };
            let many = engine.run_many(m.as_ref(), &texts, &mode, &[b"col"]);
            assert_eq!(many.len(), texts.len());
            for (t, got) in texts.iter().zip(many) {
                match engine.run(m.as_ref(), t, &mode, &[b"col"]) {
                    Ok(alone) => {
                        let got = got.unwrap();
                        assert_eq!(got.text, alone.text, "{name} {t:?}");
                        assert_eq!(
                            serde_json::to_value(&got.cost).unwrap(),
                            serde_json::to_value(&alone.cost).unwrap()
                        );
                    }
                    Err(e) => assert_eq!(got.unwrap_err().to_string(), e.to_string()),
                }
            }
        }
    }
}
