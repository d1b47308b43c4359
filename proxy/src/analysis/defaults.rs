//! The default allow- and deny-lists of [`super::Policy::default`]; the
//! reasons are in docs/proxy-allowlist.md.

use std::collections::{BTreeMap, BTreeSet};

use super::QualName;

/// Settings `SET`/`RESET` may change. `search_path` is not listed: it
/// has rules of its own (`PathChange`), since the analyzer resolves names
/// with the path the server searches. Not `standard_conforming_strings`
/// or `backslash_quote`: the proxy's parse must read string literals as
/// the server does. `client_encoding` only to UTF8, for the same reason.
pub const ALLOWED_SETTINGS: &[&str] = &[
    "application_name",
    "client_encoding",
    "client_min_messages",
    "datestyle",
    "extra_float_digits",
    "idle_in_transaction_session_timeout",
    "intervalstyle",
    "lock_timeout",
    "statement_timeout",
    "timezone",
    "transaction_isolation",
    "transaction_read_only",
    "transaction_deferrable",
];

/// Settings `SHOW` may read besides [`ALLOWED_SETTINGS`]: the read-only
/// ones drivers and tools ask for (psql, psycopg, SQLAlchemy's
/// `standard_conforming_strings`, `max_identifier_length` and, through
/// `current_setting`, `default_table_access_method`; pgjdbc, BI tools),
/// the locale and the path. `current_setting` of one of these, named by
/// a constant, is allowed as the same read. Any other, `SHOW ALL` and settings of
/// extensions or made up (`SET my.x`, `set_config`) included, is refused:
/// a custom setting holds whatever text was put there.
pub const SHOWN_SETTINGS: &[&str] = &[
    "server_version",
    "server_version_num",
    "server_encoding",
    "standard_conforming_strings",
    "integer_datetimes",
    "search_path",
    "max_identifier_length",
    "lc_collate",
    "lc_ctype",
    "is_superuser",
    "default_table_access_method",
    "default_transaction_isolation",
    "default_transaction_read_only",
    "max_index_keys",
    "block_size",
];

/// `pg_catalog` functions refused whatever their volatility: they read
/// files, large objects, settings or other sessions, run queries given as
/// text, or have side effects. Most are VOLATILE or STABLE anyway; being
/// listed keeps them refused should a STABLE allow-list or a catalog grow.
pub const DENIED_FUNCTIONS: &[&str] = &[
    "current_setting",
    "set_config",
    "pg_read_file",
    "pg_read_binary_file",
    "pg_ls_dir",
    "pg_stat_file",
    "pg_ls_logdir",
    "pg_ls_waldir",
    "pg_ls_tmpdir",
    "pg_ls_archive_statusdir",
    "lo_import",
    "lo_export",
    "lo_get",
    "lo_open",
    "lo_from_bytea",
    "loread",
    "pg_notify",
    "pg_sleep",
    "pg_sleep_for",
    "pg_sleep_until",
    "query_to_xml",
    "query_to_xmlschema",
    "query_to_xml_and_xmlschema",
    "table_to_xml",
    "table_to_xmlschema",
    "table_to_xml_and_xmlschema",
    "schema_to_xml",
    "schema_to_xml_and_xmlschema",
    "database_to_xml",
    "database_to_xml_and_xmlschema",
    "cursor_to_xml",
    "cursor_to_xmlschema",
    "ts_stat",
    "pg_advisory_lock",
    "pg_try_advisory_lock",
    "pg_terminate_backend",
    "pg_cancel_backend",
    "pg_reload_conf",
    "pg_logical_emit_message",
    "nextval",
    "setval",
    "currval",
    "lastval",
    "txid_current",
    "pg_current_xact_id",
    "pg_relation_size",
    "pg_table_size",
    "pg_total_relation_size",
    "pg_indexes_size",
    "pg_column_size",
    "pg_column_compression",
    "pg_mcv_list_items",
    "pg_stat_get_activity",
    "pg_get_backend_memory_contexts",
    "dblink",
    "dblink_exec",
];

/// Functions that read definitions from the catalog, by the OIDs and
/// names they are given: object names, types, defaults, index, constraint,
/// view, rule, trigger, policy and partition definitions, comments,
/// privileges, visibility on the search path. None reads a table's rows
/// or the statistics of its values (`pg_statistic`, `pg_statistic_ext_data`),
/// and every argument must be a value of the catalog (a constant, a
/// parameter or a catalog column; see `Policy::catalog_functions`).
/// Allowed whatever their volatility: `pg_partition_ancestors` is
/// VOLATILE by default only (it reads `pg_inherits`).
pub const CATALOG_FUNCTIONS: &[&str] = &[
    // psql \d and \dt, SQLAlchemy
    "format_type",
    "pg_get_expr",
    "pg_get_indexdef",
    "pg_get_constraintdef",
    "pg_get_viewdef",
    "pg_get_triggerdef",
    "pg_get_ruledef",
    "pg_get_partkeydef",
    "pg_get_partition_constraintdef",
    "pg_get_statisticsobjdef_columns",
    "pg_get_function_arguments",
    "pg_get_function_result",
    "pg_get_function_identity_arguments",
    "pg_get_userbyid",
    "pg_get_serial_sequence",
    "pg_table_is_visible",
    "pg_type_is_visible",
    "pg_function_is_visible",
    "pg_relation_is_publishable",
    "obj_description",
    "col_description",
    "shobj_description",
    "has_table_privilege",
    "has_schema_privilege",
    "pg_has_role",
    "to_regclass",
    "to_regtype",
    // psql \d of a table referenced by a foreign key or with triggers,
    // of a partition; \dX; \dx+; \df+; \do; \dd; SQLAlchemy's columns
    "pg_partition_ancestors",
    "pg_statistics_obj_is_visible",
    "pg_describe_object",
    "pg_get_function_sqlbody",
    "pg_operator_is_visible",
    "pg_opclass_is_visible",
    "pg_opfamily_is_visible",
    "pg_collation_is_visible",
    // takes a regclass: a table's text value cast to one would name a
    // relation (and its error quote the text)
    "pg_partition_root",
    // \db
    "pg_tablespace_location",
    // \l, \dO: encoding names and numbers
    "pg_encoding_to_char",
    "pg_char_to_encoding",
    "getdatabaseencoding",
];

/// STABLE `pg_catalog` functions that are allowed: they depend on
/// settings such as TimeZone and DateStyle only. The last group
/// implements cross-type date/time comparisons, `||` with a non-text
/// operand, and `@@` with the default text-search configuration, so that
/// the operators built on them can be used.
pub const STABLE_FUNCTIONS: &[&str] = &[
    "current_schema",
    "current_schemas",
    "current_database",
    "version",
    "array_to_string",
    // length(bytea, encoding name) is STABLE (an encoding lookup); every
    // other overload is IMMUTABLE
    "length",
    // generate_series(timestamptz, timestamptz, interval) is STABLE (the
    // time zone); the numeric overloads are IMMUTABLE
    "generate_series",
    // date and time, formatting
    "now",
    "transaction_timestamp",
    "statement_timestamp",
    "to_char",
    "to_date",
    "to_timestamp",
    "date_trunc",
    "date_part",
    "extract",
    "age",
    "timezone",
    "concat",
    "concat_ws",
    "format",
    // as concat: STABLE for its arguments' output functions (SQLAlchemy's
    // column reflection builds its identity and collation options with it)
    "json_build_object",
    // behind operators
    "anytextcat",
    "textanycat",
    "ts_match_tt",
    "ts_match_tq",
    "timestamptz_pl_interval",
    "timestamptz_mi_interval",
    "interval_pl_timestamptz",
    "date_eq_timestamptz",
    "date_ne_timestamptz",
    "date_lt_timestamptz",
    "date_le_timestamptz",
    "date_gt_timestamptz",
    "date_ge_timestamptz",
    "timestamptz_eq_date",
    "timestamptz_ne_date",
    "timestamptz_lt_date",
    "timestamptz_le_date",
    "timestamptz_gt_date",
    "timestamptz_ge_date",
    "timestamp_eq_timestamptz",
    "timestamp_ne_timestamptz",
    "timestamp_lt_timestamptz",
    "timestamp_le_timestamptz",
    "timestamp_gt_timestamptz",
    "timestamp_ge_timestamptz",
    "timestamptz_eq_timestamp",
    "timestamptz_ne_timestamp",
    "timestamptz_lt_timestamp",
    "timestamptz_le_timestamp",
    "timestamptz_gt_timestamp",
    "timestamptz_ge_timestamp",
];

/// Set-returning functions allowed in `FROM` (one output column each).
pub const FROM_FUNCTIONS: &[&str] = &[
    "generate_series",
    "generate_subscripts",
    "unnest",
    "pg_partition_ancestors",
];

/// `pg_catalog` relations that may be read: definitions, not data or
/// statistics. Not `pg_statistic`, `pg_stats`, `pg_statistic_ext_data`,
/// `pg_stats_ext*` (most common values and histograms of columns),
/// `pg_largeobject`, `pg_stat_activity` (other sessions' query texts),
/// `pg_settings`, `pg_user_mappings`, `pg_authid`, `pg_shadow`.
pub const PG_CATALOG_RELATIONS: &[&str] = &[
    "pg_am",
    "pg_attrdef",
    "pg_attribute",
    "pg_auth_members",
    "pg_class",
    "pg_collation",
    "pg_constraint",
    "pg_database",
    "pg_depend",
    "pg_description",
    "pg_enum",
    "pg_extension",
    "pg_index",
    "pg_indexes",
    "pg_inherits",
    "pg_language",
    "pg_matviews",
    "pg_namespace",
    "pg_opclass",
    "pg_operator",
    "pg_opfamily",
    "pg_partitioned_table",
    "pg_policy",
    "pg_proc",
    "pg_publication",
    "pg_publication_namespace",
    "pg_publication_rel",
    "pg_range",
    "pg_rewrite",
    "pg_roles",
    "pg_sequence",
    "pg_statistic_ext",
    "pg_tables",
    "pg_tablespace",
    "pg_trigger",
    "pg_type",
    "pg_views",
];

/// `information_schema` views that may be read.
pub const INFORMATION_SCHEMA_RELATIONS: &[&str] = &[
    "check_constraints",
    "columns",
    "constraint_column_usage",
    "key_column_usage",
    "referential_constraints",
    "schemata",
    "table_constraints",
    "tables",
    "views",
];

/// Columns of catalog relations that count a relation's rows or pages
/// (`Policy::size_columns`): the planner's estimates, kept for partitions,
/// partial indexes and TOAST tables alike. `relallfrozen` is
/// PostgreSQL 18's.
pub const SIZE_COLUMNS: &[(&str, &[&str])] = &[(
    "pg_class",
    &["reltuples", "relpages", "relallvisible", "relallfrozen"],
)];

/// [`SIZE_COLUMNS`], qualified with `pg_catalog`.
pub fn size_columns() -> BTreeMap<QualName, BTreeSet<String>> {
    SIZE_COLUMNS
        .iter()
        .map(|(rel, cols)| (QualName::new("pg_catalog", *rel), set(cols)))
        .collect()
}

/// A list as a set.
pub fn set(items: &[&str]) -> BTreeSet<String> {
    items.iter().map(|s| (*s).to_owned()).collect()
}

/// [`PG_CATALOG_RELATIONS`] and [`INFORMATION_SCHEMA_RELATIONS`],
/// qualified.
pub fn catalog_relations() -> BTreeSet<QualName> {
    PG_CATALOG_RELATIONS
        .iter()
        .map(|n| QualName::new("pg_catalog", *n))
        .chain(
            INFORMATION_SCHEMA_RELATIONS
                .iter()
                .map(|n| QualName::new("information_schema", *n)),
        )
        .collect()
}
