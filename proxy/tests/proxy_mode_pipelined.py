"""An error in an extended-protocol batch with a simple Query pipelined
before its Sync: the server would discard the Query (and its
ReadyForQuery); the proxy refuses a Query inside an unfinished batch and
sends a Sync in its place, so the client reads the refusal and two
ReadyForQuery (the Query's, then its own Sync's). Then a plain query, and
a protected EXECUTE whose stored rows fail on one row: it must end the
session. Prints JSON: the plain query's values, the error SQLSTATEs in
order, and whether the session ended.

usage: python3 proxy_mode_pipelined.py CONNINFO
"""
import json
import sys

from pgraw import Raw

r = Raw(sys.argv[1])
r.Q("PREPARE p AS SELECT note, 1 / (id - 3) AS z FROM chan_t WHERE id < 5"); r.ready()
r.P("", "SELECT 1 / 0"); r.B("", ""); r.E(""); r.Q("SELECT 'skipped'"); r.S(); r.ready(); r.ready()
r.Q("SELECT 1"); r.ready()
plain = list(r.values)
r.Q("EXECUTE p"); r.ready()
print(json.dumps({"plain": plain, "errors": r.errors, "closed": r.closed}))
