"""Statements parsed at the protocol level while the cursor they name read
plain columns, bound after the cursor was declared again over a
protected column and an expression that fails on one row.

- fetch: `FETCH ALL FROM c`. The server stores a FETCH's rows before it
  sends them; the error must end the session (the proxy's own Describe of
  the portal shows the protected column first), not come back as a plain
  ERROR.
- move: `MOVE FORWARD ALL IN c`, which reads rows without sending them.
  It must be refused when parsed, whatever the cursor holds then.

Prints JSON: for each, the values, error SQLSTATEs, and whether the
session ended.

usage: python3 proxy_mode_stale.py CONNINFO
"""
import json
import sys

from pgraw import Raw


def stale(conninfo, statement):
    r = Raw(conninfo)
    r.Q("BEGIN"); r.ready()
    r.Q("DECLARE c CURSOR FOR SELECT id, ward FROM chan_t"); r.ready()
    r.P("s", statement); r.S(); r.ready()
    r.Q("COMMIT"); r.ready()
    r.Q("BEGIN"); r.ready()
    r.Q("DECLARE c CURSOR FOR SELECT note, 1 / (id - 3) FROM chan_t"); r.ready()
    r.B("", "s"); r.E(""); r.S(); r.ready()
    if not r.closed:
        r.Q("ROLLBACK"); r.ready()
        r.Q("SELECT 'still here'"); r.ready()
    return {"values": r.values, "errors": r.errors, "closed": r.closed}


print(json.dumps({
    "fetch": stale(sys.argv[1], "FETCH ALL FROM c"),
    "move": stale(sys.argv[1], "MOVE FORWARD ALL IN c"),
}))
