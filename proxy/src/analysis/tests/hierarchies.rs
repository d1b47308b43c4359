//! Partitions and inheritance children that a protected column splits:
//! the member of a hierarchy a row is in would tell something of its
//! protected values.

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
