"""Raw protocol messages over a connection psycopg authenticated, for the
proxy-mode tests that must send what no driver sends (a Parse kept for
later, a Bind to a taken name, messages pipelined before one Sync).
Collects every DataRow value and error SQLSTATE, and whether the
connection closed.
"""
import os
import socket
import struct

import psycopg


class Raw:
    def __init__(self, dsn):
        self.conn = psycopg.connect(dsn, autocommit=True)
        self.s = socket.socket(fileno=os.dup(self.conn.pgconn.socket))
        self.s.settimeout(10)
        self.buf = b""
        self.values, self.errors, self.closed = [], [], False

    def send(self, tag, body=b""):
        self.s.sendall(tag + struct.pack("!i", len(body) + 4) + body)

    def Q(self, sql):
        self.send(b"Q", sql.encode() + b"\0")

    def P(self, name, sql):
        self.send(b"P", name.encode() + b"\0" + sql.encode() + b"\0" + struct.pack("!h", 0))

    def B(self, portal, stmt):
        self.send(b"B", portal.encode() + b"\0" + stmt.encode() + b"\0" + struct.pack("!hhh", 0, 0, 0))

    def E(self, portal="", max_rows=0):
        self.send(b"E", portal.encode() + b"\0" + struct.pack("!i", max_rows))

    def C(self, kind, name):
        self.send(b"C", kind + name.encode() + b"\0")

    def S(self):
        self.send(b"S")

    def msg(self):
        while True:
            if len(self.buf) >= 5:
                n = struct.unpack("!i", self.buf[1:5])[0]
                if len(self.buf) >= 1 + n:
                    tag, body = self.buf[:1], self.buf[5:1 + n]
                    self.buf = self.buf[1 + n:]
                    return tag, body
            d = self.s.recv(65536)
            if not d:
                return None, None
            self.buf += d

    def ready(self, stop=b"Z"):
        """Reads to the next ReadyForQuery (or message `stop`), keeping
        values and errors."""
        while True:
            try:
                tag, body = self.msg()
            except (socket.timeout, OSError):
                self.closed = True
                return
            if tag is None:
                self.closed = True
                return
            if tag == b"D":
                n, i = struct.unpack("!h", body[:2])[0], 2
                for _ in range(n):
                    ln = struct.unpack("!i", body[i:i + 4])[0]
                    i += 4
                    if ln >= 0:
                        self.values.append(body[i:i + ln].decode(errors="replace"))
                        i += ln
            elif tag == b"E":
                fields = {chr(p[0]): p[1:].decode(errors="replace") for p in body.split(b"\0") if p}
                self.errors.append(fields.get("C", ""))
            if tag == stop:
                return
