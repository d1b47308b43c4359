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

use dptext_core::detect::custom::{Custom, CustomDef, RecognizerDef};
use dptext_core::Engine;
use pgrx::prelude::*;

use crate::error::OrRaise;

thread_local! {
    /// The threshold the loaded recognizers were built with; `None`: reload.
    static LOADED: Cell<Option<f64>> = const { Cell::new(None) };
}

/// Forgets the loaded recognizers; called on relation-cache invalidations.
pub(crate) fn invalidate() {
    LOADED.with(|l| l.set(None));
}

const READ_SQL: &str = "SELECT name, label, pattern, words, context, score \
     FROM dptext.recognizers ORDER BY name";
const ALLOW_SQL: &str = "SELECT value FROM dptext.allow_list ORDER BY value";
const EXISTS_SQL: &str = "SELECT pg_catalog.to_regclass('dptext.recognizers') IS NOT NULL \
     AND pg_catalog.to_regclass('dptext.allow_list') IS NOT NULL";

/// Loads the recognizers into `engine` unless they are current.
pub(crate) fn refresh(engine: &Engine) {
    let threshold = crate::guc::DETECT_THRESHOLD.get();
    if LOADED.with(Cell::get) == Some(threshold) {
        return;
    }
    let def = read(threshold);
    let custom = Custom::new(def).or_raise("dptext.recognizers");
    engine.set_recognizers(Arc::new(custom));
    LOADED.with(|l| l.set(Some(threshold)));
}

fn read(threshold: f64) -> CustomDef {
    let mut def = CustomDef {
        threshold: threshold as f32,
        ..CustomDef::default()
    };
    let result: Result<(), pgrx::spi::Error> = Spi::connect(|client| {
        let exists: Option<bool> = client.select(EXISTS_SQL, None, &[])?.first().get(1)?;
        if exists != Some(true) {
            // The extension's catalog is not created in this database.
            return Ok(());
        }
        for row in client.select(READ_SQL, None, &[])? {
            def.recognizers.push(RecognizerDef {
                name: row.get::<String>(1)?.unwrap_or_default(),
                label: row.get::<String>(2)?.unwrap_or_default(),
                pattern: row.get::<String>(3)?,
                words: row.get::<Vec<String>>(4)?,
                context: row.get::<Vec<String>>(5)?.unwrap_or_default(),
                score: row.get::<f64>(6)?.unwrap_or(0.85) as f32,
            });
        }
        for row in client.select(ALLOW_SQL, None, &[])? {
            if let Some(v) = row.get::<String>(1)? {
                def.allow.push(v);
            }
        }
        Ok(())
    });
    if let Err(e) = result {
        // Fail closed: detection without the user's recognizers would find less.
        pgrx::error!("dptext: could not read dptext.recognizers: {e}");
    }
    def
}

/// The check behind `dptext.recognizers`' CHECK constraint.
#[pg_schema]
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
        crate::ffi::catalog::invalidate_relation(table);
    }
}
