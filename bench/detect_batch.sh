#!/usr/bin/env bash
# Detection throughput: the per-line pass one line per model call against
# 4, 8 and 32 lines per call, on the 60 clinical notes, in the same script.
# Prints notes/s of each and the ratio to one line a call; every run must
# score the same.
#
#   scripts/setup.sh          # once: builds the CLI, fetches the assets
#   bench/detect_batch.sh [REPS]
source "$(dirname "${BASH_SOURCE[0]}")/../scripts/lib.sh"
resolve_state
REPS="${1:-3}"
BIN="$REPO/target/release/dptext"
NOTES="$REPO/tests/data/clinical"
export DPTEXT_ASSETS="${DPTEXT_ASSETS:-$STATE/assets}"

best() {  # the fastest of REPS runs: notes/s, and the recall line
  local batch="$1" top=0 line
  for _ in $(seq "$REPS"); do
    out="$("$BIN" eval-detect "$NOTES" --batch "$batch" 2>/dev/null)"
    rate="$(head -1 <<<"$out" | sed -E 's/.*\(([0-9.]+) notes\/s\).*/\1/')"
    top="$(awk -v a="$top" -v b="$rate" 'BEGIN { print (b > a) ? b : a }')"
    line="$(grep -m1 '^| \*\*all' <<<"$out")"
  done
  echo "$top|$line"
}

base="$(best 1)"
echo "per-line pass, 1 line a call: ${base%%|*} notes/s"
for b in 4 8 32; do
  r="$(best "$b")"
  [ "${r#*|}" = "${base#*|}" ] || { echo "batch $b scores differently:"; echo "${base#*|}"; echo "${r#*|}"; exit 1; }
  awk -v a="${base%%|*}" -v r="${r%%|*}" -v b="$b" 'BEGIN { printf "per-line pass, %2d lines a call: %6.2f notes/s, ratio to 1: %.2fx\n", b, r, r / a }'
done
