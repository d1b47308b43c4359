"""Empty statements through proxy mode, as raw messages over a connection
psycopg authenticated: a Query of nothing (psql's `;`, a driver's ping),
of only a semicolon or a comment, and an empty Parse, bound, described
and executed. PostgreSQL answers each with EmptyQueryResponse (and NoData
for the Describe), runs nothing, and the session goes on. Prints JSON:
the message types read up to each ReadyForQuery, every DataRow value,
every error SQLSTATE, and whether the session survived.

usage: python3 proxy_mode_empty.py CONNINFO
"""
import json
import sys

from pgraw import Raw


r = Raw(sys.argv[1])
answers = []


def answer():
    """The types of the messages up to the next ReadyForQuery."""
    tags = []
    while True:
        try:
            tag, body = r.msg()
        except OSError:
            tag = None
        if tag is None:
            r.closed = True
            break
        tags.append(tag.decode())
        if tag == b"E":
            fields = {chr(p[0]): p[1:].decode(errors="replace") for p in body.split(b"\0") if p}
            r.errors.append(fields.get("C", ""))
        if tag == b"D":
            r.values.append(body[6:].decode(errors="replace"))
        if tag == b"Z":
            break
    answers.append("".join(tags))


for sql in ["", ";", "-- only a comment"]:
    r.Q(sql)
    answer()
r.P("", "")
r.B("", "")
r.send(b"D", b"P\0")
r.E("")
r.S()
answer()
r.P("e", "  ")
r.send(b"D", b"Se\0")
r.S()
answer()
r.Q("SELECT 42")
answer()
print(json.dumps({"answers": answers, "values": r.values, "errors": r.errors, "closed": r.closed}))
