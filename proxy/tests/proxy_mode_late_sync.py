"""An extended-protocol message fails and the client sends the rest of its
batch only after the error has come back (as a slow or loaded client's
messages can arrive): the server discards everything up to the Sync, so
the proxy must expect no answer to those messages. Before, an Execute
read after the error waited for an answer that never came and the session
ended at the next ReadyForQuery ("the server sent 'Z' where proxy mode
expected another answer"): a test passed or failed with the machine's load.

- late: Bind of a statement that does not exist; after its error, an
  Execute and a Flush, then Sync; then a plain query.
- query: the same with a simple Query pipelined before the Sync: refused
  (a Query inside an unfinished extended-protocol batch), answered with
  the refusal and its own ReadyForQuery, then the Sync's.
- refused: the same with a Parse the proxy refuses (LISTEN) after the
  error: the proxy's own Sync for the refusal ends the server's skip.
- timeout: the twelfth review's desynchronization. With a
  statement_timeout, a Parse without Sync, then a pause: the server fails
  at the next message it reads, here a Flush, and discards the rest up to
  the Sync. The proxy had no record of the Flush, took the error for the
  pipelined Query's, and matched every later answer to the message before
  it (a protected EXECUTE's error then came back as a plain ERROR, the
  session kept: a way to exact lengths). The session must stay in step:
  a plain query answers, and a protected EXECUTE whose stored rows fail
  ends the session.

Prints JSON: for each, the values, error SQLSTATEs, and whether the
session ended.

usage: python3 proxy_mode_late_sync.py CONNINFO
"""
import json
import sys
import time

from pgraw import Raw


def late(conninfo, case):
    r = Raw(conninfo)
    r.B("", "no_such_statement")
    r.ready(stop=b"E")  # the Bind's error is back before the rest is sent
    if case == "refused":
        r.P("l", "LISTEN chan_channel")
    r.E("")
    r.send(b"H")
    if case == "query":
        r.Q("SELECT 'skipped'")
    r.S(); r.ready()
    if case == "query":
        r.ready()
    if not r.closed:
        r.Q("SELECT 'still here'"); r.ready()
    return {"values": r.values, "errors": r.errors, "closed": r.closed}


def timeout(conninfo):
    r = Raw(conninfo)
    r.Q("PREPARE p AS SELECT note, 1 / (id - 3) AS z FROM chan_t WHERE id < 5"); r.ready()
    r.Q("SET statement_timeout = 200"); r.ready()
    r.P("s", "SELECT 1")
    time.sleep(0.6)
    r.send(b"H"); r.Q("SELECT 'skipped'"); r.S(); r.ready(); r.ready()
    if not r.closed:
        r.Q("RESET statement_timeout"); r.ready()
        r.Q("SELECT 'still here'"); r.ready()
    plain = list(r.values)
    r.Q("EXECUTE p"); r.ready()
    return {"values": plain, "errors": r.errors, "closed": r.closed}


print(json.dumps({
    "late": late(sys.argv[1], "late"),
    "query": late(sys.argv[1], "query"),
    "refused": late(sys.argv[1], "refused"),
    "timeout": timeout(sys.argv[1]),
}))
