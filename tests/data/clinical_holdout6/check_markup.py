"""Validate the inline markup of clinical_holdout6 and print per-category counts.

Adapted from clinical_holdout5/check_markup.py. Checks, per note: categories are known, span text has no
padding, AGE spans are numbers of 90 or more, no stray '{{', '}}' or '|' outside spans (except '|' in the
notes listed in PIPE_OK, which carry real HL7 v2 field separators), raw length (markup removed) is
1,800-3,500 characters. Checks for the set: at least 32 notes, at least 900 PHI spans and at least 700
clinical spans. Exit status 1 if anything fails.
"""
import re, glob, collections, sys, os

PHI = "NAME DATE AGE LOCATION HOSPITAL ORGANIZATION PHONE EMAIL URL IP SSN MRN ACCOUNT HEALTH_PLAN LICENSE DEVICE VEHICLE ID".split()
CLIN = "DRUG LAB ANATOMY".split()
MIN_LEN, MAX_LEN = 1800, 3500
MIN_NOTES, MIN_PHI, MIN_CLIN = 32, 900, 700
PIPE_OK = {'n29.txt'}  # HL7 v2 with real '|' field separators

span = re.compile(r'\{\{([A-Z_]+)\|([^{}|\n]+)\}\}')
here = os.path.dirname(os.path.abspath(__file__))
tot = collections.Counter()
ok = True
files = sorted(glob.glob(os.path.join(here, 'n*.txt')))
for f in files:
    t = open(f, encoding='utf-8').read()
    errs = []
    for m in span.finditer(t):
        if m.group(1) not in PHI + CLIN:
            errs.append('badcat ' + m.group(1))
        if m.group(2) != m.group(2).strip():
            errs.append('pad ' + m.group(0))
        if m.group(1) == 'AGE' and not (m.group(2).isdigit() and int(m.group(2)) >= 90):
            errs.append('age<90 or not a number ' + m.group(0))
        tot[m.group(1)] += 1
    rest = span.sub('', t)
    toks = ('{{', '}}') if os.path.basename(f) in PIPE_OK else ('{{', '}}', '|')
    for tok in toks:
        if tok in rest:
            i = rest.find(tok)
            errs.append('stray %r near %r' % (tok, rest[max(0, i - 40):i + 40]))
    raw = span.sub(lambda m: m.group(2), t)
    n = len(raw)
    phi = sum(1 for m in span.finditer(t) if m.group(1) in PHI)
    clin = sum(1 for m in span.finditer(t) if m.group(1) in CLIN)
    if not MIN_LEN <= n <= MAX_LEN:
        errs.append('len %d' % n)
    print(os.path.basename(f), n, phi, clin, '; '.join(errs))
    if errs:
        ok = False

nphi = sum(v for k, v in tot.items() if k in PHI)
nclin = sum(v for k, v in tot.items() if k in CLIN)
print('notes', len(files))
print('PHI', nphi, {k: tot[k] for k in PHI})
print('CLIN', nclin, {k: tot[k] for k in CLIN})
if len(files) < MIN_NOTES:
    print('too few notes'); ok = False
if nphi < MIN_PHI:
    print('too few PHI spans'); ok = False
if nclin < MIN_CLIN:
    print('too few clinical spans'); ok = False
print('OK' if ok else 'FAIL')
sys.exit(0 if ok else 1)
