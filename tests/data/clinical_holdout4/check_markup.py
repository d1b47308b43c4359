import re,glob,collections,sys,os
PHI="NAME DATE AGE LOCATION HOSPITAL ORGANIZATION PHONE EMAIL URL IP SSN MRN ACCOUNT HEALTH_PLAN LICENSE DEVICE VEHICLE ID".split()
CLIN="DRUG LAB ANATOMY".split()
span=re.compile(r'\{\{([A-Z_]+)\|([^{}|\n]+)\}\}')
tot=collections.Counter(); ok=True
for f in sorted(glob.glob(os.path.join(os.path.dirname(__file__),'n*.txt'))):
    t=open(f,encoding='utf-8').read()
    errs=[]
    for m in span.finditer(t):
        if m.group(1) not in PHI+CLIN: errs.append('badcat '+m.group(1))
        if m.group(2)!=m.group(2).strip(): errs.append('pad '+m.group(0))
        tot[m.group(1)]+=1
    rest=span.sub('',t)
    for tok in ('{{','}}','|'):
        if tok in rest: errs.append('stray %r near %r'%(tok,rest[max(0,rest.find(tok)-40):rest.find(tok)+40]))
    raw=span.sub(lambda m:m.group(2),t)
    n=len(raw); phi=sum(1 for m in span.finditer(t) if m.group(1) in PHI)
    if not 1500<=n<=4000: errs.append('len %d'%n)
    print(os.path.basename(f),n,phi,'; '.join(errs))
    if errs: ok=False
print('PHI',sum(v for k,v in tot.items() if k in PHI),{k:tot[k] for k in PHI})
print('CLIN',{k:tot[k] for k in CLIN})
