//! Vocabularies drawn from a column with differential privacy
//! (docs/vocabulary.md), kept in the catalog table `dptext.vocabularies`.
//!
//! Why a table and not `<assets>/vocabularies/`: the server usually cannot
//! write into the assets directory (scripts/setup.sh makes it readable
//! only, as for CusText mappings), and a table is transactional, dumped by
//! pg_dump and replicated with the database. The engine is handed each
//! vocabulary a call names the first time this backend needs it, and again
//! after any change to the table (its statement triggers invalidate every
//! session's cache, as for `dptext.recognizers`). A name the table does not
//! hold is looked up in the assets directory, where `dptext vocab build`
//! writes.

use std::cell::RefCell;
use std::collections::HashSet;
use std::ffi::CString;

use dptext_core::mechanisms::MechanismSpec;
use dptext_core::vocab::VocabularyAsset;
use dptext_core::Engine;

use crate::error::OrRaise;

thread_local! {
    /// Names handed to the current engine since the last invalidation,
    /// with the engine's address (a new engine starts empty).
    static LOADED: RefCell<(usize, HashSet<String>)> = RefCell::new((0, HashSet::new()));
}

/// Forgets which vocabularies were loaded; called on relation-cache
/// invalidations.
pub(crate) fn invalidate() {
    LOADED.with(|l| l.borrow_mut().1.clear());
}

/// Hands the engine the vocabulary `spec` names, from the catalog table,
/// unless it already has the current one.
pub(crate) fn ensure(
    engine: &std::sync::Arc<Engine>,
    spec: &MechanismSpec,
    funcname: &'static str,
) {
    let Some(name) = spec.vocabulary() else {
        return;
    };
    let addr = std::sync::Arc::as_ptr(engine) as usize;
    let fresh = LOADED.with(|l| {
        let l = l.borrow();
        l.0 == addr && l.1.contains(name)
    });
    if fresh {
        return;
    }
    if let Some(asset) = read(name, funcname) {
        engine.register_vocabulary(asset).or_raise(funcname);
    }
    LOADED.with(|l| {
        let mut l = l.borrow_mut();
        if l.0 != addr {
            *l = (addr, HashSet::new());
        }
        l.1.insert(name.to_string());
    });
}

/// The row of `name` in `dptext.vocabularies`, if the table exists and
/// holds one.
fn read(name: &str, funcname: &'static str) -> Option<VocabularyAsset> {
    // Checked names are letters, digits, '_' and '-': safe inside quotes.
    dptext_core::vocab::check_name(name).or_raise(funcname);
    let sql = format!(
        "SELECT v.name, v.source, v.eps::pg_catalog.numeric::pg_catalog.text, v.delta::pg_catalog.numeric::pg_catalog.text, v.noise, \
         v.threshold::pg_catalog.numeric::pg_catalog.text, v.max_words_per_value::pg_catalog.text, \
         pg_catalog.to_char(v.created_at AT TIME ZONE 'UTC', 'YYYY-MM-DD\"T\"HH24:MI:SS\"Z\"'), \
         v.embedding, v.embedding_rows::pg_catalog.text, v.digest, \
         pg_catalog.array_to_json(v.words)::pg_catalog.text \
         FROM dptext.vocabularies v WHERE v.name = '{name}'"
    );
    let exists = crate::pg::catalog::read_only_rows(
        c"SELECT pg_catalog.to_regclass('dptext.vocabularies') IS NOT NULL",
    )
    .ok()
    .and_then(|r| r.first().and_then(|r| r.first()).cloned().flatten());
    if exists.as_deref() != Some("t") {
        // A catalog without the table (an older version): the assets only.
        return None;
    }
    let sql = CString::new(sql).unwrap_or_default();
    let rows = crate::pg::catalog::read_only_rows(&sql)
        .unwrap_or_else(|e| pgrx::error!("dptext: could not read dptext.vocabularies: {e}"));
    let row = rows.into_iter().next()?;
    let col = |i: usize| row.get(i).cloned().flatten().unwrap_or_default();
    let num = |i: usize| col(i).parse::<f64>().unwrap_or(f64::NAN);
    let words: Vec<String> = serde_json::from_str(&col(11))
        .map_err(dptext_core::Error::from)
        .or_raise(funcname);
    Some(VocabularyAsset {
        format: dptext_core::vocab::asset::FORMAT,
        name: col(0),
        source: col(1),
        eps: num(2),
        delta: num(3),
        noise: col(4),
        threshold: num(5),
        max_words_per_value: col(6).parse().unwrap_or(0),
        created: col(7),
        embedding: col(8),
        embedding_rows: col(9).parse().unwrap_or(0),
        digest: col(10),
        words,
    })
}

/// The SQL side: the release itself. `dptext.build_vocabulary` (SQL, in
/// `sql/catalog.sql`) calls it and records the result.
#[pgrx::pg_schema]
pub mod dptext {
    use dptext_core::mechanisms::EmbeddingChoice;
    use dptext_core::vocab::{Counter, ReleaseParams, VocabularyAsset};
    use pgrx::prelude::*;
    use pgrx::JsonB;

    use crate::error::OrRaise;

    /// Reads `column_name` of `source` (with the caller's privileges,
    /// read-only) and releases its vocabulary: the asset as JSON, plus
    /// `"summary"` with the exact counts for the builder. Called by
    /// `dptext.build_vocabulary`, which records it.
    ///
    /// ```sql
    /// SELECT dptext._vocabulary_release('records'::regclass, 'note', 1.0, 1e-6, 'notes', 32, 'laplace');
    /// ```
    #[pg_extern(volatile, parallel_unsafe)]
    fn _vocabulary_release(
        source: pg_sys::Oid,
        column_name: &str,
        eps: f64,
        delta: f64,
        name: &str,
        max_words_per_value: i32,
        noise: &str,
    ) -> JsonB {
        const F: &str = "dptext.build_vocabulary";
        let params = ReleaseParams {
            eps,
            delta,
            max_words_per_value: usize::try_from(max_words_per_value).unwrap_or(0),
            noise: noise.parse().or_raise(F),
        };
        params.validate().or_raise(F);
        dptext_core::vocab::check_name(name).or_raise(F);
        let engine = crate::engine::engine();
        let glove = engine.vocabulary(EmbeddingChoice::Glove).or_raise(F);
        let mut counter = Counter::new(glove.embeddings(), params).or_raise(F);
        let query = Spi::get_one_with_args::<String>(
            "SELECT pg_catalog.format('SELECT %I::pg_catalog.text FROM %s', $1, $2::pg_catalog.regclass)",
            &[column_name.into(), source.into()],
        )
        .ok()
        .flatten()
        .unwrap_or_else(|| pgrx::error!("dptext.build_vocabulary: could not name the source"));
        let read: Result<(), pgrx::spi::Error> = Spi::connect(|client| {
            let mut cursor = client.try_open_cursor(query.as_str(), &[])?;
            loop {
                let batch = cursor.fetch(1000)?;
                if batch.is_empty() {
                    return Ok(());
                }
                for row in batch {
                    crate::pg::interrupts::check().or_raise(F);
                    if let Some(v) = row.get::<String>(1)? {
                        counter.add(&v);
                    }
                }
            }
        });
        read.unwrap_or_else(|e| pgrx::error!("dptext.build_vocabulary: reading the column: {e}"));
        let mode = crate::guc::random_mode().or_raise(F);
        let release = engine.cancellable(|| counter.finish(&mode)).or_raise(F);
        let summary = serde_json::json!({
            "values": release.values,
            "truncated": release.truncated,
            "candidates": release.candidates,
            "scale": release.scale,
        });
        let source_name = Spi::get_one_with_args::<String>(
            "SELECT pg_catalog.format('%s.%I', $1::pg_catalog.regclass, $2)",
            &[source.into(), column_name.into()],
        )
        .ok()
        .flatten()
        .unwrap_or_default();
        let asset = VocabularyAsset::new(name, &source_name, &params, release, glove.embeddings())
            .or_raise(F);
        let mut out = serde_json::to_value(&asset)
            .map_err(dptext_core::Error::from)
            .or_raise(F);
        out["summary"] = summary;
        JsonB(out)
    }
}
