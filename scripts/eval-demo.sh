#!/usr/bin/env bash
# Measures every mechanism on the demo notes with `dptext eval`: the
# figures and plots docs/choosing-epsilon.md shows.
#
#   scripts/eval-demo.sh [OUT]       # default OUT: target/eval/demo
#
# Writes, under OUT:
#   demo_notes.csv     the 240 demo notes with their complaint class
#   report/            all mechanisms at eps 1,2,3,5,8, with the classifier
#                      protocol, the Query Attack and p0 of the CusText
#                      paper's words (results.csv, p0.csv, *.png)
#   custext-k50/       CusText at K = 50, eps 1, 2, 3, 5, 10 (the paper's Tables 6 and 8),
#                      token level without stopwords, record and token level
#                      with stopwords kept
#   santext-nx/        SanText's N_x against eps, GloVe and WordPiece
#                      (the SanText paper's Figure 5)
#   vocabulary/        SanText and CusText with a vocabulary released from
#                      5,000 notes of the demo's generator (dptext vocab
#                      build, eps 1) against the default one, at equal eps
# Needs the set-up (scripts/setup.sh); about 15 minutes on 2 cores, most of
# it NDD and the K = 50 CusText mapping (built once into the assets).
# Environment: DPTEXT_EVAL_SAMPLE (values per report, default 240).
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
resolve_state
OUT="${1:-$REPO/target/eval/demo}"
SAMPLE="${DPTEXT_EVAL_SAMPLE:-240}"
mkdir -p "$OUT"

step "build the CLI"
cargo build --release -q -p dptext-cli
dptext() { "$REPO/target/release/dptext" "$@"; }

step "the demo notes with their complaint class"
python3 "$REPO/scripts/gen_demo_data.py" --csv > "$OUT/demo_notes.csv"
notes=(--format csv --field note --label complaint "$OUT/demo_notes.csv" --sample "$SAMPLE")

step "every mechanism at eps 1,2,3,5,8"
dptext eval "${notes[@]}" --mechanism santext,santext_plus,custext,deidentify,ndd \
  --eps 1,2,3,5,8 --queries 10 --attack-values 20 --p0-words happy,car,she,mary \
  --out "$OUT/report" | tee "$OUT/report.txt"

step "CusText at K = 50 (the paper's Table 6: rows T, R^+ and T^+)"
dptext eval "${notes[@]}" --mechanism custext:k=50,level=token,keep_stopwords=false \
  --mechanism custext:k=50,level=record --mechanism custext:k=50,level=token \
  --eps 1,2,3,5,10 --queries 0 --p0-words happy,car,she,mary \
  --out "$OUT/custext-k50" | tee "$OUT/custext-k50.txt"

step "SanText's N_x against eps (the paper's Figure 5)"
dptext eval "${notes[@]}" --mechanism santext --mechanism santext:embedding=wordpiece \
  --eps 1,2,3,5,8,15 --queries 0 --p0-words happy,car,she,mary \
  --out "$OUT/santext-nx" | tee "$OUT/santext-nx.txt"

step "a vocabulary released from the notes, against the default one"
# 240 values are too few for a DP set union (at eps 1 a word must appear in
# hundreds of values), so the vocabulary is released from 5,000 notes of the
# same generator with another seed: the demo table's bigger sibling.
python3 "$REPO/scripts/gen_demo_data.py" --csv --rows 5000 --seed 2027 > "$OUT/notes_5000.csv"
dptext vocab build --input "$OUT/notes_5000.csv" --format csv --field note \
  --eps 1 --delta 1e-5 --name demo-notes --replace --seed 1 | tee "$OUT/vocabulary-build.txt"
dptext eval "${notes[@]}" --mechanism santext,custext --eps 1,2,3,5 --vocabulary demo-notes \
  --queries 0 --out "$OUT/vocabulary" | tee "$OUT/vocabulary.txt"

echo "written under $OUT" >&2
