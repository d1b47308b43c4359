//! `#[pg_test]`s of masking's hardening: label changes wait for the
//! transactions that planned under the old labels (the locks, seen in
//! `pg_locks`; the waiting itself needs two sessions and is tested in
//! `tests/tests/hardening.rs`).

use pgrx::prelude::*;

// The test framework calls `tests.<name>()`: the schema is `tests`, like
// the other module's.
#[pg_schema]
mod tests {
    use pgrx::prelude::*;

    fn count(sql: &str) -> i64 {
        Spi::get_one::<i64>(sql).expect("query runs").unwrap_or(-1)
    }

    /// How many locks of `mode` this backend holds on role `role`.
    fn role_locks(role: &str, mode: &str) -> i64 {
        count(&format!(
            "SELECT count(*) FROM pg_locks
              WHERE locktype = 'object' AND classid = 'pg_authid'::regclass
                AND objid = (SELECT oid FROM pg_roles WHERE rolname = '{role}')
                AND mode = '{mode}' AND granted AND pid = pg_backend_pid()"
        ))
    }

    /// A role label takes an exclusive lock on the role: it waits for the
    /// open transactions whose statements locked the role (the next test)
    /// and keeps new ones from starting until it commits.
    #[pg_test]
    fn a_role_label_locks_the_role_exclusively() {
        Spi::run("CREATE ROLE dptext_h_label").unwrap();
        assert_eq!(role_locks("dptext_h_label", "AccessExclusiveLock"), 0);
        Spi::run("SECURITY LABEL FOR dptext ON ROLE dptext_h_label IS 'MASKED'").unwrap();
        assert_eq!(role_locks("dptext_h_label", "AccessExclusiveLock"), 1);
    }

    /// Every statement locks its session's login role and current role
    /// (shared) before it reads the masking decision, until its
    /// transaction ends.
    #[pg_test]
    fn statements_lock_the_session_roles() {
        Spi::run("CREATE ROLE dptext_h_reader").unwrap();
        assert_eq!(role_locks("dptext_h_reader", "AccessShareLock"), 0);
        Spi::run("SET ROLE dptext_h_reader").unwrap();
        Spi::run("SELECT 1").unwrap();
        Spi::run("RESET ROLE").unwrap();
        assert_eq!(role_locks("dptext_h_reader", "AccessShareLock"), 1);
        let login = Spi::get_one::<String>("SELECT session_user::text")
            .unwrap()
            .unwrap();
        assert_eq!(role_locks(&login, "AccessShareLock"), 1);
    }

    /// A column label locks the relations whose rules it can change: the
    /// whole inheritance family of its relation (ancestors, descendants,
    /// their other parents and children) and the materialized views that
    /// read any of them, directly or through a view; nothing else. (Here
    /// the set; that the label waits for them needs two sessions.)
    #[pg_test]
    fn a_column_label_affects_the_family_and_the_materialized_views_over_it() {
        Spi::run(
            "CREATE TABLE h_root (id int, note text) PARTITION BY RANGE (id);
             CREATE TABLE h_a PARTITION OF h_root FOR VALUES FROM (0) TO (10) PARTITION BY RANGE (id);
             CREATE TABLE h_a1 PARTITION OF h_a FOR VALUES FROM (0) TO (5);
             CREATE TABLE h_b PARTITION OF h_root FOR VALUES FROM (10) TO (20);
             CREATE TABLE h_other (id int, note text);
             CREATE MATERIALIZED VIEW h_mv AS SELECT id, note FROM h_a1;
             CREATE VIEW h_v AS SELECT id, note FROM h_b;
             CREATE MATERIALIZED VIEW h_mv2 AS SELECT id FROM h_v;
             CREATE MATERIALIZED VIEW h_mv_other AS SELECT id FROM h_other;
             CREATE TABLE h_p1 (id int, note text);
             CREATE TABLE h_p2 (x int);
             CREATE TABLE h_c () INHERITS (h_p1, h_p2);
             CREATE TABLE h_c2 () INHERITS (h_p2);",
        )
        .unwrap();
        let names = |relid: &str| -> Vec<String> {
            let oid = Spi::get_one::<pg_sys::Oid>(&format!("SELECT '{relid}'::regclass::oid"))
                .unwrap()
                .unwrap();
            let mut names: Vec<String> = crate::ffi::locks::affected_relations(oid)
                .into_iter()
                .map(|o| {
                    Spi::get_one::<String>(&format!("SELECT {o}::regclass::text"))
                        .unwrap()
                        .unwrap()
                })
                .collect();
            names.sort();
            names
        };
        assert_eq!(
            names("h_a1"),
            ["h_a", "h_a1", "h_b", "h_mv", "h_mv2", "h_root"]
        );
        assert_eq!(names("h_c"), ["h_c", "h_c2", "h_p1", "h_p2"]);
        assert_eq!(names("h_other"), ["h_mv_other", "h_other"]);
    }
}
