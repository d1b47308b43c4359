"""What the end-to-end check scripts share (store_check.py, upgrade_check.py,
cluster_copies.py): one line per check, a summary line, the exit status, and
short ways to read rows."""
import sys

RESULTS = []


def check(name, ok, detail=""):
    """Records one check and prints it (with `detail` when it failed)."""
    RESULTS.append(bool(ok))
    print(f"{'ok' if ok else 'FAILED'}: {name}" + ("" if ok or not detail else f" -- {detail}"))


def rows(conn, sql, args=None):
    """Every row of a query."""
    with conn.cursor() as cur:
        cur.execute(sql, args)
        return cur.fetchall()


def one(conn, sql, args=None):
    """The first value of a query."""
    return rows(conn, sql, args)[0][0]


def finish():
    """Prints 'N passed, M failed' and exits 1 on a failure."""
    passed = sum(RESULTS)
    failed = len(RESULTS) - passed
    print(f"{passed} passed, {failed} failed")
    sys.exit(1 if failed else 0)
