"""A Python client (psycopg 3) through dptext-proxy: server-side prepared
statements (prepare_threshold=0 prepares on first use), text and binary
results, server metadata and a catalog query. Prints the rows as JSON, for
proxy/tests/proxy.rs to compare with a direct connection.

usage: python3 psycopg_client.py CONNINFO
"""
import json
import sys

import psycopg

QUERIES = [
    ("SELECT id, note, code, n FROM proxy_t WHERE id = %s", (1,)),
    ("SELECT id, note FROM proxy_t ORDER BY id", None),
    ("SELECT array_agg(note ORDER BY id), json_agg(note ORDER BY id) FROM proxy_t", None),
    ("SELECT upper(note), length(note) FROM proxy_t ORDER BY id", None),
    ("SELECT version(), current_user", None),
    ("SELECT a.attname, pg_catalog.format_type(a.atttypid, a.atttypmod) FROM pg_catalog.pg_attribute a "
     "WHERE a.attrelid = 'proxy_t'::regclass AND a.attnum > 0 ORDER BY a.attnum", None),
]

out = []
with psycopg.connect(sys.argv[1], prepare_threshold=0, autocommit=True) as conn:
    for binary in (True, False):
        with conn.cursor(binary=binary) as cur:
            for sql, args in QUERIES:
                for _ in range(2):  # the second run reuses the prepared statement
                    cur.execute(sql, args)
                    rows = cur.fetchall()
                out.append({"sql": sql, "binary": binary, "rows": rows})
    prepared = conn.execute("SELECT count(*) FROM pg_prepared_statements").fetchone()[0]
print(json.dumps({"results": out, "prepared_statements": prepared}, default=str))
