//! Catalog queries of psql 15 (`\dt`, `\d records`, as `psql -E` shows
//! them) and of SQLAlchemy 2.0's PostgreSQL dialect, and the rule that
//! keeps the catalog functions they call to values of the catalog.

use super::*;

const PSQL_DT: &str = r#"SELECT n.nspname as "Schema",
  c.relname as "Name",
  CASE c.relkind WHEN 'r' THEN 'table' WHEN 'v' THEN 'view' WHEN 'm' THEN 'materialized view' WHEN 'i' THEN 'index' WHEN 'S' THEN 'sequence' WHEN 't' THEN 'TOAST table' WHEN 'f' THEN 'foreign table' WHEN 'p' THEN 'partitioned table' WHEN 'I' THEN 'partitioned index' END as "Type",
  pg_catalog.pg_get_userbyid(c.relowner) as "Owner"
FROM pg_catalog.pg_class c
     LEFT JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace
     LEFT JOIN pg_catalog.pg_am am ON am.oid = c.relam
WHERE c.relkind IN ('r','p','')
      AND n.nspname <> 'pg_catalog'
      AND n.nspname !~ '^pg_toast'
      AND n.nspname <> 'information_schema'
  AND pg_catalog.pg_table_is_visible(c.oid)
ORDER BY 1,2;"#;

const PSQL_D: &[&str] = &[
    r#"SELECT c.oid,
  n.nspname,
  c.relname
FROM pg_catalog.pg_class c
     LEFT JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace
WHERE c.relname OPERATOR(pg_catalog.~) '^(records)$' COLLATE pg_catalog.default
  AND pg_catalog.pg_table_is_visible(c.oid)
ORDER BY 2, 3;"#,
    r#"SELECT c.relchecks, c.relkind, c.relhasindex, c.relhasrules, c.relhastriggers, c.relrowsecurity, c.relforcerowsecurity, false AS relhasoids, c.relispartition, '', c.reltablespace, CASE WHEN c.reloftype = 0 THEN '' ELSE c.reloftype::pg_catalog.regtype::pg_catalog.text END, c.relpersistence, c.relreplident, am.amname
FROM pg_catalog.pg_class c
 LEFT JOIN pg_catalog.pg_class tc ON (c.reltoastrelid = tc.oid)
LEFT JOIN pg_catalog.pg_am am ON (c.relam = am.oid)
WHERE c.oid = '16385';"#,
    r#"SELECT a.attname,
  pg_catalog.format_type(a.atttypid, a.atttypmod),
  (SELECT pg_catalog.pg_get_expr(d.adbin, d.adrelid, true)
   FROM pg_catalog.pg_attrdef d
   WHERE d.adrelid = a.attrelid AND d.adnum = a.attnum AND a.atthasdef),
  a.attnotnull,
  (SELECT c.collname FROM pg_catalog.pg_collation c, pg_catalog.pg_type t
   WHERE c.oid = a.attcollation AND t.oid = a.atttypid AND a.attcollation <> t.typcollation) AS attcollation,
  a.attidentity,
  a.attgenerated
FROM pg_catalog.pg_attribute a
WHERE a.attrelid = '16385' AND a.attnum > 0 AND NOT a.attisdropped
ORDER BY a.attnum;"#,
    r#"SELECT c2.relname, i.indisprimary, i.indisunique, i.indisclustered, i.indisvalid, pg_catalog.pg_get_indexdef(i.indexrelid, 0, true),
  pg_catalog.pg_get_constraintdef(con.oid, true), contype, condeferrable, condeferred, i.indisreplident, c2.reltablespace
FROM pg_catalog.pg_class c, pg_catalog.pg_class c2, pg_catalog.pg_index i
  LEFT JOIN pg_catalog.pg_constraint con ON (conrelid = i.indrelid AND conindid = i.indexrelid AND contype IN ('p','u','x'))
WHERE c.oid = '16385' AND c.oid = i.indrelid AND i.indexrelid = c2.oid
ORDER BY i.indisprimary DESC, c2.relname;"#,
    r#"SELECT oid, stxrelid::pg_catalog.regclass, stxnamespace::pg_catalog.regnamespace::pg_catalog.text AS nsp, stxname,
pg_catalog.pg_get_statisticsobjdef_columns(oid) AS columns,
  'd' = any(stxkind) AS ndist_enabled,
  'f' = any(stxkind) AS deps_enabled,
  'm' = any(stxkind) AS mcv_enabled,
stxstattarget
FROM pg_catalog.pg_statistic_ext
WHERE stxrelid = '16385'
ORDER BY nsp, stxname;"#,
    r#"SELECT pubname
     , NULL
     , NULL
FROM pg_catalog.pg_publication p
     JOIN pg_catalog.pg_publication_namespace pn ON p.oid = pn.pnpubid
     JOIN pg_catalog.pg_class pc ON pc.relnamespace = pn.pnnspid
WHERE pc.oid ='16385' and pg_catalog.pg_relation_is_publishable('16385')
UNION
SELECT pubname
     , pg_get_expr(pr.prqual, c.oid)
     , (CASE WHEN pr.prattrs IS NOT NULL THEN
         (SELECT string_agg(attname, ', ')
           FROM pg_catalog.generate_series(0, pg_catalog.array_upper(pr.prattrs::pg_catalog.int2[], 1)) s,
                pg_catalog.pg_attribute
          WHERE attrelid = pr.prrelid AND attnum = prattrs[s])
        ELSE NULL END) FROM pg_catalog.pg_publication p
     JOIN pg_catalog.pg_publication_rel pr ON p.oid = pr.prpubid
     JOIN pg_catalog.pg_class c ON c.oid = pr.prrelid
WHERE pr.prrelid = '16385'
UNION
SELECT pubname
     , NULL
     , NULL
FROM pg_catalog.pg_publication p
WHERE p.puballtables AND pg_catalog.pg_relation_is_publishable('16385')
ORDER BY 1;"#,
    r#"SELECT c.oid::pg_catalog.regclass
FROM pg_catalog.pg_class c, pg_catalog.pg_inherits i
WHERE c.oid = i.inhparent AND i.inhrelid = '16385'
  AND c.relkind != 'p' AND c.relkind != 'I'
ORDER BY inhseqno;"#,
    r#"SELECT c.oid::pg_catalog.regclass, c.relkind, inhdetachpending, pg_catalog.pg_get_expr(c.relpartbound, c.oid)
FROM pg_catalog.pg_class c, pg_catalog.pg_inherits i
WHERE c.oid = i.inhrelid AND i.inhparent = '16385'
ORDER BY pg_catalog.pg_get_expr(c.relpartbound, c.oid) = 'DEFAULT', c.oid::pg_catalog.regclass::pg_catalog.text;"#,
];

/// What psql 15 sends beside [`PSQL_D`] for a table with triggers or
/// one a foreign key references (`\d records`), for a partitioned table
/// (`\d parts`), and for `\dX`, `\dx+` and `\df+`: each was refused
/// before pg_partition_ancestors, pg_statistics_obj_is_visible,
/// pg_describe_object, pg_get_function_sqlbody and pg_language were
/// allowed.
const PSQL_MORE: &[&str] = &[
    r#"SELECT conname, conrelid::pg_catalog.regclass AS ontable,
       pg_catalog.pg_get_constraintdef(oid, true) AS condef
  FROM pg_catalog.pg_constraint c
 WHERE confrelid IN (SELECT pg_catalog.pg_partition_ancestors('16385')
                     UNION ALL VALUES ('16385'::pg_catalog.regclass))
       AND contype = 'f' AND conparentid = 0
ORDER BY conname;"#,
    r#"SELECT t.tgname, pg_catalog.pg_get_triggerdef(t.oid, true), t.tgenabled, t.tgisinternal,
  CASE WHEN t.tgparentid != 0 THEN
    (SELECT u.tgrelid::pg_catalog.regclass
     FROM pg_catalog.pg_trigger AS u,
          pg_catalog.pg_partition_ancestors(t.tgrelid) WITH ORDINALITY AS a(relid, depth)
     WHERE u.tgname = t.tgname AND u.tgrelid = a.relid
           AND u.tgparentid = 0
     ORDER BY a.depth LIMIT 1)
  END AS parent
FROM pg_catalog.pg_trigger t
WHERE t.tgrelid = '16385' AND (NOT t.tgisinternal OR (t.tgisinternal AND t.tgenabled = 'D'))
ORDER BY 1;"#,
    r#"SELECT conrelid = '16385'::pg_catalog.regclass AS sametable,
       conname,
       pg_catalog.pg_get_constraintdef(oid, true) AS condef,
       conrelid::pg_catalog.regclass AS ontable
  FROM pg_catalog.pg_constraint,
       pg_catalog.pg_partition_ancestors('16385')
 WHERE conrelid = relid AND contype = 'f' AND conparentid = 0
ORDER BY sametable DESC, conname;"#,
    r#"SELECT 
es.stxnamespace::pg_catalog.regnamespace::pg_catalog.text AS "Schema", 
es.stxname AS "Name", 
pg_catalog.format('%s FROM %s', 
  pg_catalog.pg_get_statisticsobjdef_columns(es.oid), 
  es.stxrelid::pg_catalog.regclass) AS "Definition",
CASE WHEN 'd' = any(es.stxkind) THEN 'defined' 
END AS "Ndistinct", 
CASE WHEN 'f' = any(es.stxkind) THEN 'defined' 
END AS "Dependencies",
CASE WHEN 'm' = any(es.stxkind) THEN 'defined' 
END AS "MCV"  
FROM pg_catalog.pg_statistic_ext es 
WHERE pg_catalog.pg_statistics_obj_is_visible(es.oid)
ORDER BY 1, 2;"#,
    r#"SELECT pg_catalog.pg_describe_object(classid, objid, 0) AS "Object description"
FROM pg_catalog.pg_depend
WHERE refclassid = 'pg_catalog.pg_extension'::pg_catalog.regclass AND refobjid = '47655' AND deptype = 'e'
ORDER BY 1;"#,
    r#"SELECT n.nspname as "Schema",
  p.proname as "Name",
  pg_catalog.pg_get_function_result(p.oid) as "Result data type",
  pg_catalog.pg_get_function_arguments(p.oid) as "Argument data types",
 CASE p.prokind
  WHEN 'a' THEN 'agg'
  WHEN 'w' THEN 'window'
  WHEN 'p' THEN 'proc'
  ELSE 'func'
 END as "Type",
 CASE
  WHEN p.provolatile = 'i' THEN 'immutable'
  WHEN p.provolatile = 's' THEN 'stable'
  WHEN p.provolatile = 'v' THEN 'volatile'
 END as "Volatility",
 pg_catalog.pg_get_userbyid(p.proowner) as "Owner",
 CASE WHEN prosecdef THEN 'definer' ELSE 'invoker' END AS "Security",
 pg_catalog.array_to_string(p.proacl, E'\n') AS "Access privileges",
 l.lanname as "Language",
 COALESCE(pg_catalog.pg_get_function_sqlbody(p.oid), p.prosrc) as "Source code",
 pg_catalog.obj_description(p.oid, 'pg_proc') as "Description"
FROM pg_catalog.pg_proc p
     LEFT JOIN pg_catalog.pg_namespace n ON n.oid = p.pronamespace
     LEFT JOIN pg_catalog.pg_language l ON l.oid = p.prolang
WHERE pg_catalog.pg_function_is_visible(p.oid)
      AND n.nspname <> 'pg_catalog'
      AND n.nspname <> 'information_schema'
ORDER BY 1, 2, 4;"#,
];

const SQLALCHEMY: &[&str] = &[
    "select pg_catalog.version()",
    "select current_schema()",
    "show standard_conforming_strings",
    "show transaction isolation level",
    "SELECT pg_catalog.pg_class.relname FROM pg_catalog.pg_class JOIN pg_catalog.pg_namespace \
     ON pg_catalog.pg_namespace.oid = pg_catalog.pg_class.relnamespace \
     WHERE pg_catalog.pg_class.relname = $1::VARCHAR \
     AND pg_catalog.pg_class.relkind = ANY (ARRAY[$2::VARCHAR, $3::VARCHAR]) \
     AND pg_catalog.pg_table_is_visible(pg_catalog.pg_class.oid) \
     AND pg_catalog.pg_namespace.nspname != $4::VARCHAR",
    "SELECT table_name FROM information_schema.tables WHERE table_schema = 'public'",
    // Inspector.get_columns (and pandas' read_sql_table), parameters numbered
    "SELECT pg_catalog.pg_attribute.attname AS name, \
     pg_catalog.format_type(pg_catalog.pg_attribute.atttypid, pg_catalog.pg_attribute.atttypmod) AS format_type, \
     CASE WHEN pg_catalog.pg_attribute.atthasdef THEN (SELECT pg_catalog.pg_get_expr(pg_catalog.pg_attrdef.adbin, pg_catalog.pg_attrdef.adrelid) AS pg_get_expr_1 \
     FROM pg_catalog.pg_attrdef WHERE pg_catalog.pg_attribute.atthasdef AND pg_catalog.pg_attrdef.adrelid = pg_catalog.pg_attribute.attrelid \
     AND pg_catalog.pg_attrdef.adnum = pg_catalog.pg_attribute.attnum) ELSE NULL END AS \"default\", \
     pg_catalog.pg_attribute.attnotnull AS not_null, pg_catalog.pg_class.relname AS table_name, \
     CASE WHEN (pg_catalog.pg_attribute.attcollation != $1::INTEGER AND (SELECT pg_catalog.pg_type.typcollation \
     FROM pg_catalog.pg_type WHERE pg_catalog.pg_type.oid = pg_catalog.pg_attribute.atttypid) != pg_catalog.pg_attribute.attcollation) \
     THEN (SELECT json_build_object($2::VARCHAR, pg_catalog.pg_collation.collname, $3::VARCHAR, \
     CASE WHEN pg_catalog.pg_collation_is_visible(pg_catalog.pg_collation.oid) THEN NULL ELSE pg_catalog.pg_namespace.nspname END) AS json_build_object_9 \
     FROM pg_catalog.pg_collation JOIN pg_catalog.pg_namespace ON pg_catalog.pg_namespace.oid = pg_catalog.pg_collation.collnamespace \
     WHERE pg_catalog.pg_collation.oid = pg_catalog.pg_attribute.attcollation) ELSE NULL END AS collation \
     FROM pg_catalog.pg_class LEFT OUTER JOIN pg_catalog.pg_attribute ON pg_catalog.pg_class.oid = pg_catalog.pg_attribute.attrelid \
     AND pg_catalog.pg_attribute.attnum > $4::SMALLINT AND NOT pg_catalog.pg_attribute.attisdropped \
     JOIN pg_catalog.pg_namespace ON pg_catalog.pg_namespace.oid = pg_catalog.pg_class.relnamespace \
     WHERE pg_catalog.pg_table_is_visible(pg_catalog.pg_class.oid) AND pg_catalog.pg_class.relname IN ($5::VARCHAR) \
     ORDER BY pg_catalog.pg_class.relname, pg_catalog.pg_attribute.attnum",
];

#[test]
fn psql_dt() {
    assert_eq!(plan(PSQL_DT), [None, None, None, None]);
}

#[test]
fn psql_d_table() {
    for sql in PSQL_D {
        ok(sql);
    }
}

#[test]
fn psql_d_of_referenced_and_partitioned_tables_and_more() {
    for sql in PSQL_MORE {
        ok(sql);
    }
    // pg_partition_ancestors names its column relid, whatever the alias.
    assert_eq!(
        plan("SELECT a.relid FROM pg_catalog.pg_partition_ancestors('16385') AS a"),
        [None]
    );
    refused(
        "SELECT a.a FROM pg_catalog.pg_partition_ancestors('16385') AS a",
        Rule::ColumnUnresolved,
    );
}

#[test]
fn sqlalchemy_introspection() {
    for sql in SQLALCHEMY {
        ok(sql);
    }
}

/// SQLAlchemy 2.1's table reflection compares each table's access method
/// with `current_setting('default_table_access_method')`: a read of a
/// setting SHOW may read, named by a constant, is allowed; a computed
/// name, a setting SHOW may not read and the dptext settings are not.
#[test]
fn current_setting_of_a_shown_setting_is_allowed_by_name() {
    for sql in [
        "SELECT current_setting('default_table_access_method')",
        "SELECT pg_catalog.current_setting('server_version_num', true)",
        "SELECT c.relname, CASE WHEN am.amname IS NOT NULL AND am.amname <> \
         pg_catalog.current_setting('default_table_access_method') THEN am.amname END \
         FROM pg_catalog.pg_class c LEFT JOIN pg_catalog.pg_am am ON am.oid = c.relam",
    ] {
        ok(sql);
    }
    for sql in [
        "SELECT current_setting('dptext.key')",
        "SELECT current_setting('DPTEXT.KEY_FILE')",
        "SELECT current_setting('my.secret')",
        "SELECT current_setting('data_directory')",
        "SELECT current_setting('default_table_' || 'access_method')",
        "SELECT current_setting(r.patient) FROM records r",
        "SELECT current_setting('server_version', r.id > 1) FROM records r",
        "SELECT current_setting(relname) FROM pg_catalog.pg_class",
    ] {
        refused(sql, Rule::FunctionNotAllowed);
    }
}

#[test]
fn statistics_and_data_reading_functions_stay_refused() {
    for sql in [
        "SELECT attname, most_common_vals FROM pg_stats WHERE tablename = 'records'",
        "SELECT * FROM pg_catalog.pg_statistic",
        "SELECT stxdmcv FROM pg_catalog.pg_statistic_ext_data",
    ] {
        refused(sql, Rule::CatalogRelation);
    }
    refused(
        "SELECT pg_catalog.pg_mcv_list_items(NULL)",
        Rule::FunctionNotAllowed,
    );
    refused(
        "SELECT pg_catalog.pg_stat_get_live_tuples(c.oid) FROM pg_catalog.pg_class c",
        Rule::FunctionNotAllowed,
    );
    refused(
        "SELECT pg_catalog.pg_column_size(a.attname) FROM pg_catalog.pg_attribute a",
        Rule::FunctionNotAllowed,
    );
    refused(
        "SELECT c.relname FROM pg_catalog.pg_class c WHERE pg_catalog.pg_table_is_visible(c.oid) \
         AND public.leak(c.relname) IS NULL",
        Rule::FunctionNotAllowed,
    );
}

/// A catalog function takes constants, parameters and catalog columns
/// only: never a value read from a table (even an unprotected column),
/// however it is carried there.
#[test]
fn catalog_functions_take_only_values_of_the_catalog() {
    for sql in [
        "SELECT pg_catalog.pg_get_userbyid(r.id) FROM records r",
        "SELECT pg_catalog.pg_table_is_visible(r.patient_id) FROM records r",
        "SELECT id FROM records r WHERE pg_catalog.pg_table_is_visible(r.id)",
        "SELECT id FROM records r ORDER BY pg_catalog.pg_get_userbyid(r.id)",
        "SELECT pg_catalog.pg_get_userbyid(s.x) FROM (SELECT id AS x FROM records) s",
        "WITH c AS (SELECT id AS x FROM records) SELECT pg_catalog.pg_get_userbyid(x) FROM c",
        "WITH c AS (SELECT oid FROM pg_catalog.pg_class UNION SELECT id FROM records) \
         SELECT pg_catalog.pg_table_is_visible(oid) FROM c",
        "SELECT pg_catalog.pg_get_userbyid(max(r.id)) FROM records r",
        "SELECT pg_catalog.pg_get_userbyid(CASE WHEN r.id > 1 THEN 10 ELSE 11 END) FROM records r",
        "SELECT pg_catalog.pg_get_userbyid((SELECT max(id) FROM records))",
        "SELECT pg_catalog.pg_get_userbyid(v.column1) FROM (VALUES ((SELECT 10))) v",
        "SELECT (SELECT pg_catalog.pg_get_userbyid(r.id)) FROM records r",
        "SELECT pg_catalog.pg_get_userbyid(x) FROM records r, LATERAL (SELECT r.id AS x) s",
        "SELECT pg_catalog.pg_get_userbyid(g) FROM records r, generate_series(1, r.id) g",
        "SELECT a.relid FROM records r, pg_catalog.pg_partition_ancestors(r.id) a",
        "SELECT pg_catalog.pg_describe_object(c.oid, r.id, 0) FROM pg_catalog.pg_class c, records r",
        "SELECT pg_catalog.pg_get_expr(d.adbin, r.id) FROM pg_catalog.pg_attrdef d, records r",
        "SELECT pg_catalog.pg_get_userbyid(r.tableoid) FROM records r",
        "SELECT pg_catalog.pg_get_userbyid(s.id) FROM analytics.records_safe s",
        // pg_partition_root takes a regclass: a table's text cast to one
        // names a relation, and its error quotes the text.
        "SELECT pg_catalog.pg_partition_root(ward) FROM records",
        "SELECT pg_catalog.pg_tablespace_location(r.id) FROM records r",
    ] {
        refused(sql, Rule::CatalogFunctionArgument);
    }
    // Protected columns stay refused first, by their own rule.
    refused(
        "SELECT pg_catalog.pg_get_userbyid(note) FROM records",
        Rule::ProtectedInExpression,
    );
    // What tools write: constants, parameters, catalog columns, through
    // joins, derived tables, CTEs, VALUES and set-returning functions of
    // them.
    for sql in [
        "SELECT pg_catalog.pg_get_userbyid(10)",
        "SELECT pg_catalog.pg_get_userbyid($1)",
        "SELECT pg_catalog.pg_table_is_visible('records'::pg_catalog.regclass)",
        "SELECT pg_catalog.pg_get_userbyid(c.relowner) FROM pg_catalog.pg_class c \
         JOIN records r ON r.id = c.relchecks",
        "SELECT pg_catalog.pg_get_userbyid(s.o) FROM (SELECT relowner AS o FROM pg_catalog.pg_class) s",
        "WITH c AS (SELECT relowner FROM pg_catalog.pg_class) SELECT pg_catalog.pg_get_userbyid(relowner) FROM c",
        "SELECT pg_catalog.pg_get_userbyid(v.column1) FROM (VALUES (10), (11)) v",
        "SELECT pg_catalog.pg_get_userbyid(g) FROM generate_series(1, 3) g",
    ] {
        ok(sql);
    }
}

/// An aggregate or a window function computes over the rows a query
/// reads, not over its arguments alone: `count(*)` and `row_number()`
/// take no argument, yet their values are counts of a table's rows. None
/// is a value of the catalog, even over catalog columns. Before the fix
/// the calls without arguments passed as constants.
#[test]
fn aggregates_and_window_functions_are_not_values_of_the_catalog() {
    for sql in [
        "SELECT pg_catalog.to_regclass(count(*)::text) FROM records WHERE ward = 'north'",
        "SELECT pg_catalog.has_table_privilege((row_number() OVER ())::text, 'SELECT') FROM records",
        "SELECT pg_catalog.pg_get_userbyid(count(*)) FROM records",
        "SELECT pg_catalog.pg_get_userbyid(count(1)) FROM records",
        "SELECT pg_catalog.pg_get_userbyid(rank() OVER (ORDER BY id)) FROM records",
        "SELECT pg_catalog.pg_get_userbyid(sum(1)) FROM records",
        "SELECT pg_catalog.pg_get_userbyid(max(c.relowner)) FROM pg_catalog.pg_class c",
        "SELECT pg_catalog.pg_get_userbyid(x) FROM (SELECT count(*) AS x FROM records) s",
        "WITH c AS (SELECT row_number() OVER () AS n FROM records) \
         SELECT pg_catalog.pg_get_userbyid(n) FROM c",
    ] {
        refused(sql, Rule::CatalogFunctionArgument);
    }
    // Outside a catalog function they stay what they were.
    ok("SELECT count(*), row_number() OVER () FROM records");
}
