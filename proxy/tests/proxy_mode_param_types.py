"""A Parse whose parameter types the client names by OID: each OID given
is used for `SELECT $1::text`, executed with the value 'x' (or the value
given after it, `OID=VALUE`). Prints JSON: for each OID, the error
message or the value that came back.

usage: python3 proxy_mode_param_types.py CONNINFO OID[=VALUE]...
"""
import json
import sys

import psycopg

conn = psycopg.connect(sys.argv[1], autocommit=True)
pg = conn.pgconn
out = {}
for i, arg in enumerate(sys.argv[2:]):
    oid, _, value = arg.partition("=")
    name = f"s{i}".encode()
    r = pg.prepare(name, b"SELECT $1::text", [int(oid)])
    if r.error_message:
        out[oid] = {"error": r.error_message.decode()}
        continue
    r = pg.exec_prepared(name, [value.encode() if value else b"x"])
    if r.error_message:
        out[oid] = {"error": r.error_message.decode()}
    else:
        out[oid] = {"value": r.get_value(0, 0).decode() if r.ntuples else None}
print(json.dumps(out))
