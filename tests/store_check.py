#!/usr/bin/env python3
"""The computed-once store (docs/masking.md, "Computed once"), end to end.

    store_check.py --owner-dsn DSN --key-file PATH

Creates its own database (`dptext_store_check`) and tables (`store_t`, `store_w`) with model-based rules and a
role `store_masked` labelled MASKED under the key file, then checks:

- a stored output equals the computation without the store, for entity
  replacement, entity replacement grouped by a column, NDD with operators
  and a chain (masked reads and apply_rule, store on and off);
- masked reads file nothing (nor take a transaction id); after warming,
  masked reads are served from the
  store (a planted entry is what comes back: the store is really read);
- a changed rule, key or value never serves the old entry;
- `dptext.warm` computes each distinct value once, reports progress, and
  a second run computes nothing; `create_sanitized_view` uses it;
- `dptext.store_prune` removes entries of deleted values and other rules;
- a masked session cannot read, probe or fill the store through SQL, and
  a read-only masked transaction reads without filling;
- a fill that is cancelled leaves no entry behind, and a rerun completes.

Prints one line per check and 'N passed, M failed'; exits 1 on a failure.
"""
import argparse
import os
import shutil
import tempfile
import threading
import time

import psycopg

from checks import check, finish, one, rows

NOTES = [
    "Seen by Dr. Alice Whitmore on 03/14/2023 at Mercy General Hospital. MRN 4471902.",
    "Patient Jonathan Greaves, a 67-year-old man, called 555-201-3344 about metformin 500 mg.",
    "Follow-up with Maria Castellanos on 2023-04-02; lisinopril continued.",
    "Discharged home to Springfield on 04/20/2023 with his daughter Emily.",
    "No acute distress. Chest clear. Seen by Dr. Robert Okafor.",
    "Seen by Dr. Alice Whitmore on 03/14/2023 at Mercy General Hospital. MRN 4471902.",
]


def refused(conn, sql, code="42501"):
    try:
        with conn.cursor() as cur:
            cur.execute(sql)
            cur.fetchall()
        return False, "no error"
    except psycopg.Error as e:
        conn.rollback() if not conn.autocommit else None
        return e.sqlstate == code, f"{e.sqlstate}: {e}"


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--owner-dsn", required=True)
    ap.add_argument("--key-file", required=True)
    a = ap.parse_args()

    # A database of its own: other checks may run beside this one, and it
    # empties the store.
    boot = psycopg.connect(a.owner_dsn, autocommit=True)
    boot.execute("DROP DATABASE IF EXISTS dptext_store_check")
    boot.execute("CREATE DATABASE dptext_store_check")
    boot.close()
    a.owner_dsn = " ".join(p for p in a.owner_dsn.split() if not p.startswith("dbname=")) + " dbname=dptext_store_check"
    owner = psycopg.connect(a.owner_dsn, autocommit=True)
    owner.execute("CREATE EXTENSION dptext")
    notices = []
    owner.add_notice_handler(lambda d: notices.append(d.message_primary or ""))
    # A second key the server can read, for the changed-key check.
    other_key = os.path.join(os.path.dirname(a.key_file), "store_check_other.key")
    with open(other_key, "w") as f:
        f.write("0f" * 32)
    os.chmod(other_key, 0o600)
    try:
        shutil.chown(other_key, user=os.stat(a.key_file).st_uid)
    except (PermissionError, LookupError):
        pass

    with owner.cursor() as cur:
        cur.execute("""
            DO $$ BEGIN
              IF NOT EXISTS (SELECT 1 FROM pg_roles WHERE rolname = 'store_masked') THEN
                CREATE ROLE store_masked LOGIN;
              END IF;
            END $$;
            DROP TABLE IF EXISTS store_t, store_w CASCADE;
            DROP MATERIALIZED VIEW IF EXISTS store_safe;
            CREATE TABLE store_t (id int PRIMARY KEY, patient text, note text, ndd text, chained text);
            SECURITY LABEL FOR dptext ON ROLE store_masked IS 'MASKED';
            GRANT SELECT ON store_t TO store_masked;
            TRUNCATE dptext.store;
        """)
        cur.execute(f"ALTER ROLE store_masked SET dptext.key_file = '{a.key_file}'")
        cur.execute(f"SET dptext.key_file = '{a.key_file}'")
        # Notes 1 and 6 are one text of one patient: one entry.
        patients = ["p1", "p2", "p0", "p1", "p2", "p1"]
        for i, n in enumerate(NOTES, 1):
            cur.execute("INSERT INTO store_t VALUES (%s, %s, %s, %s, %s)",
                        (i, patients[i - 1], n, n, n))
        cur.execute("""
            SECURITY LABEL FOR dptext ON COLUMN store_t.note IS
              'MASKED WITH deidentify(operators => ''DATE:shift,ID:redact'') GROUPED BY patient';
            SECURITY LABEL FOR dptext ON COLUMN store_t.ndd IS 'MASKED WITH ndd(operators => ''DATE:shift'')';
            SECURITY LABEL FOR dptext ON COLUMN store_t.chained IS
              'MASKED WITH deidentify(operators => ''ID:redact'') THEN santext_plus(eps => 3)';
        """)

    def masked(key=None):
        c = psycopg.connect(a.owner_dsn.replace("user=postgres", "user=store_masked"), autocommit=True)
        if key:
            # Only a superuser may point a role at another key.
            with owner.cursor() as cur:
                cur.execute(f"ALTER ROLE store_masked SET dptext.key_file = '{key}'")
            c.close()
            c = psycopg.connect(a.owner_dsn.replace("user=postgres", "user=store_masked"), autocommit=True)
        return c

    cols = ["note", "ndd", "chained"]
    m = masked()
    first = {c: rows(m, f"SELECT id, {c} FROM store_t ORDER BY id") for c in cols}
    # A masked session only reads the store: filing would take a
    # transaction id and make the next read of the value fast, which would
    # tell which rows share a raw value.
    check("a masked read files nothing", one(owner, "SELECT count(*) FROM dptext.store") == 0)
    one(owner, "SELECT dptext.warm('store_t')")
    stored = one(owner, "SELECT count(*) FROM dptext.store")
    # note: 6 rows, 5 distinct (value, group); ndd and chained: 5 distinct values.
    check("warm files each distinct value of each model rule once", stored == 15, f"{stored} entries")
    check("the store holds no raw text",
          one(owner, "SELECT count(*) FROM dptext.store WHERE output LIKE '%Whitmore%' OR output LIKE '%4471902%'") == 0
          and one(owner, "SELECT count(*) FROM dptext.store s, store_t t WHERE position(convert_to(t.note, 'UTF8') in s.tag) > 0") == 0)
    again = {c: rows(m, f"SELECT id, {c} FROM store_t ORDER BY id") for c in cols}
    check("a masked read served from the store gives the computed outputs", again == first)
    check("a masked read served from the store files nothing new", one(owner, "SELECT count(*) FROM dptext.store") == stored)

    # Cached equals uncached: apply_rule with the store off, as the owner.
    with owner.cursor() as cur:
        cur.execute("SET dptext.store = off")
        direct = {
            "note": rows(owner, "SELECT id, dptext.apply_rule(note, r.mechanism, r.params, patient) FROM store_t, dptext.rules r "
                                "WHERE r.table_name = 'store_t' AND r.column_name = 'note' ORDER BY id"),
        }
        for c in ["ndd", "chained"]:
            direct[c] = rows(owner, f"SELECT id, dptext.apply_rule({c}, r.mechanism, r.params) FROM store_t, dptext.rules r "
                                    f"WHERE r.table_name = 'store_t' AND r.column_name = '{c}' ORDER BY id")
        cur.execute("RESET dptext.store")
    for c in cols:
        check(f"stored output equals the computation without the store ({c})", direct[c] == first[c],
              f"{direct[c][:1]} vs {first[c][:1]}")
    m.close()
    # Masked reads with the store off compute the same.
    with owner.cursor() as cur:
        cur.execute("ALTER ROLE store_masked SET dptext.store = off")
    m = masked()
    off = {c: rows(m, f"SELECT id, {c} FROM store_t ORDER BY id") for c in cols}
    check("masked reads with the store off give the same outputs", off == first)
    m.close()
    with owner.cursor() as cur:
        cur.execute("ALTER ROLE store_masked RESET dptext.store")

    # The store is really read: a planted output is what a new session serves.
    with owner.cursor() as cur:
        cur.execute("UPDATE dptext.store SET output = 'PLANTED ' || rule_id")
    m = masked()
    planted = rows(m, "SELECT ndd FROM store_t WHERE id = 5")[0][0]
    check("masked reads are served from the store", planted.startswith("PLANTED "), planted)
    # ... and never from a copy the masked backend kept: a copy keyed by
    # value made the second read of an equal value fast, in any row or
    # table under the rule, which timing showed (which rows share a raw
    # value). The same session reads the entry as the store has it now.
    with owner.cursor() as cur:
        cur.execute("UPDATE dptext.store SET output = 'REPLANTED ' || rule_id")
    replanted = rows(m, "SELECT ndd FROM store_t WHERE id = 5")[0][0]
    check("a masked session keeps no copy of what it read (it reads the store again)",
          replanted.startswith("REPLANTED "), replanted)
    m.close()

    # A changed rule: the planted entries are not served to it.
    with owner.cursor() as cur:
        cur.execute("SECURITY LABEL FOR dptext ON COLUMN store_t.ndd IS 'MASKED WITH ndd(operators => ''DATE:redact'')'")
    m = masked()
    changed = rows(m, "SELECT ndd FROM store_t ORDER BY id")
    check("a changed rule never serves the old rule's entries",
          all(not r[0].startswith("PLANTED") for r in changed), str(changed[:1]))
    # A changed value: an updated row is not served its old entry.
    with owner.cursor() as cur:
        cur.execute("UPDATE store_t SET chained = chained || ' Seen again.' WHERE id = 1")
    upd = rows(m, "SELECT chained FROM store_t WHERE id = 1")[0][0]
    check("a changed value never serves the old value's entry", not upd.startswith("PLANTED"), upd)
    m.close()
    # A changed key.
    m = masked(key=other_key)
    keyed = rows(m, "SELECT chained FROM store_t WHERE id = 2")[0][0]
    check("a changed key never serves the old key's entries", not keyed.startswith("PLANTED"), keyed)
    m.close()
    with owner.cursor() as cur:
        cur.execute(f"ALTER ROLE store_masked SET dptext.key_file = '{a.key_file}'")
        cur.execute("TRUNCATE dptext.store")

    # A masked session cannot read, probe or fill the store through SQL.
    m = masked()
    for sql in ["SELECT * FROM dptext.store", "SELECT count(*) FROM dptext.store",
                "SELECT * FROM dptext.store_summary", "SELECT dptext.warm('store_t')",
                "SELECT dptext.store_prune()", "SELECT dptext._warm('store_t'::regclass::oid, 8)",
                "INSERT INTO dptext.store VALUES ('\\x00', 'x', 'r', 'k')",
                "TABLE dptext.store"]:
        ok, detail = refused(m, sql)
        check(f"masked session refused: {sql}", ok, detail)
    # The store and its index are not in a masked session's pg_class (their
    # row count is how many distinct values were computed, everywhere).
    check("the store is hidden from masked sessions' pg_class",
          one(m, "SELECT count(*) FROM pg_class WHERE relname IN ('store', 'store_tag') "
                 "AND relnamespace = 'dptext'::regnamespace") == 0)
    # The lock table is refused: SERIALIZABLE reads take predicate locks
    # that name the tuples they touched.
    ok, detail = refused(m, "SELECT * FROM pg_locks")
    check("masked session refused: pg_locks", ok, detail)
    # A masked read takes no transaction id, whether the value is stored
    # or not, the first time or the second: nothing tells which of its
    # rows hold the same raw value (the fifth review's oracle).
    with owner.cursor() as cur:
        cur.execute("TRUNCATE dptext.store")
    # (Read by the owner: masked sessions may not read the ID counter.)
    xids = []
    with m.cursor() as cur:
        cur.execute("SELECT pg_backend_pid()")
        masked_pid = cur.fetchone()[0]
    for row_id in (2, 5, 2, 5):
        with m.transaction():
            with m.cursor() as cur:
                cur.execute(f"SELECT note FROM store_t WHERE id = {row_id}")
            with owner.cursor() as cur:
                cur.execute("SELECT backend_xid IS NULL FROM pg_stat_activity WHERE pid = %s", (masked_pid,))
                xids.append(cur.fetchone()[0])
    check("a masked read takes no transaction id, stored or not, first or again", all(xids), f"{xids}")
    # An aborted unmasked read leaves nothing behind: its fills roll back
    # and the backend forgets what it served, so the value is computed
    # (and filed, taking a transaction id) again.
    rule = "SELECT dptext.apply_rule(note, r.mechanism, r.params, patient) FROM store_t, dptext.rules r " \
           "WHERE r.table_name = 'store_t' AND r.column_name = 'note' AND id = 2"
    try:
        with owner.transaction():
            with owner.cursor() as cur:
                cur.execute(rule)
                cur.execute("SELECT 1 / 0")
    except psycopg.errors.DivisionByZero:
        pass
    with owner.transaction():
        with owner.cursor() as cur:
            cur.execute(rule)
            cur.execute("SELECT txid_current_if_assigned() IS NOT NULL")
            recomputed = cur.fetchone()[0]
    check("an aborted read leaves no served entry behind", recomputed)
    with owner.cursor() as cur:
        cur.execute("TRUNCATE dptext.store")
    # A read-only masked transaction reads without filling.
    with m.transaction():
        with m.cursor() as cur:
            cur.execute("SET TRANSACTION READ ONLY")
            cur.execute("SELECT note FROM store_t ORDER BY id")
            ro = cur.fetchall()
    check("a read-only masked transaction reads and files nothing",
          [r[0] for r in ro] == [r[1] for r in first["note"]] and one(owner, "SELECT count(*) FROM dptext.store") == 0)
    m.close()

    # warm: batched, once per distinct value, with progress.
    with owner.cursor() as cur:
        cur.execute("""
            CREATE TABLE store_w (id int PRIMARY KEY, note text);
            SECURITY LABEL FOR dptext ON COLUMN store_w.note IS 'MASKED WITH deidentify()';
            GRANT SELECT ON store_w TO store_masked;
        """)
        for i in range(40):
            cur.execute("INSERT INTO store_w VALUES (%s, %s)", (i, f"Visit {i % 20}: {NOTES[i % 5]}"))
    notices.clear()
    n = one(owner, "SELECT dptext.warm('store_w', 8)")
    check("warm computes each distinct value once", n == 20, f"{n}")
    check("warm reports totals", any("20 distinct values, 20 computed" in x for x in notices), str(notices))
    check("a second warm computes nothing", one(owner, "SELECT dptext.warm('store_w')") == 0)
    # warm's refusals: no key, a batch size out of range, the store off.
    with psycopg.connect(a.owner_dsn, autocommit=True) as keyless:
        ok, detail = refused(keyless, "SELECT dptext.warm('store_w')", code="22023")
        check("warm without a key is refused (22023, naming dptext.key_file)", ok and "key_file" in detail, detail)
    ok, detail = refused(owner, "SELECT dptext.warm('store_w', 0)", code="22023")
    check("warm with batch_size 0 is refused (22023)", ok and "batch_size" in detail, detail)
    ok, detail = refused(owner, "SET dptext.store = off; SELECT dptext.warm('store_w')", code="22023")
    owner.execute("RESET dptext.store")
    check("warm with the store off is refused (22023)", ok and "store" in detail, detail)
    with owner.cursor() as cur:
        cur.execute("SET dptext.store = off")
        plain = rows(owner, "SELECT id, dptext.apply_rule(note, 'deidentify', '{}') FROM store_w ORDER BY id")
        cur.execute("RESET dptext.store")
    m = masked()
    check("warmed outputs equal computed ones", rows(m, "SELECT id, note FROM store_w ORDER BY id") == plain)
    m.close()
    check("a masked read after warming files nothing", one(owner, "SELECT count(*) FROM dptext.store") == 20)
    # Two model threads (two engines side by side, with this backend's
    # recognizers) file the same outputs as one.
    with owner.cursor() as cur:
        cur.execute("TRUNCATE dptext.store")
        cur.execute("SET dptext.model_threads = 2")
        cur.execute("SELECT dptext.warm('store_w', 8)")
        cur.execute("RESET dptext.model_threads")
    # With no backend copy (store_cache_mb = 0) every read is served from
    # the table, with the same outputs.
    with owner.cursor() as cur:
        cur.execute("ALTER ROLE store_masked SET dptext.store_cache_mb = 0")
    m = masked()
    check("outputs warmed on two model threads, read without a backend copy, equal computed ones",
          rows(m, "SELECT id, note FROM store_w ORDER BY id") == plain
          and one(owner, "SELECT count(*) FROM dptext.store") == 20)
    m.close()
    with owner.cursor() as cur:
        cur.execute("ALTER ROLE store_masked RESET dptext.store_cache_mb")
    # create_sanitized_view warms, and its rows equal the masked reads.
    with owner.cursor() as cur:
        cur.execute("INSERT INTO store_w VALUES (100, 'Seen by Dr. Hannah Lindqvist today.')")
    notices.clear()
    one(owner, "SELECT dptext.create_sanitized_view('store_w', 'store_safe')")
    check("create_sanitized_view warms the new values first",
          any("dptext.warm" in x and ", 1 computed," in x for x in notices), str(notices))
    check("the sanitized view equals masked reads",
          rows(owner, "SELECT id, note FROM store_safe WHERE id < 100 ORDER BY id") == plain)
    # Prune: entries of deleted values go.
    with owner.cursor() as cur:
        cur.execute("DELETE FROM store_w WHERE id >= 20")
        cur.execute("DROP MATERIALIZED VIEW store_safe")
    before = one(owner, "SELECT count(*) FROM dptext.store")
    pruned = one(owner, "SELECT dptext.store_prune()")
    after = one(owner, "SELECT count(*) FROM dptext.store")
    # ids 20..39 repeat ids 0..19's values; only id 100's value is gone.
    check("store_prune removes entries no current value needs", pruned == 1 and after == before - 1,
          f"pruned {pruned}, {before} -> {after}")
    with owner.cursor() as cur:
        cur.execute("DELETE FROM store_w WHERE id >= 10")
    check("store_prune after deleting rows", one(owner, "SELECT dptext.store_prune()") == 10)

    # A cancelled fill leaves nothing half-written; a rerun completes.
    with owner.cursor() as cur:
        cur.execute("TRUNCATE dptext.store")
        cur.execute("INSERT INTO store_w SELECT i, 'Note ' || i || ': seen by Dr. Okafor on ' || (1 + i % 28) || "
                    "'/03/2023 about ' || repeat('chest pain and shortness of breath, ', 8) FROM generate_series(200, 2199) i")
    w = psycopg.connect(a.owner_dsn, autocommit=True)
    with w.cursor() as cur:
        cur.execute(f"SET dptext.key_file = '{a.key_file}'")
    pid = one(w, "SELECT pg_backend_pid()")
    err = []

    def run():
        try:
            w.execute("SELECT dptext.warm('store_w', 4)")
        except psycopg.Error as e:
            err.append(e.sqlstate)
    t = threading.Thread(target=run)
    t.start()
    # Cancel once the fill is under way (its first NOTICE-free seconds).
    time.sleep(2.0)
    one(owner, "SELECT pg_cancel_backend(%s)", (pid,))
    t.join(30)
    check("a fill is cancellable", err == ["57014"], str(err))
    check("a cancelled fill leaves no entry", one(owner, "SELECT count(*) FROM dptext.store") == 0)
    check("a rerun completes the fill", one(w, "SELECT dptext.warm('store_w', 16)") == 2010)
    w.close()

    with owner.cursor() as cur:
        cur.execute("DROP TABLE store_t, store_w CASCADE")
        cur.execute("TRUNCATE dptext.store")
    try:
        os.unlink(other_key)
    except OSError:
        pass
    finish()


if __name__ == "__main__":
    main()
