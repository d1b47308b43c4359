//! The user's recognizers: `dptext.recognizers`, `dptext.allow_list` and
//! `dptext.detect_threshold`, read into the engine's detector when they
//! change (docs/detection.md, "Your own recognizers").
//!
//! The tables are read again after any relation-cache invalidation (the
//! same signal that drops cached masking decisions) or a change of the
//! threshold, so a committed change is seen by the next statement of every
//! session. A row that does not compile is refused when it is written (the
//! table's CHECK calls [`dptext::recognizer_ok`]), and again when read: a
//! recognizer the user relies on is never silently skipped.

use std::cell::Cell;
use std::sync::Arc;

use crate::error::OrRaise;
use dptext_core::detect::custom::{Custom, CustomDef, RecognizerDef};
use dptext_core::Engine;

thread_local! {
    /// The engine (by address) and threshold the loaded recognizers were
    /// built for; `None`: reload. A new engine (settings changed) starts
    /// without recognizers, so it must be loaded again.
    static LOADED: Cell<Option<(usize, f64)>> = const { Cell::new(None) };
    /// A fingerprint of the loaded recognizers, allow list and threshold:
    /// part of a model-based rule's identity in the computed-once store
    /// (`crate::store`), since they change what detection finds.
    static FINGERPRINT: std::cell::RefCell<String> = const { std::cell::RefCell::new(String::new()) };
}

/// The fingerprint of the recognizers [`refresh`] loaded last.
pub(crate) fn fingerprint() -> String {
    FINGERPRINT.with(|f| f.borrow().clone())
}

/// Forgets the loaded recognizers; called on relation-cache invalidations.
pub(crate) fn invalidate() {
    LOADED.with(|l| l.set(None));
}

/// One query for both tables (JSON text columns: no array parsing), or
/// nothing when the catalog is not created in this database.
const READ_SQL: &std::ffi::CStr = c"SELECT 'r', name, label, pattern, \
     pg_catalog.array_to_json(words)::pg_catalog.text, \
     pg_catalog.array_to_json(context)::pg_catalog.text, score::pg_catalog.numeric::pg_catalog.text \
     FROM dptext.recognizers \
     UNION ALL SELECT 'a', value, NULL, NULL, NULL, NULL, NULL FROM dptext.allow_list \
     ORDER BY 1, 2";
const EXISTS_SQL: &std::ffi::CStr =
    c"SELECT pg_catalog.to_regclass('dptext.recognizers') IS NOT NULL \
     AND pg_catalog.to_regclass('dptext.allow_list') IS NOT NULL";

/// Loads the recognizers into `engine` unless they are current.
pub(crate) fn refresh(engine: &Arc<Engine>) {
    let threshold = crate::guc::DETECT_THRESHOLD.get();
    let key = (Arc::as_ptr(engine) as usize, threshold);
    if LOADED.with(Cell::get) == Some(key) {
        return;
    }
    let (def, fingerprint) = read(threshold).unwrap_or_else(|e| {
        // Fail closed: detection without the user's recognizers would find less.
        pgrx::error!("dptext: could not read dptext.recognizers: {e}")
    });
    let custom = Custom::new(def).or_raise("dptext.recognizers");
    engine.set_recognizers(Arc::new(custom));
    FINGERPRINT.with(|f| *f.borrow_mut() = fingerprint);
    LOADED.with(|l| l.set(Some(key)));
}

/// The definition, and a fingerprint of every row read and the threshold.
fn read(threshold: f64) -> Result<(CustomDef, String), String> {
    let mut def = CustomDef {
        threshold: threshold as f32,
        ..CustomDef::default()
    };
    let mut parts: Vec<String> = vec![threshold.to_string()];
    let exists = crate::pg::catalog::read_only_rows(EXISTS_SQL)?;
    if exists
        .first()
        .and_then(|r| r.first())
        .cloned()
        .flatten()
        .as_deref()
        != Some("t")
    {
        // The extension's catalog is not created in this database.
        return Ok((def, String::new()));
    }
    let json = |v: &Option<String>| -> Result<Option<Vec<String>>, String> {
        v.as_deref()
            .map(|t| serde_json::from_str(t).map_err(|e| e.to_string()))
            .transpose()
    };
    for row in crate::pg::catalog::read_only_rows(READ_SQL)? {
        parts.push(format!("{row:?}"));
        let col = |i: usize| row.get(i).cloned().flatten();
        match col(0).as_deref() {
            Some("r") => def.recognizers.push(RecognizerDef {
                name: col(1).unwrap_or_default(),
                label: col(2).unwrap_or_default(),
                pattern: col(3),
                words: json(&col(4))?,
                context: json(&col(5))?.unwrap_or_default(),
                score: col(6).and_then(|s| s.parse().ok()).unwrap_or(0.85),
            }),
            Some("a") => def.allow.extend(col(1)),
            _ => {}
        }
    }
    let parts: Vec<&[u8]> = parts.iter().map(|p| p.as_bytes()).collect();
    Ok((def, dptext_core::store::rule_id(&parts)))
}

/// The check behind `dptext.recognizers`' CHECK constraint.
#[pgrx::pg_schema]
pub mod dptext {
    use pgrx::prelude::*;

    use crate::error::OrRaise;

    /// True when a `dptext.recognizers` row compiles; raises 22023 naming
    /// what is wrong otherwise (the table's CHECK constraint calls it).
    ///
    /// ```sql
    /// SELECT dptext.recognizer_ok('badge', 'ID', '\bB-[0-9]{5}\b', NULL, '{badge}', 0.6);
    /// ```
    #[pg_extern(immutable, parallel_safe)]
    fn recognizer_ok(
        name: &str,
        label: &str,
        pattern: Option<&str>,
        words: Option<Vec<String>>,
        context: Option<Vec<String>>,
        score: f64,
    ) -> bool {
        let def = dptext_core::detect::custom::CustomDef {
            recognizers: vec![dptext_core::detect::custom::RecognizerDef {
                name: name.to_string(),
                label: label.to_string(),
                pattern: pattern.map(str::to_string),
                words,
                context: context.unwrap_or_default(),
                score: score as f32,
            }],
            ..Default::default()
        };
        dptext_core::detect::custom::Custom::new(def).or_raise("dptext.recognizer_ok");
        true
    }

    /// Tells every session that `dptext.recognizers` or `dptext.allow_list`
    /// changed (their statement triggers call it): row changes do not
    /// invalidate a relation's cache by themselves.
    #[pg_extern(volatile)]
    fn _recognizers_changed(table: pg_sys::Oid) {
        crate::pg::catalog::invalidate_relation(table);
    }
}
