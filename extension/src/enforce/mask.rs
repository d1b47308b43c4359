//! `dptext.mask`: a labelled value through its rule, keyed, the call the
//! query rewrite ([`super::rewrite`]) puts where a masked session reads a
//! labelled column; the key it requires; the mechanisms it built, kept per
//! rule until the next invalidation.

use std::cell::RefCell;
use std::collections::HashMap;
use std::sync::Arc;

use pgrx::prelude::*;

use crate::error::{raise, refuse, ExtError};

thread_local! {
    /// Built mechanisms per (mechanism, params), for [`dptext::mask`].
    static MECHANISMS: RefCell<HashMap<(String, String), Arc<dyn dptext_core::mechanisms::Mechanism>>> =
        RefCell::new(HashMap::new());
}

/// Drops the mechanisms built (a rule's released vocabulary may have
/// changed); called with masking's other caches.
pub(crate) fn invalidate() {
    MECHANISMS.with(|m| m.borrow_mut().clear());
}

/// Refuses masked reads unless a key is in force: seeded or OS randomness
/// would let a masked session see fresh draws (or replay a public seed).
pub(crate) fn require_key() -> dptext_core::RandomMode {
    // The key of a masked session is the administrator's: one the session
    // chose (a start-up option, SET or set_config, where SET ON PARAMETER
    // was granted) would give it a fresh release of every value per key,
    // or a key it knows.
    for name in ["dptext.key_file", "dptext.key"] {
        if crate::pg::settings::chosen_by_session(name) {
            refuse(format!(
                "masked sessions read labelled columns only under the key an administrator set, and this session set {name} itself (a start-up option or SET): reconnect without it"
            ));
        }
    }
    match crate::guc::random_mode() {
        Ok(mode @ dptext_core::RandomMode::Keyed(_)) => mode,
        Ok(_) => refuse(
            "masked sessions read labelled columns only under a key, and none is set: set dptext.key_file (in postgresql.conf, or ALTER DATABASE/ROLE ... SET) to a file holding a secret key".into(),
        ),
        Err(e) => refuse(format!("the masking key could not be read: {e}")),
    }
}

/// The rule's mechanism with `group` as the date shift's grouping value:
/// built per call (one per patient would fill a cache), which for entity
/// replacement copies its settings and nothing large.
fn grouped_mechanism_for(
    mechanism: &str,
    params: &str,
    group: Option<&str>,
) -> Arc<dyn dptext_core::mechanisms::Mechanism> {
    let spec = rule_spec(mechanism, params).with_group(group);
    crate::engine::engine()
        .build(&spec)
        .unwrap_or_else(|e| raise(e.into(), "dptext.mask"))
        .into()
}

/// The spec of a rule as the rewrite writes it into the call: the
/// mechanism's name and its parameters as JSON text.
fn rule_spec(mechanism: &str, params: &str) -> dptext_core::mechanisms::MechanismSpec {
    const F: &str = "dptext.mask";
    let json: serde_json::Value = serde_json::from_str(params)
        .unwrap_or_else(|e| raise(ExtError::Core(dptext_core::Error::Json(e)), F));
    dptext_core::mechanisms::MechanismSpec::parse(mechanism, &json)
        .unwrap_or_else(|e| raise(e.into(), F))
}

/// What both forms of `dptext.mask` do: refuse a call the rewrite did not
/// build, require the key, then serve the rule's keyed output: from the
/// computed-once store for a model-based rule ([`crate::store`]), else
/// computed. `group` is `Some` for a rule written `GROUPED BY` (its value
/// in the row, NULL: no group).
fn mask_value(
    fcinfo: pg_sys::FunctionCallInfo,
    value: &str,
    mechanism: &str,
    params: &str,
    group: Option<Option<&str>>,
) -> String {
    if !crate::pg::catalog::called_by_rewrite(fcinfo) {
        refuse("dptext.mask is applied by masking only and cannot be called directly".into());
    }
    let mode = require_key();
    let engine = crate::engine::engine();
    let compute = || {
        let m = match group {
            Some(g) => grouped_mechanism_for(mechanism, params, g),
            None => mechanism_for(mechanism, params),
        };
        engine
            .run(m.as_ref(), value, &mode, &[])
            .unwrap_or_else(|e| match e {
                dptext_core::Error::InputTooLarge { limit, .. } => {
                    raise(ExtError::MaskedTooLarge { limit }, "dptext.mask")
                }
                // Errors whose text may follow the value (a span too long
                // for a model's window once printed its token count) reach
                // a masked session without it.
                e if matches!(
                    e.kind(),
                    dptext_core::ErrorKind::InvalidParameter | dptext_core::ErrorKind::Model
                ) =>
                {
                    raise(ExtError::MaskFailed { kind: e.kind() }, "dptext.mask")
                }
                e => raise(e.into(), "dptext.mask"),
            })
            .text
    };
    let rule = crate::store::rule(&engine, mechanism, params, || rule_spec(mechanism, params));
    match rule {
        Some(rule) => crate::store::serve(&rule, group.flatten(), value, &mode, compute),
        None => compute(),
    }
}

fn mechanism_for(mechanism: &str, params: &str) -> Arc<dyn dptext_core::mechanisms::Mechanism> {
    const F: &str = "dptext.mask";
    let key = (mechanism.to_string(), params.to_string());
    if let Some(m) = MECHANISMS.with(|c| c.borrow().get(&key).cloned()) {
        return m;
    }
    let spec = rule_spec(mechanism, params);
    let built = crate::engine::engine()
        .mechanism(&spec)
        .unwrap_or_else(|e| raise(e.into(), F));
    MECHANISMS.with(|c| c.borrow_mut().insert(key, built.clone()));
    built
}

/// The SQL-callable side of masking's reads, in schema `dptext`.
#[pg_schema]
pub mod dptext {
    use pgrx::prelude::*;

    use crate::pg::interrupts::Utf8Text;

    /// One labelled value through its rule, keyed: what a masked session
    /// reads instead of the raw value. Only the query rewrite may call it
    /// (a call written in SQL is refused, so nobody can use it as an
    /// oracle to test guessed values against masked output). `VOLATILE`
    /// (though keyed, hence repeatable) so that the planner never pulls
    /// the rewrite's masking subquery up into the query: the call stays in
    /// the scan that reads the row.
    #[pg_extern(volatile, parallel_safe)]
    fn mask(
        value: Utf8Text,
        mechanism: &str,
        params: &str,
        fcinfo: pg_sys::FunctionCallInfo,
    ) -> String {
        super::mask_value(fcinfo, value.0, mechanism, params, None)
    }

    /// [`mask`] for a rule written `GROUPED BY column`: `grp` is that
    /// column's value in the row (NULL: no group), which fixes the date
    /// shift of every note of one group. Only the query rewrite may call it.
    /// `VOLATILE`, as [`mask`].
    #[pg_extern(name = "mask", volatile, parallel_safe)]
    fn mask_grouped(
        value: Option<Utf8Text>,
        mechanism: &str,
        params: &str,
        grp: Option<Utf8Text>,
        fcinfo: pg_sys::FunctionCallInfo,
    ) -> Option<String> {
        // A NULL value is refused like any direct call before it is
        // passed through as NULL.
        if !crate::pg::catalog::called_by_rewrite(fcinfo) {
            super::refuse(
                "dptext.mask is applied by masking only and cannot be called directly".into(),
            );
        }
        let value = value?.0;
        Some(super::mask_value(
            fcinfo,
            value,
            mechanism,
            params,
            Some(grp.as_ref().map(|g| g.0)),
        ))
    }
}
