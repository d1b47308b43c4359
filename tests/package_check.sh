#!/usr/bin/env bash
# The Debian packages (scripts/package.sh) installed on this machine's
# PostgreSQL: the extension package installs with apt-get, a new cluster
# creates the extension and runs a query, the package removes cleanly and
# the cluster starts and serves without it; dptext-tools installs its
# commands, its user and a unit systemd accepts, and removes cleanly. The
# files the development install put where the package goes are saved first
# and put back after, so the rest of the test command is undisturbed.
#   tests/package_check.sh DEB_DIR WORK_DIR PORT
source "$(dirname "${BASH_SOURCE[0]}")/../scripts/lib.sh"
resolve_state
DEBS="$(cd "$1" && pwd)"; WORK="$2"; PORT="${3:-54336}"
[ "$(id -u)" = 0 ] || { echo "SKIPPED: installing packages needs root"; exit 0; }
ext_deb="$(ls "$DEBS"/postgresql-"$PG_MAJOR"-dptext_*.deb)"
tools_deb="$(ls "$DEBS"/dptext-tools_*.deb)"
pass=0; fail=0
ok() { echo "ok: $1"; pass=$((pass + 1)); }
bad() { echo "FAILED: $1"; fail=$((fail + 1)); }
t() {
  local name="$1" out; shift
  if out="$("$@" 2>&1)"; then ok "$name"; else bad "$name"; tail -5 <<<"$out" | sed 's/^/    /'; fi
}

rm -rf "$WORK"; mkdir -p "$WORK/save"
# Save the development install's files that the package replaces.
mapfile -t files < <(dpkg-deb -c "$ext_deb" | awk '$1 !~ /^d/ {sub(/^\./, "", $6); print $6}')
for f in "${files[@]}"; do [ -e "$f" ] && install -D -m "$(stat -c %a "$f")" "$f" "$WORK/save$f"; done
restore() {
  local f
  for f in "${files[@]}"; do
    if [ -e "$WORK/save$f" ]; then
      install -D -m "$(stat -c %a "$WORK/save$f")" "$WORK/save$f" "$(dirname "$f")/.$(basename "$f").restore.$$"
      mv -f "$(dirname "$f")/.$(basename "$f").restore.$$" "$f"
    fi
  done
}
cleanup() {
  as_user "$PG_BIN/pg_ctl" -D "$WORK/data" -m fast stop >/dev/null 2>&1 || true
  dpkg -r "postgresql-$PG_MAJOR-dptext" dptext-tools >/dev/null 2>&1 || true
  restore || echo "could not put the development install back: run scripts/install-extension.sh" >&2
}
trap cleanup EXIT

t "apt-get installs $(basename "$ext_deb")" apt-get install -y -q "$ext_deb"
t "dpkg lists the extension package as installed" dpkg -s "postgresql-$PG_MAJOR-dptext"
owned=0
for f in "${files[@]}"; do
  [ "$(dpkg -S "$f" 2>/dev/null | cut -d: -f1)" = "postgresql-$PG_MAJOR-dptext" ] && owned=$((owned + 1))
done
t "the package owns its ${#files[@]} files" test "$owned" = "${#files[@]}"

chown "$RUN_USER" "$WORK"
as_user "$PG_BIN/initdb" -D "$WORK/data" -U postgres --auth=trust -E UTF8 --locale=C.UTF-8 >/dev/null
cat >> "$WORK/data/postgresql.conf" <<CONF
port = $PORT
listen_addresses = ''
unix_socket_directories = '$WORK'
shared_preload_libraries = 'dptext'
dptext.assets_dir = '$DPTEXT_ASSETS'
CONF
t "a new cluster starts with the packaged library preloaded" as_user "$PG_BIN/pg_ctl" -D "$WORK/data" -l "$WORK/log" -w start
q() { psql -X -q -tA -h "$WORK" -p "$PORT" -U postgres -d postgres -v ON_ERROR_STOP=1 -c "$1"; }
t "CREATE EXTENSION dptext in it" q "CREATE EXTENSION dptext"
t "the extension is the packaged version" test "$(q "SELECT extversion FROM pg_extension WHERE extname = 'dptext'")" = "$(dpkg-query -W -f '${Version}' "postgresql-$PG_MAJOR-dptext")"
t "a query runs: santext" test -n "$(q "SET dptext.seed = 7; SELECT santext('the patient reports chest pain', 3)")"
q "CREATE DATABASE upd" >/dev/null
t "the update path is packaged: CREATE EXTENSION ... VERSION '0.1.0', then UPDATE" \
  psql -X -q -h "$WORK" -p "$PORT" -U postgres -d upd -v ON_ERROR_STOP=1 \
  -c "CREATE EXTENSION dptext VERSION '0.1.0'" -c "ALTER EXTENSION dptext UPDATE"
q "CREATE TABLE plain (id int, t text); INSERT INTO plain VALUES (1, 'kept')" >/dev/null
as_user "$PG_BIN/pg_ctl" -D "$WORK/data" -m fast -w stop >/dev/null

t "apt-get removes the extension package" apt-get remove -y -q "postgresql-$PG_MAJOR-dptext"
gone=1; for f in "${files[@]}"; do [ -e "$f" ] && gone=0; done
t "its files are gone" test "$gone" = 1
# The cluster without it: drop the preload, start, read the data.
sed -i "/^shared_preload_libraries = 'dptext'/d; /^dptext\./d" "$WORK/data/postgresql.conf"
t "the cluster starts without the package" as_user "$PG_BIN/pg_ctl" -D "$WORK/data" -l "$WORK/log" -w start
t "and serves its data" test "$(q "SELECT t FROM plain WHERE id = 1")" = kept
t "a database without the extension is unharmed" q "CREATE DATABASE after_removal"
as_user "$PG_BIN/pg_ctl" -D "$WORK/data" -m fast -w stop >/dev/null

t "apt-get installs $(basename "$tools_deb")" apt-get install -y -q "$tools_deb"
t "dptext is installed" /usr/bin/dptext --version
t "dptext-proxy is installed" test -x /usr/bin/dptext-proxy
t "the proxy's system user exists" getent passwd dptext-proxy
t "systemd accepts the unit" systemd-analyze verify /lib/systemd/system/dptext-proxy.service
t "the unit runs as its own user, without privileges" \
  grep -q '^User=dptext-proxy' /lib/systemd/system/dptext-proxy.service
t "the secrets file is not world-readable" test "$(stat -c %a /etc/dptext/proxy.env)" = 640
t "apt-get purges dptext-tools" apt-get purge -y -q dptext-tools
t "its commands are gone" test ! -e /usr/bin/dptext-proxy
t "its user is gone" sh -c '! getent passwd dptext-proxy'

echo "$pass passed, $fail failed"
[ "$fail" = 0 ]
