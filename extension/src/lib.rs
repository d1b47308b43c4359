//! `CREATE EXTENSION dptext`: differentially private text sanitization in SQL.
//!
//! Thin `#[pg_extern]` wrappers over `dptext-core`. Every function is
//! STRICT (NULL in, NULL out), VOLATILE (without a seed or key each call
//! draws fresh randomness) and PARALLEL SAFE: each call's randomness comes
//! either from the OS or from (seed or key, input, parameters), never from
//! per-backend state, and settings reach parallel workers with the query,
//! so a worker computes exactly what the leader would.
//!
//! Settings are documented in [`guc`]; errors carry SQLSTATEs ([`error`]).
//! `unsafe` code is refused by the compiler outside [`pg`] and the
//! enforcement files that must touch PostgreSQL's structures ([`enforce`]).
#![deny(unsafe_code)]

use dptext_core::mechanisms::{
    EmbeddingChoice, MechanismSpec, SanTextPlusSpec, SanTextSpec, Words,
};
use pgrx::prelude::*;
use pgrx::JsonB;

// Enforcement of masking at the source: the policy and `dptext.mask`
// (`masking`), the hooks, the query rewrite, DDL checks, side channels,
// the label provider; its files that touch PostgreSQL's structures carry
// their own `unsafe` allowance.
mod backend;
pub mod enforce;
mod engine;
mod error;
// Thin PostgreSQL primitives (catalog reads, settings, interrupts, the
// store's table access): `unsafe` allowed here and in the enforcement
// files that name it, refused by the compiler everywhere else.
pub mod guc;
#[allow(unsafe_code)]
mod pg;
mod recognizers;
pub mod rules;
mod session;
mod store;
mod vocabularies;

use backend::{embedding, mlm, randomness_json, run, with_vocabulary};
use engine::engine;
use error::OrRaise;
use pg::interrupts::{Params, Utf8Text};

::pgrx::pg_module_magic!(name, version);

#[pg_guard]
pub extern "C-unwind" fn _PG_init() {
    // pgrx appends the Rust backtrace it captured to an error's DETAIL
    // when RUST_BACKTRACE or RUST_LIB_BACKTRACE asks for one; no client may
    // get one (source paths, the code's structure, whatever a masked
    // session could learn from where an error came from), whatever the
    // server's environment. RUST_LIB_BACKTRACE takes precedence over
    // RUST_BACKTRACE for captured backtraces; set here, in the process's
    // only thread, before anything captured one.
    std::env::set_var("RUST_LIB_BACKTRACE", "0");
    guc::init();
    enforce::labels::register_label_provider();
    enforce::hooks::install();
    if guc::key_is_set() && !pg::loading_at_server_start() {
        // Until this library was loaded, dptext.key was an ordinary
        // placeholder setting that SHOW displays to anyone.
        pgrx::warning!(
            "dptext.key is set but dptext is not in shared_preload_libraries, so the key was visible before this session loaded the library; add dptext to shared_preload_libraries, or use dptext.key_file"
        );
    }
}

// The catalog (rules, provenance, budget, the view builder) and the
// privileges: keyed or seeded outputs are a function of the value, so
// whoever may call the functions while a key is set can test guesses
// against a sanitized view. Nobody may call them until granted (see
// docs/sql-reference.md, "Privileges").
extension_sql_file!("../../sql/catalog.sql", name = "catalog", finalize);

/// SanText (Yue et al. 2021): every word replaced by a word drawn with
/// probability proportional to `exp(-eps/2 * d(x, y))` over the embedding
/// vocabulary. eps·d-metric LDP per word.
///
/// ```sql
/// SELECT santext('The patient reported chest pain.', 3.0);
/// SELECT santext(note, eps => 2, embedding => 'wordpiece') FROM records;
/// SELECT santext(note, 3, vocabulary => 'notes_vocab') FROM records;
/// ```
///
/// `vocabulary` names a vocabulary released from a column
/// (`dptext.build_vocabulary`, docs/vocabulary.md) to draw from instead of
/// the embedding's most frequent words (default `''`: those words).
#[pg_extern(volatile, parallel_safe)]
fn santext(
    t: Utf8Text,
    eps: f64,
    embedding: default!(&str, "'glove'"),
    vocabulary: default!(&str, "''"),
) -> String {
    let spec = MechanismSpec::SanText(SanTextSpec::new(
        eps,
        Words {
            embedding: self::embedding(embedding, "santext"),
            vocabulary: None,
        },
    ));
    run(with_vocabulary(spec, vocabulary, "santext"), t.0, "santext").text
}

/// SanText+ : the least frequent fraction `w` of the vocabulary is
/// sensitive and always re-drawn; other words are kept with probability
/// `1 - p`. (V_S, V_P, eps, ln(1/p))-UMLDP.
///
/// ```sql
/// SELECT santext_plus('The patient reported chest pain.', 3.0);
/// SELECT santext_plus(note, 3.0, p => 0.3, w => 0.9) FROM records;
/// SELECT santext_plus(note, 3.0, vocabulary => 'notes_vocab') FROM records;
/// ```
#[pg_extern(volatile, parallel_safe)]
fn santext_plus(
    t: Utf8Text,
    eps: f64,
    p: default!(f64, 0.3),
    w: default!(f64, 0.9),
    embedding: default!(&str, "'glove'"),
    vocabulary: default!(&str, "''"),
) -> String {
    let spec = MechanismSpec::SanTextPlus(SanTextPlusSpec::new(
        eps,
        p,
        w,
        Words {
            embedding: self::embedding(embedding, "santext_plus"),
            vocabulary: None,
        },
    ));
    run(
        with_vocabulary(spec, vocabulary, "santext_plus"),
        t.0,
        "santext_plus",
    )
    .text
}

/// CusText (Chen et al.): every word replaced by a word drawn from its
/// customized output set of the `k` nearest tokens, with probability
/// `∝ exp(eps · u(x, y) / 2)`: eps-DP per replaced word among the words
/// that share an output set. The mapping is built once per vocabulary, k,
/// mapping and metric (about a minute for GloVe 50k) and cached on disk
/// under `<assets>/custext/`.
///
/// ```sql
/// SELECT custext('The patient reported chest pain.', 2.0);
/// SELECT custext(note, 1.0, k => 50, mapping => 'conservative', level => 'token') FROM records;
/// SELECT custext(note, 2.0, vocabulary => 'notes_vocab') FROM records;
/// ```
#[allow(clippy::too_many_arguments)]
#[pg_extern(volatile, parallel_safe)]
fn custext(
    t: Utf8Text,
    eps: f64,
    k: default!(i32, 20),
    mapping: default!(&str, "'balanced'"),
    level: default!(&str, "'record'"),
    keep_stopwords: default!(bool, true),
    metric: default!(&str, "'euclidean'"),
    embedding: default!(&str, "'glove'"),
    vocabulary: default!(&str, "''"),
) -> String {
    let spec = MechanismSpec::custext(
        eps,
        i64::from(k),
        mapping,
        metric,
        level,
        keep_stopwords,
        embedding,
    )
    .or_raise("custext");
    run(with_vocabulary(spec, vocabulary, "custext"), t.0, "custext").text
}

/// Typed PII spans: the Rampart token classifier (ONNX) plus rule
/// recognizers (e-mail, URL, IP, phone, Luhn-checked cards, SSN, IBAN, MRN,
/// dates, times, ages over 89, organisations). Positions are 1-based
/// characters, end exclusive, so `substr(t, start_pos, end_pos - start_pos) = value`.
/// Labels: PERSON, LOCATION, ORGANIZATION, DATE, AGE, CONTACT, ID.
///
/// ```sql
/// SELECT * FROM detect_pii('Call John Smith at (555) 123-4567 before May 3, 2024.');
/// SELECT r.id, d.label, d.value FROM records r, detect_pii(r.note) d;
/// ```
#[pg_extern(stable, parallel_safe)]
fn detect_pii(
    t: Utf8Text,
) -> TableIterator<
    'static,
    (
        name!(start_pos, i32),
        name!(end_pos, i32),
        name!(label, String),
        name!(value, String),
        name!(score, f64),
    ),
> {
    let t = t.0;
    let spans = engine().detect(t).or_raise("detect_pii");
    // Byte offsets to 1-based character positions, in one pass.
    let mut char_at = Vec::with_capacity(t.len() + 1);
    let mut chars = 0i32;
    for (i, _) in t.char_indices() {
        while char_at.len() <= i {
            char_at.push(chars);
        }
        chars += 1;
    }
    while char_at.len() <= t.len() {
        char_at.push(chars);
    }
    let rows: Vec<_> = spans
        .into_iter()
        .map(|s| {
            (
                char_at[s.start] + 1,
                char_at[s.end] + 1,
                s.label.as_str().to_string(),
                t[s.start..s.end].to_string(),
                // f32 scores shown as f64 would print noise digits (0.8500000238).
                (f64::from(s.score) * 1e4).round() / 1e4,
            )
        })
        .collect();
    TableIterator::new(rows)
}

/// Entity replacement with a stated epsilon (Adelani et al.): each span
/// `detect_pii` finds is replaced with probability `p` by a surrogate that
/// does not depend on it. Strategies: `redact`, `typed_placeholder`,
/// `named_placeholder`, `word_by_word`, `full_entity`. The epsilon of the
/// lemma is in `sanitize(t, 'deidentify', params) -> 'cost'`; `consistent`
/// (same original, same surrogate within the value) voids it.
///
/// `operators` sets a strategy per label, as JSON (`'{"PERSON":
/// "full_entity", "DATE": "shift", "ID": "redact"}'`) or compactly
/// (`'DATE:shift,ID:redact'`); `shift` moves every date of the value by one
/// keyed number of days in `[-shift_days, shift_days]` (`grp`, e.g. a
/// patient id, makes it the same for every value of the group under a key);
/// `keep` leaves a label as written. `whole` treats the whole value as one
/// person's name (name columns). Shifted and kept labels are outside the
/// lemma: the cost says so per label.
///
/// ```sql
/// SELECT deidentify('Call John Smith at (555) 123-4567.');
/// SELECT deidentify(note, 'typed_placeholder') FROM records;
/// SELECT deidentify(note, operators => 'DATE:shift,ID:redact', grp => patient_id::text) FROM records;
/// SELECT deidentify(patient_name, whole => true) FROM records;
/// SELECT sanitize(note, 'deidentify', '{"strategy": "full_entity", "p": 0.9}') -> 'cost' FROM records;
/// ```
#[pg_extern(volatile, parallel_safe)]
#[allow(clippy::too_many_arguments)] // SQL's named, defaulted arguments
fn deidentify(
    // Optional: the other Option arguments make the function non-strict,
    // and NULL in must still be NULL out.
    t: Option<Utf8Text>,
    strategy: default!(&str, "'full_entity'"),
    p: default!(f64, 1.0),
    consistent: default!(bool, false),
    operators: default!(Option<&str>, "NULL"),
    whole: default!(bool, false),
    shift_days: default!(i32, 365),
    grp: default!(Option<&str>, "NULL"),
) -> Option<String> {
    let t = t?;
    let mut params = serde_json::json!({
        "strategy": strategy,
        "p": p,
        "consistent": consistent,
        "whole": whole,
        "shift_days": shift_days,
    });
    if let Some(o) = operators {
        params["operators"] = o.into();
    }
    if let Some(g) = grp {
        params["group"] = g.into();
    }
    let spec = MechanismSpec::parse("deidentify", &params).or_raise("deidentify");
    Some(run(spec, t.0, "deidentify").text)
}

/// The lemma's epsilon of `deidentify(t, strategy, p)` over the shipped
/// surrogate lists (format-preserving redraws counted up to 16 characters):
/// 0 at `p = 1`, infinity at `p = 0`.
///
/// ```sql
/// SELECT deidentify_epsilon('full_entity', 0.9), deidentify_epsilon('redact', 0.5);
/// ```
#[pg_extern(immutable, parallel_safe)]
fn deidentify_epsilon(strategy: &str, p: f64) -> f64 {
    let s = strategy.parse().or_raise("deidentify_epsilon");
    dptext_core::mechanisms::replace::strategy_epsilon(s, p).or_raise("deidentify_epsilon")
}

/// NDD (neighbouring distribution divergence, Peng, Li, Zhao): how much
/// an edit disturbs the masked LM's predictions at the unedited
/// neighbours, each weighted `mu^distance`. `b` is an edit of `a`: the
/// edited span lies between their common prefix and suffix. 0 for equal
/// texts; `divergence` is `'kl'` (default) or `'hellinger'`. Smaller means
/// the edit fits its context better.
///
/// ```sql
/// SELECT ndd('Masao Yoshikawa was defeated in the match in Hokkaido .',
///            'Masao Yoshikawa was defeated in the match in Moscow .');
/// SELECT ndd(a, b, mu => 0.8, divergence => 'hellinger') FROM pairs;
/// ```
#[pg_extern(stable, parallel_safe)]
fn ndd(
    a: Utf8Text,
    b: Utf8Text,
    mu: default!(f64, 0.9),
    divergence: default!(&str, "'kl'"),
) -> f64 {
    const F: &str = "ndd";
    let d = divergence.parse().or_raise(F);
    mlm(F);
    engine().ndd(a.0, b.0, mu, d).or_raise(F)
}

/// Semantics-preserved distortion (Peng, Li, Zhao): every span
/// `detect_pii` finds is replaced by the one of `candidates` candidates
/// with the smallest NDD. `mode` `'substitutive'` (default) draws
/// candidates from the entity replacement surrogate lists of the span's
/// label; `'generative'` fills the masked span by sampling the masked LM.
/// No formal DP guarantee: `sanitize(t, 'ndd', ...) -> 'cost'` says so.
/// `operators` takes `deidentify`'s per-label operators: spans of those
/// labels get their operator instead of distortion, so
/// `'DATE:shift,ID:redact'` keeps a note's timeline (one shift for all its
/// dates; per patient with `sanitize(t, 'ndd', '{"operators": ...,
/// "group": ...}')` or a rule `GROUPED BY`, under a key) and redacts IDs.
///
/// ```sql
/// SELECT ndd_distort('Kathryn Herrera was admitted to St. Mary''s Hospital on May 3, 2024.');
/// SELECT ndd_distort(note, 'generative', candidates => 4) FROM records;
/// SELECT ndd_distort(note, operators => 'DATE:shift,ID:redact') FROM records;
/// ```
#[pg_extern(volatile, parallel_safe)]
fn ndd_distort(
    t: Utf8Text,
    mode: default!(&str, "'substitutive'"),
    candidates: default!(i32, 8),
    operators: default!(&str, "''"),
) -> String {
    const F: &str = "ndd_distort";
    // mu and divergence are not arguments here: the spec's defaults. No
    // argument is nullable, so the function stays STRICT (NULL in, NULL out).
    let mut params = serde_json::json!({"mode": mode, "candidates": candidates});
    if !operators.trim().is_empty() {
        params["operators"] = operators.into();
    }
    let spec = MechanismSpec::parse("ndd", &params).or_raise(F);
    mlm(F);
    run(spec, t.0, F).text
}

/// Any mechanism by name, with its parameters as JSON; returns the text and
/// what it cost: `{"text": ..., "cost": {...}}`.
///
/// ```sql
/// SELECT sanitize('Seen by Dr. Smith', 'santext_plus', '{"eps": 3, "p": 0.3}');
/// SELECT (sanitize(note, 'santext', '{"eps": 3}')->'cost'->>'worst_case_eps')::float8 FROM records;
/// ```
#[pg_extern(volatile, parallel_safe)]
fn sanitize(t: Utf8Text, mechanism: &str, params: Params) -> JsonB {
    const F: &str = "sanitize";
    let spec = MechanismSpec::parse(mechanism, &params.0.or_raise(F)).or_raise(F);
    let rests_on = spec.rests_on();
    let out = run(spec, t.0, F);
    let mut cost = serde_json::json!(out.cost);
    cost["rests_on"] = rests_on.into();
    JsonB(serde_json::json!({ "text": out.text, "cost": cost }))
}

/// What this backend uses: assets directory, random mode (with the key's
/// public id, never the key) and the mechanisms available.
///
/// ```sql
/// SELECT dptext_info();
/// ```
#[pg_extern(stable, parallel_safe)]
fn dptext_info() -> JsonB {
    let e = engine();
    let mode = randomness_json(&guc::random_mode().or_raise("dptext_info"));
    let loaded: Vec<serde_json::Value> = [EmbeddingChoice::Glove, EmbeddingChoice::Wordpiece]
        .into_iter()
        .filter_map(|c| e.loaded(c))
        .map(|v| {
            let emb = v.embeddings();
            serde_json::json!({"name": emb.name(), "rows": emb.len(), "mapped": emb.is_mapped(), "source": emb.source()})
        })
        .collect();
    JsonB(serde_json::json!({
        "version": env!("CARGO_PKG_VERSION"),
        "loaded_vocabularies": loaded,
        "assets_dir": e.config().assets_dir,
        "glove_words": e.config().glove_words,
        "randomness": mode,
        "mechanisms": dptext_core::mechanisms::MECHANISMS,
    }))
}

#[cfg(any(test, feature = "pg_test"))]
mod test_support;
#[cfg(any(test, feature = "pg_test"))]
mod tests;
#[cfg(any(test, feature = "pg_test"))]
mod tests_hardening;

/// Required by `cargo pgrx test`.
#[cfg(test)]
pub mod pg_test {
    /// One-off set-up when the test cluster starts.
    pub fn setup(_options: Vec<&str>) {}

    /// postgresql.conf settings for the test cluster: the assets installed
    /// by the test command (`DPTEXT_ASSETS` at build time).
    #[must_use]
    pub fn postgresql_conf_options() -> Vec<&'static str> {
        match option_env!("DPTEXT_ASSETS") {
            Some(dir) => vec![Box::leak(
                format!("dptext.assets_dir = '{dir}'").into_boxed_str(),
            )],
            None => vec![],
        }
    }
}
