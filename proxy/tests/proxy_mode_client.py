"""psycopg 3 through dptext-proxy in proxy mode: the extended protocol
(parameters, binary results, a pipeline), a refusal, and repeated asks.
Prints JSON for proxy/tests/proxy_mode.rs.

usage: python3 proxy_mode_client.py CONNINFO
"""
import json
import sys

import psycopg

out = {}
with psycopg.connect(sys.argv[1], autocommit=True) as c:
    cur = c.cursor()
    cur.execute("SELECT id FROM pm_t WHERE ward = %s ORDER BY id", ("north",))
    out["ids"] = cur.fetchall()
    cur.execute("SELECT id, note, patient FROM pm_t WHERE id > %s", (0,))
    out["rows"] = sorted(cur.fetchall())
    cur.execute("SELECT note FROM pm_t WHERE id = %s", (2,), binary=True)
    out["binary_rows"] = cur.fetchall()
    try:
        cur.execute("SELECT id FROM pm_t WHERE note LIKE %s", ("Seen%",))
        out["refused"] = "not refused: %r" % (cur.fetchall(),)
    except psycopg.Error as e:
        out["refused"] = str(e)
    cur.execute("SELECT %s::int", (1,))
    out["after_refusal"] = cur.fetchall()
    first = cur.execute("SELECT note FROM pm_t WHERE id = 1").fetchall()
    with psycopg.connect(sys.argv[1], autocommit=True) as c2:
        second = c2.execute("SELECT note FROM pm_t WHERE id = %s", (1,)).fetchall()
    out["repeat_equal"] = first == second
print(json.dumps(out))
