# Shared settings of the project's scripts; sourced, not run.
set -euo pipefail

REPO="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
# Every script works from the repository root, wherever it was called from.
cd "$REPO"
# An assets directory given by the caller is kept; otherwise resolve_state picks one.
if [ -n "${DPTEXT_ASSETS:-}" ]; then export DPTEXT_ASSETS_SET=1; fi
PG_MAJOR=15
PG_BIN="/usr/lib/postgresql/$PG_MAJOR/bin"
PG_CONFIG="$PG_BIN/pg_config"
PGRX_VERSION=0.18.1
# Throwaway clusters run as this unprivileged user (PostgreSQL refuses root).
RUN_USER="${DPTEXT_RUN_USER:-dptext}"
export PATH="$HOME/.cargo/bin:$PATH"
command -v cargo >/dev/null 2>&1 || { echo "error: cargo not found: install Rust (rustup, 1.85 or newer) first" >&2; exit 1; }

step() { printf '\n==> %s\n' "$*" >&2; }
die() { printf 'error: %s\n' "$*" >&2; exit 1; }

# Runs a command as the cluster user, keeping the environment it needs.
as_user() {
  if [ "$(id -un)" = "$RUN_USER" ]; then "$@"; else sudo -u "$RUN_USER" -H env DPTEXT_ASSETS="$DPTEXT_ASSETS" "$@"; fi
}

# Where throwaway clusters and (by default) assets live: target/ when the
# cluster user can reach it, else a private folder under /var/tmp (a clone
# under /root is not readable by other users).
resolve_state() {
  STATE="$REPO/target"
  if [ "$(id -un)" != "$RUN_USER" ] && ! sudo -u "$RUN_USER" test -r "$REPO/Cargo.toml" 2>/dev/null; then
    STATE="/var/tmp/dptext-$(printf '%s' "$REPO" | sha1sum | cut -c1-10)"
  fi
  mkdir -p "$STATE"
  # A folder someone else created first could hold planted assets.
  [ -O "$STATE" ] || die "$STATE exists but belongs to another user: remove it or set DPTEXT_ASSETS"
  if [ -z "${DPTEXT_ASSETS_SET:-}" ]; then export DPTEXT_ASSETS="$STATE/assets"; fi
  PGDEMO="$STATE/demo-pg"
  # The throwaway cluster's masking key (scripts/cluster.sh makes it): masked
  # roles read labelled columns only under a key (ALTER ROLE r SET
  # dptext.key_file = '$DPTEXT_KEY_FILE').
  export DPTEXT_KEY_FILE="$PGDEMO/dptext.key"
  PGPORT="${DPTEXT_PG_PORT:-54329}"
  export PGHOST="$PGDEMO/run" PGPORT PGUSER=postgres PGDATABASE=dptext_demo
}
