"""An extended-protocol message fails and the client sends the rest of its
batch only after the error has come back (as a slow or loaded client's
messages can arrive): the server discards everything up to the Sync, so
the proxy must expect no answer to those messages. Before, an Execute
read after the error waited for an answer that never came and the session
ended at the next ReadyForQuery ("the server sent 'Z' where proxy mode
expected another answer"): a test passed or failed with the machine's load.

- late: Bind of a statement that does not exist; after its error, an
  Execute, a pipelined simple Query, then Sync; then a plain query.
- refused: the same, with a Parse the proxy refuses (LISTEN) after the
  error: the proxy's own Sync for the refusal ends the server's skip.

Prints JSON: for each, the values, error SQLSTATEs, and whether the
session ended.

usage: python3 proxy_mode_late_sync.py CONNINFO
"""
import json
import sys

from pgraw import Raw


def late(conninfo, refused):
    r = Raw(conninfo)
    r.B("", "no_such_statement")
    r.ready(stop=b"E")  # the Bind's error is back before the rest is sent
    if refused:
        r.P("l", "LISTEN chan_channel")
    r.E("")
    r.Q("SELECT 'skipped'")
    r.S(); r.ready()
    if not r.closed:
        r.Q("SELECT 'still here'"); r.ready()
    return {"values": r.values, "errors": r.errors, "closed": r.closed}


print(json.dumps({
    "late": late(sys.argv[1], False),
    "refused": late(sys.argv[1], True),
}))
