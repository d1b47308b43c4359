"""Sends one simple query over a connection psycopg authenticated and
counts the DataRow messages that arrive before the answer ends (an error,
ReadyForQuery, or the session's end): what a raw client sees of a result
whose later rows end the session. Prints JSON: {"rows": N, "errors": [...]}.

usage: python3 proxy_mode_rows_out.py CONNINFO SQL
"""
import json
import os
import socket
import struct
import sys

import psycopg

conn = psycopg.connect(sys.argv[1], autocommit=True)
s = socket.socket(fileno=os.dup(conn.pgconn.socket))
s.settimeout(30)
body = sys.argv[2].encode() + b"\0"
s.sendall(b"Q" + struct.pack("!i", len(body) + 4) + body)
buf, rows, errors = b"", 0, []
while True:
    while len(buf) < 5 or len(buf) < 1 + struct.unpack("!i", buf[1:5])[0]:
        try:
            d = s.recv(1 << 20)
        except (socket.timeout, OSError):
            d = b""
        if not d:
            print(json.dumps({"rows": rows, "errors": errors}))
            sys.exit(0)
        buf += d
    n = struct.unpack("!i", buf[1:5])[0]
    tag, msg, buf = buf[:1], buf[5:1 + n], buf[1 + n:]
    if tag == b"D":
        rows += 1
    elif tag == b"E":
        fields = {chr(p[0]): p[1:].decode(errors="replace") for p in msg.split(b"\0") if p}
        errors.append(fields.get("C", ""))
    elif tag == b"Z":
        print(json.dumps({"rows": rows, "errors": errors}))
        sys.exit(0)
