//! Tests of the analyzer against a fixture catalog: a clinic with
//! `public.records(id, patient_id, note, ward)` whose `note` is protected,
//! a sanitized view `analytics.records_safe`, a user-defined function
//! `public.leak(text)`, a schema `tools` that shadows `upper`, `=` and
//! `text`, a table `public.regions` partitioned by its protected `region`
//! (and its partition `regions_north`), a table `public.screened` whose
//! row-level security policy reads its protected `note`, and enough of
//! `pg_catalog` for psql and SQLAlchemy.

mod allowed;
mod attacks;
mod guards;
mod hierarchies;
mod introspection;
mod names;
mod qualify;
mod refused;
mod row_security;
mod session;

use super::catalog::{FunctionKind as K, Volatility as V};
use super::*;

/// A relation of the fixture catalogs: its columns, nothing else known.
pub fn rel(schema: &str, name: &str, kind: RelationKind, cols: &[&str]) -> RelationInfo {
    RelationInfo {
        schema: schema.into(),
        name: name.into(),
        kind,
        columns: cols.iter().map(|c| (*c).to_owned()).collect(),
        ancestors: Vec::new(),
        opaque: Default::default(),
        opaque_row: None,
        split: None,
        row_security: None,
        untrusted_owner: None,
        protected_index: None,
        unique_keys: Vec::new(),
        derived: Default::default(),
    }
}

const PG_CATALOG: &[(&str, &[&str])] = &[
    (
        "pg_class",
        &[
            "oid",
            "relname",
            "relnamespace",
            "relkind",
            "relowner",
            "relchecks",
            "relhasindex",
            "relhasrules",
            "relhastriggers",
            "relrowsecurity",
            "relforcerowsecurity",
            "relispartition",
            "reltablespace",
            "reloftype",
            "relpersistence",
            "relreplident",
            "relam",
            "reltoastrelid",
            "relpartbound",
            "relpages",
            "reltuples",
        ],
    ),
    ("pg_namespace", &["oid", "nspname", "nspowner"]),
    ("pg_am", &["oid", "amname"]),
    (
        "pg_attribute",
        &[
            "attrelid",
            "attname",
            "atttypid",
            "atttypmod",
            "attnum",
            "attnotnull",
            "attisdropped",
            "atthasdef",
            "attcollation",
            "attidentity",
            "attgenerated",
        ],
    ),
    ("pg_attrdef", &["oid", "adrelid", "adnum", "adbin"]),
    ("pg_collation", &["oid", "collname", "collnamespace"]),
    ("pg_type", &["oid", "typname", "typcollation"]),
    (
        "pg_index",
        &[
            "indrelid",
            "indexrelid",
            "indisprimary",
            "indisunique",
            "indisclustered",
            "indisvalid",
            "indisreplident",
        ],
    ),
    (
        "pg_constraint",
        &[
            "oid",
            "conrelid",
            "conindid",
            "contype",
            "condeferrable",
            "condeferred",
            "conname",
            "confrelid",
            "conparentid",
        ],
    ),
    (
        "pg_inherits",
        &["inhrelid", "inhparent", "inhseqno", "inhdetachpending"],
    ),
    (
        "pg_statistic_ext",
        &[
            "oid",
            "stxrelid",
            "stxnamespace",
            "stxname",
            "stxkind",
            "stxstattarget",
        ],
    ),
    ("pg_publication", &["oid", "pubname", "puballtables"]),
    ("pg_publication_namespace", &["pnpubid", "pnnspid"]),
    (
        "pg_publication_rel",
        &["prpubid", "prrelid", "prqual", "prattrs"],
    ),
    ("pg_statistic", &["starelid", "staattnum", "stavalues1"]),
    (
        "pg_stats",
        &["schemaname", "tablename", "attname", "most_common_vals"],
    ),
    ("pg_settings", &["name", "setting"]),
    (
        "pg_trigger",
        &[
            "oid",
            "tgname",
            "tgrelid",
            "tgparentid",
            "tgisinternal",
            "tgenabled",
        ],
    ),
    (
        "pg_depend",
        &["classid", "objid", "refclassid", "refobjid", "deptype"],
    ),
    (
        "pg_proc",
        &[
            "oid",
            "proname",
            "pronamespace",
            "prokind",
            "provolatile",
            "proparallel",
            "proowner",
            "prosecdef",
            "proacl",
            "prolang",
            "prosrc",
        ],
    ),
    ("pg_language", &["oid", "lanname"]),
    ("pg_statistic_ext_data", &["stxoid", "stxdmcv"]),
    (
        "pg_description",
        &["objoid", "classoid", "objsubid", "description"],
    ),
];

fn pg_function(c: &mut MemoryCatalog, name: &str, v: V, k: K) {
    c.add_function("pg_catalog", name, v, k);
}

fn pg_operator(c: &mut MemoryCatalog, symbol: &str, function: &str, v: V) {
    c.add_operator(
        "pg_catalog",
        symbol,
        QualName::new("pg_catalog", function),
        v,
    );
}

/// The fixture catalog.
pub fn catalog() -> MemoryCatalog {
    let mut c = MemoryCatalog::new();
    let t = RelationKind::Table;
    let mut records = rel(
        "public",
        "records",
        t,
        &["id", "patient_id", "note", "ward"],
    );
    // Two unique keys: `id`, and (`patient_id`, `ward`).
    records.unique_keys = vec![vec!["id".into()], vec!["patient_id".into(), "ward".into()]];
    c.add_relation(records);
    c.add_relation(rel("public", "patients", t, &["id", "name", "ward"]));
    c.add_relation(rel("public", "wards", t, &["id", "name"]));
    let mut child = rel(
        "public",
        "records_2024",
        t,
        &["id", "patient_id", "note", "ward"],
    );
    child.ancestors = vec![QualName::new("public", "records")];
    c.add_relation(child);
    c.add_relation(rel("public", "renamed", t, &["id", "body"]));
    // Partitioned by a protected column: the table and its partition.
    let split = Split {
        relation: QualName::new("public", "regions"),
        column: "region".into(),
        by: SplitBy::PartitionKey,
    };
    let mut regions = rel("public", "regions", t, &["id", "region"]);
    regions.split = Some(split.clone());
    c.add_relation(regions);
    let mut north = rel("public", "regions_north", t, &["id", "region"]);
    north.ancestors = vec![QualName::new("public", "regions")];
    north.split = Some(split);
    c.add_relation(north);
    // A row-level security policy reads the protected note of `screened`.
    let mut screened = rel("public", "screened", t, &["id", "note"]);
    screened.row_security = Some(RowSecurity {
        policy: "oncology".into(),
        reads: PolicyReads::Column("note".into()),
    });
    c.add_relation(screened);
    // Another role owns the type of `status` and the table's row type.
    let mut tagged = rel("public", "tagged", t, &["id", "status"]);
    tagged
        .opaque
        .insert("status".into(), "public.status_t".into());
    tagged.opaque_row = Some("public.tagged".into());
    c.add_relation(tagged);
    c.add_relation(rel(
        "public",
        "records_view",
        RelationKind::View,
        &["id", "note"],
    ));
    c.add_relation(rel(
        "public",
        "records_mv",
        RelationKind::MaterializedView,
        &["id", "note"],
    ));
    c.add_relation(rel(
        "public",
        "records_id_seq",
        RelationKind::Other,
        &["last_value"],
    ));
    c.add_relation(rel(
        "analytics",
        "records_safe",
        RelationKind::View,
        &["id", "note", "ward"],
    ));
    c.add_relation(rel(
        "pg_toast",
        "pg_toast_16384",
        t,
        &["chunk_id", "chunk_seq", "chunk_data"],
    ));
    for (name, cols) in PG_CATALOG {
        c.add_relation(rel("pg_catalog", name, t, cols));
    }
    c.add_relation(rel(
        "information_schema",
        "tables",
        RelationKind::View,
        &["table_catalog", "table_schema", "table_name", "table_type"],
    ));

    use K::{Aggregate as A, Function as F, Window as W};
    for (name, v, k) in [
        ("lower", V::Immutable, F),
        ("upper", V::Immutable, F),
        ("length", V::Immutable, F),
        ("substring", V::Immutable, F),
        ("btrim", V::Immutable, F),
        ("md5", V::Immutable, F),
        ("array_upper", V::Immutable, F),
        ("generate_series", V::Immutable, F),
        ("unnest", V::Immutable, F),
        ("jsonb_each", V::Immutable, F),
        ("similar_to_escape", V::Immutable, F),
        ("count", V::Immutable, A),
        ("sum", V::Immutable, A),
        ("min", V::Immutable, A),
        ("max", V::Immutable, A),
        ("string_agg", V::Immutable, A),
        ("array_agg", V::Immutable, A),
        ("row_number", V::Immutable, W),
        ("rank", V::Immutable, W),
        ("lag", V::Immutable, W),
        ("now", V::Stable, F),
        ("extract", V::Immutable, F),
        ("extract", V::Stable, F),
        ("row_to_json", V::Stable, F),
        ("to_json", V::Stable, F),
        ("random", V::Volatile, F),
        ("pg_notify", V::Volatile, F),
        ("set_config", V::Volatile, F),
        ("current_setting", V::Stable, F),
        ("pg_read_file", V::Volatile, F),
        ("pg_sleep", V::Volatile, F),
        ("query_to_xml", V::Volatile, F),
        ("pg_column_size", V::Stable, F),
        ("format_type", V::Stable, F),
        ("pg_get_expr", V::Stable, F),
        ("pg_table_is_visible", V::Stable, F),
        ("pg_get_indexdef", V::Stable, F),
        ("pg_get_constraintdef", V::Stable, F),
        ("pg_get_userbyid", V::Stable, F),
        ("pg_relation_is_publishable", V::Stable, F),
        ("pg_get_statisticsobjdef_columns", V::Stable, F),
        ("obj_description", V::Stable, F),
        ("version", V::Stable, F),
        ("current_schema", V::Stable, F),
        ("pg_stat_get_numscans", V::Stable, F),
        ("pg_partition_ancestors", V::Volatile, F),
        ("pg_partition_root", V::Immutable, F),
        ("pg_tablespace_location", V::Stable, F),
        ("pg_statistics_obj_is_visible", V::Stable, F),
        ("pg_describe_object", V::Stable, F),
        ("pg_get_triggerdef", V::Stable, F),
        ("pg_get_function_result", V::Stable, F),
        ("pg_get_function_arguments", V::Stable, F),
        ("pg_get_function_sqlbody", V::Stable, F),
        ("pg_function_is_visible", V::Stable, F),
        ("array_to_string", V::Stable, F),
        ("format", V::Stable, F),
        ("json_build_object", V::Stable, F),
        ("pg_collation_is_visible", V::Stable, F),
        ("to_regclass", V::Stable, F),
        ("has_table_privilege", V::Stable, F),
        ("pg_mcv_list_items", V::Immutable, F),
        ("pg_stat_get_live_tuples", V::Stable, F),
    ] {
        pg_function(&mut c, name, v, k);
    }
    c.add_function("public", "leak", V::Volatile, F);
    c.add_function("public", "pure_leak", V::Immutable, F);
    c.add_function("tools", "upper", V::Immutable, F);
    c.add_function("public", "archive", V::Volatile, K::Procedure);

    for (symbol, function, v) in [
        ("=", "int4eq", V::Immutable),
        ("=", "texteq", V::Immutable),
        ("=", "date_eq_timestamptz", V::Stable),
        ("<>", "int4ne", V::Immutable),
        ("<>", "textne", V::Immutable),
        ("<", "int4lt", V::Immutable),
        ("<=", "int4le", V::Immutable),
        (">", "int4gt", V::Immutable),
        (">", "text_gt", V::Immutable),
        (">=", "int4ge", V::Immutable),
        ("+", "int4pl", V::Immutable),
        ("||", "textcat", V::Immutable),
        ("||", "anytextcat", V::Stable),
        ("~~", "textlike", V::Immutable),
        ("!~~", "textnlike", V::Immutable),
        ("~~*", "texticlike", V::Immutable),
        ("~", "textregexeq", V::Immutable),
        ("!~", "textregexne", V::Immutable),
        ("@@", "ts_match_vq", V::Immutable),
        ("@@", "ts_match_tq", V::Stable),
        ("<->", "pg_sleep_op", V::Volatile),
    ] {
        pg_operator(&mut c, symbol, function, v);
    }
    c.add_operator(
        "public",
        "===",
        QualName::new("public", "leak_eq"),
        V::Immutable,
    );
    c.add_operator(
        "tools",
        "=",
        QualName::new("tools", "tools_eq"),
        V::Immutable,
    );

    for t in [
        "text",
        "int4",
        "int8",
        "int2",
        "bytea",
        "bool",
        "numeric",
        "varchar",
        "regclass",
        "regtype",
        "regnamespace",
        "oid",
        "date",
        "timestamptz",
        "float8",
        "name",
        "char",
        "interval",
        "json",
        "jsonb",
    ] {
        c.add_type("pg_catalog", t);
    }
    c.add_type("public", "mood");
    c.add_type("tools", "text");
    c
}

/// The fixture policy: `public.records.note` and `public.regions.region`
/// protected, the view `analytics.records_safe` sanitized,
/// `public.renamed.note` protected although the table has no such column.
pub fn policy() -> Policy {
    let mut p = Policy::default();
    p.protect("public", "records", "note", "deidentify");
    p.protect("public", "renamed", "note", "deidentify");
    p.protect("public", "regions", "region", "deidentify");
    p.protect("public", "screened", "note", "deidentify");
    p.sanitize("analytics", "records_safe");
    p
}

/// Analyzes `sql` with search path `path` and session `session`.
pub fn analyze_with(sql: &str, path: &[&str], session: &Session) -> Result<Analysis, Refusal> {
    analyze_against(sql, &catalog(), &policy(), path, session)
}

/// Analyzes `sql` against `catalog` and `policy`, with search path `path`
/// and session `session`.
pub fn analyze_against(
    sql: &str,
    catalog: &MemoryCatalog,
    policy: &Policy,
    path: &[&str],
    session: &Session,
) -> Result<Analysis, Refusal> {
    let cache = ParseCache::default();
    let path: Vec<String> = path.iter().map(|s| (*s).to_owned()).collect();
    let ctx = Context {
        catalog,
        policy,
        search_path: &path,
        user: "analyst",
        cache: &cache,
    };
    analyze(sql, &ctx, session)
}

/// Analyzes `sql` with the default search path and a fresh session.
pub fn check(sql: &str) -> Result<Analysis, Refusal> {
    analyze_with(sql, &["$user", "public"], &Session::new())
}

/// Asserts that `sql` is allowed; returns its analysis.
#[track_caller]
pub fn ok(sql: &str) -> Analysis {
    match check(sql) {
        Ok(a) => a,
        Err(r) => panic!("refused: {sql}\n  {r}"),
    }
}

/// Asserts that `sql` is refused by `rule`; returns the refusal.
#[track_caller]
pub fn refused(sql: &str, rule: Rule) -> Refusal {
    match check(sql) {
        Ok(a) => panic!("allowed: {sql}\n  {a:?}"),
        Err(r) => {
            assert_eq!(r.rule, rule, "{sql}\n  {r}");
            r
        }
    }
}

/// The output plan of a one-statement `sql`: for each column, the rule
/// of the protected column it carries, or `None`.
#[track_caller]
pub fn plan(sql: &str) -> Vec<Option<String>> {
    let a = ok(sql);
    assert_eq!(a.statements.len(), 1, "{sql}");
    a.statements[0]
        .output
        .iter()
        .map(|o| match o {
            OutputColumn::Plain => None,
            OutputColumn::Protected(p) => Some(format!("{}.{}", p.table, p.column)),
            OutputColumn::Opaque { column, .. } => Some(format!("opaque {column}")),
        })
        .collect()
}

/// `Some("public.records.note")`.
pub fn note() -> Option<String> {
    Some("public.records.note".to_owned())
}
