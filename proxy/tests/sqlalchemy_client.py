"""SQLAlchemy 2 (postgresql+psycopg) and pandas through dptext-proxy: table
and view reflection from the catalogs (sqlalchemy.inspect), pandas
read_sql_table on a table and a view, and read_sql_query with a bound
parameter. Prints everything as JSON, for proxy/tests/proxy.rs to compare
with a direct connection as the same upstream role.

usage: python3 sqlalchemy_client.py USER PASSWORD HOST PORT DBNAME
(HOST may be a unix-socket directory; PASSWORD may be empty)
"""
import json
import sys

import pandas as pd
import sqlalchemy as sa

user, password, host, port, dbname = sys.argv[1:6]
url = sa.URL.create(
    "postgresql+psycopg",
    username=user,
    password=password or None,
    host=host,
    port=int(port),
    database=dbname,
)
engine = sa.create_engine(url)


def frame(df):
    """A DataFrame as plain JSON: column names, dtypes, and the rows (NULL and
    NaN as null)."""
    return {
        "columns": list(df.columns),
        "dtypes": {c: str(t) for c, t in df.dtypes.items()},
        "rows": json.loads(df.to_json(orient="records")),
    }


insp = sa.inspect(engine)
reflected = {
    name: [
        {"name": c["name"], "type": str(c["type"]), "nullable": c["nullable"]}
        for c in insp.get_columns(name)
    ]
    for name in ("proxy_t", "proxy_v")
}
out = {
    "tables": sorted(t for t in insp.get_table_names() if t.startswith("proxy_")),
    "views": sorted(v for v in insp.get_view_names() if v.startswith("proxy_")),
    "columns": reflected,
    "primary_key": insp.get_pk_constraint("proxy_t")["constrained_columns"],
    "table": frame(pd.read_sql_table("proxy_t", engine).sort_values("id", ignore_index=True)),
    "view": frame(pd.read_sql_table("proxy_v", engine).sort_values("id", ignore_index=True)),
    "query": frame(
        pd.read_sql_query(
            sa.text("SELECT id, note, upper(note) AS shout FROM proxy_t WHERE id >= :id ORDER BY id"),
            engine,
            params={"id": 2},
        )
    ),
}
with engine.connect() as conn:
    out["whoami"] = conn.execute(sa.text("SELECT current_user")).scalar_one()
engine.dispose()
print(json.dumps(out, default=str))
