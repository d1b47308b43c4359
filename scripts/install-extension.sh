#!/usr/bin/env bash
# Builds the extension and installs it into the PostgreSQL that pg_config
# names, without hurting servers that have it loaded: every file is written
# beside its target and renamed over it, so a running backend keeps the
# library it mapped (the old inode) and a new one maps the new file whole.
# (`cargo pgrx install` rewrites dptext.so in place: backends that had it
# mapped crashed with signal 11.)
#   scripts/install-extension.sh [release|debug]
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
resolve_state
PROFILE="${1:-release}"
if [ "$(id -u)" = 0 ]; then SUDO=""; else SUDO="sudo"; fi

out="$STATE/pgrx-package"
rm -rf "$out"
args=(-p dptext -c "$PG_CONFIG" --out-dir "$out")
[ "$PROFILE" = debug ] && args+=(--debug)
( cd "$REPO" && cargo pgrx package "${args[@]}" )

# The package mirrors the installation's absolute paths.
( cd "$out" && find . -type f ) | while read -r rel; do
  src="$out/${rel#./}"
  dest="/${rel#./}"
  mode=0644
  case "$dest" in *.so) mode=0755 ;; esac
  tmp="$(dirname "$dest")/.$(basename "$dest").dptext-new.$$"
  $SUDO install -D -m "$mode" "$src" "$tmp"
  $SUDO mv -f "$tmp" "$dest"
  echo "installed $dest"
done

# Earlier releases' scripts and the update scripts between releases
# (sql/versions): CREATE EXTENSION dptext VERSION '0.1.0' and ALTER
# EXTENSION dptext UPDATE find them beside the current one.
extdir="$("$PG_CONFIG" --sharedir)/extension"
for src in "$REPO"/sql/versions/dptext--*.sql; do
  dest="$extdir/$(basename "$src")"
  tmp="$extdir/.$(basename "$src").dptext-new.$$"
  $SUDO install -D -m 0644 "$src" "$tmp"
  $SUDO mv -f "$tmp" "$dest"
  echo "installed $dest"
done
