#!/usr/bin/env python3
"""Generate the labelled detection evaluation set (tests/data/detection_eval.jsonl).

Sentences are filled from the project's own templates and name lists
(scripts/gen_demo_data.py), so every sensitive span is known by construction:
each line is {"text": ..., "spans": [[start, end, label], ...]} with byte
offsets into the UTF-8 text. Deterministic:

    python3 scripts/gen_detection_eval.py --n 600 > tests/data/detection_eval.jsonl
"""
import argparse
import json
import os
import random
import sys

sys.path.insert(0, os.path.dirname(__file__))
from gen_demo_data import CITIES, GIVEN, HOSPITALS, SURNAMES  # noqa: E402

STREETS = ["Oak Street", "Maple Avenue", "Cedar Lane", "Elm Road", "Pine Street", "Lake Drive",
           "Hill Road", "Park Avenue", "Church Street", "Mill Lane"]
STATES = ["IL", "CA", "TX", "NY", "OH", "WA", "MA", "GA"]
MONTHS = ["January", "February", "March", "April", "May", "June", "July", "August",
          "September", "October", "November", "December"]

# Each template is a list of literal strings and (kind) slots.
TEMPLATES = [
    ["Patient ", "PERSON", " was admitted on ", "DATE", " with chest pain."],
    ["Please call ", "PERSON", " at ", "PHONE", " to confirm the appointment."],
    ["Send the results to ", "EMAIL", " before ", "DATE", "."],
    ["", "PERSON", " lives at ", "ADDRESS", " and was seen by Dr. ", "SURNAME", "."],
    ["The SSN on file for ", "PERSON", " is ", "SSN", "."],
    ["Record ", "MRN", " belongs to ", "PERSON", ", born ", "DATE", "."],
    ["Dr. ", "SURNAME", " referred the patient to ", "ORG", " on ", "DATE", "."],
    ["Payment by card ", "CARD", " was declined; contact ", "EMAIL", "."],
    ["", "PERSON", ", who moved to ", "CITY", " last year, reports dizziness."],
    ["Follow-up with ", "PERSON", " scheduled for ", "DATE", " at ", "ORG", "."],
    ["The family of ", "PERSON", " can be reached at ", "PHONE", " or ", "EMAIL", "."],
    ["Discharge summary: ", "PERSON", ", MRN ", "MRNNUM", ", address ", "ADDRESS", "."],
    # Harder: lower-case names, names first, run-on notes, and sentences
    # with no PII at all (every detection there is a false positive).
    ["spoke with ", "LOWERPERSON", " today about the new dosage."],
    ["", "PERSON", " reports that her daughter ", "GIVEN", " will drive her home."],
    ["pt seen ", "DATE", " bp 130/85 hr 72 called ", "PHONE", " no answer"],
    ["The patient reported mild pain in the left arm after the fall."],
    ["Blood pressure was 120/80 and the dose was increased to 500 mg twice daily."],
    ["No fever, no cough, follow up in two weeks if symptoms persist."],
    ["Labs drawn at 7 am; potassium 4.1, sodium 139, glucose 98."],
]

KIND_LABEL = {"PERSON": "PERSON", "SURNAME": "PERSON", "LOWERPERSON": "PERSON", "GIVEN": "PERSON", "DATE": "DATE", "PHONE": "CONTACT",
              "EMAIL": "CONTACT", "ADDRESS": "LOCATION", "CITY": "LOCATION", "SSN": "ID",
              "MRN": "ID", "MRNNUM": "ID", "CARD": "ID", "ORG": "ORGANIZATION"}


def luhn_complete(prefix):
    digits = [int(c) for c in prefix]
    for check in range(10):
        d = digits + [check]
        s = 0
        for i, x in enumerate(reversed(d)):
            if i % 2 == 1:
                x *= 2
                if x > 9:
                    x -= 9
            s += x
        if s % 10 == 0:
            return prefix + str(check)
    raise ValueError(prefix)


def fill(kind, r):
    if kind == "PERSON":
        return f"{r.choice(GIVEN)} {r.choice(SURNAMES)}"
    if kind == "LOWERPERSON":
        return f"{r.choice(GIVEN)} {r.choice(SURNAMES)}".lower()
    if kind == "GIVEN":
        return r.choice(GIVEN)
    if kind == "SURNAME":
        return r.choice(SURNAMES)
    if kind == "DATE":
        y, m, d = r.randint(1940, 2025), r.randint(1, 12), r.randint(1, 28)
        return r.choice([f"{MONTHS[m - 1]} {d}, {y}", f"{m:02d}/{d:02d}/{y}", f"{y}-{m:02d}-{d:02d}", f"{d} {MONTHS[m - 1]} {y}"])
    if kind == "PHONE":
        a, b, c = r.randint(201, 989), r.randint(200, 999), r.randint(1000, 9999)
        return r.choice([f"({a}) {b}-{c}", f"{a}-{b}-{c}", f"+1 {a} {b} {c}", f"+44 20 {b} {c}"])
    if kind == "EMAIL":
        return f"{r.choice(GIVEN).lower()}.{r.choice(SURNAMES).lower()}{r.randint(1, 99)}@{r.choice(['example.org', 'mail.example.com', 'clinic.example.net'])}"
    if kind == "ADDRESS":
        return f"{r.randint(1, 9999)} {r.choice(STREETS)}, {r.choice(CITIES)}, {r.choice(STATES)} {r.randint(10000, 99999)}"
    if kind == "CITY":
        return r.choice(CITIES)
    if kind == "SSN":
        return f"{r.randint(100, 665)}-{r.randint(10, 99)}-{r.randint(1000, 9999)}"
    if kind == "MRN":
        return f"MRN-{r.randint(100000, 999999)}"
    if kind == "MRNNUM":
        return f"MRN-{r.randint(100000, 999999)}"
    if kind == "CARD":
        return luhn_complete(r.choice(["4", "51", "37"]) + "".join(str(r.randint(0, 9)) for _ in range(14)))[:16]
    if kind == "ORG":
        return r.choice(HOSPITALS)
    raise ValueError(kind)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=600)
    ap.add_argument("--seed", type=int, default=7)
    args = ap.parse_args()
    r = random.Random(args.seed)
    for _ in range(args.n):
        t = r.choice(TEMPLATES)
        text, spans = b"", []
        for i, part in enumerate(t):
            if i % 2 == 0:
                text += part.encode()
            else:
                value = fill(part, r)
                if part == "CARD" and len(value) == 16:
                    value = luhn_complete(value[:15])
                start = len(text)
                text += value.encode()
                spans.append([start, len(text), KIND_LABEL[part]])
        print(json.dumps({"text": text.decode(), "spans": spans}, ensure_ascii=False))


if __name__ == "__main__":
    main()
