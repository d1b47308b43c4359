"""Extended-protocol attacks on proxy mode's bookkeeping, sent as raw
messages over a connection psycopg authenticated: a Parse that the server
refuses must not replace the statement the server keeps; a Bind to a name
the server refuses must not replace the portal; DECLARE and PREPARE
executed as portals, and Close, must be followed. Prints JSON: every
DataRow value, every error SQLSTATE, and whether the session survived.

usage: python3 proxy_mode_protocol.py CONNINFO
"""
import json
import sys

from pgraw import Raw


r = Raw(sys.argv[1])
# 1. A Parse the server refuses (the name exists) must not replace it.
r.P("s1", "SELECT note FROM pm_t"); r.S(); r.ready()
r.P("s1", "SELECT ward FROM pm_t"); r.S(); r.ready()
r.B("", "s1"); r.E(""); r.S(); r.ready()
# 2. A Bind the server refuses (the cursor exists) must not replace it.
r.Q("BEGIN"); r.ready()
r.Q("DECLARE c1 CURSOR FOR SELECT note FROM pm_t"); r.ready()
r.P("pw", "SELECT ward FROM pm_t"); r.S(); r.ready()
r.B("c1", "pw"); r.S(); r.ready()
r.E("c1"); r.S(); r.ready()
r.Q("COMMIT"); r.ready()
# 3. DECLARE executed as a portal, after a plain portal of that name closed.
r.P("pw2", "SELECT ward FROM pm_t"); r.B("k", "pw2"); r.C(b"P", "k"); r.S(); r.ready()
r.Q("BEGIN"); r.ready()
r.P("", "DECLARE k CURSOR FOR SELECT note FROM pm_t"); r.B("", ""); r.E(""); r.S(); r.ready()
r.E("k"); r.S(); r.ready()
r.Q("COMMIT"); r.ready()
# 4. PREPARE executed as a portal, after a plain statement of that name closed.
r.P("pp", "SELECT ward FROM pm_t"); r.C(b"S", "pp"); r.S(); r.ready()
r.P("", "PREPARE pp AS SELECT note FROM pm_t"); r.B("", ""); r.E(""); r.S(); r.ready()
r.B("", "pp"); r.E(""); r.S(); r.ready()
# 5. The session still works.
r.Q("SELECT 42"); r.ready()
print(json.dumps({"values": r.values, "errors": r.errors, "closed": r.closed}))
