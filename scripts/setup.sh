#!/usr/bin/env bash
# Installs whatever is missing, and only that: Debian packages, cargo-pgrx,
# the pgrx PostgreSQL configuration, the cluster user and the assets.
# Safe to run again; a second run on a set-up machine takes seconds.
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

if [ "$(id -u)" = 0 ]; then SUDO=""; else SUDO="sudo"; fi

step "debian packages"
need=()
for p in postgresql-$PG_MAJOR postgresql-server-dev-$PG_MAJOR libclang-dev clang sudo pkg-config libssl-dev ca-certificates openssl python3-pip; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || need+=("$p")
done
# python3-pip is only needed where python3 has no pip of its own.
if python3 -m pip --version >/dev/null 2>&1; then
  need=("${need[@]/python3-pip}")
fi
need=($(printf '%s\n' "${need[@]}" | grep -v '^$' || true))
if [ ${#need[@]} -gt 0 ]; then
  echo "installing: ${need[*]}" >&2
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${need[@]}" >/dev/null
  # Debian creates and starts a default cluster; the project uses its own.
  $SUDO pg_ctlcluster $PG_MAJOR main stop 2>/dev/null || true
else
  echo "all present" >&2
fi

step "cargo-pgrx $PGRX_VERSION"
if ! cargo pgrx --version 2>/dev/null | grep -q " $PGRX_VERSION\$"; then
  cargo install cargo-pgrx --version "=$PGRX_VERSION" --locked
else
  echo "present" >&2
fi
if ! grep -q "^pg$PG_MAJOR = \"$PG_CONFIG\"" "$HOME/.pgrx/config.toml" 2>/dev/null; then
  cargo pgrx init --pg$PG_MAJOR "$PG_CONFIG"
fi

step "cluster user $RUN_USER"
if ! id "$RUN_USER" >/dev/null 2>&1; then
  $SUDO useradd --system --create-home --shell /bin/bash "$RUN_USER"
fi
echo "present" >&2

resolve_state
step "assets in $DPTEXT_ASSETS"
cargo build --release -q -p dptext-cli
"$REPO/target/release/dptext" assets fetch
# The default CusText mapping (about 40 s once; a PostgreSQL backend cannot
# write into the assets directory, so it is built here and read there).
"$REPO/target/release/dptext" custext-map
# The cluster user reads the assets.
chmod -R a+rX "$DPTEXT_ASSETS"
chmod a+rx "$STATE"

step "python client for the proxy tests (psycopg 3)"
PYLIB="$STATE/pylib"
if ! PYTHONPATH="$PYLIB" python3 -c "import psycopg" 2>/dev/null; then
  python3 -m pip install -q --root-user-action=ignore --target "$PYLIB" "psycopg[binary]==3.2.13"
fi
echo "present in $PYLIB" >&2
