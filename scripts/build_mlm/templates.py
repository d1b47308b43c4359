"""Sentences filled from templates, so that the small model sees person names, places,
organisations, dates, languages and amounts in ordinary sentence contexts (the NDD
metric must tell a fitting entity replacement from an unfitting one).

The templates and the extra word lists below were written for dptext (Apache-2.0).
Person names, cities, organisations and streets come from the project's own surrogate
lists under core/src/mechanisms/deidentify/surrogates/ (Apache-2.0, read only here). None of the
templates is taken from the evaluation sentences (the build checks for overlap).
"""
import hashlib
import os

COUNTRIES = """France Germany Italy Spain Portugal Norway Sweden Finland Denmark Poland
Austria Greece Turkey Egypt Kenya Nigeria Ghana Morocco Brazil Argentina Chile Peru
Colombia Mexico Canada Japan China India Pakistan Indonesia Vietnam Thailand Australia
Ireland Scotland Belgium Switzerland Hungary Romania Ukraine Russia Iran Iraq Israel
Korea Malaysia Singapore Cuba Jamaica""".split()

NATIONALITIES = """French German Italian Spanish Portuguese Norwegian Swedish Finnish
Danish Polish Austrian Greek Turkish Egyptian Kenyan Nigerian Brazilian Argentine
Chilean Mexican Canadian Japanese Chinese Indian Australian Irish Belgian Swiss
Hungarian Romanian Ukrainian Russian Iranian Israeli Korean Dutch British American
Indonesian Vietnamese Thai Cuban""".split()

LANGUAGES = """English French German Italian Spanish Portuguese Norwegian Swedish
Finnish Danish Polish Greek Turkish Arabic Swahili Japanese Chinese Mandarin Hindi
Urdu Bengali Korean Dutch Russian Ukrainian Hebrew Persian Indonesian Malay
Vietnamese Thai Latin Welsh Irish Czech Hungarian Romanian Tamil""".split()

WORLD_CITIES = """London Paris Berlin Rome Madrid Lisbon Oslo Stockholm Helsinki
Copenhagen Warsaw Vienna Athens Istanbul Cairo Nairobi Lagos Accra Tokyo Osaka Kyoto
Beijing Shanghai Delhi Mumbai Karachi Jakarta Hanoi Bangkok Sydney Melbourne Toronto
Montreal Vancouver Chicago Boston Houston Denver Seattle Atlanta Dallas Brussels
Amsterdam Geneva Zurich Dublin Glasgow Edinburgh Manchester Liverpool Moscow Prague
Budapest Bucharest Kiev Lima Santiago Havana""".split()

REGIONS = """Bavaria Tuscany Catalonia Provence Siberia Bengal Punjab Ontario Quebec
Texas California Florida Ohio Oregon Alaska Yorkshire Cornwall Normandy Brittany
Andalusia Sicily Sardinia Crete Patagonia Queensland Tasmania Hokkaido Kyushu""".split()

ORG_HEADS = """Bank Institute Council Museum University College Foundation Society
Association Agency Committee Commission Company Corporation Group Union League
Federation Academy Centre Center Authority Board Bureau Trust Alliance""".split()
ORG_MODS = """National International Royal Central Northern Southern Eastern Western
Federal Regional Metropolitan Technical Medical Scientific Historical Agricultural
Industrial Commercial Maritime Cultural Economic""".split()

JOBS = """lawyer doctor teacher engineer journalist banker farmer nurse architect
economist scientist writer painter singer pilot soldier judge senator mayor
professor manager coach player minister chemist surgeon""".split()

SPORTS_NOUNS = """Lions Tigers Bears Eagles Hawks Wolves Rangers Rovers United City
Athletic Giants Pirates Sharks Falcons""".split()

MONTHS = """January February March April May June July August September October
November December""".split()

UP = "rose climbed jumped gained rallied advanced soared surged increased".split()
DOWN = "fell dropped slipped declined slumped plunged tumbled sank retreated".split()
FEELINGS = """confident optimistic cautious nervous pleased worried hopeful angry
disappointed satisfied calm uncertain relieved skeptical""".split()
MARKETS = ["stocks", "shares", "bonds", "futures", "currencies", "oil prices",
           "bank shares", "technology stocks", "gold prices"]

TEMPLATES = """{P} was born in {CITY} in {YEAR}.
{P} was born on {DATE} in {WCITY}.
{P} moved to {WCITY} with {his} family in {YEAR}.
{P} studied law at the University of {WCITY}.
{P} is a {NAT} {JOB} who lives in {WCITY}.
{P}, a {JOB} from {CITY}, said the plan would fail.
{P} told reporters in {WCITY} that the talks had ended.
{P} joined {ORG} as a {JOB} in {MONTH} {YEAR}.
{P} was appointed chairman of {ORG} last week.
{P} resigned from {ORG} on {DATE}.
{P} won the match in {WCITY} on {DATE}.
{P} was beaten in the final in {WCITY}.
{P} lost the first round to {P2} in {REGION}.
{P} scored twice as {TEAM} beat {TEAM2} in {WCITY}.
{P} married {P2} in {WCITY} in {YEAR}.
{P} and {P2} founded {ORG} in {YEAR}.
{P} met {P2} at a conference in {WCITY}.
{P} died in {WCITY} on {DATE} at the age of {AGE}.
{P} wrote a book about the history of {COUNTRY}.
{P} speaks {LANG} and {LANG2} fluently.
{P} visited {COUNTRY} and {COUNTRY2} last {MONTH}.
{P} called {P2} on {WEEKDAY} morning.
{P} works for {ORG} in {CITY}.
{P} lives at {NUM} {STREET} in {CITY}.
Mr. {SUR} said the company would cut {NUM} jobs.
Ms. {SUR} said she was {FEEL} about the results.
Dr. {SUR} treated the patient at a clinic in {CITY}.
According to {P}, the project will cost {MONEY}.
A spokesman for {ORG} declined to comment.
A spokeswoman for {ORG} said the report was wrong.
{ORG} was founded in {YEAR} in {WCITY}.
{ORG} is based in {WCITY}.
{ORG} said its profit rose {PCT} in the third quarter.
{ORG} reported a loss of {MONEY} for the year.
{ORG} agreed to buy a rival firm for {MONEY}.
{ORG} has offices in {WCITY} and {WCITY2}.
{ORG} will open a new office in {WCITY} in {YEAR}.
The {ORGX} sets the rules for its members.
The {ORGX} settles disputes between its members.
The {ORGX} is responsible for the museums of the region.
The {ORGX} was established by the government in {YEAR}.
The head of the {ORGX} met officials from {COUNTRY}.
The {ORGX} published its annual report on {DATE}.
The conference was held in {WCITY} in {YEAR}.
The festival takes place in {REGION} every {MONTH}.
The treaty was signed in {WCITY} on {DATE}.
The flight from {WCITY} to {WCITY2} was delayed.
The storm hit {REGION} on {WEEKDAY}.
The museum in {WCITY} has a large collection of {NAT} paintings.
The team from {WCITY} won the title in {YEAR}.
The election in {COUNTRY} was held on {DATE}.
The government of {COUNTRY} raised taxes in {YEAR}.
The president of {COUNTRY} arrived in {WCITY} on {WEEKDAY}.
Talks between {COUNTRY} and {COUNTRY2} resumed in {WCITY}.
{COUNTRY} adopted {LANG} as its official language.
The school teaches {LANG} and {LANG2}.
The book was translated from {LANG} into {LANG2}.
Most people in {COUNTRY} speak {LANG}.
She learned {LANG} when she lived in {COUNTRY}.
The {NAT} delegation arrived in {WCITY} on {WEEKDAY}.
The {NAT} government said it would not change its policy.
The {NAT} team lost to {COUNTRY} in the semifinal.
Share prices in {WCITY} {UP} after the announcement.
Bond prices in {WCITY} {DOWN} after the report.
Shares in {ORG} {UP} {PCT} on {WEEKDAY}.
Shares of {ORG} {DOWN} {PCT} in early trading.
{MARKET} in {WCITY} {UP} sharply on {WEEKDAY}.
{MARKET} in {WCITY} {DOWN} as investors sold.
{MARKET} {UP} in {WCITY}, while {MARKET2} {DOWN} in {WCITY2}.
The index {UP} {NUM} points to close at a record.
The dollar {DOWN} against the yen in {WCITY}.
Investors were {FEEL} about the outlook for the economy.
Analysts said they were {FEEL} about the figures.
The workers were {FEEL} after the meeting with managers.
Most economists remain {FEEL} about growth next year.
He was {FEEL} that the deal would go through.
She seemed {FEEL}, but she did not say why.
The company raised {MONEY} from investors.
The city spent {MONEY} on new roads.
The deal is worth about {MONEY}.
The bank lent {MONEY} to the company in {YEAR}.
Sales fell to {MONEY} in the year ended {MONTH} {YEAR}.
The fund lost {MONEY} last year.
He paid {MONEY} for the house in {CITY}.
They won {NUM} of their last {NUM2} games on the road.
He hit {NUM} home runs in {MONTH}.
The {TEAM} beat the {TEAM2} {NUM} to {NUM2} on {WEEKDAY}.
The match in {WCITY} ended in a draw.
The race starts in {WCITY} and ends in {WCITY2}.
{P} is the coach of the {TEAM}.
I met {FN} at the station in {CITY}.
My sister {FN} moved to {WCITY} last year.
{FN} and {FN2} went to school together in {CITY}.
We had dinner with {FN} on {WEEKDAY}.
{FN} said {he} would call back tomorrow.
Please send the letter to {P} at {NUM} {STREET}.
The meeting is scheduled for {DATE}.
The law came into force on {DATE}.
The building was completed in {YEAR}.
The war ended in {YEAR}.
The bridge was opened in {MONTH} {YEAR}.
The report was published in {YEAR} by {ORG}.
The hospital in {CITY} has {NUM} beds.
The village lies {NUM} miles north of {WCITY}.
The river flows through {REGION} into the sea.
The company makes cars in {COUNTRY} and sells them in {COUNTRY2}.
The {JOB} from {WCITY} was arrested on {WEEKDAY}.
The {JOB} said the results were {FEEL}.
The patient was admitted to {ORG} on {DATE}.
The film was shot in {REGION} in {YEAR}.
The orchestra will perform in {WCITY} in {MONTH}.
The students travelled to {COUNTRY} in {MONTH}.
The army withdrew from {REGION} in {YEAR}.
The governor of {REGION} announced new rules on {WEEKDAY}.
Police in {WCITY} said {NUM} people were injured.
Officials in {WCITY} said the fire was under control.
Farmers in {REGION} fear the drought will get worse.
Residents of {CITY} voted against the plan.
He has lived in {CITY} since {YEAR}.
She has worked at {ORG} for {NUM} years.
They stayed in {WCITY} for {NUM} days.
It was the first time since {YEAR} that {COUNTRY} had won.""".strip().split("\n")

WEEKDAYS = "Monday Tuesday Wednesday Thursday Friday Saturday Sunday".split()


def _read_list(repo_root, name):
    path = os.path.join(repo_root, "core/src/mechanisms/deidentify/surrogates", name)
    with open(path, encoding="utf-8") as f:
        data = f.read()
    items = [l.strip() for l in data.split("\n") if l.strip() and not l.startswith("#")]
    return items, hashlib.sha256(data.encode()).hexdigest()


def generate(repo_root, n, rng):
    lists = {}
    info = {"templates": len(TEMPLATES), "surrogate_lists_sha256": {}}
    for key, fn in (("GIVEN", "given_names.txt"), ("SUR", "surnames.txt"),
                    ("CITY", "cities.txt"), ("ORG", "organizations.txt"),
                    ("STREET", "streets.txt")):
        lists[key], info["surrogate_lists_sha256"][fn] = _read_list(repo_root, fn)
    # gender-neutral: pronoun chosen at random; names are not gendered here
    out = set()
    tries = 0
    while len(out) < n and tries < n * 5:
        tries += 1
        t = rng.choice(TEMPLATES)

        def person():
            r = rng.random()
            if r < 0.75:
                return f"{rng.choice(lists['GIVEN'])} {rng.choice(lists['SUR'])}"
            if r < 0.9:
                return f"{rng.choice(lists['GIVEN'])} {rng.choice(lists['GIVEN'])[0]}. {rng.choice(lists['SUR'])}"
            return rng.choice(lists["SUR"])

        def city():
            return rng.choice(lists["CITY"]) if rng.random() < 0.5 else rng.choice(WORLD_CITIES)

        def orgx():
            return f"{rng.choice(ORG_MODS)} {rng.choice(ORG_HEADS)}"

        def org():
            r = rng.random()
            if r < 0.4:
                return rng.choice(lists["ORG"])
            if r < 0.7:
                return f"the {orgx()}"
            if r < 0.85:
                return f"the {rng.choice(NATIONALITIES)} {rng.choice(ORG_HEADS)}"
            return f"{rng.choice(lists['SUR'])} {rng.choice(['Corp.', 'Inc.', 'and Sons', 'Group', 'Holdings', 'Ltd.'])}"

        def money():
            r = rng.random()
            if r < 0.5:
                return f"${rng.randint(1, 999)} million"
            if r < 0.7:
                return f"${rng.randint(1, 99)} billion"
            if r < 0.85:
                return f"{rng.randint(2, 900)} million euros"
            return f"${rng.randint(10, 9999)}"

        def date():
            m, d, y = rng.choice(MONTHS), rng.randint(1, 28), rng.randint(1850, 2024)
            return f"{m} {d}, {y}" if rng.random() < 0.7 else f"{d} {m} {y}"

        def team():
            return f"{rng.choice(WORLD_CITIES + lists['CITY'])} {rng.choice(SPORTS_NOUNS)}"

        he = rng.choice(["he", "she"])
        fill = {
            "P": person(), "P2": person(), "FN": rng.choice(lists["GIVEN"]),
            "FN2": rng.choice(lists["GIVEN"]), "SUR": rng.choice(lists["SUR"]),
            "CITY": city(), "WCITY": rng.choice(WORLD_CITIES),
            "WCITY2": rng.choice(WORLD_CITIES), "REGION": rng.choice(REGIONS),
            "COUNTRY": rng.choice(COUNTRIES), "COUNTRY2": rng.choice(COUNTRIES),
            "NAT": rng.choice(NATIONALITIES), "LANG": rng.choice(LANGUAGES),
            "LANG2": rng.choice(LANGUAGES), "ORG": org(), "ORGX": orgx(),
            "JOB": rng.choice(JOBS), "YEAR": str(rng.randint(1850, 2024)),
            "DATE": date(), "MONTH": rng.choice(MONTHS), "WEEKDAY": rng.choice(WEEKDAYS),
            "AGE": str(rng.randint(40, 99)), "NUM": str(rng.randint(2, 500)),
            "NUM2": str(rng.randint(2, 60)), "PCT": f"{rng.randint(1, 40)} percent",
            "MONEY": money(), "STREET": rng.choice(lists["STREET"]),
            "TEAM": team(), "TEAM2": team(), "UP": rng.choice(UP), "DOWN": rng.choice(DOWN),
            "FEEL": rng.choice(FEELINGS), "MARKET": rng.choice(MARKETS).capitalize(),
            "MARKET2": rng.choice(MARKETS), "he": he,
            "his": {"he": "his", "she": "her"}[he],
        }
        s = t.format(**fill)
        s = s[0].upper() + s[1:]
        out.add(s)
    out = sorted(out)
    rng.shuffle(out)
    return out, info
