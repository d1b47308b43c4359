#!/usr/bin/env python3
"""What the demo's masked analyst reads: are the patients gone and the medicine kept?

Reads every row of the demo table `records` twice: as its owner (raw) and as
the role `analyst`, which the demo labels MASKED (what an analyst's tool
gets). For each of the 240 notes it checks

- names: the patient's full name ("Kathryn Herrera", in any case, also as
  `kathryn.herrera` in an e-mail address) anywhere in the masked row (note
  or patient column), and the surname alone as a capitalised word in the
  masked note (a surrogate that happens to draw the same surname counts as
  kept: the figure can only overstate what leaks);
- the doctor's surname after "Dr." kept;
- clinical terms: the presenting complaint, the drug and the clinical
  phrases of the findings (the terms a clinician reads the note for, listed
  below independently of the detector) that the raw note has, all present
  in the masked note.

It prints the figures and fails (exit 1) when a target is missed:
full names kept 0 of 240 (`--max-full-names`), patient-column values kept 0,
notes with every clinical term kept at least 95% (`--min-clinical`), and
surnames kept at most `--max-surnames` (what detection recall implies:
surnames that are also common words, such as Long or Bell, are the misses).

    PYTHONPATH=$STATE/pylib python3 tests/demo_quality.py \
        --owner-dsn "host=... port=... user=postgres dbname=dptext_demo" \
        --analyst-dsn "host=... port=... user=analyst dbname=dptext_demo"
"""
import argparse
import json
import pathlib
import re
import sys

import psycopg

# The complaints and drugs the notes were written around, from the
# generator itself (scripts/gen_demo_data.py), not from the detector.
sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent.parent / "scripts"))
from gen_demo_data import COMPLAINTS, DRUGS  # noqa: E402

FINDING_TERMS = [
    "Blood pressure", "heart rate", "ECG", "normal sinus rhythm", "Chest X-ray",
    "no acute abnormality", "elevated white blood cell count", "CT scan of the abdomen",
    "appendicitis", "Oxygen saturation", "room air", "Blood glucose",
    "Physical examination", "cardiology",
]
TERMS = [t.lower() for t in COMPLAINTS + DRUGS + FINDING_TERMS]


def rows(dsn):
    with psycopg.connect(dsn, autocommit=True) as conn:
        cur = conn.execute("SELECT id, patient, note FROM records ORDER BY id")
        return {i: (p, n) for i, p, n in cur.fetchall()}


def word(w):
    return re.compile(r"(?<![A-Za-z])" + re.escape(w) + r"(?![A-Za-z])")


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--owner-dsn", required=True)
    ap.add_argument("--analyst-dsn", required=True)
    ap.add_argument("--max-full-names", type=int, default=0)
    ap.add_argument("--max-surnames", type=int, default=12)
    ap.add_argument("--min-clinical", type=float, default=0.95)
    ap.add_argument("--json", help="write the figures to this file too")
    args = ap.parse_args()

    raw, masked = rows(args.owner_dsn), rows(args.analyst_dsn)
    if sorted(raw) != sorted(masked):
        sys.exit("demo_quality: the analyst reads other rows than the owner")
    n = len(raw)
    full, surname, column, doctor, clinical_notes, clinical_ok = [], [], [], 0, 0, 0
    terms_total = terms_kept = 0
    for i, (patient, note) in raw.items():
        mpatient, mnote = masked[i]
        first, last = patient.split(" ", 1)
        row = f"{mpatient}\n{mnote}".lower()
        if patient.lower() in row or f"{first}.{last}".lower() in row:
            full.append(i)
        if mpatient == patient:
            column.append(i)
        if word(last).search(mnote):
            surname.append(i)
        m = re.search(r"Dr\. ([A-Z][a-z]+)", note)
        if m and word(m.group(1)).search(mnote):
            doctor += 1
        have = [t for t in TERMS if t in note.lower()]
        if have:
            clinical_notes += 1
            kept = [t for t in have if t in mnote.lower()]
            terms_total += len(have)
            terms_kept += len(kept)
            if len(kept) == len(have):
                clinical_ok += 1
    figures = {
        "notes": n,
        "full_names_kept": len(full),
        "patient_column_kept": len(column),
        "surnames_kept": len(surname),
        "doctor_surnames_kept": doctor,
        "notes_with_clinical_terms": clinical_notes,
        "notes_keeping_every_clinical_term": clinical_ok,
        "clinical_terms": terms_total,
        "clinical_terms_kept": terms_kept,
    }
    print(f"demo masked view, {n} notes read as the masked role:")
    print(f"  full names kept:            {len(full)} of {n} {full[:10] if full else ''}")
    print(f"  patient column kept:        {len(column)} of {n}")
    print(f"  surnames kept:              {len(surname)} of {n} {surname[:10] if surname else ''}")
    print(f"  doctors' surnames kept:     {doctor}")
    print(f"  notes keeping every clinical term: {clinical_ok} of {clinical_notes}"
          f" ({terms_kept} of {terms_total} terms)")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(figures, f, indent=1)
    failed = []
    if len(full) > args.max_full_names:
        failed.append(f"{len(full)} full names kept (at most {args.max_full_names})")
    if column:
        failed.append(f"{len(column)} patient-column values kept")
    if len(surname) > args.max_surnames:
        failed.append(f"{len(surname)} surnames kept (at most {args.max_surnames})")
    if clinical_notes == 0 or clinical_ok < args.min_clinical * clinical_notes:
        failed.append(f"{clinical_ok} of {clinical_notes} notes keep every clinical term "
                      f"(at least {args.min_clinical:.0%})")
    if failed:
        sys.exit("demo_quality: " + "; ".join(failed))
    print("demo_quality ok")


if __name__ == "__main__":
    main()
