#!/usr/bin/env python3
"""Generate the demo's synthetic clinical notes as SQL (sql/demo_data.sql).

Everything comes from the templates and name lists below, written for this
project; no real person is described. Deterministic: the same seed gives the
same file, so the committed SQL can be regenerated and diffed:

    python3 scripts/gen_demo_data.py --rows 240 > sql/demo_data.sql

With --csv it writes the same notes as CSV (id, patient, note, complaint),
where complaint is the body system of the presenting complaint the note was
written around: the class `dptext eval --label complaint` trains on
(scripts/eval-demo.sh).
"""
import argparse
import csv
import random
import sys

GIVEN = """James Mary Robert Patricia John Jennifer Michael Linda David Elizabeth
William Barbara Richard Susan Joseph Jessica Thomas Sarah Charles Karen Daniel
Nancy Matthew Lisa Anthony Betty Mark Margaret Paul Sandra Steven Ashley Andrew
Emily Kenneth Donna Joshua Michelle Kevin Carol Brian Amanda George Melissa
Timothy Deborah Ronald Stephanie Jason Rebecca Edward Sharon Jeffrey Laura Ryan
Cynthia Jacob Amy Gary Kathleen Nicholas Angela Eric Helen Jonathan Anna Larry
Brenda Justin Pamela Scott Emma Brandon Nicole Samuel Ruth Benjamin Katherine
Gregory Christine Alexander Samantha Patrick Debra Frank Rachel Raymond Carolyn
Jack Janet Dennis Maria Jerry Olivia Tyler Heather Aaron Diane Jose Julie Adam
Joyce Nathan Victoria Henry Kelly Zachary Christina Douglas Lauren Peter Joan
Kyle Evelyn Noah Judith Ethan Megan Jeremy Andrea Walter Cheryl Christian Hannah
Keith Jacqueline Roger Martha Terry Gloria Austin Teresa Sean Ann Gerald Sara
Carl Madison Harold Frances Dylan Kathryn Arthur Janice Lawrence Jean Jordan
Abigail Jesse Alice Bryan Judy Billy Sophia Bruce Grace Gabriel Denise Joe Amber
Logan Doris Alan Marilyn Juan Danielle Albert Beverly Willie Isabella Elijah
Theresa Wayne Diana Randy Natalie Vincent Brittany Mason Charlotte Roy Marie
Ralph Kayla Bobby Alexis Russell Lori Bradley Priya Ahmed Fatima Wei Mei Hiroshi
Yuki Olga Dmitri Ingrid Lars Aisha Kwame Chiara Luca Sofia Mateo Camila Diego
""".split()

SURNAMES = """Smith Johnson Williams Brown Jones Garcia Miller Davis Rodriguez Martinez
Hernandez Lopez Gonzalez Wilson Anderson Thomas Taylor Moore Jackson Martin Lee
Perez Thompson White Harris Sanchez Clark Ramirez Lewis Robinson Walker Young
Allen King Wright Scott Torres Nguyen Hill Flores Green Adams Nelson Baker Hall
Rivera Campbell Mitchell Carter Roberts Gomez Phillips Evans Turner Diaz Parker
Cruz Edwards Collins Reyes Stewart Morris Morales Murphy Cook Rogers Gutierrez
Ortiz Morgan Cooper Peterson Bailey Reed Kelly Howard Ramos Kim Cox Ward
Richardson Watson Brooks Chavez Wood James Bennett Gray Mendoza Ruiz Hughes
Price Alvarez Castillo Sanders Patel Myers Long Ross Foster Jimenez Powell
Jenkins Perry Russell Sullivan Bell Coleman Butler Henderson Barnes Fisher
Vasquez Simmons Romero Jordan Patterson Alexander Hamilton Graham Reynolds
Griffin Wallace Moreno West Cole Hayes Bryant Herrera Gibson Ellis Tran Medina
Aguilar Stevens Murray Ford Castro Marshall Owens Harrison Fernandez Okafor
Nakamura Kowalski Novak Lindqvist Haddad Mensah Rossi Schmidt Dubois Ivanova
""".split()

CITIES = """Springfield Riverside Franklin Greenville Bristol Clinton Fairview Salem
Madison Georgetown Arlington Ashland Burlington Manchester Oxford Milton Newport
Dayton Chester Jackson Lexington Marion Auburn Dover Hudson Kingston Lebanon
Oakland Portland Trenton Boston Denver Austin Seattle Phoenix Chicago Houston
""".split()

HOSPITALS = [
    "St. Mary's Hospital", "Riverside General Hospital", "Mercy Medical Center",
    "Lakeside Community Clinic", "Northgate University Hospital",
    "Hillcrest Memorial Hospital", "Westbrook Family Clinic", "Cedar Valley Medical Center",
]

COMPLAINTS = [
    "chest pain radiating to the left arm", "a persistent dry cough and low-grade fever",
    "shortness of breath on exertion", "severe abdominal pain in the right lower quadrant",
    "a headache that worsened over three days", "dizziness and blurred vision",
    "swelling of the left ankle after a fall", "nausea, vomiting and dehydration",
    "lower back pain after lifting heavy boxes", "palpitations and anxiety",
    "a rash on both forearms", "fatigue and unexplained weight loss",
    "burning pain during urination", "a deep laceration on the right hand",
    "wheezing and chest tightness", "confusion and slurred speech",
]

FINDINGS = [
    "Blood pressure was {bp} and heart rate {hr} beats per minute.",
    "An ECG showed normal sinus rhythm.",
    "Chest X-ray revealed no acute abnormality.",
    "Laboratory results showed elevated white blood cell count.",
    "CT scan of the abdomen was consistent with appendicitis.",
    "Oxygen saturation was {sat} percent on room air.",
    "Blood glucose was {glu} mg/dL.",
    "Physical examination was otherwise unremarkable.",
]

# The body system of each complaint: the demo's classification task.
SYSTEM = {
    "chest pain radiating to the left arm": "cardiac", "palpitations and anxiety": "cardiac",
    "a persistent dry cough and low-grade fever": "respiratory",
    "shortness of breath on exertion": "respiratory", "wheezing and chest tightness": "respiratory",
    "severe abdominal pain in the right lower quadrant": "digestive",
    "nausea, vomiting and dehydration": "digestive",
    "a headache that worsened over three days": "neurological",
    "dizziness and blurred vision": "neurological", "confusion and slurred speech": "neurological",
    "swelling of the left ankle after a fall": "injury",
    "lower back pain after lifting heavy boxes": "injury", "a deep laceration on the right hand": "injury",
    "a rash on both forearms": "other", "fatigue and unexplained weight loss": "other",
    "burning pain during urination": "other",
}

PLANS = [
    "Started on {drug} {dose} mg twice daily.", "Prescribed {drug} {dose} mg as needed for pain.",
    "Referred to cardiology for further evaluation.", "Admitted for observation overnight.",
    "Discharged home with instructions to rest and drink fluids.",
    "Scheduled for surgery on {date2}.", "Follow-up appointment in two weeks.",
    "Advised to avoid strenuous activity and return if symptoms worsen.",
]

DRUGS = ["ibuprofen", "amoxicillin", "metformin", "lisinopril", "atorvastatin",
         "omeprazole", "paracetamol", "prednisone", "azithromycin", "metoprolol"]

TEMPLATES = [
    "{name}, a {age}-year-old {sex} from {city}, presented to {hospital} on {date} with {complaint}. "
    "{finding} {finding2} {plan} Record {mrn}.",
    "Patient {name} (DOB {dob}) was seen by Dr. {doctor} at {hospital} for {complaint}. "
    "{finding} {plan} Contact number {phone}.",
    "{date}: {name} reports {complaint}. {finding} Lives in {city} with {relation}. {plan}",
    "Discharge summary for {name}, age {age}. Admitted to {hospital} with {complaint}. "
    "{finding2} {plan} Email {email} for follow-up. Record {mrn}.",
    "Dr. {doctor} reviewed {name} today. The {sex} patient described {complaint}. {finding} {plan}",
]


def sql_str(s):
    return "'" + s.replace("'", "''") + "'"


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rows", type=int, default=240)
    ap.add_argument("--seed", type=int, default=2026)
    ap.add_argument("--csv", action="store_true", help="CSV with a complaint class instead of SQL")
    args = ap.parse_args()
    r = random.Random(args.seed)

    def date():
        return f"{r.choice(['January', 'February', 'March', 'April', 'May', 'June', 'July', 'August', 'September', 'October', 'November', 'December'])} {r.randint(1, 28)}, {r.randint(2019, 2025)}"

    def fill(s):
        return s.format(bp=f"{r.randint(100, 170)}/{r.randint(60, 100)}", hr=r.randint(55, 120),
                        sat=r.randint(88, 99), glu=r.randint(70, 260), drug=r.choice(DRUGS),
                        dose=r.choice([5, 10, 20, 250, 400, 500]), date2=date())

    def note_rows():
        for i in range(1, args.rows + 1):
            first, last = r.choice(GIVEN), r.choice(SURNAMES)
            name = f"{first} {last}"
            note = r.choice(TEMPLATES).format(
                name=name, age=r.randint(18, 95), sex=r.choice(["man", "woman"]), city=r.choice(CITIES),
                hospital=r.choice(HOSPITALS), date=date(), complaint=(complaint := r.choice(COMPLAINTS)),
                finding=fill(r.choice(FINDINGS)), finding2=fill(r.choice(FINDINGS)), plan=fill(r.choice(PLANS)),
                mrn=f"MRN-{r.randint(100000, 999999)}", dob=f"{r.randint(1, 12):02d}/{r.randint(1, 28):02d}/{r.randint(1930, 2005)}",
                doctor=r.choice(SURNAMES), phone=f"({r.randint(200, 989)}) {r.randint(200, 999)}-{r.randint(1000, 9999)}",
                relation=r.choice(["her husband", "his wife", "two children", "a roommate", "elderly parents"]),
                email=f"{first.lower()}.{last.lower()}{r.randint(1, 99)}@example.org",
            )
            yield i, name, note, SYSTEM[complaint]

    if args.csv:
        w = csv.writer(sys.stdout, lineterminator="\n")
        w.writerow(["id", "patient", "note", "complaint"])
        w.writerows(note_rows())
        return

    print("-- Synthetic clinical notes for the dptext demo.")
    print("-- Generated by scripts/gen_demo_data.py; no real person is described.")
    print("DROP TABLE IF EXISTS records CASCADE;")
    print("CREATE TABLE records (id int PRIMARY KEY, patient text NOT NULL, note text NOT NULL);")
    print("INSERT INTO records (id, patient, note) VALUES")
    rows = []
    for i, name, note, _ in note_rows():
        rows.append(f"({i}, {sql_str(name)}, {sql_str(note)})")
    print(",\n".join(rows) + ";")


if __name__ == "__main__":
    main()
