#!/usr/bin/env python3
"""Masked copies of NDD schedules, without the model, from a dump of every term.

    DPTEXT_ASSETS=$PWD/target/assets NDD_BENCH_DUMP=/tmp/ndd-terms.json \
        cargo bench -p dptext-core --bench ndd
    bench/ndd_schedules.py /tmp/ndd-terms.json

The dump holds, per note, per sentence, per span, per candidate, every term of
the candidate's NDD as [position, distance, weight, divergence]. This script
counts the masked copies (rows run by the model) that each way of choosing
each span's winner needs, and prints their ratio to the naive computation:

- naive: per candidate, its copies and the original's again: 2(L - m);
- full evaluation (`Scorer::score`): the original once, every candidate;
- `Scorer::choose` as it is (simulated here: its count must equal the
  benchmark's "ours, + exact pruning" line), and the schedule before it;
- two oracles that know every term in advance and run the winner in full and,
  for each loser, the fewest terms that lift its sum above the winner's NDD:
  taking them nearest first, or largest first (no exact schedule can run
  fewer copies than the latter: it must complete the winner, and must see
  enough of each loser to prove it loses);
- `choose` told the winner in advance (what a perfect guess of the leader
  would save).

Calls are estimated as one per 64 rows of each round's two phases (originals,
then edits) per note. Standard library only.
"""

import json
import math
import sys

MARGIN = 1e-9  # PRUNE_MARGIN in core/src/mechanisms/ndd/mod.rs
BATCH = 64


def total(terms):
    s = 0.0
    for t in terms:
        s += t[2] * t[3]
    return s


def nearest(terms):
    return sorted(range(len(terms)), key=lambda x: (terms[x][1], x))


class Candidate:
    def __init__(self, terms):
        self.terms = terms
        self.order = nearest(terms)
        self.done = 0
        self.partial = 0.0
        self.pruned = False
        self.winner = False

    def complete(self):
        return self.done == len(self.terms)


def schedule(notes, first_jobs=None, first_distance=None, step0=1, growth=1.5,
             by_leader=True, told_winner=False):
    """Rows and calls of `choose`'s rounds with these parameters."""
    rows = calls = 0
    for note in notes:
        windows = []
        for w in note:
            spans = []
            for cands in w["spans"]:
                cs = [Candidate(t) for t in cands]
                if cs:
                    tots = [total(c.terms) for c in cs]
                    cs[min(range(len(cs)), key=lambda i: (tots[i], i))].winner = True
                spans.append(cs)
            windows.append((spans, set()))

        def advance(take):
            nonlocal rows, calls
            edits = originals = 0
            for spans, seen in windows:
                for cs in spans:
                    for c, n in [(c, take(cs, c)) for c in range(len(cs))]:
                        t = cs[c]
                        for x in t.order[t.done:t.done + n]:
                            t.partial += t.terms[x][2] * t.terms[x][3]
                            if t.terms[x][0] not in seen:
                                seen.add(t.terms[x][0])
                                originals += 1
                        edits += min(n, len(t.terms) - t.done)
                        t.done = min(len(t.terms), t.done + n)
            rows += edits + originals
            calls += math.ceil(edits / BATCH) + math.ceil(originals / BATCH)

        def prune_and_reorder(cs):
            done = [t for t in cs if t.complete()]
            if not done:
                return
            best = min(done, key=lambda t: total(t.terms))
            bound = total(best.terms)
            key = [t[2] * t[3] for t in best.terms]
            for t in cs:
                if t.complete():
                    continue
                if t.partial > bound * (1 + MARGIN):
                    t.pruned = True
                elif by_leader:
                    t.order[t.done:] = sorted(
                        t.order[t.done:], key=lambda x: (-key[x], t.terms[x][1], x))

        everything = 10**9
        if told_winner:
            advance(lambda cs, c: everything if cs[c].winner else 0)
        else:
            if first_distance is not None:
                advance(lambda cs, c: sum(1 for x in cs[c].terms if x[1] <= first_distance))
            else:
                advance(lambda cs, c: first_jobs)

            def leader(cs, c):
                lead = min(range(len(cs)), key=lambda i: (cs[i].partial, i))
                return everything if c == lead else 0
            advance(leader)
        step = step0
        while True:
            more = False
            for spans, _ in windows:
                for cs in spans:
                    prune_and_reorder(cs)
                    more |= any(not t.pruned and not t.complete() for t in cs)
            if not more:
                break
            n = max(1, int(step))
            advance(lambda cs, c: 0 if cs[c].pruned or cs[c].complete() else n)
            step *= growth
    return rows, calls


def oracle(notes, largest_first):
    rows = 0
    for note in notes:
        for w in note:
            seen = set()
            for cands in w["spans"]:
                if not cands:
                    continue
                tots = [total(t) for t in cands]
                win = min(range(len(cands)), key=lambda i: (tots[i], i))
                for c, terms in enumerate(cands):
                    if c == win:
                        order = range(len(terms))
                    elif largest_first:
                        order = sorted(range(len(terms)), key=lambda x: -terms[x][2] * terms[x][3])
                    else:
                        order = nearest(terms)
                    s = 0.0
                    for x in order:
                        rows += 1
                        seen.add(terms[x][0])
                        s += terms[x][2] * terms[x][3]
                        if c != win and s > tots[win] * (1 + MARGIN):
                            break
            rows += len(seen)
    return rows


def main():
    notes = json.load(open(sys.argv[1] if len(sys.argv) > 1 else "/tmp/ndd-terms.json"))
    naive = full = 0
    for note in notes:
        for w in note:
            seen = set()
            for cands in w["spans"]:
                for terms in cands:
                    naive += 2 * len(terms)
                    full += len(terms)
                    seen.update(t[0] for t in terms)
            full += len(seen)
    print(f"{'naive':58s} {naive:6d} copies")
    lines = [
        ("full evaluation (Scorer::score)", full, None),
        ("choose: 2 nearest, leader, by leader's terms, x1.5", *schedule(notes, first_jobs=2)),
        ("choose before (distance <= 2, nearest first, x2 from 2)",
         *schedule(notes, first_distance=2, step0=2, growth=2, by_leader=False)),
        ("choose told the winner", *schedule(notes, told_winner=True)),
        ("oracle, each loser's nearest terms", oracle(notes, False), None),
        ("oracle, each loser's largest terms (lower bound)", oracle(notes, True), None),
    ]
    for name, rows, calls in lines:
        extra = f", about {calls} calls" if calls is not None else ""
        print(f"{name:58s} {rows:6d} copies: {naive / rows:.2f}x{extra}")


if __name__ == "__main__":
    main()
