//! How a SQL call runs: on this backend's engine ([`crate::engine`]),
//! under the random mode of a call (keyed calls refused to masked
//! sessions), a rule's output through the computed-once store, and the
//! small helpers the SQL functions in `lib.rs` share.

use std::sync::Arc;

use dptext_core::mechanisms::{EmbeddingChoice, MechanismSpec};

use crate::engine::{engine, warn_fallback};
use crate::error::OrRaise;
use crate::{guc, session, store, vocabularies};

pub(crate) fn run(
    spec: MechanismSpec,
    t: &str,
    funcname: &'static str,
) -> dptext_core::mechanisms::Sanitized {
    let engine = engine();
    vocabularies::ensure(&engine, &spec, funcname);
    let mechanism = engine.mechanism(&spec).or_raise(funcname);
    let mode = keyed_call_mode(funcname);
    let out = engine
        .run(mechanism.as_ref(), t, &mode, &[])
        .or_raise(funcname);
    warn_fallback(None);
    out
}

/// The random mode for a call of a rule function, refused to masked
/// sessions while a key is set.
pub(crate) fn keyed_call_mode(funcname: &'static str) -> dptext_core::RandomMode {
    let mode = guc::random_mode().or_raise(funcname);
    if matches!(mode, dptext_core::RandomMode::Keyed(_)) && session::session_is_masked() {
        // Under the key that masks its reads, a masked session's own call
        // of a rule on a guessed text would give what a masked read of
        // that text gives: an oracle for raw values.
        crate::error::refuse(format!(
            "masked sessions cannot call {funcname} while a key is set: its output for a guessed text would match masked reads of that text"
        ));
    }
    mode
}

/// A rule's output for `t` (`apply_rule`): `spec` is the rule without its
/// group, `group` the grouping value (`None`: no group). Model-based
/// rules under a key are served from the computed-once store
/// ([`store`]); the output is the same as computing it.
pub(crate) fn run_rule(
    spec: MechanismSpec,
    group: Option<&str>,
    t: &str,
    funcname: &'static str,
) -> String {
    let engine = engine();
    vocabularies::ensure(&engine, &spec, funcname);
    let mode = keyed_call_mode(funcname);
    let compute = || {
        let m: Arc<dyn dptext_core::mechanisms::Mechanism> = match group {
            Some(_) => engine
                .build(&spec.clone().with_group(group))
                .or_raise(funcname)
                .into(),
            None => engine.mechanism(&spec).or_raise(funcname),
        };
        let out = engine.run(m.as_ref(), t, &mode, &[]).or_raise(funcname);
        warn_fallback(None);
        out.text
    };
    let params = spec.params_json().to_string();
    match store::rule(&engine, spec.name(), &params, || spec.clone()) {
        Some(rule) => store::serve(&rule, group, t, &mode, compute),
        None => compute(),
    }
}

pub(crate) fn embedding(e: &str, funcname: &'static str) -> EmbeddingChoice {
    e.parse().or_raise(funcname)
}

/// `spec` drawing from the released vocabulary `name` ('': the
/// embedding's own words), checked: the mechanism takes one and the name
/// is valid. A text default rather than NULL keeps the functions STRICT
/// (NULL in, NULL out).
pub(crate) fn with_vocabulary(
    spec: MechanismSpec,
    name: &str,
    funcname: &'static str,
) -> MechanismSpec {
    spec.with_vocabulary(Some(name.to_owned()))
        .or_raise(funcname)
}

/// The masked LM for NDD (its fallback, like the detection model's, is
/// warned about once per backend: [`warn_fallback`]).
pub(crate) fn mlm(funcname: &'static str) -> Arc<dptext_core::mlm::MaskedLm> {
    guc::device().or_raise(funcname);
    let m = engine().mlm().or_raise(funcname);
    warn_fallback(m.fallback());
    m
}

/// The random mode as JSON, with the key's public id, never the key.
pub(crate) fn randomness_json(mode: &dptext_core::RandomMode) -> serde_json::Value {
    match mode {
        dptext_core::RandomMode::Os => serde_json::json!({"mode": "os"}),
        dptext_core::RandomMode::Seeded(s) => serde_json::json!({"mode": "seeded", "seed": s}),
        dptext_core::RandomMode::Keyed(k) => {
            serde_json::json!({"mode": "keyed", "key_id": k.key_id()})
        }
    }
}
