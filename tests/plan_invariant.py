#!/usr/bin/env python3
"""The masking boundary, checked on plans: no raw labelled value leaves the
scan node that reads it.

    plan_invariant.py --owner-dsn DSN --key-file PATH [--battery]

Creates its own fixtures (tables `plan_*` with labelled columns, indexes on
them, a partitioned table, an inheritance pair, and a role `plan_masked`
labelled MASKED), then, as that role, runs `EXPLAIN (VERBOSE, FORMAT JSON)`
of every statement below under every planner profile (each `enable_*`
switch that changes the plan shape, forced parallel plans and none, small
`work_mem`). With --battery it also walks the SELECT statements of the leak
battery (`leak_battery.py`, whose fixtures must exist) as `leak_masked`.

In every node of every plan, each expression EXPLAIN prints (outputs, sort,
group, hash and cache keys, join and filter conditions, index conditions)
is searched for a column reference `alias.column` where `alias` is a scan of
a relation and `column` one of its labelled columns, after every
`dptext.mask(...)` call is cut out: a reference outside the mask means a raw
value reaches that node (a sort, hash, aggregate, gather...). No index that
reads a labelled column may appear either. A positive control runs the same
walk on the owner's (unmasked) plans, where raw values do pass through
sorts and index orders: the checker must find them there.

Prints one line per check and 'N passed, M failed'; exits 1 on a failure.
"""
import argparse
import importlib.util
import json
import os
import re
import sys

import psycopg

FIXTURES = """
DO $$ BEGIN
  IF NOT EXISTS (SELECT 1 FROM pg_roles WHERE rolname = 'plan_masked') THEN
    CREATE ROLE plan_masked LOGIN;
  END IF;
END $$;
DROP TABLE IF EXISTS plan_t, plan_u, plan_p, plan_parent CASCADE;
CREATE TABLE plan_t (id int PRIMARY KEY, ward text, note text, name text UNIQUE, pad text,
                     code char(12), patient int);
CREATE INDEX plan_t_ward_note ON plan_t (ward, note);
CREATE INDEX plan_t_lower ON plan_t (lower(name));
CREATE INDEX plan_t_partial ON plan_t (id) WHERE note LIKE '%pain%';
CREATE INDEX plan_t_ward ON plan_t (ward);
CREATE TABLE plan_u (id int PRIMARY KEY, note text);
CREATE TABLE plan_p (id int, note text) PARTITION BY RANGE (id);
CREATE TABLE plan_p1 PARTITION OF plan_p FOR VALUES FROM (0) TO (50);
CREATE TABLE plan_p2 PARTITION OF plan_p FOR VALUES FROM (50) TO (1000);
CREATE INDEX plan_p_note ON plan_p (note);
CREATE TABLE plan_parent (id int, note text);
CREATE TABLE plan_child () INHERITS (plan_parent);
SECURITY LABEL FOR dptext ON COLUMN plan_t.note IS 'MASKED WITH santext(eps => 2)';
SECURITY LABEL FOR dptext ON COLUMN plan_t.name IS 'MASKED WITH deidentify(strategy => typed_placeholder)';
SECURITY LABEL FOR dptext ON COLUMN plan_t.code IS 'MASKED WITH deidentify(strategy => redact)';
SECURITY LABEL FOR dptext ON COLUMN plan_p.note IS 'MASKED WITH santext(eps => 2)';
SECURITY LABEL FOR dptext ON COLUMN plan_parent.note IS 'MASKED WITH santext(eps => 2)';
INSERT INTO plan_t SELECT g, 'w' || (g % 3), 'note ' || md5(g::text) || CASE WHEN g % 4 = 0 THEN ' pain' ELSE '' END,
                          'Name' || md5((g * 7)::text), repeat('p', g % 13), 'C' || g, g % 5
  FROM generate_series(1, 200) g;
INSERT INTO plan_u SELECT g, 'note ' || md5(g::text) FROM generate_series(1, 100) g;
INSERT INTO plan_p SELECT g, 'part ' || md5(g::text) FROM generate_series(1, 99) g;
INSERT INTO plan_child SELECT g, 'child ' || md5(g::text) FROM generate_series(1, 20) g;
ANALYZE plan_t, plan_u, plan_p, plan_parent, plan_child;
SECURITY LABEL FOR dptext ON ROLE plan_masked IS 'MASKED';
GRANT SELECT ON plan_t, plan_u, plan_p, plan_p1, plan_p2, plan_parent, plan_child TO plan_masked;
"""

STATEMENTS = [
    "SELECT * FROM plan_t",
    "SELECT name FROM plan_t",
    "SELECT id, name FROM plan_t",
    "SELECT id FROM plan_t WHERE ward = 'w1' ORDER BY ward",
    "SELECT id, pad FROM plan_t WHERE ward = 'w1' ORDER BY ward, pad",
    "SELECT ward, string_agg(note, ',' ORDER BY id) FROM plan_t GROUP BY ward",
    "SELECT ward, count(DISTINCT note) FROM plan_t GROUP BY ward",
    "SELECT ward, max(length(note)) FROM plan_t GROUP BY ward ORDER BY 2",
    "SELECT DISTINCT note FROM plan_t",
    "SELECT note, count(*) FROM plan_t GROUP BY note",
    "SELECT id, note FROM plan_t ORDER BY note LIMIT 5",
    "SELECT id, note FROM plan_t ORDER BY ward, note",
    "SELECT id, row_number() OVER (PARTITION BY ward ORDER BY note) FROM plan_t",
    "SELECT id, lag(name) OVER (ORDER BY id) FROM plan_t",
    "SELECT a.id, b.id FROM plan_t a JOIN plan_t b ON a.note = b.note",
    "SELECT t.id FROM plan_t t JOIN plan_u u ON u.note = t.note",
    "SELECT t.id, u.id FROM plan_t t JOIN plan_u u ON u.id = t.id ORDER BY t.pad",
    "SELECT t.id, t.note FROM plan_t t JOIN plan_u u ON u.id = t.id",
    "SELECT t.note, u.note FROM plan_t t FULL JOIN plan_u u USING (id)",
    "SELECT j.name, j.pad FROM (plan_t JOIN plan_u USING (id)) AS j ORDER BY j.name",
    "SELECT id FROM plan_t WHERE note LIKE '%a%'",
    "SELECT id FROM plan_t WHERE lower(name) = 'x'",
    "SELECT count(*) FROM plan_t WHERE note LIKE '%pain%'",
    "SELECT * FROM plan_t WHERE id IN (SELECT id FROM plan_t WHERE name > 'M')",
    "SELECT id FROM plan_t WHERE EXISTS (SELECT 1 FROM plan_u u WHERE u.note = plan_t.note)",
    "SELECT id FROM plan_t WHERE note IN (SELECT note FROM plan_u)",
    "WITH c AS MATERIALIZED (SELECT * FROM plan_t) SELECT * FROM c ORDER BY id",
    "WITH RECURSIVE r(n, s) AS (SELECT 1, (SELECT min(note) FROM plan_t) UNION ALL "
    "SELECT n + 1, s FROM r WHERE n < 3) SELECT * FROM r",
    "SELECT (SELECT max(note) FROM plan_t t2 WHERE t2.ward = t.ward) FROM plan_t t",
    "SELECT * FROM plan_t t, LATERAL (SELECT u.id FROM plan_u u WHERE u.note = t.note LIMIT 1) l",
    "SELECT t.id, l.n FROM plan_u t, LATERAL (SELECT count(*) AS n FROM plan_t x WHERE x.note > t.note) l",
    "SELECT note FROM plan_p ORDER BY id",
    "SELECT note, count(*) FROM plan_p GROUP BY note",
    "SELECT id FROM plan_p ORDER BY note",
    "SELECT note FROM plan_parent ORDER BY note",
    "SELECT t FROM plan_t t ORDER BY id",
    "SELECT row_to_json(t) FROM plan_t t ORDER BY t.pad",
    "SELECT id FROM plan_t ORDER BY id",
    "SELECT count(*) FROM plan_t GROUP BY ward",
    "SELECT array_agg(note ORDER BY note) FROM plan_t",
    "SELECT id FROM plan_t UNION SELECT length(note) FROM plan_t",
    "SELECT note FROM plan_t INTERSECT SELECT note FROM plan_u",
    "SELECT note FROM plan_t UNION SELECT note FROM plan_u",
    "SELECT note FROM plan_t WHERE id = 3",
    "SELECT code, count(*) FROM plan_t GROUP BY code",
    "SELECT tableoid::regclass, id, note FROM plan_p",
    "SELECT id, note FROM plan_t FOR SHARE",
    "SELECT percentile_disc(0.5) WITHIN GROUP (ORDER BY note) FROM plan_t",
    "SELECT id FROM plan_t ORDER BY length(note), id",
]

PROFILES = [
    {},
    {"enable_seqscan": "off"},
    {"enable_seqscan": "off", "enable_bitmapscan": "off"},
    {"enable_seqscan": "off", "enable_indexscan": "off"},
    {"enable_hashagg": "off", "enable_hashjoin": "off"},
    {"enable_mergejoin": "off", "enable_nestloop": "off"},
    {"enable_hashjoin": "off", "enable_nestloop": "off"},
    {"enable_hashjoin": "off", "enable_mergejoin": "off", "enable_material": "off"},
    {"enable_sort": "off", "enable_incremental_sort": "on"},
    {"enable_memoize": "on", "enable_hashjoin": "off", "enable_mergejoin": "off"},
    {"work_mem": "64kB", "hash_mem_multiplier": "1"},
    {"max_parallel_workers_per_gather": "0"},
    {"parallel_setup_cost": "0", "parallel_tuple_cost": "0", "min_parallel_table_scan_size": "0",
     "min_parallel_index_scan_size": "0", "max_parallel_workers_per_gather": "4", "PARALLEL": "on"},
    {"enable_partitionwise_join": "on", "enable_partitionwise_aggregate": "on"},
    {"jit": "on", "jit_above_cost": "0"},
]

# Fields of a plan node that name things rather than compute on values.
NAME_FIELDS = {"Node Type", "Relation Name", "Schema", "Alias", "Parent Relationship", "Strategy",
               "Partial Mode", "Join Type", "Subplan Name", "CTE Name", "Index Name", "Command",
               "Scan Direction", "Sort Method", "Function Name", "Operation", "Setop"}


def strip_masks(text):
    """`text` with every `dptext.mask(...)` call cut out (balanced)."""
    out, i = [], 0
    while True:
        j = text.find("dptext.mask(", i)
        if j < 0:
            out.append(text[i:])
            return "".join(out)
        out.append(text[i:j])
        depth, k = 0, j + len("dptext.mask")
        while k < len(text):
            c = text[k]
            if c == "'":  # a quoted literal: skip it whole ('' inside)
                k += 1
                while k < len(text) and not (text[k] == "'" and text[k + 1:k + 2] != "'"):
                    k += 2 if text[k] == "'" else 1
            elif c == "(":
                depth += 1
            elif c == ")":
                depth -= 1
                if depth == 0:
                    break
            k += 1
        i = k + 1


def nodes(plan):
    yield plan
    for child in plan.get("Plans", []):
        yield from nodes(child)


def strings(value):
    if isinstance(value, str):
        yield value
    elif isinstance(value, list):
        for v in value:
            yield from strings(v)
    elif isinstance(value, dict):
        for v in value.values():
            yield from strings(v)


class Checker:
    def __init__(self, owner):
        # Labelled columns per relation, inherited labels included (a
        # partition or child carries its family's).
        names = dict(owner.execute("SELECT oid, relname FROM pg_class WHERE relkind IN ('r', 'p', 'm', 'f')"))
        edges = owner.execute("SELECT inhrelid, inhparent FROM pg_inherits").fetchall()
        family = {rel: {rel} for rel in names}
        for child, parent in edges:
            # one family per connected component of the inheritance graph
            merged = family.get(child, {child}) | family.get(parent, {parent})
            for rel in merged:
                family[rel] = merged
        self.labelled = {}
        for table, col in owner.execute("SELECT table_oid, column_name FROM dptext.rules").fetchall():
            for rel in family.get(table, {table}):
                if rel in names:
                    self.labelled.setdefault(names[rel], set()).add(col)
        self.indexes = {r[0] for r in owner.execute("""
            SELECT i.indexrelid::regclass::text FROM pg_index i
             WHERE EXISTS (SELECT 1 FROM dptext.rules r WHERE r.table_oid = i.indrelid
                             AND (r.attnum = ANY (i.indkey)
                                  OR pg_get_expr(i.indexprs, i.indrelid) ~ ('\\m' || r.column_name || '\\M')
                                  OR pg_get_expr(i.indpred, i.indrelid) ~ ('\\m' || r.column_name || '\\M')))
                OR EXISTS (SELECT 1 FROM pg_inherits h JOIN dptext.rules r ON r.table_oid = h.inhparent
                            WHERE h.inhrelid = i.indrelid
                              AND (SELECT attnum FROM pg_attribute WHERE attrelid = i.indrelid
                                     AND attname = r.column_name) = ANY (i.indkey))""").fetchall()}

    def violations(self, plan):
        """What in `plan` reads a raw labelled value outside its mask."""
        raw = set()
        # Names of nodes that are not relation scans (a masking subquery
        # kept as a Subquery Scan, a CTE scan): what they output is theirs.
        other = {n["Alias"] for n in nodes(plan) if "Alias" in n and "Relation Name" not in n}
        for n in nodes(plan):
            rel, alias = n.get("Relation Name"), n.get("Alias")
            for col in self.labelled.get(rel, ()):
                raw.add((alias, col))
                # A partition or child scan is named after its parent
                # (`plan_p_1`), and nodes above the Append name the
                # parent's columns (`plan_p.note`).
                parent = re.sub(r"_\d+$", "", alias)
                if parent != alias and parent not in other:
                    raw.add((parent, col))
        raw = sorted(raw)
        # EXPLAIN names columns without their relation when the query has
        # one range-table entry: then a bare labelled name is the raw one.
        bare_names = sum(1 for n in nodes(plan) if "Alias" in n) == 1
        patterns = [re.compile(r'(?<![\w."])"?%s"?\."?%s"?(?![\w"])' % (re.escape(a), re.escape(c)))
                    for a, c in raw]
        # Nodes above an Append may name the family's parent by an alias no
        # scan carries (the parent's own range-table entry, `plan_p_1` while
        # its scans are `plan_p_2`, ...): any `<family>_<n>` that is not a
        # node of its own reads the family's raw column.
        for a, c in raw:
            base = re.sub(r"_\d+$", "", a)
            excluded = "|".join(re.escape(o) for o in sorted(other)) or "(?!)"
            patterns.append(re.compile(
                r'(?<![\w."])"?(?!(?:%s)"?\.)%s_\d+"?\."?%s"?(?![\w"])' % (excluded, re.escape(base), re.escape(c))))
        if bare_names:
            patterns += [re.compile(r'(?<![\w."])"?%s"?(?![\w"(])' % re.escape(c)) for _, c in raw]
        found = []
        for n in nodes(plan):
            if n.get("Index Name") in self.indexes:
                found.append(f"{n['Node Type']} uses index {n['Index Name']}")
            for key, value in n.items():
                if key == "Plans" or key in NAME_FIELDS:
                    continue
                if key == "Output" and "Relation Name" in n:
                    # A scan hands its stored tuple up whole where nothing
                    # stores it ("physical" target list); every node that
                    # stores, moves or computes on it names what it takes
                    # in its own fields, which are checked.
                    continue
                for s in strings(value):
                    bare = strip_masks(s)
                    if any(p.search(bare) for p in patterns):
                        found.append(f"{n['Node Type']} {key}: {s}")
        return found


def explain(conn, stmt, profile):
    conn.execute("RESET ALL")
    for k, v in profile.items():
        if k == "PARALLEL":
            name = "debug_parallel_query" if conn.info.server_version >= 160000 else "force_parallel_mode"
            conn.execute(f"SET {name} = {v}")
        else:
            conn.execute(f"SET {k} = '{v}'")
    row = conn.execute(f"EXPLAIN (VERBOSE, FORMAT JSON) {stmt}").fetchone()[0]
    plan = row[0]["Plan"] if isinstance(row, list) else json.loads(row)[0]["Plan"]
    return plan


def battery_statements():
    here = os.path.dirname(os.path.abspath(__file__))
    spec = importlib.util.spec_from_file_location("leak_battery", os.path.join(here, "leak_battery.py"))
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    out = []
    for _, stmts in mod.ATTACKS:
        for s in stmts:
            head = s.lstrip().split(None, 1)[0].upper()
            if head in ("SELECT", "WITH", "TABLE", "VALUES") and "set_config" not in s:
                out.append(s)
    return out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--owner-dsn", required=True)
    ap.add_argument("--key-file", required=True)
    ap.add_argument("--battery", action="store_true", help="also walk the leak battery's statements")
    args = ap.parse_args()
    passed = failed = 0

    def check(name, ok, detail=""):
        nonlocal passed, failed
        if ok:
            passed += 1
            print(f"ok    {name}")
        else:
            failed += 1
            print(f"FAIL  {name}: {detail}")

    with psycopg.connect(args.owner_dsn, autocommit=True) as owner:
        owner.execute(FIXTURES)
        owner.execute("ALTER ROLE plan_masked SET dptext.key_file = %s" % psycopg.sql.quote(args.key_file))
        checker = Checker(owner)
        # The positive control: unmasked plans carry raw values through
        # sorts and index orders, and the checker sees it.
        control = [
            ("SELECT ward, string_agg(note, ',' ORDER BY id) FROM plan_t GROUP BY ward",
             {"enable_hashagg": "off"}),
            ("SELECT id, name FROM plan_t ORDER BY name", {"enable_seqscan": "off"}),
            ("SELECT note FROM plan_p ORDER BY note", {}),
        ]
        for stmt, profile in control:
            found = checker.violations(explain(owner, stmt, profile))
            check(f"control: the owner's plan carries raw values: {stmt}", bool(found), "the checker found none")

    dsns = [(f"{args.owner_dsn} user=plan_masked", STATEMENTS)]
    if args.battery:
        dsns.append((f"{args.owner_dsn} user=leak_masked", battery_statements()))
    # The parallel profile plans with 4 workers a gather: a masked session
    # may not raise max_parallel_workers_per_gather above the value it
    # started with, so the administrator's default for these roles allows
    # it for the run (and is removed after).
    roles = [dsn.rsplit("user=", 1)[1] for dsn, _ in dsns]
    with psycopg.connect(args.owner_dsn, autocommit=True) as owner:
        for role in roles:
            owner.execute(f"ALTER ROLE {role} SET max_parallel_workers_per_gather = 4")
    try:
        check_plans(dsns, checker, check)
    finally:
        with psycopg.connect(args.owner_dsn, autocommit=True) as owner:
            for role in roles:
                owner.execute(f"ALTER ROLE {role} RESET max_parallel_workers_per_gather")

    print(f"\nplan invariant: {passed} passed, {failed} failed")
    sys.exit(1 if failed else 0)


def check_plans(dsns, checker, check):
    """Every statement of each (masked role's DSN, statements) under every
    planner profile: no raw value below the mask."""
    for dsn, statements in dsns:
        with psycopg.connect(dsn, autocommit=True) as conn:
            masked = conn.execute("SELECT dptext.session_masking()").fetchone()[0]
            check(f"{conn.info.user} is masked and keyed", masked["masked"] and masked["keyed"], f"{masked}")
            for stmt in statements:
                bad, refused = [], None
                for profile in PROFILES:
                    try:
                        bad += [f"[{profile}] {v}" for v in checker.violations(explain(conn, stmt, profile))]
                    except psycopg.Error as e:
                        # A statement masking refuses has no plan to check;
                        # nor has one of the battery's that reads what its
                        # own session made (temporary tables, functions).
                        refused = e.sqlstate
                        if e.sqlstate != "42501" and not (
                                statements is not STATEMENTS and e.sqlstate in ("42P01", "3F000", "42883")):
                            bad.append(f"[{profile}] {e.sqlstate} {e}")
                        break
                label = stmt if refused is None else f"{stmt} (no plan: {refused})"
                check(f"no raw value below the mask: {label}", not bad, "; ".join(bad[:4]))


if __name__ == "__main__":
    main()
