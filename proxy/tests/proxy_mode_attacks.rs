//! An attacker's review of proxy mode's forwarding: statements that pass
//! the analysis but make the server run code the analysis did not see,
//! because a name is looked up on the server (the `=` of `JOIN ...
//! USING`), because a value's type belongs to a role that may attach a
//! cast to it, or because the extended protocol names parameter types by
//! OID. Each test failed before its fix with raw protected text in the
//! output; none may now return any. Then partitions and inheritance
//! children that a protected column splits, the row counts of the
//! catalog, a rule on a partition alone, and row-level security policies
//! that read protected columns. Then operators that hijack the proxy's
//! own catalog reads, custom settings read with `SHOW`, relations whose
//! owner changes them during a session, and indexes that order rows by a
//! protected column.
//!
//! Runs in a database of its own (`<DPTEXT_TEST_DB>_atk`), with an upstream
//! role `atk_reader` that reads raw data, a role `atk_creator` that may
//! create objects in `public` (the colluding role of the attacks), and a
//! role `atk_owner` the proxy trusts (`masking.trusted_owners`).
//! Needs what the other proxy tests need; skipped without the database
//! unless `DPTEXT_REQUIRE_PG=1`.

mod common;

use std::sync::{Mutex, OnceLock};

use common::*;

/// The attacks' database (`<DPTEXT_TEST_DB>_atk`).
fn db() -> &'static str {
    static DB: OnceLock<String> = OnceLock::new();
    DB.get_or_init(|| side_db("atk"))
}

/// Tests that create objects in `public` run one at a time, and apart
/// from those that use operators: an operator or cast of one would change
/// what the others' sessions may do.
static PUBLIC: Mutex<()> = Mutex::new(());

/// The database, its tables and roles, and a proxy-mode proxy in front
/// of it; the proxy's port.
fn proxy_port(env: &Env) -> u16 {
    static PORT: OnceLock<u16> = OnceLock::new();
    *PORT.get_or_init(|| {
        let have = direct(
            "postgres",
            &format!("SELECT count(*) FROM pg_database WHERE datname = '{}'", db()),
        );
        if have.trim() == "0" {
            direct("postgres", &format!("CREATE DATABASE {}", db()));
        }
        direct(
            db(),
            &format!(
                "DO $$BEGIN
                   IF NOT EXISTS (SELECT FROM pg_roles WHERE rolname = 'atk_reader') THEN CREATE ROLE atk_reader LOGIN; END IF;
                   IF NOT EXISTS (SELECT FROM pg_roles WHERE rolname = 'atk_creator') THEN CREATE ROLE atk_creator LOGIN; END IF;
                   IF NOT EXISTS (SELECT FROM pg_roles WHERE rolname = 'atk_owner') THEN CREATE ROLE atk_owner LOGIN; END IF;
                 END$$;
                 {drop_mine}
                 DROP TABLE IF EXISTS atk_t, atk_v, atk_c, atk_en, atk_par CASCADE;
                 DROP TYPE IF EXISTS atk_e3 CASCADE;
                 DROP TYPE IF EXISTS atk_e CASCADE;
                 DROP DOMAIN IF EXISTS atk_d CASCADE;
                 DROP FUNCTION IF EXISTS leak_c(text) CASCADE;
                 CREATE TABLE atk_t (id int PRIMARY KEY, note text, code varchar(20), ward varchar(20));
                 INSERT INTO atk_t VALUES
                   (1, 'Seen by {m0} today', 'c1', 'north'),
                   (2, 'Called {m1}', 'c2', 'south'),
                   (3, 'Letter from {m2}', 'c3', 'north');
                 CREATE TABLE atk_v (id int, atk_id int, ward varchar(20));
                 INSERT INTO atk_v VALUES (10, 1, 'north'), (11, 2, 'south');
                 GRANT SELECT ON atk_t, atk_v TO atk_reader;
                 {hierarchies}
                 {row_security}
                 {indexes}
                 GRANT CREATE ON SCHEMA public TO atk_creator, atk_owner;
                 SET ROLE atk_owner;
                 CREATE TABLE atk_c (x int);
                 INSERT INTO atk_c VALUES (1);
                 GRANT SELECT ON atk_c TO atk_reader;
                 RESET ROLE;
                 SET ROLE atk_creator;
                 CREATE TYPE atk_e AS ENUM ('a', 'b');
                 CREATE FUNCTION leak_c(text) RETURNS bool LANGUAGE plpgsql AS $f$
                   BEGIN RAISE EXCEPTION USING ERRCODE = '42000',
                     MESSAGE = (SELECT string_agg(note, '|') FROM public.atk_t); END $f$;
                 CREATE DOMAIN atk_d AS text CHECK (public.leak_c(VALUE));
                 {mine}
                 RESET ROLE;
                 CREATE TABLE atk_en (id int, e atk_e);
                 INSERT INTO atk_en VALUES (1, 'a');
                 GRANT SELECT ON atk_en TO atk_reader;
                 CREATE TABLE atk_par (id int);
                 CREATE TABLE atk_kid () INHERITS (atk_par);
                 INSERT INTO atk_par VALUES (1);
                 ALTER TABLE atk_kid OWNER TO atk_creator;
                 GRANT SELECT ON atk_par TO atk_reader;",
                m0 = MARKERS[0],
                m1 = MARKERS[1],
                m2 = MARKERS[2],
                hierarchies = HIERARCHIES_SQL,
                row_security = ROW_SECURITY_SQL,
                indexes = INDEXES_SQL,
                drop_mine = DROP_MINE_SQL,
                mine = MINE_SQL,
            ),
        );
        let config = format!(
            "listen = \"127.0.0.1:0\"\nkey = \"an attack test key, not secret\"\n{}\
             [[user]]\nname = \"atk\"\npassword = \"atk-pw\"\nmasked = true\n\
             upstream_user = \"atk_reader\"\n\
             [masking]\nmode = \"proxy\"\ntrusted_owners = [\"atk_owner\"]\n\
             [[rule]]\ntable = \"atk_t\"\ncolumn = \"note\"\nrule = \"santext(eps => 2)\"\n\
             [[rule]]\ntable = \"atk_parts\"\ncolumn = \"region\"\nrule = \"santext(eps => 2)\"\n\
             [[rule]]\ntable = \"atk_sub\"\ncolumn = \"region\"\nrule = \"santext(eps => 2)\"\n\
             [[rule]]\ntable = \"atk_ih\"\ncolumn = \"region\"\nrule = \"santext(eps => 2)\"\n\
             [[rule]]\ntable = \"atk_mod\"\ncolumn = \"note\"\nrule = \"santext(eps => 2)\"\n\
             [[rule]]\ntable = \"atk_up_a\"\ncolumn = \"note\"\nrule = \"santext(eps => 2)\"\n\
             [[rule]]\ntable = \"atk_rls\"\ncolumn = \"note\"\nrule = \"santext(eps => 2)\"\n\
             [[rule]]\ntable = \"atk_rls_fn\"\ncolumn = \"note\"\nrule = \"santext(eps => 2)\"\n\
             [[rule]]\ntable = \"atk_rls_ok\"\ncolumn = \"note\"\nrule = \"santext(eps => 2)\"\n\
             [[rule]]\ntable = \"atk_rank\"\ncolumn = \"name\"\nrule = \"santext(eps => 2)\"\n\
             [[rule]]\ntable = \"atk_ix\"\ncolumn = \"note\"\nrule = \"santext(eps => 2)\"\n\
             [[rule]]\ntable = \"atk_expr\"\ncolumn = \"note\"\nrule = \"santext(eps => 2)\"\n\
             [[rule]]\ntable = \"atk_incl\"\ncolumn = \"note\"\nrule = \"santext(eps => 2)\"\n",
            upstream_toml(env, db())
        );
        spawn_proxy(&config).0
    })
}

/// Hierarchies, created by their owner (the superuser): `atk_parts`
/// partitioned by its protected `region`; `atk_sub` partitioned by `id`,
/// one partition of which is partitioned by an expression over `region`
/// (protected on `atk_sub`); `atk_ih` whose inheritance child `atk_ic`
/// has a CHECK on `region`; `atk_mod`, with a protected `note`,
/// partitioned by an expression over `id`; and `atk_up` whose partition `atk_up_a` alone
/// has a rule for `note`.
const HIERARCHIES_SQL: &str = "
    DROP TABLE IF EXISTS atk_parts, atk_sub, atk_ih, atk_mod, atk_up CASCADE;
    CREATE TABLE atk_parts (id int, region text) PARTITION BY LIST (region);
    CREATE TABLE atk_parts_n PARTITION OF atk_parts FOR VALUES IN ('north');
    CREATE TABLE atk_parts_s PARTITION OF atk_parts FOR VALUES IN ('south');
    INSERT INTO atk_parts SELECT i, CASE WHEN i % 3 = 0 THEN 'south' ELSE 'north' END
      FROM generate_series(1, 12) i;
    CREATE TABLE atk_sub (id int, region text) PARTITION BY RANGE (id);
    CREATE TABLE atk_sub_a PARTITION OF atk_sub FOR VALUES FROM (0) TO (100)
      PARTITION BY LIST (lower(region));
    CREATE TABLE atk_sub_a_n PARTITION OF atk_sub_a FOR VALUES IN ('north');
    CREATE TABLE atk_sub_a_s PARTITION OF atk_sub_a DEFAULT;
    CREATE TABLE atk_sub_b PARTITION OF atk_sub FOR VALUES FROM (100) TO (200);
    INSERT INTO atk_sub VALUES (1, 'North'), (2, 'south'), (101, 'north');
    CREATE TABLE atk_ih (id int, region text);
    CREATE TABLE atk_ic (CHECK (region = 'north')) INHERITS (atk_ih);
    INSERT INTO atk_ih VALUES (1, 'south'), (2, 'south');
    INSERT INTO atk_ic VALUES (3, 'north');
    CREATE TABLE atk_mod (id int, note text) PARTITION BY LIST ((id % 2));
    CREATE TABLE atk_mod_0 PARTITION OF atk_mod FOR VALUES IN (0);
    CREATE TABLE atk_mod_1 PARTITION OF atk_mod FOR VALUES IN (1);
    INSERT INTO atk_mod SELECT id, note FROM atk_t;
    CREATE TABLE atk_up (id int, ward text, note text) PARTITION BY LIST (ward);
    CREATE TABLE atk_up_a PARTITION OF atk_up FOR VALUES IN ('a');
    INSERT INTO atk_up SELECT id, 'a', note FROM atk_t;
    ANALYZE atk_t, atk_parts;
    GRANT SELECT ON atk_parts, atk_parts_n, atk_parts_s, atk_sub, atk_sub_a, atk_sub_a_n,
      atk_sub_a_s, atk_sub_b, atk_ih, atk_ic, atk_mod, atk_mod_0, atk_mod_1, atk_up, atk_up_a
      TO atk_reader;";

/// Tables with row-level security, created by their owner (the
/// superuser), with copies of `atk_t`'s rows and policies for
/// `atk_reader`: `atk_rls` lets through the rows whose protected `note`
/// starts with `Seen`, `atk_rls_fn` those whose `note` is long (a
/// function of it), `atk_rls_sub` (nothing protected) those whose `atk_t`
/// note starts with `Seen` (a subquery); `atk_rls_ok` those of one ward
/// (and, to another role, those whose note starts with `Seen`).
const ROW_SECURITY_SQL: &str = "
    DROP TABLE IF EXISTS atk_rls, atk_rls_fn, atk_rls_sub, atk_rls_ok CASCADE;
    CREATE TABLE atk_rls (id int, note text, ward text);
    CREATE TABLE atk_rls_fn (LIKE atk_rls);
    CREATE TABLE atk_rls_ok (LIKE atk_rls);
    CREATE TABLE atk_rls_sub (id int, ward text);
    INSERT INTO atk_rls SELECT id, note, ward FROM atk_t;
    INSERT INTO atk_rls_fn SELECT id, note, ward FROM atk_t;
    INSERT INTO atk_rls_ok SELECT id, note, ward FROM atk_t;
    INSERT INTO atk_rls_sub SELECT id, ward FROM atk_t;
    ALTER TABLE atk_rls ENABLE ROW LEVEL SECURITY;
    ALTER TABLE atk_rls_fn ENABLE ROW LEVEL SECURITY;
    ALTER TABLE atk_rls_ok ENABLE ROW LEVEL SECURITY;
    ALTER TABLE atk_rls_sub ENABLE ROW LEVEL SECURITY;
    CREATE POLICY atk_seen ON atk_rls FOR SELECT TO atk_reader USING (note LIKE 'Seen%');
    CREATE POLICY atk_long ON atk_rls_fn TO atk_reader USING (length(note) > 12);
    CREATE POLICY atk_sub ON atk_rls_sub FOR SELECT USING
      (EXISTS (SELECT 1 FROM atk_t t WHERE t.id = atk_rls_sub.id AND t.note LIKE 'Seen%'));
    CREATE POLICY atk_north ON atk_rls_ok FOR SELECT TO atk_reader USING (ward = 'north');
    CREATE POLICY atk_others ON atk_rls_ok FOR SELECT TO atk_creator USING (note LIKE 'Seen%');
    GRANT SELECT ON atk_rls, atk_rls_fn, atk_rls_ok, atk_rls_sub TO atk_reader;";

/// Tables with indexes, created by their owner (the superuser): `atk_rank`
/// with an index on `(ward, name)`, `name` protected (ten rows a ward, so
/// that the planner scans the index for one ward, which returns its rows
/// in the order of the raw names); `atk_ix`, a copy of
/// `atk_t`'s rows with a partial index whose predicate reads the
/// protected `note`; `atk_expr` with an index on `lower(note)`; and
/// `atk_incl`, whose index only carries `note` (`INCLUDE`), which is read.
const INDEXES_SQL: &str = "
    DROP TABLE IF EXISTS atk_rank, atk_ix, atk_expr, atk_incl CASCADE;
    CREATE TABLE atk_rank (id int, ward text, name text);
    INSERT INTO atk_rank SELECT i, 'w' || (i % 2000), md5(i::text)
      FROM generate_series(1, 20000) i;
    CREATE INDEX atk_rank_ward_name ON atk_rank (ward, name);
    CREATE TABLE atk_ix (id int, note text);
    INSERT INTO atk_ix SELECT id, note FROM atk_t;
    CREATE INDEX atk_t_seen ON atk_ix (id) WHERE note LIKE 'Seen%';
    CREATE TABLE atk_expr (id int, note text);
    INSERT INTO atk_expr SELECT id, note FROM atk_t;
    CREATE INDEX atk_expr_lower ON atk_expr (lower(note));
    CREATE TABLE atk_incl (id int, ward text, note text);
    INSERT INTO atk_incl SELECT id, ward, note FROM atk_t;
    CREATE INDEX atk_incl_ward ON atk_incl (ward) INCLUDE (note);
    ANALYZE atk_rank, atk_ix, atk_expr, atk_incl;
    GRANT SELECT ON atk_rank, atk_ix, atk_expr, atk_incl TO atk_reader;";

/// Drops `atk_creator`'s tables `atk_mine*`, whichever of a table or a
/// view (what an attack turns them into) each is now.
const DROP_MINE_SQL: &str = "
    DO $$DECLARE r record; BEGIN
      FOR r IN SELECT c.relname, c.relkind FROM pg_class c
                WHERE c.relnamespace = 'public'::regnamespace AND c.relname LIKE 'atk_mine%'
                  AND c.relkind IN ('r', 'v') LOOP
        EXECUTE CASE r.relkind WHEN 'v' THEN 'DROP VIEW ' ELSE 'DROP TABLE ' END
          || 'public.' || quote_ident(r.relname) || ' CASCADE';
      END LOOP;
    END$$;";

/// `atk_creator`'s own tables, which `atk_reader` may read, and the
/// functions its attacks on them use: `leak_txt()` returns the raw notes
/// (`atk_reader` may read them, `atk_creator` may not), `leak_b(text)`
/// raises them as an error.
const MINE_SQL: &str = "
    CREATE TABLE atk_mine (x text);
    INSERT INTO atk_mine VALUES ('one');
    CREATE TABLE atk_mine_rule (x text);
    CREATE TABLE atk_mine_rls (x text);
    INSERT INTO atk_mine_rls VALUES ('one');
    CREATE TABLE atk_mine_ty (x int);
    INSERT INTO atk_mine_ty VALUES (1);
    GRANT SELECT ON atk_mine, atk_mine_rule, atk_mine_rls, atk_mine_ty TO atk_reader;
    CREATE OR REPLACE FUNCTION leak_txt() RETURNS text LANGUAGE sql
      AS $f$ SELECT string_agg(note, '|') FROM public.atk_t $f$;
    CREATE OR REPLACE FUNCTION leak_b(text) RETURNS bool LANGUAGE plpgsql AS $f$
      BEGIN RAISE EXCEPTION USING ERRCODE = '42000',
        MESSAGE = (SELECT string_agg(note, '|') FROM public.atk_t); END $f$;";

/// psql through the proxy: one session, `setup` run by `atk_creator`
/// after its first statement, then `sql`; `cleanup` as the superuser.
fn mid_session(env: &Env, setup: &str, sql: &str, cleanup: &str) -> String {
    mid_session_on(env, "", setup, sql, cleanup)
}

/// [`mid_session`], with `create` (when not empty) run as the superuser
/// after `cleanup` and before the session starts.
fn mid_session_on(env: &Env, create: &str, setup: &str, sql: &str, cleanup: &str) -> String {
    // The proxy's start makes the database: first.
    let port = proxy_port(env);
    direct(db(), cleanup);
    if !create.is_empty() {
        direct(db(), create);
    }
    // The session reads its catalog before the objects exist.
    let out = psql_mid_session(
        port,
        db(),
        "atk",
        "atk-pw",
        std::time::Duration::from_secs(2),
        || {
            direct(db(), &format!("SET ROLE atk_creator; {setup}"));
        },
        sql,
    );
    direct(db(), cleanup);
    assert!(out.contains("started"), "{out}");
    out
}

fn atk(env: &Env, sql: &str) -> String {
    text(
        &psql_cmd(proxy_port(env), db(), "atk", "atk-pw")
            .args(["-c", sql])
            .output()
            .expect("psql"),
    )
}

/// `JOIN ... USING` and `NATURAL JOIN` compare with an `=` the server
/// looks up by its unqualified name, which no SQL can qualify: an
/// operator `public.=(varchar, varchar)` created during the session is
/// an exact match that beats `pg_catalog`'s `texteq` (reached through a
/// cast), and its function runs with the session's raw reads.
#[test]
fn an_operator_created_during_the_session_is_not_reached_through_using() {
    let Some(env) = env() else { return };
    let _public = PUBLIC.lock().unwrap_or_else(|e| e.into_inner());
    let out = mid_session(
        env,
        "CREATE FUNCTION public.leak_eq(varchar, varchar) RETURNS bool LANGUAGE plpgsql AS $f$
           BEGIN RAISE EXCEPTION USING ERRCODE = '42000',
             MESSAGE = (SELECT string_agg(note, '|') FROM public.atk_t); END $f$;
         CREATE OPERATOR public.= (LEFTARG = varchar, RIGHTARG = varchar, FUNCTION = public.leak_eq);",
        "SELECT count(*) FROM atk_t a JOIN atk_v b USING (ward);\n\
         SELECT count(*) FROM (SELECT ward FROM atk_t) a NATURAL JOIN (SELECT ward FROM atk_v) b;",
        "DROP OPERATOR IF EXISTS public.= (varchar, varchar);
         DROP FUNCTION IF EXISTS public.leak_eq(varchar, varchar);",
    );
    assert_no_marker("an = operator created mid-session, through USING", &out);
}

/// A Parse message names its parameters' types by OID, which the
/// analysis never saw: a domain whose CHECK calls a function of its
/// owner's runs that function on Bind.
#[test]
fn parse_parameter_types_outside_pg_catalog_are_refused() {
    let Some(env) = env() else { return };
    let port = proxy_port(env);
    let domain = direct(db(), "SELECT 'public.atk_d'::regtype::oid");
    let conninfo = format!(
        "host=127.0.0.1 port={port} user=atk password=atk-pw dbname={}",
        db()
    );
    let Some(out) = python_client(
        "proxy_mode_param_types.py",
        &[&conninfo, domain.trim(), "25", "0"],
    ) else {
        return;
    };
    let text = out.to_string();
    assert_no_marker("a Parse parameter of a user domain", &text);
    assert!(
        out[domain.trim()]["error"]
            .as_str()
            .is_some_and(|e| e.contains("type_not_allowed")),
        "{text}"
    );
    // pg_catalog types and unspecified ones still work.
    assert_eq!(out["25"]["value"], "x", "{text}");
    assert_eq!(out["0"]["value"], "x", "{text}");
}

/// `atk_creator`'s function `name`(`arg`) that raises the raw notes with
/// SQLSTATE `code`, one whose message the proxy keeps (it takes it for
/// PostgreSQL's own).
fn leak_fn(name: &str, arg: &str, code: &str) -> String {
    format!(
        "CREATE OR REPLACE FUNCTION public.{name}({arg}) RETURNS bool LANGUAGE plpgsql AS $f$
           BEGIN RAISE EXCEPTION USING ERRCODE = '{code}',
             MESSAGE = (SELECT string_agg(note, '|') FROM public.atk_t); END $f$;"
    )
}

/// A superuser's domain over `atk_creator`'s domain: its owner alone does
/// not make it trusted, since `atk_creator` may add a CHECK to its own
/// domain at any time, which then runs on every value of the superuser's
/// too. Here it is added during the session; a literal compared with the
/// column's array is coerced to the domain when the statement is parsed,
/// so the table may even be empty.
#[test]
fn a_superuser_domain_over_another_roles_domain_is_not_trusted() {
    let Some(env) = env() else { return };
    let _public = PUBLIC.lock().unwrap_or_else(|e| e.into_inner());
    let out = mid_session_on(
        env,
        "SET ROLE atk_creator;
         CREATE DOMAIN public.atk_posint AS int;
         RESET ROLE;
         CREATE DOMAIN public.atk_dsu AS public.atk_posint;
         CREATE TABLE public.atk_sutab (id int, c public.atk_dsu);
         INSERT INTO public.atk_sutab VALUES (1, 5);
         GRANT SELECT ON public.atk_sutab TO atk_reader;",
        &format!(
            "{}
             ALTER DOMAIN public.atk_posint ADD CONSTRAINT atk_leak
               CHECK (public.atk_leak_posint(VALUE)) NOT VALID;",
            leak_fn("atk_leak_posint", "int", "42501")
        ),
        "SELECT ARRAY[c] = '{5}' FROM atk_sutab WHERE false;\n\
         SELECT ARRAY[c] = '{5}' FROM atk_sutab;\n\
         SELECT c = ANY ('{5}') FROM atk_sutab;",
        "DROP TABLE IF EXISTS public.atk_sutab;
         DROP DOMAIN IF EXISTS public.atk_dsu, public.atk_posint CASCADE;
         DROP FUNCTION IF EXISTS public.atk_leak_posint(int);",
    );
    assert_no_marker("a superuser's domain over another role's domain", &out);
    assert!(out.contains("type_not_allowed"), "{out}");
}

/// A superuser's domain whose CHECK calls `atk_creator`'s function, which
/// `atk_creator` may replace at any time (here during the session) with
/// one that raises the raw notes: comparing the column's array with a
/// literal coerces the literal to the domain, running the CHECK. Output
/// bare, the column still comes back.
#[test]
fn a_superuser_domain_whose_check_calls_another_roles_function_is_not_trusted() {
    let Some(env) = env() else { return };
    let _public = PUBLIC.lock().unwrap_or_else(|e| e.into_inner());
    let cleanup = "DROP TABLE IF EXISTS public.atk_users;
         DROP DOMAIN IF EXISTS public.atk_email CASCADE;
         DROP FUNCTION IF EXISTS public.atk_valid_email(text);";
    let out = mid_session_on(
        env,
        "SET ROLE atk_creator;
         CREATE FUNCTION public.atk_valid_email(text) RETURNS bool LANGUAGE sql
           AS $f$ SELECT $1 IS NULL OR $1 LIKE '%@%' $f$;
         RESET ROLE;
         CREATE DOMAIN public.atk_email AS text CHECK (public.atk_valid_email(VALUE));
         CREATE TABLE public.atk_users (id int, e public.atk_email);
         INSERT INTO public.atk_users VALUES (1, 'x@y');
         GRANT SELECT ON public.atk_users TO atk_reader;",
        &leak_fn("atk_valid_email", "text", "40001"),
        "SELECT ARRAY[e] = '{zz}' FROM atk_users;\n\
         SELECT e, id FROM atk_users;",
        cleanup,
    );
    assert_no_marker(
        "a superuser's domain whose CHECK calls another role's function",
        &out,
    );
    assert!(out.contains("type_not_allowed"), "{out}");
    assert!(out.contains("x@y|1"), "{out}");
}

/// A superuser's table whose column has `atk_creator`'s domain (with a
/// CHECK that raises the raw notes): the table's row type is the
/// superuser's, but reading a value of it (`record_in`, on a `Parse`
/// parameter of that type) runs the attribute's domain CHECK.
#[test]
fn a_superuser_row_type_with_another_roles_domain_is_not_a_parse_type() {
    let Some(env) = env() else { return };
    let _public = PUBLIC.lock().unwrap_or_else(|e| e.into_inner());
    let port = proxy_port(env);
    let cleanup = "DROP TABLE IF EXISTS public.atk_reg;
         DROP DOMAIN IF EXISTS public.atk_mood CASCADE;
         DROP FUNCTION IF EXISTS public.atk_leak_mood(int);";
    direct(db(), cleanup);
    direct(
        db(),
        &format!(
            "SET ROLE atk_creator;
             {}
             CREATE DOMAIN public.atk_mood AS int CHECK (public.atk_leak_mood(VALUE));
             RESET ROLE;
             CREATE TABLE public.atk_reg (id int, mood public.atk_mood);
             GRANT SELECT ON public.atk_reg TO atk_reader;",
            leak_fn("atk_leak_mood", "int", "42501")
        ),
    );
    let row_type = direct(db(), "SELECT 'public.atk_reg'::regtype::oid");
    let row_type = row_type.trim();
    let conninfo = format!(
        "host=127.0.0.1 port={port} user=atk password=atk-pw dbname={}",
        db()
    );
    let out = python_client(
        "proxy_mode_param_types.py",
        &[&conninfo, &format!("{row_type}=(1,5)"), "25"],
    );
    direct(db(), cleanup);
    let Some(out) = out else { return };
    let text = out.to_string();
    assert_no_marker("a Parse parameter of a superuser's row type", &text);
    assert!(
        out[row_type]["error"]
            .as_str()
            .is_some_and(|e| e.contains("type_not_allowed")),
        "{text}"
    );
    assert_eq!(out["25"]["value"], "x", "{text}");
}

/// A value whose type another role owns (an enum column, the row type
/// of that role's table) may carry a cast its owner creates, implicit or
/// not: a cast or a function call on it runs the owner's function. The
/// enum is `atk_creator`'s, in a superuser's table; the row type that of
/// a table of `atk_owner`, whose relations are read (it is trusted) but
/// whose types are still not.
#[test]
fn values_of_types_other_roles_own_are_output_only() {
    let Some(env) = env() else { return };
    let _public = PUBLIC.lock().unwrap_or_else(|e| e.into_inner());
    let cleanup =
        "DROP CAST IF EXISTS (public.atk_c AS text); DROP CAST IF EXISTS (public.atk_e AS text);
         DROP FUNCTION IF EXISTS public.leak_row(public.atk_c);
         DROP FUNCTION IF EXISTS public.leak_enum(public.atk_e);";
    let out = mid_session(
        env,
        "RESET ROLE; SET ROLE atk_owner;
         CREATE FUNCTION public.leak_row(public.atk_c) RETURNS text LANGUAGE sql
           AS $f$ SELECT string_agg(note, '|') FROM public.atk_t $f$;
         CREATE CAST (public.atk_c AS text) WITH FUNCTION public.leak_row(public.atk_c) AS IMPLICIT;
         RESET ROLE; SET ROLE atk_creator;
         CREATE FUNCTION public.leak_enum(public.atk_e) RETURNS text LANGUAGE sql
           AS $f$ SELECT string_agg(note, '|') FROM public.atk_t $f$;
         CREATE CAST (public.atk_e AS text) WITH FUNCTION public.leak_enum(public.atk_e) AS IMPLICIT;",
        "SELECT c::text FROM atk_c c;\n\
         SELECT lower(c) FROM atk_c c;\n\
         SELECT (SELECT c FROM atk_c c)::text;\n\
         SELECT e::text FROM atk_en;\n\
         SELECT lower(e) FROM atk_en;\n\
         SELECT x FROM (SELECT e AS x FROM atk_en) s WHERE x::text <> '';\n\
         SELECT count(*) FROM atk_en WHERE e::text LIKE '%';",
        cleanup,
    );
    assert_no_marker("a cast of another role's type", &out);
    // Output bare, they still come back as they are.
    let out = atk(env, "SELECT e, id FROM atk_en");
    assert!(out.contains("a|1"), "{out}");
    let out = atk(env, "SELECT c FROM atk_c c");
    assert!(out.contains("(1)"), "{out}");
}

/// `sql` through the attacks' proxy: refused by `rule`, no raw value.
fn refused_by(env: &Env, rule: &str, sql: &str) {
    assert_refused_by(rule, sql, &atk(env, sql));
}

/// A table partitioned by a protected column (at any level, by an
/// expression over it too) or an inheritance child whose CHECK reads one:
/// the member a row is in tells which bounds its value lies in. Its
/// `tableoid`, its `ctid` (which restarts in every partition), the order
/// an unordered read returns rows in (partition by partition), or a read
/// or count of one member would say it; no member is read. Each
/// statement returned the partition of every row, or a count of values in
/// a partition's bounds, before the fix.
#[test]
fn no_member_of_a_hierarchy_a_protected_column_splits_is_read() {
    let Some(env) = env() else { return };
    // Their operators are pg_catalog's only while no other test's are.
    let _public = PUBLIC.lock().unwrap_or_else(|e| e.into_inner());
    for sql in [
        "SELECT id, tableoid::regclass FROM atk_parts",
        "SELECT id, ctid FROM atk_parts",
        "SELECT string_agg(id::text, ',') FROM atk_parts",
        "SELECT id FROM atk_parts LIMIT 4",
        "SELECT count(*) FROM atk_parts",
        "SELECT id FROM ONLY atk_parts",
        "SELECT t.id, i.inhrelid FROM atk_parts t JOIN pg_inherits i ON i.inhrelid = t.tableoid",
        "SELECT count(*) FROM atk_parts_n",
        "SELECT id FROM atk_parts_s",
        "SELECT id FROM atk_t WHERE id IN (SELECT id FROM atk_parts_s)",
        "SELECT id, tableoid::regclass FROM atk_sub",
        "SELECT id FROM atk_sub_a",
        "SELECT count(*) FROM atk_sub_a_n",
        "SELECT id FROM atk_sub_a_s",
        "SELECT id, tableoid::regclass FROM atk_ih",
        "SELECT id FROM atk_ih",
        "SELECT id FROM atk_ic",
    ] {
        refused_by(env, "protected_partition", sql);
    }
    // A partition the protected column does not split is read, and so is
    // a table partitioned by an expression over other columns, tableoid
    // and all (its protected column sanitized); the definitions stay
    // readable.
    let out = atk(env, "SELECT id FROM atk_sub_b");
    assert!(out.contains("101") && !out.contains("ERROR"), "{out}");
    let sql = "SELECT id, tableoid::regclass, note FROM atk_mod";
    let out = atk(env, sql);
    assert!(
        out.contains("2|atk_mod_0|") && !out.contains("ERROR"),
        "{out}"
    );
    assert_no_marker(sql, &out);
    // psql's \d+ runs its queries of the key and the partitions (with
    // -t it prints the columns only).
    let out = atk(env, "\\d+ atk_parts");
    assert!(
        out.contains("region|text") && !out.contains("ERROR"),
        "{out}"
    );
}

/// `pg_class.reltuples` of a partial index whose predicate reads a
/// protected column counts the rows that match it (of a partition, the
/// rows in its bounds; of a TOAST table, the chunks of long values);
/// `relpages` and `relallvisible` size them. Withheld while anything is
/// protected.
#[test]
fn row_counts_and_sizes_of_relations_are_withheld() {
    let Some(env) = env() else { return };
    // Their operators are pg_catalog's only while no other test's are.
    let _public = PUBLIC.lock().unwrap_or_else(|e| e.into_inner());
    for sql in [
        "SELECT reltuples FROM pg_class WHERE relname = 'atk_t_seen'",
        "SELECT relname, relpages FROM pg_class WHERE relname = 'atk_parts_n'",
        "SELECT relname FROM pg_class WHERE relname LIKE 'atk_t%' AND reltuples > 1",
        "SELECT c.* FROM pg_class c WHERE relname = 'atk_t_seen'",
        "SELECT relallvisible FROM pg_class",
    ] {
        refused_by(env, "relation_size", sql);
    }
    let out = atk(
        env,
        "SELECT relname, relkind FROM pg_class WHERE relname = 'atk_t_seen'",
    );
    assert!(out.contains("atk_t_seen|i"), "{out}");
}

/// A rule on a partition alone: a read of its parent returns the
/// partition's rows, so the parent's column is protected too. The parent's
/// read returned the raw notes before the fix.
#[test]
fn a_column_protected_on_a_partition_is_protected_through_its_parent() {
    let Some(env) = env() else { return };
    // Their operators are pg_catalog's only while no other test's are.
    let _public = PUBLIC.lock().unwrap_or_else(|e| e.into_inner());
    for sql in [
        "SELECT note FROM atk_up",
        "SELECT * FROM atk_up",
        "SELECT note FROM atk_up_a",
    ] {
        let out = atk(env, sql);
        assert!(!out.contains("ERROR") && !out.trim().is_empty(), "{out}");
        assert_no_marker(sql, &out);
    }
    refused_by(
        env,
        "protected_in_where",
        "SELECT id FROM atk_up WHERE note LIKE 'Seen%'",
    );
}

/// A row-level security policy whose `USING` reads a protected column
/// (directly, through a function, or through a subquery on another
/// table): every row a read returns satisfies it, so the rows and their
/// count tell which notes pass it. Before the fix `SELECT id FROM
/// atk_rls` returned 1 alone, the one note that starts with `Seen`.
#[test]
fn a_table_whose_policy_reads_a_protected_column_is_not_read() {
    let Some(env) = env() else { return };
    // Their operators are pg_catalog's only while no other test's are.
    let _public = PUBLIC.lock().unwrap_or_else(|e| e.into_inner());
    for sql in [
        "SELECT id FROM atk_rls",
        "SELECT count(*) FROM atk_rls",
        "SELECT note FROM atk_rls",
        "SELECT id FROM atk_t WHERE id IN (SELECT id FROM atk_rls)",
        "SELECT id FROM atk_rls_fn",
        "SELECT count(*) FROM atk_rls_sub",
    ] {
        refused_by(env, "protected_policy", sql);
    }
    let out = atk(env, "SELECT id FROM atk_rls");
    assert!(
        out.contains("policy, atk_seen, that reads protected column public.atk_rls.note"),
        "{out}"
    );
    // A policy on unprotected columns filters as usual, the notes of the
    // rows it lets through sanitized; another role's policy does not
    // apply to this one.
    let sql = "SELECT id, note FROM atk_rls_ok";
    let out = atk(env, sql);
    let mut ids: Vec<&str> = out.lines().filter_map(|l| l.split('|').next()).collect();
    ids.sort_unstable();
    assert_eq!(ids, ["1", "3"], "{out}");
    assert_no_marker(sql, &out);
}

/// The proxy's own catalog reads, at a session's start, run as the
/// session's upstream role: an operator they name without `pg_catalog`
/// is looked up along the session's path, and `<>(oid, integer)` (`conrelid
/// <> 0`) and `=(oid, regclass)` have no exact match in `pg_catalog`, so
/// `atk_creator`'s in `public` won. Before the fix its function ran with
/// the role's raw reads, and the session's start failed with the raw notes
/// in its FATAL message.
#[test]
fn the_catalog_reads_run_no_operator_of_another_role() {
    let Some(env) = env() else { return };
    let _public = PUBLIC.lock().unwrap_or_else(|e| e.into_inner());
    let port = proxy_port(env);
    let cleanup = "DROP OPERATOR IF EXISTS public.<> (oid, integer);
         DROP OPERATOR IF EXISTS public.= (oid, regclass);
         DROP FUNCTION IF EXISTS public.hijack_ne(oid, integer);
         DROP FUNCTION IF EXISTS public.hijack_eq(oid, regclass);";
    direct(db(), cleanup);
    direct(
        db(),
        "SET ROLE atk_creator;
         CREATE FUNCTION public.hijack_ne(oid, integer) RETURNS boolean LANGUAGE plpgsql AS $f$
           BEGIN RAISE EXCEPTION USING ERRCODE = '42000',
             MESSAGE = (SELECT pg_catalog.string_agg(note, '|') FROM public.atk_t); END $f$;
         CREATE OPERATOR public.<> (LEFTARG = oid, RIGHTARG = integer, FUNCTION = public.hijack_ne);
         CREATE FUNCTION public.hijack_eq(oid, regclass) RETURNS boolean LANGUAGE plpgsql AS $f$
           BEGIN RAISE EXCEPTION USING ERRCODE = '42000',
             MESSAGE = (SELECT pg_catalog.string_agg(note, '|') FROM public.atk_t); END $f$;
         CREATE OPERATOR public.= (LEFTARG = oid, RIGHTARG = regclass, FUNCTION = public.hijack_eq);",
    );
    let out = text(
        &psql_cmd(port, db(), "atk", "atk-pw")
            .args([
                "-c",
                "SELECT 'session started'",
                "-c",
                "SELECT note FROM atk_t",
            ])
            .output()
            .expect("psql"),
    );
    direct(db(), cleanup);
    assert_no_marker("an operator of another role's in the catalog reads", &out);
    assert!(out.contains("session started"), "{out}");
}

/// `SHOW` reads only the settings drivers and tools ask for: a custom
/// setting holds whatever text was put there (code of a colluding role
/// that ran in the session could `set_config` the raw notes into one).
/// Before the fix `SHOW atk.leak` returned it.
#[test]
fn show_reads_only_the_settings_tools_ask_for() {
    let Some(env) = env() else { return };
    let port = proxy_port(env);
    let role = format!("ALTER ROLE atk_reader IN DATABASE {}", db());
    direct(
        db(),
        &format!("{role} SET atk.leak = '{}'", MARKERS[0].replace(' ', "_")),
    );
    let out = text(
        &psql_cmd(port, db(), "atk", "atk-pw")
            .args(["-c", "SHOW atk.leak", "-c", "SHOW ALL"])
            .output()
            .expect("psql"),
    );
    direct(db(), &format!("{role} RESET atk.leak"));
    assert_refused_by("setting_not_allowed", "SHOW atk.leak; SHOW ALL", &out);
    assert_eq!(
        out.matches("statement refused (setting_not_allowed)")
            .count(),
        2,
        "{out}"
    );
    for sql in [
        "SHOW server_version",
        "SHOW TRANSACTION ISOLATION LEVEL",
        "SHOW standard_conforming_strings",
    ] {
        let out = atk(env, sql);
        assert!(!out.contains("ERROR") && !out.trim().is_empty(), "{out}");
    }
}

/// A relation's owner may change it during a session that read the
/// catalog before: make it a view of its own function (`DROP TABLE` and
/// `CREATE VIEW`, or a `_RETURN` rule that keeps the OID), give it a
/// row-level security policy that calls its function, or retype a column
/// to an enum of its own with a cast to text. Each ran `atk_creator`'s
/// function with the session's raw reads before the fix; now a relation
/// whose owner is not trusted is not read at all.
#[test]
fn relations_of_owners_the_proxy_does_not_trust_are_not_read() {
    let Some(env) = env() else { return };
    let _public = PUBLIC.lock().unwrap_or_else(|e| e.into_inner());
    let restore = format!(
        "{DROP_MINE_SQL}
         DROP TYPE IF EXISTS public.atk_e3 CASCADE;
         SET ROLE atk_creator; {MINE_SQL} RESET ROLE;"
    );
    let out = mid_session(
        env,
        "DROP TABLE public.atk_mine;
         CREATE VIEW public.atk_mine AS SELECT public.leak_txt() AS x;
         GRANT SELECT ON public.atk_mine TO atk_reader;
         CREATE RULE \"_RETURN\" AS ON SELECT TO public.atk_mine_rule
           DO INSTEAD SELECT public.leak_txt() AS x;
         ALTER TABLE public.atk_mine_rls ENABLE ROW LEVEL SECURITY;
         CREATE POLICY atk_leak ON public.atk_mine_rls USING (public.leak_b(x));
         CREATE TYPE public.atk_e3 AS ENUM ('a');
         ALTER TABLE public.atk_mine_ty ALTER COLUMN x TYPE public.atk_e3 USING 'a';
         CREATE FUNCTION public.leak_e3(public.atk_e3) RETURNS text LANGUAGE sql
           AS $f$ SELECT string_agg(note, '|') FROM public.atk_t $f$;
         CREATE CAST (public.atk_e3 AS text) WITH FUNCTION public.leak_e3(public.atk_e3);",
        "SELECT x FROM atk_mine;\n\
         SELECT x FROM atk_mine_rule;\n\
         SELECT count(*) FROM atk_mine_rls;\n\
         SELECT x::text FROM atk_mine_ty;",
        &restore,
    );
    assert_no_marker("a relation its owner changed mid-session", &out);
    assert_eq!(
        out.matches("statement refused (untrusted_owner)").count(),
        4,
        "{out}"
    );
    assert!(
        out.contains("relation public.atk_mine is owned by role atk_creator")
            && out.contains("masking.trusted_owners"),
        "{out}"
    );
    // A member of a hierarchy owned by it refuses the whole hierarchy;
    // a trusted owner's relation is read.
    let out = atk(env, "SELECT id FROM atk_par");
    assert_refused_by("untrusted_owner", "SELECT id FROM atk_par", &out);
    assert!(
        out.contains("its member public.atk_kid is owned by role atk_creator"),
        "{out}"
    );
    let out = atk(env, "SELECT x FROM atk_c");
    assert_eq!(out.trim(), "1", "{out}");
}

/// An index scan returns rows in the order of the index's keys: with an
/// index on `(ward, name)` and `name` protected, `... WHERE ward = 'w1'
/// ORDER BY ward LIMIT 1` returned the row whose raw name sorts first,
/// and repeated with `id NOT IN (...)` the whole raw ranking. A partial
/// index whose predicate reads a protected column holds the rows that
/// pass it, and an expression index orders by a function of the values.
/// Before the fix each of these was read.
#[test]
fn tables_with_an_index_on_a_protected_column_are_not_read() {
    let Some(env) = env() else { return };
    // Their operators are pg_catalog's only while no other test's are.
    let _public = PUBLIC.lock().unwrap_or_else(|e| e.into_inner());
    for sql in [
        "SELECT id FROM atk_rank WHERE ward = 'w1' ORDER BY ward LIMIT 1",
        "SELECT id FROM atk_rank WHERE ward = 'w1' AND id NOT IN (1, 5) ORDER BY ward LIMIT 1",
        "SELECT id FROM atk_rank",
        "SELECT id FROM atk_ix WHERE id > 0",
        "SELECT id FROM atk_expr ORDER BY id",
    ] {
        refused_by(env, "protected_index", sql);
    }
    let out = atk(env, "SELECT id FROM atk_rank LIMIT 1");
    assert!(
        out.contains(
            "relation public.atk_rank has index public.atk_rank_ward_name, whose key or \
             predicate reads protected column name"
        ),
        "{out}"
    );
    // An index that only carries the column (INCLUDE) does not order by
    // it: the table is read, its notes sanitized.
    let sql = "SELECT id, note FROM atk_incl WHERE ward = 'north'";
    let out = atk(env, sql);
    assert!(
        out.lines().any(|l| l.starts_with("1|")) && !out.contains("ERROR"),
        "{out}"
    );
    assert_no_marker(sql, &out);
}
