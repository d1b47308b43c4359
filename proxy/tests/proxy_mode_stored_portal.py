"""Portals of a protocol-level `EXECUTE` (or `FETCH`), whose rows the
server stores whole the first time it runs them: read in part, rows would
be built (raw values beside a padding) and never sent. An Execute with a
row limit, and a Bind to a named portal (which SQL `FETCH` could read in
part), must be refused; an Execute of the whole unnamed portal works.
Prints JSON: per step, its error SQLSTATEs and values.

usage: python3 proxy_mode_stored_portal.py CONNINFO
"""
import json
import sys

from pgraw import Raw

r = Raw(sys.argv[1])
r.Q("PREPARE p AS SELECT id, note FROM chan_t"); r.ready()
steps = {}


def step(name, send):
    r.errors, r.values = [], []
    send()
    r.ready()
    steps[name] = {"errors": r.errors, "values": r.values}


step("row_limit", lambda: (r.P("", "EXECUTE p"), r.B("", ""), r.E("", 1), r.S()))
step("named_portal", lambda: (r.P("s", "EXECUTE p"), r.B("q", "s"), r.S()))
step("whole", lambda: (r.P("", "EXECUTE p"), r.B("", ""), r.E("", 0), r.S()))
steps["closed"] = r.closed
print(json.dumps(steps))
