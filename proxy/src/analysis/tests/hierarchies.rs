//! Partitions and inheritance children that a protected column splits,
//! and the catalog's row counts and sizes: the member of a hierarchy a
//! row is in, or the number of rows a partition or partial index holds,
//! would tell something of protected values.

use super::*;

#[test]
fn no_member_of_a_hierarchy_a_protected_column_splits_is_read() {
    for sql in [
        // The partitioned table: tableoid, ctid, the order of an
        // unordered read all tell the partition.
        "SELECT id, region FROM regions",
        "SELECT id, tableoid FROM regions",
        "SELECT id, ctid FROM regions",
        "SELECT count(*) FROM regions",
        "SELECT id FROM ONLY regions",
        "TABLE regions",
        // A partition, directly, counted, or as a filter.
        "SELECT id FROM regions_north",
        "SELECT count(*) FROM public.regions_north",
        "SELECT id FROM records r WHERE EXISTS (SELECT 1 FROM regions_north n WHERE n.id = r.id)",
        "SELECT r.id FROM records r JOIN regions_north n ON n.id = r.id",
        "WITH x AS (SELECT id FROM regions_north) SELECT count(*) FROM x",
        "SELECT id FROM records UNION ALL SELECT id FROM regions_north",
        "DECLARE c CURSOR FOR SELECT id FROM regions",
        "PREPARE p AS SELECT id FROM regions_north",
    ] {
        let r = refused(sql, Rule::ProtectedPartition);
        assert!(
            r.message
                .contains("public.regions is partitioned by protected column region"),
            "{r}"
        );
    }
    // A CTE of that name is the CTE; the catalog still describes it.
    ok("WITH regions AS (SELECT 1 AS id) SELECT id FROM regions");
    ok("SELECT c.relname FROM pg_catalog.pg_class c \
        WHERE c.oid = 'regions_north'::pg_catalog.regclass");
}

#[test]
fn relation_sizes_are_withheld_while_columns_are_protected() {
    for sql in [
        "SELECT relname, reltuples FROM pg_class",
        "SELECT relpages FROM pg_catalog.pg_class WHERE relname = 'records'",
        "SELECT c.relname FROM pg_class c WHERE c.reltuples > 10",
        "SELECT relname FROM pg_class ORDER BY relpages",
        "SELECT sum(c.reltuples) FROM pg_class c",
        "SELECT * FROM pg_class",
        "SELECT c.* FROM pg_class c",
        "SELECT c FROM pg_class c",
        "SELECT array_agg(c) FROM pg_class c",
        "SELECT x FROM (SELECT * FROM pg_class) s(x)",
        "SELECT n.nspname FROM pg_namespace n JOIN pg_class c ON c.relpages = n.oid::int",
    ] {
        let r = refused(sql, Rule::RelationSize);
        assert!(r.message.contains("pg_catalog.pg_class.re"), "{r}");
    }
    // The other columns, and a count of relations, stay readable.
    ok("SELECT c.relname, c.relkind, c.relispartition FROM pg_class c");
    ok("SELECT count(*) FROM pg_class");
    // Nothing protected: nothing to withhold.
    analyze_against(
        "SELECT relname, reltuples, relpages FROM pg_class",
        &catalog(),
        &Policy::default(),
        &["public"],
        &Session::new(),
    )
    .expect("allowed without protected columns");
}

/// A generated column computed from a protected one (`RelationInfo::
/// derived`) is refused by any reference, `*` and whole rows included;
/// the table's other columns stay readable.
#[test]
fn columns_generated_from_protected_ones_are_withheld() {
    let mut c = catalog();
    let mut gen = rel(
        "public",
        "gen",
        RelationKind::Table,
        &["id", "note", "note_len"],
    );
    gen.derived
        .insert("note_len".into(), "protected column note".into());
    c.add_relation(gen);
    let mut p = policy();
    p.protect("public", "gen", "note", "santext");
    let run = |sql: &str| analyze_against(sql, &c, &p, &["public"], &Session::new());
    for sql in [
        "SELECT note_len FROM gen",
        "SELECT id, note FROM gen WHERE note_len > 10",
        "SELECT * FROM gen",
        "SELECT g.* FROM gen g",
        "SELECT g FROM gen g",
        "TABLE gen",
        "SELECT count(*) FROM gen GROUP BY note_len",
        "SELECT x FROM (SELECT id, note_len AS x FROM gen) s",
    ] {
        let r = run(sql).expect_err(sql);
        assert_eq!(r.rule, Rule::DerivedColumn, "{sql}: {r}");
        assert!(
            r.message
                .contains("public.gen.note_len is generated from protected column note"),
            "{r}"
        );
    }
    assert!(run("SELECT id, note FROM gen WHERE id > 1").is_ok());
    assert!(run("SELECT count(*) FROM gen").is_ok());
}
