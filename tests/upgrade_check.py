#!/usr/bin/env python3
"""ALTER EXTENSION dptext UPDATE from the previous release, end to end.

    upgrade_check.py --owner-dsn DSN --key-file PATH

The previous release's script is `sql/versions/dptext--0.1.0.sql` (what
release 0.1.0, commit 0709e6f, installed), the update script
`sql/versions/dptext--0.1.0--0.2.0.sql`; scripts/install-extension.sh
installs both beside the current one. This check:

- creates a database at 0.1.0, with labels (a word rule and a model rule
  grouped by a column), a MASKED role, a released vocabulary, a sanitized
  materialized view (provenance, budget) and a recognizer;
- records what the masked role reads and what the view holds;
- runs `ALTER EXTENSION dptext UPDATE` and checks the version, that the
  masked role reads the same outputs (same key), that the view's rows and a
  REFRESH are the same, that rules, provenance, budget, vocabulary and
  recognizer are intact, and that what 0.2.0 adds (the store, warm) works;
- compares the updated database's extension objects with a fresh 0.2.0
  install: the same members, function definitions, view definitions,
  columns and privileges (a missing or stale statement in the update
  script fails here).

Prints one line per check and 'N passed, M failed'; exits 1 on a failure.
"""
import argparse

import psycopg

from checks import check, finish, one, rows


def dsn_for(dsn, db, user=None):
    parts = [p for p in dsn.split() if not p.startswith("dbname=") and not (user and p.startswith("user="))]
    parts.append(f"dbname={db}")
    if user:
        parts.append(f"user={user}")
    return " ".join(parts)


# What an extension's objects are, comparable across databases.
MEMBERS = """
SELECT pg_describe_object(d.classid, d.objid, d.objsubid)
  FROM pg_depend d JOIN pg_extension e ON e.oid = d.refobjid
 WHERE e.extname = 'dptext' AND d.deptype = 'e' ORDER BY 1
"""
FUNCTIONS = """
SELECT p.oid::regprocedure::text, pg_get_functiondef(p.oid), coalesce(p.proacl::text, 'default')
  FROM pg_proc p JOIN pg_namespace n ON n.oid = p.pronamespace
 WHERE p.prokind IN ('f', 'p') AND EXISTS (
   SELECT 1 FROM pg_depend d JOIN pg_extension e ON e.oid = d.refobjid
    WHERE e.extname = 'dptext' AND d.objid = p.oid AND d.deptype = 'e')
 ORDER BY 1
"""
RELATIONS = """
SELECT c.oid::regclass::text, c.relkind,
       CASE WHEN c.relkind = 'v' THEN pg_get_viewdef(c.oid) END,
       coalesce(c.relacl::text, 'default'),
       (SELECT string_agg(a.attname || ' ' || format_type(a.atttypid, a.atttypmod) || ' ' || a.attnotnull, ', ' ORDER BY a.attnum)
          FROM pg_attribute a WHERE a.attrelid = c.oid AND a.attnum > 0 AND NOT a.attisdropped)
  FROM pg_class c
 WHERE EXISTS (SELECT 1 FROM pg_depend d JOIN pg_extension e ON e.oid = d.refobjid
                WHERE e.extname = 'dptext' AND d.objid = c.oid AND d.deptype = 'e')
 ORDER BY 1
"""
CONFIG = "SELECT unnest(extconfig)::regclass::text FROM pg_extension WHERE extname = 'dptext' ORDER BY 1"


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--owner-dsn", required=True)
    ap.add_argument("--key-file", required=True)
    a = ap.parse_args()

    boot = psycopg.connect(a.owner_dsn, autocommit=True)
    for db in ("dptext_upgrade_old", "dptext_upgrade_new"):
        boot.execute(f"DROP DATABASE IF EXISTS {db}")
        boot.execute(f"CREATE DATABASE {db}")
    boot.execute("""
        DO $$ BEGIN
          IF NOT EXISTS (SELECT 1 FROM pg_roles WHERE rolname = 'upgrade_masked') THEN
            CREATE ROLE upgrade_masked LOGIN;
          END IF;
        END $$""")
    boot.close()
    fresh = psycopg.connect(dsn_for(a.owner_dsn, "dptext_upgrade_new"), autocommit=True)
    fresh.execute("CREATE EXTENSION dptext")
    old = psycopg.connect(dsn_for(a.owner_dsn, "dptext_upgrade_old"), autocommit=True)
    old.execute("CREATE EXTENSION dptext VERSION '0.1.0'")
    check("a database can be created at 0.1.0",
          one(old, "SELECT extversion FROM pg_extension WHERE extname = 'dptext'") == "0.1.0")
    check("0.1.0 has no store", one(old, "SELECT to_regclass('dptext.store') IS NULL"))

    with old.cursor() as cur:
        cur.execute(f"SET dptext.key_file = '{a.key_file}'")
        cur.execute("""
            CREATE TABLE notes (id int PRIMARY KEY, patient text, note text, body text);
            INSERT INTO notes VALUES
              (1, 'p1', 'Seen by Dr. Alice Whitmore on 03/14/2023. MRN 4471902.', 'the patient reports chest pain'),
              (2, 'p1', 'Follow-up with Maria Castellanos on 2023-04-02.', 'no fever and no cough today'),
              (3, 'p2', 'Patient Jonathan Greaves called 555-201-3344.', 'headache improved after rest');
            SECURITY LABEL FOR dptext ON COLUMN notes.note IS
              'MASKED WITH deidentify(operators => ''DATE:shift,ID:redact'') GROUPED BY patient';
            SECURITY LABEL FOR dptext ON COLUMN notes.body IS 'MASKED WITH santext(eps => 3)';
            SECURITY LABEL FOR dptext ON ROLE upgrade_masked IS 'MASKED';
            GRANT SELECT ON notes TO upgrade_masked;
            INSERT INTO dptext.recognizers (name, label, words) VALUES ('wards', 'LOCATION', '{Ward 7B}');
        """)
        cur.execute(f"ALTER ROLE upgrade_masked IN DATABASE dptext_upgrade_old SET dptext.key_file = '{a.key_file}'")
        cur.execute("SELECT dptext.create_sanitized_view('notes', 'notes_safe')")
        cur.execute("CREATE TABLE words AS SELECT 'the patient reports chest pain and fever ' || g AS t FROM generate_series(1, 200) g")
        cur.execute("SELECT dptext.build_vocabulary('words', 't', 1.0, 1e-5, 'upgrade_words')")
    masked_dsn = dsn_for(a.owner_dsn, "dptext_upgrade_old", user="upgrade_masked")

    def snapshot():
        with psycopg.connect(masked_dsn, autocommit=True) as m:
            reads = rows(m, "SELECT id, note, body FROM notes ORDER BY id")
        return {
            "reads": reads,
            "view": rows(old, "SELECT id, note, body FROM notes_safe ORDER BY id"),
            "rules": rows(old, "SELECT table_name, column_name, mechanism, params::text, group_column FROM dptext.rules ORDER BY 1, 2"),
            "provenance": rows(old, "SELECT build, event, column_name, mechanism, params::text, randomness, random_id "
                                    "FROM dptext.provenance ORDER BY id"),
            "budget": rows(old, "SELECT column_name, releases, eps_total FROM dptext.budget ORDER BY 1"),
            "vocabularies": rows(old, "SELECT name, eps, delta FROM dptext.vocabularies ORDER BY 1"),
            "recognizers": rows(old, "SELECT name, label, words FROM dptext.recognizers ORDER BY 1"),
            "masked": rows(old, "SELECT role_name FROM dptext.masked_roles ORDER BY 1"),
        }

    before = snapshot()
    old.execute("ALTER EXTENSION dptext UPDATE")
    check("ALTER EXTENSION dptext UPDATE reaches 0.2.0",
          one(old, "SELECT extversion FROM pg_extension WHERE extname = 'dptext'") == "0.2.0")
    after = snapshot()
    for part in before:
        check(f"unchanged by the update: {part}", before[part] == after[part],
              f"{before[part][:2]} -> {after[part][:2]}")
    with old.cursor() as cur:
        cur.execute(f"SET dptext.key_file = '{a.key_file}'")
        cur.execute("REFRESH MATERIALIZED VIEW notes_safe")
    check("a REFRESH after the update gives the same rows",
          rows(old, "SELECT id, note, body FROM notes_safe ORDER BY id") == before["view"])
    with old.cursor() as cur:
        cur.execute(f"SET dptext.key_file = '{a.key_file}'")
        cur.execute("SELECT dptext.warm('notes')")
        warmed = cur.fetchone()[0]
    stored = one(old, "SELECT count(*) FROM dptext.store")
    # The REFRESH (apply_rule) filed the three notes already: warm finds them.
    check("what 0.2.0 adds works after the update: the store and warm", stored == 3 and warmed == 0,
          f"{stored} stored, warm computed {warmed}")
    with psycopg.connect(masked_dsn, autocommit=True) as m:
        served = rows(m, "SELECT id, note, body FROM notes ORDER BY id")
    check("masked reads served from the store after the update are the same", served == before["reads"])

    # The updated database has exactly what a fresh 0.2.0 install has.
    for name, sql in [("members", MEMBERS), ("functions and their privileges", FUNCTIONS),
                      ("relations, columns, views and privileges", RELATIONS), ("dumped tables", CONFIG)]:
        got, want = rows(old, sql), rows(fresh, sql)
        missing = [r for r in want if r not in got]
        extra = [r for r in got if r not in want]
        check(f"updated = fresh 0.2.0: {name}", not missing and not extra,
              f"missing {[str(r)[:160] for r in missing[:3]]}, extra {[str(r)[:160] for r in extra[:3]]}")

    old.close()
    fresh.close()
    boot = psycopg.connect(a.owner_dsn, autocommit=True)
    for db in ("dptext_upgrade_old", "dptext_upgrade_new"):
        boot.execute(f"DROP DATABASE IF EXISTS {db}")
    finish()


if __name__ == "__main__":
    main()
