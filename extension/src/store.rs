//! The computed-once store: keyed outputs of model-based rules, computed
//! once per (value, rule, key) and served to every reader (docs/masking.md,
//! "Computed once").
//!
//! Under a key a rule's output is a function of (value, rule, key), so a
//! masked read, an `apply_rule` call and a sanitized copy look a value up
//! in `dptext.store` by its tag ([`dptext_core::store`]) before running the
//! models, and file what they compute when the transaction may write.
//! `dptext.warm(table)` fills the store in batches. Only rules that run
//! detection (entity replacement, NDD and chains with them) use the store:
//! the word mechanisms compute faster than a lookup. The table is read and
//! written below SQL ([`crate::pg::store`]): nobody but its owner has a
//! privilege on it, and a masked session's read needs none.

use std::cell::RefCell;
use std::collections::HashMap;
use std::sync::Arc;

use dptext_core::mechanisms::{Mechanism, MechanismSpec};
use dptext_core::store::TagKey;
use dptext_core::{Engine, RandomMode};

use crate::pg::store::{self as table, Entry};

/// Per-backend state: rule identities, the tag key, recently served
/// entries.
#[derive(Default)]
struct State {
    /// What the identities were computed for: the engine (by address) and
    /// the recognizers' fingerprint.
    context: Option<(usize, String)>,
    /// Mechanism name and parameter text -> its identity, or `None` when
    /// the rule does not use the store.
    rules: HashMap<(String, String), Option<Arc<str>>>,
    /// The masking key, its public id and the tag key derived from it.
    key: Option<(dptext_core::rng::Secret, String, TagKey)>,
    /// The store table and its index, once looked up (dropped on
    /// relation-cache invalidations).
    relations: Option<Option<(pgrx::pg_sys::Oid, pgrx::pg_sys::Oid)>>,
    /// The last rule asked for by its texts, and its identity: a masked
    /// read asks for one rule row after row.
    last_rule: Option<(String, String, Option<Arc<str>>)>,
    /// Recently served outputs by a 128-bit hash of (rule, group, raw
    /// value) under this backend's random hash keys (cheaper than the
    /// tag's HMAC; cleared when the masking key changes), and their bytes.
    /// Only outputs count against `dptext.store_cache_mb`: a limit that
    /// counted raw values would flush after a number of raw bytes, which a
    /// session could time (a size oracle).
    served: HashMap<u128, Arc<str>>,
    served_bytes: usize,
    /// The hash keys of [`served`](Self::served), random per backend.
    hashers: Option<(
        std::collections::hash_map::RandomState,
        std::collections::hash_map::RandomState,
    )>,
}

thread_local! {
    static STATE: RefCell<State> = RefCell::new(State::default());
}

/// Forgets the store's relations and the rules' identities; called on
/// relation-cache invalidations (the extension may have been dropped and
/// created again, a recognizer changed).
pub(crate) fn invalidate() {
    STATE.with(|s| {
        let mut s = s.borrow_mut();
        s.relations = None;
        s.last_rule = None;
    });
}

/// Forgets this backend's copy of served entries; called when a
/// transaction or subtransaction aborts. A cancelled read (a
/// `statement_timeout` in the middle of a parent's Append) must leave
/// nothing that tells which rows it reached: its store fills roll back,
/// and so does this copy.
pub(crate) fn forget_served() {
    STATE.with(|s| {
        if let Ok(mut s) = s.try_borrow_mut() {
            s.served.clear();
            s.served_bytes = 0;
        }
    });
}

/// Whether `relid` is the store table or its index.
pub(crate) fn is_store_relation(relid: pgrx::pg_sys::Oid) -> bool {
    store_relations().is_some_and(|(t, i)| t == relid || i == relid)
}

/// The store table and its index, looked up once per backend (until an
/// invalidation).
fn store_relations() -> Option<(pgrx::pg_sys::Oid, pgrx::pg_sys::Oid)> {
    if let Some(r) = STATE.with(|s| s.borrow().relations) {
        return r;
    }
    let r = table::relations();
    STATE.with(|s| s.borrow_mut().relations = Some(r));
    r
}

/// Whether a rule uses the store: it runs a model on every value
/// ([`MechanismSpec::runs_model`]), and draws from no released vocabulary
/// (a vocabulary can be rebuilt under its name, which the rule's identity
/// would not see).
pub(crate) fn eligible(spec: &MechanismSpec) -> bool {
    spec.runs_model() && !spec.params_json().to_string().contains("\"vocabulary\"")
}

/// The identity of the rule `(name, params)` for the store, or `None` when
/// it does not use the store; `spec` parses the rule (without its group)
/// on the first call for these texts. Nothing is built or loaded: a value
/// served from the store runs no model and loads none.
pub(crate) fn rule(
    engine: &Arc<Engine>,
    name: &str,
    params: &str,
    spec: impl FnOnce() -> MechanismSpec,
) -> Option<Arc<str>> {
    if !crate::guc::STORE.get() {
        return None;
    }
    let engine_id = Arc::as_ptr(engine) as usize;
    let fast = STATE.with(|s| {
        let s = s.borrow();
        match (&s.last_rule, &s.context) {
            (Some((n, p, r)), Some((e, _))) if n == name && p == params && *e == engine_id => {
                Some(r.clone())
            }
            _ => None,
        }
    });
    if let Some(r) = fast {
        return r;
    }
    let context = (engine_id, crate::recognizers::fingerprint());
    let cached = STATE.with(|s| {
        let mut s = s.borrow_mut();
        if s.context.as_ref() != Some(&context) {
            s.rules.clear();
            s.context = Some(context.clone());
        }
        s.rules
            .get(&(name.to_string(), params.to_string()))
            .cloned()
    });
    if let Some(r) = cached {
        STATE.with(|s| s.borrow_mut().last_rule = Some((name.into(), params.into(), r.clone())));
        return r;
    }
    let spec = spec();
    let id = eligible(&spec).then(|| identity(engine, &spec, &context.1));
    STATE.with(|s| {
        let mut s = s.borrow_mut();
        s.rules
            .insert((name.to_string(), params.to_string()), id.clone());
        s.last_rule = Some((name.into(), params.into(), id.clone()));
    });
    id
}

/// Everything that decides a rule's outputs, hashed: the mechanism, its
/// canonical parameters, the settings that change outputs, every
/// installed asset file's hash, and the user's recognizers.
fn identity(engine: &Engine, spec: &MechanismSpec, recognizers: &str) -> Arc<str> {
    let config = engine.config();
    let files = dptext_core::assets::Installed::read(&config.assets_dir)
        .map(|i| format!("{:?}", i.files))
        .unwrap_or_default();
    let params = spec.params_json().to_string();
    let settings = format!(
        "glove_words={} max_detect_bytes={} mlm_model={:?}",
        config.glove_words, config.max_detect_bytes, config.mlm_model
    );
    dptext_core::store::rule_id(&[
        spec.name().as_bytes(),
        params.as_bytes(),
        settings.as_bytes(),
        files.as_bytes(),
        recognizers.as_bytes(),
    ])
    .into()
}

/// The tag of one value and the public id of the key, under the keyed
/// `mode`'s tag key (derived once per key).
fn tag(
    secret: &dptext_core::rng::Secret,
    rule: &str,
    group: Option<&str>,
    value: &str,
) -> (String, [u8; 32]) {
    STATE.with(|s| {
        let mut s = s.borrow_mut();
        if !s.key.as_ref().is_some_and(|(k, _, _)| k.same(secret)) {
            s.key = Some((secret.clone(), secret.key_id(), TagKey::new(secret)));
            s.served.clear();
            s.served_bytes = 0;
        }
        match s.key.as_ref() {
            Some((_, id, k)) => (id.clone(), k.tag(rule, group, value)),
            None => (String::new(), [0; 32]),
        }
    })
}

/// The key of this backend's copy: a 128-bit hash of rule, group (marked,
/// so that no group differs from an empty one) and value, under two random
/// SipHash keys of this backend.
fn served_key(state: &mut State, rule: &str, group: Option<&str>, value: &str) -> u128 {
    use std::hash::{BuildHasher, Hash, Hasher};
    let (a, b) = state.hashers.get_or_insert_with(Default::default);
    let mut halves = [a.build_hasher(), b.build_hasher()];
    for h in &mut halves {
        rule.hash(h);
        group.hash(h);
        value.hash(h);
    }
    (u128::from(halves[0].finish()) << 64) | u128::from(halves[1].finish())
}

/// The output this backend served last for (rule, group, value) under
/// `secret`, if it kept it.
fn served(
    secret: &dptext_core::rng::Secret,
    rule: &str,
    group: Option<&str>,
    value: &str,
) -> Option<Arc<str>> {
    STATE.with(|s| {
        let mut s = s.borrow_mut();
        if !s.key.as_ref().is_some_and(|(k, _, _)| k.same(secret)) {
            return None;
        }
        let key = served_key(&mut s, rule, group, value);
        s.served.get(&key).cloned()
    })
}

fn remember(rule: &str, group: Option<&str>, value: &str, out: Arc<str>) {
    let limit = usize::try_from(crate::guc::STORE_CACHE_MB.get()).unwrap_or(0) << 20;
    STATE.with(|s| {
        let mut s = s.borrow_mut();
        // The output (masked) and a constant: nothing of the raw value.
        let size = out.len() + 64;
        if size > limit {
            return;
        }
        if s.served_bytes + size > limit {
            // Simplest bound: start over (a hot set refills from the table).
            s.served.clear();
            s.served_bytes = 0;
        }
        let key = served_key(&mut s, rule, group, value);
        s.served_bytes += size;
        s.served.insert(key, out);
    });
}

/// The output of `value` under the rule `rule` (from [`rule`]) and group
/// `group`: from this backend's recent entries, else from the store, else
/// `compute`d and filed (when the transaction may write). Outside keyed
/// mode it is always computed: only keyed outputs are repeatable.
///
/// A masked session only reads the store: what it computes is not filed,
/// and nothing it reads or computes is kept in, or served from, this
/// backend's copy. Filing would take a transaction ID, and a copy keyed by
/// value would make the next read of an equal value fast, across rows,
/// columns and tables under the same rule: either would tell the session
/// which of its rows hold equal raw values, which outputs that collide
/// (`[REDACTED]`) hide.
pub(crate) fn serve(
    rule: &str,
    group: Option<&str>,
    value: &str,
    mode: &RandomMode,
    compute: impl FnOnce() -> String,
) -> String {
    let RandomMode::Keyed(secret) = mode else {
        return compute();
    };
    let Some((store, index)) = store_relations() else {
        return compute();
    };
    let masked = crate::session::session_is_masked();
    if !masked {
        if let Some(hit) = served(secret, rule, group, value) {
            return hit.to_string();
        }
    }
    let (key_id, tag) = tag(secret, rule, group, value);
    if let Some(hit) = table::lookup(store, index, &tag) {
        if !masked {
            remember(rule, group, value, hit.as_str().into());
        }
        return hit;
    }
    let out = compute();
    if masked {
        return out;
    }
    if table::writable() {
        table::insert(
            store,
            index,
            &[Entry {
                tag: &tag,
                output: &out,
                rule_id: rule,
                key_id: &key_id,
            }],
        );
    }
    remember(rule, group, value, out.as_str().into());
    out
}

/// Builds a rule's mechanism on an engine for a group.
type BuildFor<'a> =
    dyn Fn(&Engine, Option<&str>) -> Result<Arc<dyn Mechanism>, dptext_core::Error> + Sync + 'a;
/// Builds a rule's mechanism on an engine.
type Build<'a> = dyn Fn(&Engine) -> Result<Arc<dyn Mechanism>, dptext_core::Error> + Sync + 'a;

/// What [`fill`] did with a batch.
#[derive(Debug, Default, Clone, Copy)]
pub(crate) struct Filled {
    /// Values already in the store (or seen earlier in this fill).
    pub present: u64,
    /// Values computed and filed now.
    pub computed: u64,
}

/// Fills the store with the outputs of `values` (value, group) under one
/// rule, computing only those it lacks, many per model call
/// ([`Engine::run_many`]), split across `pool`'s engines (one thread
/// each) when it has more than one. `build` makes the rule's mechanism for
/// a group on an engine. `seen` holds the tags this fill has handled, so
/// repeats cost nothing.
pub(crate) fn fill(
    pool: &[Arc<Engine>],
    rule: &str,
    secret: &dptext_core::rng::Secret,
    values: &[(String, Option<String>)],
    build: &BuildFor<'_>,
    seen: &mut std::collections::HashSet<[u8; 32]>,
) -> Result<Filled, dptext_core::Error> {
    let mut done = Filled::default();
    let Some((store, index)) = store_relations() else {
        return Ok(done);
    };
    let mode = RandomMode::Keyed(secret.clone());
    // Missing values, by group (one mechanism per group).
    let mut missing: Vec<(usize, [u8; 32])> = Vec::new();
    let mut key_id = String::new();
    for (i, (value, group)) in values.iter().enumerate() {
        let (id, t) = tag(secret, rule, group.as_deref(), value);
        key_id = id;
        if !seen.insert(t) || table::lookup(store, index, &t).is_some() {
            done.present += 1;
            continue;
        }
        missing.push((i, t));
    }
    // One run per group (a mechanism per group), the groups in the order
    // of their smallest tag: no raw order.
    let mut first: HashMap<Option<&str>, [u8; 32]> = HashMap::new();
    for (i, t) in &missing {
        let e = first.entry(values[*i].1.as_deref()).or_insert(*t);
        if *t < *e {
            *e = *t;
        }
    }
    missing.sort_by(|a, b| {
        let (ga, gb) = (values[a.0].1.as_deref(), values[b.0].1.as_deref());
        first[&ga]
            .cmp(&first[&gb])
            .then(ga.cmp(&gb))
            .then(a.1.cmp(&b.1))
    });
    let mut start = 0;
    while start < missing.len() {
        let group = values[missing[start].0].1.as_deref();
        let mut end = start + 1;
        while end < missing.len() && values[missing[end].0].1.as_deref() == group {
            end += 1;
        }
        let chunk = &missing[start..end];
        let texts: Vec<&str> = chunk.iter().map(|(i, _)| values[*i].0.as_str()).collect();
        let outs = run_split(pool, &texts, &mode, &|e: &Engine| build(e, group))?;
        let mut kept: Vec<(String, [u8; 32])> = outs
            .into_iter()
            .zip(chunk)
            .map(|(o, (_, t))| (o, *t))
            .collect();
        // Filed in tag order, which says nothing of the raw values.
        kept.sort_by_key(|k| k.1);
        let entries: Vec<Entry<'_>> = kept
            .iter()
            .map(|(o, t)| Entry {
                tag: t,
                output: o,
                rule_id: rule,
                key_id: &key_id,
            })
            .collect();
        table::insert(store, index, &entries);
        done.computed += kept.len() as u64;
        start = end;
    }
    Ok(done)
}

/// The outputs of `texts`, in order: on the first engine of `pool` in
/// this thread, or split into one part per engine, each run on a thread of
/// its own (engines without PostgreSQL's interrupt hook: the caller checks
/// for cancellation between batches).
fn run_split(
    pool: &[Arc<Engine>],
    texts: &[&str],
    mode: &RandomMode,
    build: &Build<'_>,
) -> Result<Vec<String>, dptext_core::Error> {
    let run = |engine: &Engine, part: &[&str]| -> Result<Vec<String>, dptext_core::Error> {
        let m = build(engine)?;
        engine
            .run_many(m.as_ref(), part, mode, &[])
            .into_iter()
            .map(|r| r.map(|s| s.text))
            .collect()
    };
    if pool.len() <= 1 || texts.len() < 2 {
        let Some(engine) = pool.first() else {
            return Ok(Vec::new());
        };
        return run(engine, texts);
    }
    let size = texts.len().div_ceil(pool.len());
    let parts: Vec<Result<Vec<String>, dptext_core::Error>> = std::thread::scope(|scope| {
        let handles: Vec<_> = texts
            .chunks(size)
            .zip(pool)
            .map(|(part, engine)| scope.spawn(move || run(engine, part)))
            .collect();
        handles
            .into_iter()
            .map(|h| {
                h.join().unwrap_or_else(|_| {
                    Err(dptext_core::Error::Model("a fill thread panicked".into()))
                })
            })
            .collect()
    });
    let mut out = Vec::with_capacity(texts.len());
    for p in parts {
        out.extend(p?);
    }
    Ok(out)
}

/// The engines a fill runs on: this backend's, or with `dptext.model_threads`
/// above 1 that many engines of one model thread each (loaded for this
/// fill, with this backend's recognizers), run side by side.
fn fill_pool(engine: &Arc<Engine>) -> Vec<Arc<Engine>> {
    let threads = engine.config().model_threads;
    if threads <= 1 {
        return vec![engine.clone()];
    }
    let config = dptext_core::EngineConfig {
        model_threads: 1,
        ..engine.config().clone()
    };
    let custom = engine.recognizers();
    (0..threads)
        .map(|_| {
            let e = Engine::with_map(config.clone(), crate::pg::map_file);
            e.set_recognizers(custom.clone());
            Arc::new(e)
        })
        .collect()
}

/// The rules of `source` (column, mechanism, parameter text, grouping
/// column), in column order.
type ColumnRule = (String, String, String, Option<String>);

fn rules_of(source: pgrx::pg_sys::Oid) -> Vec<ColumnRule> {
    use pgrx::prelude::*;
    let rows: Result<Vec<ColumnRule>, pgrx::spi::Error> = Spi::connect(|client| {
        let mut out = Vec::new();
        let args = [pgrx::datum::DatumWithOid::from(source)];
        for row in client.select(
            "SELECT column_name::text, mechanism, params::text, group_column \
               FROM dptext.rules WHERE table_oid = $1 ORDER BY attnum",
            None,
            &args,
        )? {
            if let (Some(c), Some(m), Some(p)) = (
                row.get::<String>(1)?,
                row.get::<String>(2)?,
                row.get::<String>(3)?,
            ) {
                out.push((c, m, p, row.get::<String>(4)?));
            }
        }
        Ok(out)
    });
    rows.unwrap_or_else(|e| pgrx::error!("dptext.warm: could not read the rules: {e}"))
}

/// Raises 22023 for the parameter `name` of `funcname`.
fn invalid(name: &'static str, reason: impl Into<String>, funcname: &'static str) -> ! {
    crate::error::raise(
        crate::error::ExtError::Core(dptext_core::Error::InvalidParameter {
            name,
            reason: reason.into(),
        }),
        funcname,
    )
}

/// A column of `source` whose rule uses the store: its name, the rule
/// (parsed), the rule's identity, and a subquery of its distinct (value,
/// group) pairs as `v` and `g`.
struct StoredColumn {
    column: String,
    spec: MechanismSpec,
    rule: Arc<str>,
    distinct: String,
}

/// The columns of `source` (named `relname` in SQL) whose rules use the
/// store; `skipped` hears of each other labelled column and its mechanism.
fn stored_columns(
    engine: &Arc<Engine>,
    source: pgrx::pg_sys::Oid,
    relname: &str,
    funcname: &'static str,
    mut skipped: impl FnMut(&str, &str),
) -> Vec<StoredColumn> {
    let mut out = Vec::new();
    for (column, mechanism, params, group_column) in rules_of(source) {
        let json: serde_json::Value = serde_json::from_str(&params).unwrap_or_else(|e| {
            crate::error::raise(
                crate::error::ExtError::Core(dptext_core::Error::Json(e)),
                funcname,
            )
        });
        let spec = MechanismSpec::parse(&mechanism, &json)
            .unwrap_or_else(|e| crate::error::raise(e.into(), funcname));
        let Some(rule) = rule(engine, &mechanism, &params, || spec.clone()) else {
            skipped(&column, &mechanism);
            continue;
        };
        let col = pgrx::spi::quote_identifier(&column);
        let grp = group_column
            .as_deref()
            .map(|g| format!("{}::pg_catalog.text", pgrx::spi::quote_identifier(g)))
            .unwrap_or_else(|| "NULL::pg_catalog.text".into());
        let distinct = format!(
            "(SELECT DISTINCT {col}::pg_catalog.text AS v, {grp} AS g FROM {relname} WHERE {col} IS NOT NULL) d"
        );
        out.push(StoredColumn {
            column,
            spec,
            rule,
            distinct,
        });
    }
    out
}

/// A duration in words for progress lines: `42s`, `3m05s`, `1h02m`.
fn human(secs: f64) -> String {
    let s = secs.max(0.0).round() as u64;
    match s {
        0..=59 => format!("{s}s"),
        60..=3599 => format!("{}m{:02}s", s / 60, s % 60),
        _ => format!("{}h{:02}m", s / 3600, (s % 3600) / 60),
    }
}

/// Precomputes into the store every value of `source`'s columns whose rule
/// uses it; see [`dptext::warm`].
fn warm(source: pgrx::pg_sys::Oid, batch: usize) -> i64 {
    use pgrx::prelude::*;
    const F: &str = "dptext.warm";
    if crate::session::session_is_masked() {
        crate::error::refuse(format!("masked sessions cannot call {F}"));
    }
    if !crate::guc::STORE.get() {
        invalid(
            "store",
            "dptext.store is off, so nothing would read what warming computes",
            F,
        );
    }
    let mode = crate::guc::random_mode().unwrap_or_else(|e| crate::error::raise(e.into(), F));
    let RandomMode::Keyed(secret) = mode else {
        invalid("key_file", "warming needs a key (dptext.key_file): only keyed outputs are the same at every read, so only they can be computed once", F);
    };
    let engine = crate::engine::engine();
    let relname = source_name(source);
    let mut computed = 0i64;
    let columns = stored_columns(&engine, source, &relname, F, |column, mechanism| {
        pgrx::notice!("{F}: {relname}.{column}: its rule ({mechanism}) runs no model, so it is computed at each read and not stored");
    });
    for StoredColumn {
        column,
        spec,
        rule,
        distinct,
    } in columns
    {
        let from = format!("FROM {distinct}");
        let total: i64 = Spi::get_one(&format!("SELECT pg_catalog.count(*) {from}"))
            .ok()
            .flatten()
            .unwrap_or(0);
        let pool = fill_pool(&engine);
        let build =
            |e: &Engine, g: Option<&str>| -> Result<Arc<dyn Mechanism>, dptext_core::Error> {
                match g {
                    None => e.mechanism(&spec),
                    Some(_) => e.build(&spec.clone().with_group(g)).map(Arc::from),
                }
            };
        let started = std::time::Instant::now();
        let mut last = started;
        let mut seen = std::collections::HashSet::new();
        let mut done = 0i64;
        let mut column_computed = 0i64;
        // In a random order: the store's rows are filed in the order they
        // are computed, and that order must not follow the raw values.
        let query = format!("SELECT v, g {from} ORDER BY pg_catalog.random()");
        let result: Result<(), pgrx::spi::Error> = Spi::connect(|client| {
            let mut cursor = client.try_open_cursor(query.as_str(), &[])?;
            loop {
                let table = cursor.fetch(batch as std::ffi::c_long)?;
                let mut values = Vec::with_capacity(batch);
                for row in table {
                    if let Some(v) = row.get::<String>(1)? {
                        values.push((v, row.get::<String>(2)?));
                    }
                }
                if values.is_empty() {
                    return Ok(());
                }
                pgrx::check_for_interrupts!();
                let f = fill(&pool, &rule, &secret, &values, &build, &mut seen)
                    .unwrap_or_else(|e| crate::error::raise(e.into(), F));
                done += values.len() as i64;
                column_computed += f.computed as i64;
                if last.elapsed().as_secs_f64() >= 5.0 {
                    last = std::time::Instant::now();
                    let elapsed = started.elapsed().as_secs_f64();
                    let rate = done as f64 / elapsed.max(1e-9);
                    let left = (total - done).max(0) as f64 / rate.max(1e-9);
                    pgrx::notice!(
                        "{F}: {relname}.{column}: {done} of {total} values ({:.0}%), {column_computed} computed, {rate:.1} values/s, about {} left",
                        100.0 * done as f64 / (total.max(1) as f64),
                        human(left)
                    );
                }
            }
        });
        result.unwrap_or_else(|e| pgrx::error!("{F}: reading {relname}.{column} failed: {e}"));
        pgrx::notice!(
            "{F}: {relname}.{column}: {done} distinct values, {column_computed} computed, {} already stored, in {}",
            done - column_computed,
            human(started.elapsed().as_secs_f64())
        );
        computed += column_computed;
    }
    computed
}

/// Deletes the store entries no current value needs; see
/// `dptext.store_prune()` in sql/catalog.sql.
fn prune() -> i64 {
    use pgrx::prelude::*;
    const F: &str = "dptext.store_prune";
    if crate::session::session_is_masked() {
        crate::error::refuse(format!("masked sessions cannot call {F}"));
    }
    if store_relations().is_none() {
        return 0;
    }
    let engine = crate::engine::engine();
    // Every tag a current value of a labelled column has, under the key
    // in force (none: every entry goes).
    let mut keep = std::collections::HashSet::new();
    if let Ok(RandomMode::Keyed(secret)) = crate::guc::random_mode() {
        let tables: Vec<pg_sys::Oid> = Spi::connect(|client| {
            let mut out = Vec::new();
            for row in client.select("SELECT DISTINCT table_oid FROM dptext.rules", None, &[])? {
                out.extend(row.get::<pg_sys::Oid>(1)?);
            }
            Ok::<_, pgrx::spi::Error>(out)
        })
        .unwrap_or_else(|e| pgrx::error!("{F}: could not read the rules: {e}"));
        for source in tables {
            let relname = source_name(source);
            for c in stored_columns(&engine, source, &relname, F, |_, _| {}) {
                let (column, rule) = (c.column, c.rule);
                let query = format!("SELECT v, g FROM {}", c.distinct);
                Spi::connect(|client| {
                    let mut cursor = client.try_open_cursor(query.as_str(), &[])?;
                    loop {
                        let rows = cursor.fetch(1000)?;
                        if rows.is_empty() {
                            return Ok::<_, pgrx::spi::Error>(());
                        }
                        for row in rows {
                            if let Some(v) = row.get::<String>(1)? {
                                let g = row.get::<String>(2)?;
                                keep.insert(tag(&secret, &rule, g.as_deref(), &v).1);
                            }
                        }
                        pgrx::check_for_interrupts!();
                    }
                })
                .unwrap_or_else(|e| pgrx::error!("{F}: could not read {column}: {e}"));
            }
        }
    }
    let tags: Vec<Vec<u8>> = Spi::connect(|client| {
        let mut out = Vec::new();
        for row in client.select("SELECT DISTINCT tag FROM dptext.store", None, &[])? {
            if let Some(t) = row.get::<Vec<u8>>(1)? {
                if t.len() != 32
                    || !keep.contains(&<[u8; 32]>::try_from(t.as_slice()).unwrap_or([0; 32]))
                {
                    out.push(t);
                }
            }
        }
        Ok::<_, pgrx::spi::Error>(out)
    })
    .unwrap_or_else(|e| pgrx::error!("{F}: could not read dptext.store: {e}"));
    if tags.is_empty() {
        return 0;
    }
    Spi::connect_mut(|client| {
        let args = [pgrx::datum::DatumWithOid::from(tags)];
        let n = client
            .update("DELETE FROM dptext.store WHERE tag = ANY($1)", None, &args)?
            .len();
        Ok::<_, pgrx::spi::Error>(n as i64)
    })
    .unwrap_or_else(|e| pgrx::error!("{F}: could not delete: {e}"))
}

/// `source` as SQL text (quoted and schema-qualified as needed).
fn source_name(source: pgrx::pg_sys::Oid) -> String {
    pgrx::Spi::get_one_with_args::<String>(
        "SELECT $1::pg_catalog.regclass::pg_catalog.text",
        &[pgrx::datum::DatumWithOid::from(source)],
    )
    .ok()
    .flatten()
    .unwrap_or_else(|| pgrx::error!("relation {} does not exist", source.to_u32()))
}

/// The SQL side of the store, in schema `dptext`.
#[pgrx::pg_schema]
mod dptext {
    use pgrx::prelude::*;

    /// Backs `dptext.warm(source regclass, batch_size int)` (sql/catalog.sql):
    /// computes into the store every distinct value (with its group) of
    /// each column of `source` whose rule runs a model and is not stored
    /// yet, `batch_size` values per model call, with a NOTICE of progress
    /// every 5 seconds; returns how many it computed. Cancellable.
    #[pg_extern(volatile, parallel_unsafe)]
    fn _warm(source: pg_sys::Oid, batch_size: i32) -> i64 {
        if !(1..=4096).contains(&batch_size) {
            super::invalid(
                "batch_size",
                format!("must be between 1 and 4096 (got {batch_size})"),
                "dptext.warm",
            );
        }
        super::warm(source, batch_size as usize)
    }

    /// Backs `dptext.store_prune()` (sql/catalog.sql): deletes the store's
    /// entries of other keys, of rules no label uses now, and of values no
    /// labelled column holds now; returns how many.
    #[pg_extern(volatile, parallel_unsafe)]
    fn _store_prune() -> i64 {
        super::prune()
    }
}
