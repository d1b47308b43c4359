#!/usr/bin/env python3
"""A streaming replica and a dump restored into a new cluster mask exactly as
the primary does.

    cluster_copies.py --owner-dsn DSN --key-file PATH --pg-bin DIR --run-user USER
                      --work-dir DIR --assets-dir DIR [--port-base N]

Builds a database `dptext_copy_src` on the primary (the cluster --owner-dsn
names) with labels (a model rule grouped by a column, a word rule), a MASKED
role keyed by the key file, a recognizer and an allow-list entry, a released
vocabulary, a sanitized materialized view (provenance, budget) and a warmed
store, and records what the masked role reads. Then:

- **replica**: `pg_basebackup -R` into a second cluster started as a hot
  standby; once it has replayed the primary's WAL, the masked role reads
  there exactly what it reads on the primary, from the store; a row the
  store lacks is computed on the standby (nothing written there) and
  equals what the primary computes;
- **dump and restore**: `pg_dumpall --globals-only` (roles, the role
  label, the role's key setting) and `pg_dump -Fc` restored into a third,
  new cluster with the same key file: labels, rules, provenance, budget,
  vocabulary, recognizers, store and the view come back, the masked role
  reads the same outputs, and the masked role's own `pg_dump` holds
  sanitized values only.

Prints one line per check and 'N passed, M failed'; exits 1 on a failure.
"""
import argparse
import os
import shutil
import subprocess
import time

import psycopg

from checks import check, finish, one, rows

MARKERS = ["Whitmore", "Castellanos", "Greaves", "4471902"]


def dsn(base, **kw):
    parts = {p.split("=", 1)[0]: p.split("=", 1)[1] for p in base.split()}
    parts.update({k: str(v) for k, v in kw.items()})
    return " ".join(f"{k}={v}" for k, v in parts.items())


class Tools:
    def __init__(self, a):
        self.a = a
        self.prefix = ["runuser", "-u", a.run_user, "--"] if os.geteuid() == 0 else []

    def run(self, args, as_user=True, env=None, check_rc=True, stdin=None):
        cmd = (self.prefix if as_user else []) + args
        p = subprocess.run(cmd, capture_output=True, text=True, env=env, input=stdin)
        if check_rc and p.returncode != 0:
            raise RuntimeError(f"{' '.join(args)} failed ({p.returncode}): {p.stderr[-2000:]}")
        return p

    def bin(self, name):
        return os.path.join(self.a.pg_bin, name)

    def start(self, data, port, log):
        self.run([self.bin("pg_ctl"), "-D", data, "-l", log, "-w", "-t", "120", "start"])

    def stop(self, data):
        if os.path.exists(os.path.join(data, "postmaster.pid")):
            self.run([self.bin("pg_ctl"), "-D", data, "-m", "fast", "-w", "stop"], check_rc=False)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--owner-dsn", required=True)
    ap.add_argument("--key-file", required=True)
    ap.add_argument("--pg-bin", required=True)
    ap.add_argument("--run-user", required=True)
    ap.add_argument("--work-dir", required=True)
    ap.add_argument("--assets-dir", required=True)
    ap.add_argument("--port-base", type=int, default=54331)
    a = ap.parse_args()
    t = Tools(a)
    work = os.path.abspath(a.work_dir)
    replica, restored = os.path.join(work, "replica"), os.path.join(work, "restored")
    for d in (replica, restored):
        t.stop(d)
    shutil.rmtree(work, ignore_errors=True)
    os.makedirs(work)
    if os.geteuid() == 0:
        shutil.chown(work, user=a.run_user)
    primary = a.owner_dsn
    p_host = dict(p.split("=", 1) for p in primary.split())["host"]
    p_port = dict(p.split("=", 1) for p in primary.split())["port"]

    # The source database on the primary.
    boot = psycopg.connect(primary, autocommit=True)
    boot.execute("DROP DATABASE IF EXISTS dptext_copy_src")
    boot.execute("CREATE DATABASE dptext_copy_src")
    boot.execute("""
        DO $$ BEGIN
          IF NOT EXISTS (SELECT 1 FROM pg_roles WHERE rolname = 'copy_masked') THEN
            CREATE ROLE copy_masked LOGIN;
          END IF;
        END $$""")
    boot.execute(f"ALTER ROLE copy_masked SET dptext.key_file = '{a.key_file}'")
    boot.close()
    src_dsn = dsn(primary, dbname="dptext_copy_src")
    src = psycopg.connect(src_dsn, autocommit=True)
    with src.cursor() as cur:
        cur.execute(f"SET dptext.key_file = '{a.key_file}'")
        cur.execute("""
            CREATE EXTENSION dptext;
            CREATE TABLE notes (id int PRIMARY KEY, patient text, note text, body text);
            INSERT INTO notes VALUES
              (1, 'p1', 'Seen by Dr. Alice Whitmore on 03/14/2023 on Ward 7B. MRN 4471902.', 'chest pain since Monday'),
              (2, 'p1', 'Follow-up with Maria Castellanos on 2023-04-02.', 'no fever and no cough today'),
              (3, 'p2', 'Patient Jonathan Greaves called 555-201-3344.', 'headache improved after rest');
            SECURITY LABEL FOR dptext ON COLUMN notes.note IS
              'MASKED WITH deidentify(operators => ''DATE:shift,ID:redact'') GROUPED BY patient';
            SECURITY LABEL FOR dptext ON COLUMN notes.body IS 'MASKED WITH santext(eps => 3)';
            SECURITY LABEL FOR dptext ON ROLE copy_masked IS 'MASKED';
            GRANT SELECT ON notes TO copy_masked;
            INSERT INTO dptext.recognizers (name, label, words) VALUES ('wards', 'LOCATION', '{Ward 7B}');
            INSERT INTO dptext.allow_list VALUES ('Monday');
            CREATE TABLE words AS SELECT 'the patient reports chest pain and fever ' || g AS t FROM generate_series(1, 200) g;
        """)
        cur.execute("SELECT dptext.build_vocabulary('words', 't', 1.0, 1e-5, 'copy_words')")
        cur.execute("SELECT dptext.create_sanitized_view('notes', 'notes_safe')")

    def snapshot(conn, masked_dsn):
        with psycopg.connect(masked_dsn, autocommit=True) as m:
            reads = rows(m, "SELECT id, note, body FROM notes ORDER BY id")
        return {
            "masked reads": reads,
            "sanitized view": rows(conn, "SELECT id, note, body FROM notes_safe ORDER BY id"),
            "rules": rows(conn, "SELECT table_name, column_name, mechanism, params::text, group_column FROM dptext.rules ORDER BY 1, 2"),
            "masked roles": rows(conn, "SELECT role_name FROM dptext.masked_roles WHERE role_name = 'copy_masked'"),
            "budget": rows(conn, "SELECT column_name, releases, eps_total FROM dptext.budget ORDER BY 1"),
            "vocabularies": rows(conn, "SELECT name, eps, delta FROM dptext.vocabularies ORDER BY 1"),
            "recognizers": rows(conn, "SELECT name, label, words FROM dptext.recognizers ORDER BY 1"),
            "allow list": rows(conn, "SELECT value FROM dptext.allow_list ORDER BY 1"),
            "store": rows(conn, "SELECT count(*), count(DISTINCT tag) FROM dptext.store"),
        }

    masked_src = dsn(src_dsn, user="copy_masked")
    source = snapshot(src, masked_src)
    provenance = rows(src, "SELECT build, event, column_name, mechanism, params::text, randomness, random_id "
                           "FROM dptext.provenance ORDER BY id")
    check("the source has a warmed store and provenance", source["store"][0][0] == 3 and len(provenance) >= 2,
          f"{source['store']} {len(provenance)}")
    check("the masked role reads no raw value on the primary",
          not any(m in str(source["masked reads"]) for m in MARKERS), str(source["masked reads"]))

    # --- A streaming replica (hot standby).
    rport = a.port_base
    t.run([t.bin("pg_basebackup"), "-h", p_host, "-p", p_port, "-U", "postgres", "-D", replica, "-R",
           "-X", "stream", "--checkpoint=fast"])
    with open(os.path.join(replica, "postgresql.auto.conf"), "a") as f:
        f.write(f"\nport = {rport}\nunix_socket_directories = '{work}'\nhot_standby = on\n")
    t.start(replica, rport, os.path.join(work, "replica.log"))
    rep_dsn = dsn(src_dsn, host=work, port=rport)
    lsn = one(src, "SELECT pg_current_wal_lsn()::text")
    rep = psycopg.connect(rep_dsn, autocommit=True)
    for _ in range(120):
        if one(rep, "SELECT pg_last_wal_replay_lsn() >= %s::pg_lsn", (lsn,)):
            break
        time.sleep(0.5)
    check("the replica is a hot standby", one(rep, "SELECT pg_is_in_recovery()"))
    on_replica = snapshot(rep, dsn(rep_dsn, user="copy_masked"))
    for part in ("masked reads", "sanitized view", "rules", "store"):
        check(f"replica = primary: {part}", on_replica[part] == source[part],
              f"{on_replica[part]} != {source[part]}")
    # A value the store lacks: computed on the standby, without writing.
    src.execute("INSERT INTO notes VALUES (4, 'p2', 'Seen by Dr. Robert Okafor on 05/01/2023.', 'rest and fluids')")
    lsn = one(src, "SELECT pg_current_wal_lsn()::text")
    for _ in range(120):
        if one(rep, "SELECT pg_last_wal_replay_lsn() >= %s::pg_lsn", (lsn,)):
            break
        time.sleep(0.5)
    with psycopg.connect(dsn(rep_dsn, user="copy_masked"), autocommit=True) as m:
        rep_new = rows(m, "SELECT note, body FROM notes WHERE id = 4")
    with psycopg.connect(masked_src, autocommit=True) as m:
        src_new = rows(m, "SELECT note, body FROM notes WHERE id = 4")
    check("a value the store lacks is computed on the replica as on the primary", rep_new == src_new,
          f"{rep_new} != {src_new}")
    check("the computed value is not in the replica's raw text", "Okafor" not in str(rep_new), str(rep_new))
    rep.close()
    t.stop(replica)

    # --- Dump and restore into a new cluster with the same key file.
    data = restored
    t.run([t.bin("initdb"), "-D", data, "-U", "postgres", "--auth=trust", "-E", "UTF8", "--locale=C.UTF-8"])
    with open(os.path.join(data, "postgresql.conf"), "a") as f:
        f.write(f"\nport = {rport + 1}\nlisten_addresses = ''\nunix_socket_directories = '{work}'\n"
                f"shared_preload_libraries = 'dptext'\ndptext.assets_dir = '{a.assets_dir}'\n")
    t.start(data, rport + 1, os.path.join(work, "restored.log"))
    new_boot = dsn(primary, host=work, port=rport + 1, dbname="postgres")
    globals_sql = t.run([t.bin("pg_dumpall"), "-h", p_host, "-p", p_port, "-U", "postgres", "--globals-only"]).stdout
    # Every role of the primary comes over (postgres exists already: that error is expected).
    t.run([t.bin("psql"), "-X", "-q", "-h", work, "-p", str(rport + 1), "-U", "postgres", "-d", "postgres"],
          stdin=globals_sql, check_rc=False)
    dump = os.path.join(work, "src.dump")
    t.run([t.bin("pg_dump"), "-h", p_host, "-p", p_port, "-U", "postgres", "-Fc", "-f", dump, "dptext_copy_src"])
    with psycopg.connect(new_boot, autocommit=True) as b:
        b.execute("CREATE DATABASE dptext_copy_src")
    env = dict(os.environ, PGOPTIONS=f"-c dptext.key_file={a.key_file}")
    restore = t.run([t.bin("pg_restore"), "-h", work, "-p", str(rport + 1), "-U", "postgres",
                     "-d", "dptext_copy_src", "--exit-on-error", dump], env=env, check_rc=False)
    check("pg_restore succeeds (with the key in PGOPTIONS)", restore.returncode == 0, restore.stderr[-1500:])
    new_dsn = dsn(primary, host=work, port=rport + 1, dbname="dptext_copy_src")
    new = psycopg.connect(new_dsn, autocommit=True)
    src.execute("DELETE FROM notes WHERE id = 4")
    back = snapshot(new, dsn(new_dsn, user="copy_masked"))
    # The restored rows were dumped before row 4 was deleted on the primary.
    with psycopg.connect(dsn(new_dsn, user="copy_masked"), autocommit=True) as m:
        back["masked reads"] = rows(m, "SELECT id, note, body FROM notes WHERE id <= 3 ORDER BY id")
    back["sanitized view"] = rows(new, "SELECT id, note, body FROM notes_safe WHERE id <= 3 ORDER BY id")
    for part in source:
        if part == "store":
            # Row 4's entry was filed by the primary's read before the dump.
            ok = back[part][0][0] >= source[part][0][0]
        else:
            ok = back[part] == source[part]
        check(f"restored = source: {part}", ok, f"{back[part]} != {source[part]}")
    restored_prov = rows(new, "SELECT build, event, column_name, mechanism, params::text, randomness, random_id "
                              "FROM dptext.provenance ORDER BY id")
    check("restored provenance keeps every source release (the restore's REFRESH adds its own)",
          all(p in restored_prov for p in provenance), f"{restored_prov}")
    masked_dump = t.run([t.bin("pg_dump"), "-h", work, "-p", str(rport + 1), "-U", "copy_masked",
                         "--data-only", "-t", "notes", "dptext_copy_src"], check_rc=False)
    check("the masked role's own pg_dump of the restored database has data",
          masked_dump.returncode == 0 and "COPY public.notes" in masked_dump.stdout, masked_dump.stderr[-500:])
    check("the masked role's own pg_dump holds no raw value",
          not any(m in masked_dump.stdout for m in MARKERS), masked_dump.stdout[-800:])
    new.close()
    t.stop(data)
    src.close()
    boot = psycopg.connect(primary, autocommit=True)
    boot.execute("DROP DATABASE IF EXISTS dptext_copy_src")
    boot.close()
    shutil.rmtree(work, ignore_errors=True)
    finish()


if __name__ == "__main__":
    main()
