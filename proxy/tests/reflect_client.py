"""Table reflection as SQLAlchemy 2.1 and pandas do it, through dptext-proxy:
`Table(..., autoload_with=engine)` (columns, primary key, foreign keys,
indexes, table options: the reflection that reads
current_setting('default_table_access_method')) and pandas
`read_sql_table`. Prints JSON for proxy/tests/proxy_mode.rs.

usage: python3 reflect_client.py USER PASSWORD HOST PORT DBNAME TABLE
"""
import json
import sys

import pandas as pd
import sqlalchemy as sa

user, password, host, port, dbname, table = sys.argv[1:7]
engine = sa.create_engine(sa.URL.create(
    "postgresql+psycopg", username=user, password=password or None,
    host=host, port=int(port), database=dbname))
t = sa.Table(table, sa.MetaData(), autoload_with=engine)
df = pd.read_sql_table(table, engine).sort_values("id", ignore_index=True)
print(json.dumps({
    "sqlalchemy": sa.__version__,
    "columns": [c.name for c in t.columns],
    "primary_key": [c.name for c in t.primary_key.columns],
    "rows": json.loads(df.to_json(orient="records")),
}, default=str))
