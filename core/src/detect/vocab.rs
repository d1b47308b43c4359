//! Clinical and common English vocabulary that is never a name or a place
//! on its own, whatever the census lists say (`ABDOMEN`, `Will`, `Bed`,
//! `Stable` are all surnames somewhere). It suppresses the model's and the
//! dictionaries' person and place guesses; context rules (a title, a field
//! label, a credential) still win over it.

use std::collections::HashSet;
use std::sync::OnceLock;

const WORDS: &str = "
a an the and or but nor of in on at to for from by with without within into onto upon over under
above below after before during since until about around through across between among against per via
is are was were be been being am has have had do does did will would shall should may might must can could
not no yes none all any each every some many much more most less least few several both either neither
he she it they we you i me him her them us his hers its their our your my mine this that these those
who whom whose which what when where why how there here then than so as if else also only just very
again still yet already ever never always often once twice now today tonight tomorrow yesterday
new old good bad well better best worse worst high low normal abnormal stable unstable mild moderate severe
acute chronic left right bilateral upper lower anterior posterior medial lateral proximal distal
patient patients pt pts doctor nurse physician provider attending resident fellow intern student
history hx physical exam examination assessment plan impression diagnosis diagnoses findings finding
procedure procedures indication indications technique comparison clinical summary discharge admission
admit admitted course hospital service services department unit floor ward room bed clinic office
note notes report reports result results test tests lab labs laboratory imaging radiology pathology
medication medications meds medicine allergies allergy nkda review systems ros vitals vital signs
general heent head eyes ears nose throat neck chest lungs lung heart cardiac cardiovascular abdomen
abdominal pelvis pelvic back spine extremities extremity skin neuro neurologic neurological psych
psychiatric musculoskeletal genitourinary gu gi respiratory pulmonary renal hepatic endocrine
heme oncology lymph nodes node breast breasts rectal vascular pulses reflexes strength sensation gait
mental status alert oriented awake appropriate cooperative pleasant comfortable distress acute
follow up followup return instructions disposition condition code full dnr dni consent risks benefits
family social surgical past present illness chief complaint cc hpi pmh psh fh sh
pain fever chills nausea vomiting diarrhea constipation cough dyspnea fatigue weakness dizziness
headache edema rash swelling bleeding infection sepsis shock failure disease disorder syndrome
blood pressure pulse rate temp temperature weight height bmi oxygen saturation glucose sugar
red blue yellow orange pink
north south east west central general memorial regional community county state city town
street road avenue lane drive court place way boulevard suite apartment apt floor building
hospital medical center centre health healthcare care clinic practice group associates
university college school institute foundation church company inc corp llc bank
january february march april june july august september october november december
monday tuesday wednesday thursday friday saturday sunday morning afternoon evening night noon midnight
day days week weeks month months year years hour hours minute minutes time times date dates
md do rn np pa dds phd msw lcsw pharmd dpm mph mba facs facp facc crna cnm lpn cna rd pt ot slp
mr mrs ms miss dr prof sir madam dear sincerely regards thank thanks thankyou please
signed electronically dictated transcribed typed reviewed verified cosigned attested
name address phone fax email tel telephone mobile cell home work pager contact
male female man woman boy girl son daughter wife husband mother father sister brother
child children baby infant adult elderly
care case cases bath child spring fall
major minor early late first second third last next prior current recent
negative positive unremarkable intact clear soft tender nontender nondistended distended
regular irregular murmur murmurs rub gallop wheeze wheezes rales rhonchi crackles
cbc bmp cmp ekg ecg ct mri cxr us xr echo eeg emg pet iv im po prn bid tid qid qd qhs
hgb hct wbc plt na cr bun inr ptt ast alt alk bili tsh a1c ldl hdl
ed er icu or pacu ccu micu sicu nicu picu ob gyn ent pcp
i ii iii iv v vi vii viii ix x
post pre status sp sob cp doe hpi
ra af sr nsr svt vt vf afib rvr lbbb rbbb pvc pac mvc gcs loc ams uti dvt pe chf copd cad ckd esrd
ok np na tb mv pr act
mrn dob dos acct fin csn ssn dea npi clia mr mrns
internal family primary emergency urgent critical intensive pediatric pediatrics adult geriatric
sports occupational physical behavioral women's children's outpatient inpatient
abd ctab wbat dea npi clia perrl perrla eomi nad rrr ncat ngt peg ivf abx npo ambulating
message updated resting triage line eval swallow creatinine heparin sulfa statin
barrett barrett's
rll rul rml lll lul rlq ruq llq luq rue lue rle lle ue le bue ble
htn hld hlp dm dm1 dm2 t1dm t2dm iddm niddm osa bph aki ards cva tia stemi nstemi acs pci cabg
tavr tavi avr mvr asd vsd pda pfo hcm dcm hfref hfpef lvef ef lvh ivc svc jvd jvp
gerd ibs ibd pud nafld nash cirrhosis hcc etoh ivdu uds tob nvi nvd
ppi nsaid nsaids ssri ssris snri tca maoi acei ace arb ccb asa apap hctz lasix coumadin
dexa sem hsm rrr s1 s2 s3 s4 jvd lad lcx rca pda om
ac pc hs qam qpm qod qhs q2h q4h q6h q8h q12h q24h stat sq subq sc sl gtt gtts
mg mcg ml kg lb lbs cm mm mmhg bpm inh neb nebs mdi ics laba lama o2 nc bipap cpap vent ett trach
picc cvc foley jp bx fx dx tx rx sx px wnl nka rom arom prom adl adls iadl iadls snf ltach alf
cmv hsv hiv hcv hbv hpv rsv covid mrsa mssa vre esbl ua ucx bcx abg vbg bnp ck lfts lft esr crp pct
bal ercp egd tte tee lhc rhc ppd bcg dtap tdap mmr ipv hib pcv gbs gdm pih hellp pprom nst bpp
afi efw lmp edd iud pap dre psa aox3 polst molst poa nihss mmse moca phq phq9 gad7 cbt dbt adhd
ocd ptsd mdd gad sz hr bp spo2 sao2 fio2 peep rr tmax
alzheimer alzheimer's parkinson parkinson's gleason apgar babinski crohn crohn's hodgkin hodgkin's
cushing cushing's guillain barre kawasaki tourette tourette's wernicke korsakoff raynaud raynaud's
sjogren sjogren's hashimoto hashimoto's kaposi mallampati romberg murphy's mcburney homans
bowel bowels bladder submitting submitted facility visit visits found sitting standing lying call
called calling annual wellness screening preventive routine follow-up counseling education
doppler holter thinprep surepath amacr clabsi cauti vap dka hhs mronj mqsa vna rph calc ortho
lutheran methodist baptist catholic somali hmong
";

/// English words that are also common given names or surnames: never a
/// name alone, but a name in context (`Dr. Hope Green`, `Green, Will`).
const NAME_WORDS: &str = "
long short hall walker wood price rose hope will mark bill grace faith joy may june april august
summer winter rich young king hill love page green brown white black gray grey gold silver
braden tanner hickman glasgow nottingham brady bishop wells swan ganz
";

/// Honorifics: the word after one is a name whatever it is (`Dr. Hope`,
/// `Mrs Femoral`); lower case, without the point.
pub(super) const HONORIFICS: &[&str] = &["mr", "mrs", "ms", "miss", "mx", "dr", "prof"];

/// Whether `word` (any case, with or without its point) is an honorific.
pub(super) fn is_honorific(word: &str) -> bool {
    HONORIFICS.contains(&word.to_lowercase().trim_end_matches('.'))
}

/// The US states' two-letter codes and DC's, as a regex alternation.
pub(super) const STATE_CODES: &str = "AL|AK|AZ|AR|CA|CO|CT|DE|DC|FL|GA|HI|ID|IL|IN|IA|KS|KY|LA|ME|MD|MA|MI|MN|MS|MO|MT|NE|NV|NH|NJ|NM|NY|NC|ND|OH|OK|OR|PA|RI|SC|SD|TN|TX|UT|VT|VA|WA|WV|WI|WY";

/// Whether `word` (any case) is an English word that is also a name.
pub fn is_name_word(word: &str) -> bool {
    static SET: OnceLock<HashSet<&'static str>> = OnceLock::new();
    let set = SET.get_or_init(|| NAME_WORDS.split_whitespace().collect());
    set.contains(word.to_lowercase().trim_end_matches('.'))
}

/// The set, lower case.
fn set() -> &'static HashSet<&'static str> {
    static SET: OnceLock<HashSet<&'static str>> = OnceLock::new();
    SET.get_or_init(|| WORDS.split_whitespace().collect())
}

/// Whether `word` (any case) is vocabulary, never a name on its own.
pub fn is_common(word: &str) -> bool {
    let lower = word.to_lowercase();
    set().contains(lower.trim_end_matches('.')) || is_name_word(word)
}

/// Vocabulary that is never a name, even in context (`ABDOMEN`, `the`);
/// [`is_name_word`]s are names in context.
pub fn is_vocabulary(word: &str) -> bool {
    let lower = word.to_lowercase();
    set().contains(lower.trim_end_matches('.')) && !is_name_word(word)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn clinical_words_and_common_names_that_are_words() {
        assert!(is_common("ABDOMEN"));
        assert!(is_common("Will"));
        assert!(is_common("extremities"));
        assert!(!is_common("Ybarra"));
        assert!(!is_common("Maria"));
    }
}
