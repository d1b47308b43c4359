//! `#[pg_test]`s of masking's hardening: label changes wait for the
//! transactions that planned under the old labels (the locks, seen in
//! `pg_locks`; the waiting itself needs two sessions and is tested in
//! `tests/tests/hardening.rs`), masked sessions see no figure that depends
//! on the sizes of raw values, and leave no code behind for other sessions.

use pgrx::prelude::*;

// The test framework calls `tests.<name>()`: the schema is `tests`, like
// the other module's.
#[pg_schema]
mod tests {
    use pgrx::prelude::*;

    use crate::test_support::failure_of;

    /// Runs `sql`, which must be refused with 42501; returns the message.
    fn refused(sql: &str) -> String {
        let (code, message) = failure_of(sql).unwrap_or_else(|| panic!("accepted: {sql}"));
        assert_eq!(
            code,
            PgSqlErrorCode::ERRCODE_INSUFFICIENT_PRIVILEGE,
            "{sql}: {message}"
        );
        message
    }

    /// Runs `sql`, which must succeed.
    fn allowed(sql: &str) {
        if let Some((code, message)) = failure_of(sql) {
            panic!("refused ({code:?}): {sql}: {message}");
        }
    }

    fn count(sql: &str) -> i64 {
        Spi::get_one::<i64>(sql).expect("query runs").unwrap_or(-1)
    }

    /// Creates role `name`, labelled `MASKED`, that may create objects in
    /// `public`; the caller switches to it with `SET ROLE`.
    fn masked_role(name: &str) {
        Spi::run(&format!(
            "SET search_path = public;
             CREATE ROLE {name};
             SECURITY LABEL FOR dptext ON ROLE {name} IS 'MASKED';
             GRANT CREATE, USAGE ON SCHEMA public TO {name}"
        ))
        .unwrap();
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
            let mut names: Vec<String> = crate::pg::locks::affected_relations(oid)
                .unwrap()
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

    /// EXPLAIN ANALYZE reports memory, disk and buffer figures of plan
    /// nodes below the masking: refused in a masked session; EXPLAIN alone
    /// is not, and unmasked sessions are not.
    #[pg_test]
    fn masked_sessions_cannot_explain_analyze() {
        masked_role("dptext_h_explain");
        Spi::run("CREATE TABLE h_sorted AS SELECT g AS id, repeat('x', g) AS note FROM generate_series(1, 50) g;
                  GRANT SELECT ON h_sorted TO dptext_h_explain")
            .unwrap();
        let query = "SELECT note FROM h_sorted ORDER BY id DESC";
        Spi::run("SET ROLE dptext_h_explain").unwrap();
        for explain in [
            "EXPLAIN ANALYZE",
            "EXPLAIN (ANALYZE)",
            "EXPLAIN (ANALYZE on, COSTS off)",
            "EXPLAIN (ANALYZE, BUFFERS, TIMING off)",
            "explain (analyse true)",
        ] {
            let message = refused(&format!("{explain} {query}"));
            assert!(message.contains("EXPLAIN ANALYZE"), "{message}");
        }
        for explain in ["EXPLAIN", "EXPLAIN (COSTS off)", "EXPLAIN (ANALYZE false)"] {
            allowed(&format!("{explain} {query}"));
        }
        // Inside PL/pgSQL too (a utility statement run through SPI).
        refused(&format!(
            "DO $$ DECLARE l text; BEGIN FOR l IN EXECUTE 'EXPLAIN ANALYZE {query}' LOOP END LOOP; END $$"
        ));
        Spi::run("RESET ROLE").unwrap();
        allowed(&format!("EXPLAIN ANALYZE {query}"));
    }

    /// The statistics functions that count temporary files, blocks,
    /// buffers, WAL or sizes are refused to masked sessions however they
    /// are reached: a view, a direct call, a call the planner never sees
    /// (a CALL argument, an EXECUTE parameter). Other statistics stay.
    #[pg_test]
    fn masked_sessions_cannot_read_size_counters() {
        masked_role("dptext_h_counters");
        // pg_monitor may list the temporary files: the refusal is dptext's.
        Spi::run(
            "CREATE TABLE h_counted (id int, note text);
             GRANT SELECT ON h_counted TO dptext_h_counters;
             GRANT pg_monitor TO dptext_h_counters",
        )
        .unwrap();
        let reads = [
            "SELECT temp_bytes FROM pg_stat_database WHERE datname = current_database()",
            "SELECT temp_files, blks_read, blks_hit FROM pg_stat_database",
            "SELECT pg_stat_get_db_temp_bytes(0)",
            "SELECT heap_blks_read, toast_blks_hit FROM pg_statio_user_tables",
            "SELECT pg_stat_get_xact_blocks_fetched('h_counted'::regclass)",
            "SELECT pg_stat_get_blocks_hit('h_counted'::regclass)",
            "SELECT buffers_alloc FROM pg_stat_bgwriter",
            "SELECT wal_bytes FROM pg_stat_wal",
            "SELECT pg_current_wal_lsn()",
            "SELECT pg_total_relation_size('h_counted')",
            "SELECT pg_table_size('h_counted')",
            "SELECT pg_relation_size('h_counted', 'main')",
            "SELECT pg_database_size(current_database())",
            "SELECT count(*) FROM pg_ls_tmpdir()",
        ];
        Spi::run("SET ROLE dptext_h_counters").unwrap();
        for sql in reads {
            let message = refused(sql);
            assert!(message.contains("masked sessions cannot call"), "{message}");
        }
        // Evaluated without the planner: a CALL argument, an EXECUTE
        // parameter, a temporary table's column default in COPY FROM.
        allowed("CREATE PROCEDURE pg_temp.h_proc(x bigint) LANGUAGE sql AS 'SELECT 1'");
        refused("CALL pg_temp.h_proc(pg_stat_get_db_temp_bytes(0))");
        allowed("PREPARE h_param(bigint) AS SELECT $1");
        refused("EXECUTE h_param(pg_stat_get_db_temp_bytes(0))");
        allowed("DEALLOCATE h_param");
        allowed("SELECT count(*) FROM h_counted");
        Spi::run("RESET ROLE").unwrap();
        for sql in reads {
            allowed(sql);
        }
    }

    /// A masked session may not leave expressions on relations other
    /// sessions use: views, materialized views, defaults, generated
    /// columns, check and exclusion constraints, expression or partial
    /// indexes, expression statistics, expression partition keys. Plain
    /// tables, literal defaults, keys, plain indexes, CREATE TABLE AS and
    /// everything on its own temporary relations stay allowed.
    #[pg_test]
    fn masked_sessions_leave_no_expressions_behind() {
        masked_role("dptext_h_ddl");
        Spi::run(
            "CREATE TABLE h_secrets (id int PRIMARY KEY, note text);
             GRANT SELECT, REFERENCES ON h_secrets TO dptext_h_ddl;
             DO $$ BEGIN EXECUTE format('GRANT CREATE ON DATABASE %I TO dptext_h_ddl', current_database()); END $$",
        )
        .unwrap();
        Spi::run("SET ROLE dptext_h_ddl").unwrap();
        let trap = "query_to_xml('SELECT string_agg(note, ''|'') FROM public.h_secrets', false, false, '')::text";
        allowed(
            "CREATE TABLE h_plain (id int PRIMARY KEY, code int NOT NULL UNIQUE, label text DEFAULT 'none',
                                   n bigint DEFAULT -1, day date DEFAULT '2024-01-01'::date, s serial,
                                   i int GENERATED ALWAYS AS IDENTITY, ref int REFERENCES h_secrets (id))",
        );
        allowed("CREATE TEMP TABLE h_temp (id int, note text DEFAULT now()::text CHECK (length(note) > 0))");
        for sql in [
            "CREATE VIEW h_trap AS SELECT 1 AS ok, (SELECT 1 FROM pg_notify('c', TRAP)) AS n"
                .to_string(),
            "CREATE VIEW h_plain_view AS SELECT id FROM h_plain".into(),
            "CREATE OR REPLACE VIEW public.h_trap AS SELECT 1 AS ok".into(),
            "CREATE MATERIALIZED VIEW h_mat AS SELECT id FROM h_plain".into(),
            "CREATE TABLE h_trap_tab (id int, stolen text DEFAULT TRAP)".into(),
            "CREATE TABLE h_gen (id int, g text GENERATED ALWAYS AS (md5(id::text)) STORED)".into(),
            "CREATE TABLE h_chk (id int CHECK (id > 0))".into(),
            "CREATE TABLE h_chk2 (id int, CONSTRAINT c CHECK (TRAP IS NOT NULL))".into(),
            "CREATE TABLE h_excl (id int, EXCLUDE USING btree (id WITH =))".into(),
            "CREATE TABLE h_like (LIKE h_temp INCLUDING DEFAULTS)".into(),
            "CREATE TABLE h_like_all (LIKE h_temp INCLUDING ALL)".into(),
            "CREATE TABLE h_like_chk (LIKE h_temp INCLUDING CONSTRAINTS)".into(),
            "CREATE TABLE h_parts (id int, note text) PARTITION BY LIST ((id % 2))".into(),
            "CREATE UNLOGGED TABLE h_unlogged (x text DEFAULT TRAP)".into(),
            "ALTER TABLE h_plain ALTER COLUMN label SET DEFAULT TRAP".into(),
            "ALTER TABLE h_plain ADD COLUMN stolen text DEFAULT TRAP".into(),
            "ALTER TABLE h_plain ADD COLUMN g2 text GENERATED ALWAYS AS (md5(label)) STORED".into(),
            "ALTER TABLE h_plain ADD CONSTRAINT c CHECK (TRAP IS NOT NULL)".into(),
            "ALTER TABLE h_plain ADD CONSTRAINT e EXCLUDE USING btree (code WITH =)".into(),
            "ALTER TABLE IF EXISTS public.h_plain ALTER COLUMN n SET DEFAULT random()::bigint"
                .into(),
            "CREATE INDEX ON h_plain ((md5(label)))".into(),
            "CREATE INDEX ON h_plain (code) WHERE label <> 'x'".into(),
            "CREATE STATISTICS h_st ON (code + 1), n FROM h_plain".into(),
            "CREATE SCHEMA h_schema CREATE VIEW h_inner AS SELECT 1 AS one".into(),
            "CREATE TYPE h_range AS RANGE (subtype = int4)".into(),
        ] {
            let sql = sql.replace("TRAP", trap);
            let message = refused(&sql);
            assert!(
                message.contains("masked sessions cannot create or change"),
                "{sql}: {message}"
            );
        }
        for sql in [
            "CREATE INDEX ON h_plain (code, label)",
            "CREATE TABLE h_ctas AS SELECT id, note FROM h_secrets",
            "CREATE STATISTICS h_st_plain ON code, n FROM h_plain",
            "ALTER TABLE h_plain ADD COLUMN extra text DEFAULT 'x' NOT NULL",
            "ALTER TABLE h_plain ALTER COLUMN label DROP DEFAULT",
            "ALTER TABLE h_plain ALTER COLUMN n TYPE numeric USING n * 2",
            "ALTER TABLE h_plain ADD CONSTRAINT u UNIQUE (code, label)",
            "CREATE TABLE h_like_plain (LIKE h_temp INCLUDING COMMENTS)",
            "CREATE TABLE h_list (id int, note text) PARTITION BY LIST (id)",
            "CREATE TEMP VIEW h_temp_view AS SELECT 1 AS ok, (SELECT 1 FROM pg_notify('c', 'x')) AS n",
            "CREATE VIEW pg_temp.h_temp_view2 AS SELECT 1 AS ok",
            "ALTER TABLE h_temp ALTER COLUMN id SET DEFAULT length(now()::text)",
            "ALTER TABLE h_temp ADD CONSTRAINT c CHECK (id IS NOT NULL)",
            "CREATE INDEX ON h_temp ((md5(note))) WHERE id > 0",
            "CREATE TABLE pg_temp.h_temp2 (id int DEFAULT random()::int)",
            "DROP TABLE h_ctas, h_like_plain",
        ] {
            allowed(sql);
        }
        // A name that is not this session's temporary relation is not
        // taken for one: the statement is pinned to pg_temp.
        let (code, message) =
            failure_of("ALTER TABLE h_nowhere ADD CONSTRAINT c CHECK (true)").unwrap();
        assert_eq!(code, PgSqlErrorCode::ERRCODE_UNDEFINED_TABLE, "{message}");
        Spi::run("RESET ROLE").unwrap();
        // Unmasked sessions are not concerned.
        allowed(&format!(
            "CREATE VIEW h_admin_view AS SELECT 1 AS ok, (SELECT {trap}) AS n"
        ));
    }

    /// Creates masked role `role` and table `table (id int, note
    /// column_type)` filled by `values` (an INSERT's source), `note`
    /// labelled, analyzed and readable by the role; sets a key for the
    /// masked reads.
    fn labelled_table(role: &str, table: &str, column_type: &str, values: &str) {
        masked_role(role);
        Spi::run(&format!(
            "CREATE TABLE {table} (id int, note {column_type});
             INSERT INTO {table} {values};
             SECURITY LABEL FOR dptext ON COLUMN {table}.note IS 'MASKED WITH deidentify(strategy => typed_placeholder)';
             ANALYZE {table};
             GRANT SELECT ON {table} TO {role};
             SET dptext.key = 'a key for the hardening tests'"
        ))
        .unwrap();
    }

    /// The widths `EXPLAIN` shows for `query`.
    fn explained_widths(query: &str) -> Vec<i64> {
        let plan = Spi::get_one::<String>(&format!(
            "SELECT string_agg(l, ' ') FROM (SELECT * FROM dptext_h_explain_lines($q${query}$q$)) s(l)"
        ))
        .unwrap()
        .unwrap_or_default();
        plan.split("width=")
            .skip(1)
            .filter_map(|w| w.split(')').next()?.parse().ok())
            .collect()
    }

    /// The planner's width of a labelled column below the masking (a scan
    /// under a join, which `EXPLAIN` shows) is its type's default in a
    /// masked session, not the raw values' average length of its
    /// statistics.
    #[pg_test]
    fn masked_explain_shows_no_raw_width() {
        labelled_table(
            "dptext_h_width",
            "h_wide",
            "text",
            "SELECT g, repeat('x', 500) FROM generate_series(1, 100) g",
        );
        Spi::run(
            "CREATE FUNCTION public.dptext_h_explain_lines(q text) RETURNS SETOF text
               LANGUAGE plpgsql AS $$ DECLARE l text; BEGIN
                 FOR l IN EXECUTE 'EXPLAIN ' || q LOOP RETURN NEXT l; END LOOP; END $$",
        )
        .unwrap();
        let query = "SELECT l.note FROM h_wide l, generate_series(1, 10) g WHERE g = l.id";
        let raw = explained_widths(query);
        assert!(raw.iter().any(|&w| w >= 500), "raw widths {raw:?}");
        Spi::run("SET ROLE dptext_h_width").unwrap();
        let masked = explained_widths(query);
        Spi::run("RESET ROLE").unwrap();
        assert!(!masked.is_empty());
        assert!(masked.iter().all(|&w| w < 100), "masked widths {masked:?}");
    }

    /// The cumulative statistics' row counters (of a TOAST index: the
    /// chunks of each value read), file reads and `currtid2` are refused
    /// to a masked session.
    #[pg_test]
    fn masked_sessions_cannot_count_rows_or_follow_tids() {
        labelled_table(
            "dptext_h_rows",
            "h_toasted",
            "text",
            "SELECT g, repeat(md5(g::text), 100 * g) FROM generate_series(1, 5) g",
        );
        Spi::run(
            "GRANT pg_monitor, pg_read_server_files TO dptext_h_rows;
             GRANT EXECUTE ON FUNCTION pg_stat_file(text), pg_read_file(text) TO dptext_h_rows",
        )
        .unwrap();
        let toast_index = Spi::get_one::<pg_sys::Oid>(
            "SELECT i.indexrelid FROM pg_class c JOIN pg_index i ON i.indrelid = c.reltoastrelid
              WHERE c.oid = 'h_toasted'::regclass",
        )
        .unwrap()
        .unwrap()
        .to_u32();
        let reads = [
            format!("SELECT pg_stat_get_xact_tuples_fetched({toast_index})"),
            format!("SELECT pg_stat_get_xact_tuples_returned({toast_index})"),
            format!("SELECT pg_stat_get_xact_numscans({toast_index})"),
            format!("SELECT pg_stat_get_tuples_fetched({toast_index})"),
            "SELECT idx_tup_fetch FROM pg_stat_all_indexes".into(),
            "SELECT n_live_tup, seq_scan FROM pg_stat_user_tables".into(),
            "SELECT tup_fetched FROM pg_stat_database".into(),
            "SELECT count(*) FROM pg_ls_logdir()".into(),
            "SELECT size FROM pg_stat_file('PG_VERSION')".into(),
            "SELECT pg_read_file('PG_VERSION')".into(),
            "SELECT currtid2('h_toasted', '(0,1)')".into(),
        ];
        Spi::run("SET ROLE dptext_h_rows").unwrap();
        allowed("SELECT count(*) FROM h_toasted");
        for sql in &reads {
            let message = refused(sql);
            assert!(message.contains("masked sessions cannot call"), "{message}");
        }
        Spi::run("RESET ROLE").unwrap();
        for sql in &reads[..7] {
            allowed(sql);
        }
    }

    /// `TABLESAMPLE` picks rows by where they are stored: refused on a
    /// labelled table in a masked session, whatever the method.
    #[pg_test]
    fn masked_sessions_cannot_sample_labelled_tables() {
        labelled_table(
            "dptext_h_sample",
            "h_sampled",
            "text",
            "SELECT g, repeat('x', g) FROM generate_series(1, 100) g",
        );
        Spi::run("CREATE TABLE h_unlabelled AS SELECT g AS id FROM generate_series(1, 10) g; GRANT SELECT ON h_unlabelled TO dptext_h_sample").unwrap();
        Spi::run("SET ROLE dptext_h_sample").unwrap();
        for sql in [
            "SELECT id FROM h_sampled TABLESAMPLE SYSTEM (50) REPEATABLE (7)",
            "SELECT count(*) FROM h_sampled TABLESAMPLE BERNOULLI (50)",
            "SELECT (SELECT count(*) FROM h_sampled TABLESAMPLE SYSTEM (10))",
        ] {
            let message = refused(sql);
            assert!(message.contains("TABLESAMPLE"), "{message}");
        }
        allowed("SELECT count(*) FROM h_unlabelled TABLESAMPLE SYSTEM (50) REPEATABLE (7)");
        Spi::run("RESET ROLE").unwrap();
        allowed("SELECT id FROM h_sampled TABLESAMPLE SYSTEM (50) REPEATABLE (7)");
    }

    /// A `char(n)` value is stored padded to n characters: read masked, it
    /// is trimmed before the mechanism, so no padding (n minus the raw
    /// length) comes through.
    #[pg_test]
    fn masked_char_columns_carry_no_padding() {
        labelled_table(
            "dptext_h_char",
            "h_codes",
            "char(40)",
            "VALUES (1, 'ab'), (2, 'abcdefghij'), (3, 'a code of twenty-one')",
        );
        let padded = "SELECT count(*) FROM h_codes WHERE octet_length(note) <> length(note)";
        assert_eq!(count(padded), 3);
        Spi::run("SET ROLE dptext_h_char").unwrap();
        let masked = count(padded);
        let rows = count("SELECT count(*) FROM h_codes WHERE note IS NOT NULL");
        Spi::run("RESET ROLE").unwrap();
        assert_eq!(rows, 3);
        assert_eq!(masked, 0);
    }
}
