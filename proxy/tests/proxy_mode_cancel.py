"""A cancel of a masked read through proxy mode, as raw messages over a
connection psycopg authenticated: a Query whose protected column the
proxy sanitizes row batch by row batch, cancelled (CancelRequest, over
its own connection, with the key the proxy gave) once the first rows came.
The server has sent its whole result by then; only the proxy can stop.
Prints JSON: the rows before and after the cancel, the error SQLSTATEs,
the seconds from the cancel to the error and to ReadyForQuery, what a
query after it returned, and whether the session survived.

usage: python3 proxy_mode_cancel.py CONNINFO SQL [simple|extended]
"""
import json
import sys
import time

from pgraw import Raw


r = Raw(sys.argv[1])
r.s.settimeout(120)
if len(sys.argv) > 3 and sys.argv[3] == "extended":
    r.P("", sys.argv[2])
    r.B("", "")
    r.E("")
    r.S()
else:
    r.Q(sys.argv[2])
before, after, errors = 0, 0, []
cancelled = error_at = ready_at = None
while True:
    tag, body = r.msg()
    if tag is None:
        r.closed = True
        break
    if tag == b"D":
        r.values.append(body[6:].decode(errors="replace"))
        if cancelled is None:
            before += 1
            cancelled = time.monotonic()
            r.conn.cancel()
        else:
            after += 1
    elif tag == b"E":
        fields = {chr(p[0]): p[1:].decode(errors="replace") for p in body.split(b"\0") if p}
        errors.append(fields.get("C", ""))
        if error_at is None:
            error_at = time.monotonic()
    elif tag == b"Z":
        ready_at = time.monotonic()
        break
r.values = []
if not r.closed:
    r.Q("SELECT 42")
    r.ready()
print(json.dumps({
    "before": before,
    "after": after,
    "errors": errors,
    "to_error": None if error_at is None or cancelled is None else error_at - cancelled,
    "to_ready": None if ready_at is None or cancelled is None else ready_at - cancelled,
    "then": r.values,
    "closed": r.closed,
}))
