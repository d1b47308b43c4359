#!/usr/bin/env bash
# Builds the Debian packages:
#   postgresql-<major>-dptext  the extension for one PostgreSQL major (the
#                              library, control file, install and update
#                              scripts), depending on postgresql-<major>;
#   dptext-tools               the `dptext` command and `dptext-proxy`, with a
#                              hardened systemd unit running the proxy as its
#                              own user and its configuration in /etc/dptext.
# Neither ships models or vectors: `dptext assets fetch` installs them
# (docs/install.md).
#   scripts/package.sh [OUT_DIR]     # default target/debian
#   PG_CONFIG=/path/to/pg_config scripts/package.sh   # another major
#   DPTEXT_PGRX_PACKAGE=DIR scripts/package.sh  # reuse a cargo pgrx package output
# The extension's files go where Debian's postgresql-<major> looks for them
# (/usr/lib/postgresql/<major>/lib, /usr/share/postgresql/<major>), whatever
# the layout of the PostgreSQL it was built against (scripts/pg18.sh builds
# against a private copy of 18).
given_pg_config="${PG_CONFIG:-}"
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
resolve_state
PG_CONFIG="${given_pg_config:-$PG_CONFIG}"
OUT="$(mkdir -p "${1:-$REPO/target/debian}" && cd "${1:-$REPO/target/debian}" && pwd)"
VERSION="$(sed -n 's/^version = "\(.*\)"/\1/p' "$REPO/Cargo.toml" | head -1)"
ARCH="$(dpkg --print-architecture)"
MAJOR="$("$PG_CONFIG" --version | sed -E 's/^PostgreSQL ([0-9]+).*/\1/')"
MAINTAINER="dptext maintainers <dptext@localhost>"
command -v dpkg-deb >/dev/null || die "dpkg-deb is missing (apt-get install dpkg-dev)"

# --- postgresql-<major>-dptext
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
if [ -n "${DPTEXT_PGRX_PACKAGE:-}" ]; then
  # A `cargo pgrx package` output of this tree already built (the test
  # command passes scripts/install-extension.sh's).
  cp -a "$DPTEXT_PGRX_PACKAGE" "$work/pgrx"
else
  ( cd "$REPO" && cargo pgrx package -p dptext -c "$PG_CONFIG" --out-dir "$work/pgrx" ) >&2
fi
pkg="$work/ext"
mkdir -p "$pkg/DEBIAN"
pg_lib="$("$PG_CONFIG" --pkglibdir)"; pg_share="$("$PG_CONFIG" --sharedir)"
deb_lib="/usr/lib/postgresql/$MAJOR/lib"; deb_share="/usr/share/postgresql/$MAJOR"
( cd "$work/pgrx" && find . -type f ) | while read -r rel; do
  path="/${rel#./}"
  case "$path" in
    "$pg_lib"/*) dest="$deb_lib/${path#"$pg_lib"/}" ;;
    "$pg_share"/*) dest="$deb_share/${path#"$pg_share"/}" ;;
    *) die "the pgrx package holds $path, outside $pg_lib and $pg_share" ;;
  esac
  install -D -m 0644 "$work/pgrx/${rel#./}" "$pkg$dest"
done
extdir="$deb_share/extension"
for f in "$REPO"/sql/versions/dptext--*.sql; do
  install -D -m 0644 "$f" "$pkg$extdir/$(basename "$f")"
done
find "$pkg" -name '*.so' -exec chmod 0755 {} +
name="postgresql-$MAJOR-dptext"
cat > "$pkg/DEBIAN/control" <<CONTROL
Package: $name
Version: $VERSION
Architecture: $ARCH
Maintainer: $MAINTAINER
Depends: postgresql-$MAJOR
Section: database
Priority: optional
Homepage: https://localhost/dptext
Description: differentially private text sanitization for PostgreSQL $MAJOR
 The dptext extension: SanText, SanText+, CusText, entity replacement and
 NDD in SQL, masking rules declared as security labels, and roles labelled
 MASKED that only ever read sanitized values. Load it with
 shared_preload_libraries = 'dptext'; models and vectors are installed by
 'dptext assets fetch' (package dptext-tools).
CONTROL
dpkg-deb --root-owner-group --build "$pkg" "$OUT/${name}_${VERSION}_${ARCH}.deb" >&2

# --- dptext-tools
( cd "$REPO" && cargo build --release -q -p dptext-cli -p dptext-proxy ) >&2
tools="$work/tools"
mkdir -p "$tools/DEBIAN" "$tools/usr/bin" "$tools/lib/systemd/system" "$tools/etc/dptext" \
  "$tools/usr/share/doc/dptext-tools"
install -m 0755 "$REPO/target/release/dptext" "$tools/usr/bin/dptext"
install -m 0755 "$REPO/target/release/dptext-proxy" "$tools/usr/bin/dptext-proxy"
install -m 0644 "$REPO/NOTICE" "$tools/usr/share/doc/dptext-tools/NOTICE"
install -m 0644 "$REPO/docs/proxy.md" "$tools/usr/share/doc/dptext-tools/proxy.md"
cat > "$tools/etc/dptext/proxy.toml.example" <<'TOML'
# dptext-proxy configuration (docs/proxy.md, "Configuration"): copy to
# /etc/dptext/proxy.toml, set the upstream and the users, then
#   dptext-proxy check /etc/dptext/proxy.toml && systemctl enable --now dptext-proxy
listen = "127.0.0.1:6433"

[upstream]
host = "/var/run/postgresql"
port = 5432
dbname = "clinical"

[[user]]
name = "analyst"
password = "change me"
masked = true
upstream_user = "analyst"
TOML
cat > "$tools/etc/dptext/proxy.env" <<'ENV'
# Secrets for dptext-proxy (read by its systemd unit; mode 640, group dptext-proxy).
# DPTEXT_PROXY_KEY=<64 hex digits: openssl rand -hex 32>
# DPTEXT_PROXY_UPSTREAM_PASSWORD_ANALYST=...
ENV
chmod 0640 "$tools/etc/dptext/proxy.env"
cat > "$tools/lib/systemd/system/dptext-proxy.service" <<'UNIT'
[Unit]
Description=dptext-proxy: PostgreSQL front end that serves masked users sanitized text
Documentation=file:///usr/share/doc/dptext-tools/proxy.md
After=network-online.target postgresql.service
Wants=network-online.target

[Service]
Type=simple
User=dptext-proxy
Group=dptext-proxy
EnvironmentFile=-/etc/dptext/proxy.env
Environment=DPTEXT_ASSETS=/var/lib/dptext-proxy/assets
ExecStartPre=/usr/bin/dptext-proxy check /etc/dptext/proxy.toml
ExecStart=/usr/bin/dptext-proxy --config /etc/dptext/proxy.toml
Restart=on-failure
RestartSec=2s
StateDirectory=dptext-proxy
StateDirectoryMode=0750
# Hardening: no privileges, a read-only system, only the sockets it needs.
NoNewPrivileges=yes
CapabilityBoundingSet=
AmbientCapabilities=
ProtectSystem=strict
ProtectHome=yes
PrivateTmp=yes
PrivateDevices=yes
ProtectKernelTunables=yes
ProtectKernelModules=yes
ProtectKernelLogs=yes
ProtectControlGroups=yes
ProtectClock=yes
ProtectHostname=yes
ProtectProc=invisible
ProcSubset=pid
RestrictAddressFamilies=AF_INET AF_INET6 AF_UNIX
RestrictNamespaces=yes
RestrictRealtime=yes
RestrictSUIDSGID=yes
LockPersonality=yes
RemoveIPC=yes
UMask=0077
SystemCallArchitectures=native
SystemCallFilter=@system-service
SystemCallFilter=~@privileged @resources
LimitNOFILE=65536

[Install]
WantedBy=multi-user.target
UNIT
printf '/etc/dptext/proxy.toml.example\n/etc/dptext/proxy.env\n' > "$tools/DEBIAN/conffiles"
cat > "$tools/DEBIAN/postinst" <<'SH'
#!/bin/sh
set -e
if [ "$1" = configure ]; then
  if ! getent passwd dptext-proxy >/dev/null; then
    adduser --system --group --home /var/lib/dptext-proxy --no-create-home dptext-proxy >/dev/null
  fi
  chgrp dptext-proxy /etc/dptext/proxy.env && chmod 0640 /etc/dptext/proxy.env
  if [ -d /run/systemd/system ]; then systemctl daemon-reload >/dev/null || true; fi
fi
exit 0
SH
cat > "$tools/DEBIAN/postrm" <<'SH'
#!/bin/sh
set -e
if [ -d /run/systemd/system ]; then systemctl daemon-reload >/dev/null || true; fi
if [ "$1" = purge ] && getent passwd dptext-proxy >/dev/null; then
  deluser --system dptext-proxy >/dev/null || true
fi
exit 0
SH
chmod 0755 "$tools/DEBIAN/postinst" "$tools/DEBIAN/postrm"
cat > "$tools/DEBIAN/control" <<CONTROL
Package: dptext-tools
Version: $VERSION
Architecture: $ARCH
Maintainer: $MAINTAINER
Depends: adduser, libc6
Section: database
Priority: optional
Description: dptext command line and PostgreSQL proxy
 dptext: sanitize text files, fetch and verify the models and vectors
 (dptext assets fetch), evaluate mechanisms and detection.
 dptext-proxy: a pgwire front end for analytics tools; masked users get
 sanitized text (database mode with the dptext extension, or proxy mode).
 Runs as its own user under a hardened systemd unit (dptext-proxy.service,
 configured in /etc/dptext).
CONTROL
dpkg-deb --root-owner-group --build "$tools" "$OUT/dptext-tools_${VERSION}_${ARCH}.deb" >&2
ls "$OUT"/*.deb
