//! Tests of the context layer.

use super::*;

fn lex() -> Lexicon {
    Lexicon::from_lists(
        &["Maria", "Irena", "Tom", "Ann", "Helena", "Per", "Jordan"],
        &[
            "Lopez",
            "Holmes",
            "Kowalczyk",
            "Church",
            "Olinger",
            "Jordan",
        ],
        &["Springfield", "Parma Heights", "Parma"],
    )
}

fn found(t: &str) -> Vec<(Label, String)> {
    let mut v: Vec<(Label, String)> = super::super::resolve(find(t, &lex(), &[]))
        .into_iter()
        .map(|s| (s.label, t[s.start..s.end].to_string()))
        .collect();
    v.sort();
    v
}

fn has(t: &str, label: Label, value: &str) -> bool {
    found(t).contains(&(label, value.to_string()))
}

#[test]
fn a_name_before_an_age_or_birth_date_is_a_person() {
    for (t, name) in [
        ("Maria Long, a 65-year-old woman from Parma", "Maria Long"),
        ("Tom Bell is a 45 yo M with CHF", "Tom Bell"),
        ("Mrs. Maria Long was a 70-year-old", "Maria Long"),
        (
            "Patient Maria Lopez (DOB 12/23/1993) was seen",
            "Maria Lopez",
        ),
        ("HOLMES, ANN (DOB 1/2/1950) seen today", "HOLMES, ANN"),
        (
            "Seen today: Kowalczyk, Maria, age 72, for follow-up",
            "Kowalczyk, Maria",
        ),
    ] {
        assert!(has(t, Label::Person, name), "{t}: {:?}", found(t));
    }
    for t in [
        "Patient is a 45 yo M with CHF",
        "The patient, a 65-year-old woman, was seen",
        "HISTORY OF PRESENT ILLNESS: Patient was a 70 yo",
        "Client is a 24 yo single male",
    ] {
        assert!(
            !found(t).iter().any(|(l, _)| *l == Label::Person),
            "{t}: {:?}",
            found(t)
        );
    }
}

#[test]
fn towns_no_gazetteer_lists_where_someone_lives_or_calls_from() {
    for (t, town) in [
        (
            "Her daughter, who lives with her in Wexford Falls, felt",
            "Wexford Falls",
        ),
        (
            "2 adult children (son Karim in Marrowgate, daughter local)",
            "Marrowgate",
        ),
        (
            "Pt's son called from Kelloway asking for update",
            "Kelloway",
        ),
        ("She moved to Pelham Rise last spring.", "Pelham Rise"),
    ] {
        assert!(has(t, Label::Location, town), "{t}: {:?}", found(t));
    }
    // Vocabulary and lower-case words after the same contexts are not places.
    for t in [
        "lives with her in March and April",
        "moved to ICU overnight",
        "called from home about results",
    ] {
        assert!(
            !found(t).iter().any(|(l, _)| *l == Label::Location),
            "{t}: {:?}",
            found(t)
        );
    }
}

#[test]
fn names_in_context() {
    assert!(has(
        "Maria Lopez lives in Springfield.",
        Label::Person,
        "Maria Lopez"
    ));
    assert!(has(
        "Maria Lopez lives in Springfield.",
        Label::Location,
        "Springfield"
    ));
    assert!(has(
        "Attending:\tYBARRA, JOSE\n",
        Label::Person,
        "YBARRA, JOSE"
    ));
    assert!(has(
        "PATIENT: KOWALCZYK, HELENA M\nMR: 1",
        Label::Person,
        "KOWALCZYK, HELENA M"
    ));
    assert!(has(
        "Seen by Dr. Abernathy (cardiology).",
        Label::Person,
        "Abernathy"
    ));
    assert!(has(
        "Her daughter Irena noticed it.",
        Label::Person,
        "Irena"
    ));
    assert!(has("\nAnn Holmes, MD\n", Label::Person, "Ann Holmes"));
    assert!(has("text\nXGT:holmes\n", Label::Person, "holmes"));
    assert!(has("text\nXGT:holmes\n", Label::Person, "XGT"));
    assert!(has("x\nGPP/church/olinger\n", Label::Person, "olinger"));
    // Repeats of a found name.
    assert!(has(
        "Mrs. Kowalczyk came. Later Kowalczyk left.",
        Label::Person,
        "Kowalczyk"
    ));
    assert_eq!(found("Later Kowalczyk left.").len(), 0);
    // Vocabulary in capitals is not a person.
    assert!(found("ABDOMEN: soft.\nEXTREMITIES: no edema.").is_empty());
    assert!(found("Vitals: stable\nPulse: regular").is_empty());
}

/// Letters whose case forms differ in length never misplace an offset.
#[test]
fn text_whose_case_changes_length_does_not_panic() {
    for t in [
        "İSTANBUL HOSPİTAL of İzmir (İH). Back to İH. Dr. İlker Öz, MD",
        "ẞTRASSE Clinic, Mrs. Groß at St. İves Family Medicine of İstanbul",
        "Ⅻ Ⅻ Medical Center ǅ ǅ Hospital daughter ǅorđe lives in İzmir",
    ] {
        let spans = super::super::resolve(find(t, &lex(), &[]));
        for s in spans {
            assert!(
                t.is_char_boundary(s.start) && t.is_char_boundary(s.end),
                "{t}"
            );
        }
    }
}

#[test]
fn places_and_organisations() {
    assert!(has(
        "Home with daughter in Parma Heights.",
        Label::Location,
        "Parma Heights"
    ));
    assert!(has(
        "cc: Parma Heights Family Medicine",
        Label::Organization,
        "Parma Heights Family Medicine"
    ));
    assert!(has(
        "at St. Agnes for rehab",
        Label::Organization,
        "St. Agnes"
    ));
    assert!(has(
        "MERCY RIDGE MEDICAL CENTER\n",
        Label::Organization,
        "MERCY RIDGE MEDICAL CENTER"
    ));
    assert!(has(
        "Massachusetts General Hospital (MGH). Back to MGH.",
        Label::Organization,
        "MGH"
    ));
    assert!(!has(
        "Internal Medicine clinic",
        Label::Organization,
        "Internal Medicine"
    ));
    assert!(has(
        "lives in Cuyahoga County now",
        Label::Location,
        "Cuyahoga County"
    ));
}

#[test]
fn an_organisation_keeps_its_number_and_branch() {
    for (t, org) in [
        (
            "Rx filled yesterday at Bayou Market Pharmacy #412.",
            "Bayou Market Pharmacy #412",
        ),
        (
            "He is a member of Narragansett Shipfitters Union Local 37, retired.",
            "Narragansett Shipfitters Union Local 37",
        ),
        (
            "Clinic: VisionPlus Optometry - Riverfront\nSeen today.",
            "VisionPlus Optometry - Riverfront",
        ),
        (
            "PCP: Granite Ridge Primary Care - Elm St, phone on file.",
            "Granite Ridge Primary Care - Elm St",
        ),
        (
            "Referred to Bright Harbor Family Dentistry for cleaning.",
            "Bright Harbor Family Dentistry",
        ),
    ] {
        assert!(has(t, Label::Organization, org), "{t}: {:?}", found(t));
    }
    // A dash followed by ordinary words is not a branch.
    let t = "Lakeside Heart Clinic - Follow up in two weeks.";
    assert!(
        has(t, Label::Organization, "Lakeside Heart Clinic"),
        "{:?}",
        found(t)
    );
}

#[test]
fn a_persons_glued_and_trailing_initials_are_kept_with_the_name() {
    let t = "Entered by C.Ortiz at 0800";
    assert_eq!(person_initials(t, 13, 18), (11, 18));
    let t = "ATTENDING: ROSENQUIST, H\nNext";
    assert_eq!(person_initials(t, 11, 21), (11, 24));
    let t = "Seen by Lopez, M. today";
    assert_eq!(person_initials(t, 8, 13), (8, 17));
    // Not a pronoun or an article, nor a longer word.
    let t = "Told Lopez, I think so";
    assert_eq!(person_initials(t, 5, 10), (5, 10));
    let t = "Lopez, MD signed";
    assert_eq!(person_initials(t, 0, 5), (0, 5));
    // Not a dot after a word.
    let t = "end of list.Ortiz";
    assert_eq!(person_initials(t, 12, 17), (12, 17));
}

#[test]
fn a_site_code_before_a_record_number_is_part_of_it() {
    let t = "MRN GRMC 5590314";
    assert_eq!(site_code_before(t, 9, 16), Some(4));
    let t = "Chart: LVE 2047713";
    assert_eq!(site_code_before(t, 11, 18), Some(7));
    // A label word, a short number or a word glued on are not codes.
    assert_eq!(site_code_before("MRN 5590314", 4, 11), None);
    assert_eq!(site_code_before("GRMC 55903", 5, 10), None);
    assert_eq!(site_code_before("xGRMC 5590314", 6, 13), None);
    // Digits grouped by dashes.
    assert_eq!(site_code_before("SBM 60-44-918", 4, 13), Some(0));
}

#[test]
fn capital_groups_dashed_before_an_id_are_part_of_it() {
    let t = "ref TAB-SH-0192.";
    assert_eq!(id_prefix_before(t, 8), Some(4));
    let t = "Auth AUTH-CB-25-0098812";
    assert_eq!(id_prefix_before(t, 10), Some(5));
    let t = "oid urn:oid:2.16.840.1";
    assert_eq!(id_prefix_before(t, 12), Some(4));
    // Lower case, or glued to a word, is not a prefix.
    assert_eq!(id_prefix_before("see-0192", 4), None);
    assert_eq!(id_prefix_before("xTAB-0192", 5), None);
}

#[test]
fn an_organisation_keeps_an_ampersand_tail_and_its_local() {
    let t = "Midwife: Harmony Midwifery & OB\nNext";
    let ws = words(t);
    assert_eq!(organisation_tail(t, &ws, 26), 31);
    let t = "Member, Narragansett Shipfitters Local 37, since 1990";
    let ws = words(t);
    assert_eq!(organisation_tail(t, &ws, 38), 41);
    // A name that ends the text, or a character after it, is left as is.
    let t = "Member of Shipfitters Local";
    assert_eq!(organisation_tail(t, &words(t), t.len()), t.len());
    let t = "Shipfitters Local é";
    assert_eq!(organisation_tail(t, &words(t), 17), 17);
    // Not words that run on.
    let t = "Harmony Midwifery & Obstetrics said so";
    let ws = words(t);
    assert_eq!(organisation_tail(t, &ws, 17), 17);
}
