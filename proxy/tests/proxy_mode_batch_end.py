"""How a protected result ends, row by row: a short row, then a row whose
protected value the proxy refuses (over the engine's input limit), in one
batch. Every ending of a protected result must lose the batch it was in,
whatever ended it (before, this ending sent the short row first while a
value the sanitizer refused lost it, which told which limit a value
broke). Prints JSON: the rows' values before the session ended, the
error SQLSTATEs, whether it ended.

usage: python3 proxy_mode_batch_end.py CONNINFO
"""
import json
import sys

from pgraw import Raw

r = Raw(sys.argv[1])
r.Q("SELECT id, note FROM chan_t WHERE id IN (1, 3) ORDER BY id"); r.ready()
print(json.dumps({"values": r.values, "errors": r.errors, "closed": r.closed}))
