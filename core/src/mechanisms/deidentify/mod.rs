//! `deidentify`: entity replacement over detected spans, with an operator
//! per label, whole-value replacement and date shifting
//! (docs/mechanisms.md). The surrogates, strategies and the lemma's
//! epsilon are in [`replace`]; the parameters in [`operators`]; the surrogate lists in
//! [`surrogates`] and date shifting in [`dateshift`].

pub mod dateshift;
pub mod operators;
pub mod replace;
pub mod surrogates;

use std::collections::HashMap;
use std::sync::Arc;

use rand::{Rng, RngCore};

use crate::cost::{Cost, Guarantee, LabelCost};
use crate::detect::{self, Detector, Label};
use crate::error::Result;
use crate::mechanisms::operators::{DeidentifySpec, Operator};
use crate::mechanisms::replace::{lemma_eps, ReplaceStrategy};
use crate::mechanisms::surrogates::{full_entity, named, surrogate_word};
use crate::mechanisms::{Mechanism, Sanitized};
use crate::rng::RandomMode;

/// Entity replacement over detected spans.
pub struct Deidentify {
    model: Arc<Detector>,
    spec: DeidentifySpec,
}

impl std::fmt::Debug for Deidentify {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Deidentify")
            .field("spec", &self.spec)
            .finish()
    }
}

/// Per-label tally of one call.
#[derive(Default, Clone, Copy)]
struct Tally {
    spans: usize,
    min_pi: f64,
    replaced: usize,
}

impl Deidentify {
    /// Replacement with `strategy` for every label, probability `p` in
    /// [0, 1], optionally consistent within a value.
    pub fn new(
        model: Arc<Detector>,
        strategy: ReplaceStrategy,
        p: f64,
        consistent: bool,
    ) -> Result<Self> {
        let mut spec = DeidentifySpec::new(strategy);
        spec.p = p;
        spec.consistent = consistent;
        Self::from_spec(model, spec)
    }

    /// Replacement as `spec` says (operators per label, whole values, date
    /// shifting), validated.
    pub fn from_spec(model: Arc<Detector>, spec: DeidentifySpec) -> Result<Self> {
        spec.validate()?;
        Ok(Deidentify { model, spec })
    }

    /// Its parameters.
    pub fn spec(&self) -> &DeidentifySpec {
        &self.spec
    }

    /// Replaces the given spans of `text` (the mechanism minus detection).
    pub fn replace_spans(
        &self,
        text: &str,
        spans: &[detect::Span],
        rng: &mut dyn RngCore,
    ) -> Sanitized {
        self.replace_spans_in(text, spans, rng, &RandomMode::Os)
    }

    /// The number of days this value's dates move: non-zero, uniform in
    /// `[-shift_days, shift_days]`; under a key and a grouping value, a
    /// function of both, so every value of the group moves alike.
    fn draw_shift(&self, rng: &mut dyn RngCore, mode: &RandomMode) -> i64 {
        let d = i64::from(self.spec.shift_days);
        let mut own;
        let rng: &mut dyn RngCore = match (&self.spec.group, mode) {
            (Some(g), RandomMode::Keyed(_)) => {
                own = mode.rng_for(&[
                    b"deidentify date shift",
                    self.spec.shift_days.to_string().as_bytes(),
                    g.as_bytes(),
                ]);
                &mut own
            }
            _ => rng,
        };
        let k = rng.random_range(0..2 * d);
        if k < d {
            k - d
        } else {
            k - d + 1
        }
    }

    /// Like [`Deidentify::replace_spans`]; with consistent replacement and a
    /// secret key, each original's decision and surrogate come from a stream
    /// keyed by (key, label, original), so the same original maps to the
    /// same surrogate in every value, not only within one.
    pub fn replace_spans_in(
        &self,
        text: &str,
        spans: &[detect::Span],
        rng: &mut dyn RngCore,
        mode: &RandomMode,
    ) -> Sanitized {
        self.replace_spans_keeping(text, spans, &[], rng, mode)
    }

    /// [`Deidentify::replace_spans_in`] of `spans` (none overlapping a
    /// range of `keep`); the output's `protected` holds the spans it
    /// replaced and where `keep`'s ranges moved.
    pub fn replace_spans_keeping(
        &self,
        text: &str,
        spans: &[detect::Span],
        keep: &[std::ops::Range<usize>],
        rng: &mut dyn RngCore,
        mode: &RandomMode,
    ) -> Sanitized {
        let spec = &self.spec;
        // Each span's input and output range, and whether it was replaced.
        let mut edits: Vec<(std::ops::Range<usize>, std::ops::Range<usize>)> = Vec::new();
        let mut replaced_at: Vec<bool> = Vec::new();
        let keyed = spec.consistent && matches!(mode, RandomMode::Keyed(_));
        let params = self.params();
        let shift = spans
            .iter()
            .any(|s| s.label == Label::Date && spec.operator(Label::Date) == Operator::Shift)
            .then(|| self.draw_shift(rng, mode));
        let mut out = String::with_capacity(text.len());
        let mut pos = 0;
        let mut tally = [Tally {
            min_pi: 1.0,
            ..Tally::default()
        }; 7];
        let (mut replaced, mut kept) = (0usize, 0usize);
        let mut memo: HashMap<(Label, &str), String> = HashMap::new();
        for s in spans {
            out.push_str(&text[pos..s.start]);
            let original = &text[s.start..s.end];
            pos = s.end;
            let at = out.len();
            let mut record = |out: &String, replaced: bool| {
                edits.push((s.start..s.end, at..out.len()));
                replaced_at.push(replaced);
            };
            let t = &mut tally[s.label.index()];
            t.spans += 1;
            let strategy = match spec.operator(s.label) {
                Operator::Keep => {
                    out.push_str(original);
                    kept += 1;
                    record(&out, false);
                    continue;
                }
                Operator::Shift => {
                    let days = shift.unwrap_or(0);
                    // What cannot be read as a date (a holiday) gets a surrogate date.
                    let r = dateshift::shift_date(original, days)
                        .unwrap_or_else(|| full_entity(Label::Date, original, rng).0);
                    out.push_str(&r);
                    replaced += 1;
                    t.replaced += 1;
                    record(&out, true);
                    continue;
                }
                Operator::Replace(strategy) => strategy,
            };
            if let Some(r) = spec
                .consistent
                .then(|| memo.get(&(s.label, original)))
                .flatten()
            {
                out.push_str(r);
                replaced += 1;
                t.replaced += 1;
                record(&out, true);
                continue;
            }
            let mut own;
            let rng: &mut dyn RngCore = if keyed {
                own = mode.rng_for(&[
                    b"deidentify consistent",
                    params.as_bytes(),
                    s.label.as_str().as_bytes(),
                    original.as_bytes(),
                ]);
                &mut own
            } else {
                &mut *rng
            };
            if rng.random::<f64>() >= spec.p {
                out.push_str(original);
                kept += 1;
                record(&out, false);
                continue;
            }
            replaced += 1;
            t.replaced += 1;
            let (r, pi) = match strategy {
                ReplaceStrategy::Redact => ("[REDACTED]".to_string(), 1.0),
                ReplaceStrategy::TypedPlaceholder => (format!("<{}>", s.label.as_str()), 1.0),
                ReplaceStrategy::NamedPlaceholder => (named(s.label).to_string(), 1.0),
                ReplaceStrategy::FullEntity => full_entity(s.label, original, rng),
                ReplaceStrategy::WordByWord => {
                    let seg = crate::text::Segmented::new(original);
                    let mut pi = 1.0;
                    let reps: Vec<Option<String>> = seg
                        .words()
                        .enumerate()
                        .map(|(i, w)| {
                            let (r, p) = surrogate_word(s.label, seg.word_str(w), i, rng);
                            pi *= p;
                            Some(r)
                        })
                        .collect();
                    (seg.render(&reps), pi)
                }
            };
            t.min_pi = t.min_pi.min(pi);
            if spec.consistent {
                memo.insert((s.label, original), r.clone());
            }
            out.push_str(&r);
            record(&out, true);
        }
        out.push_str(&text[pos..]);
        let protected = super::protected_after(keep, &edits, &replaced_at);
        let lemma_void =
            "consistent replacement depends on the original value: the lemma does not apply";
        let labels: Vec<LabelCost> = Label::ALL
            .iter()
            .filter(|l| tally[l.index()].spans > 0)
            .map(|&l| {
                let t = tally[l.index()];
                let op = spec.operator(l);
                let guarantee = match op {
                    Operator::Shift => Guarantee::None {
                        reason: "date shifting keeps intervals between dates: outside the lemma"
                            .to_string(),
                    },
                    Operator::Keep => Guarantee::None {
                        reason: "kept as written".to_string(),
                    },
                    Operator::Replace(_) if spec.consistent => Guarantee::None {
                        reason: lemma_void.to_string(),
                    },
                    Operator::Replace(_) => Guarantee::Replacement {
                        eps: lemma_eps(spec.p, t.min_pi),
                        p: spec.p,
                    },
                };
                LabelCost {
                    label: l.as_str(),
                    operator: op.name(),
                    spans: t.spans,
                    guarantee,
                }
            })
            .collect();
        let outside: Vec<&str> = labels
            .iter()
            .filter(|c| matches!(c.operator, "shift" | "keep"))
            .map(|c| c.label)
            .collect();
        let min_pi = tally.iter().map(|t| t.min_pi).fold(1.0, f64::min);
        let eps = lemma_eps(spec.p, min_pi);
        let guarantee = if spec.consistent {
            Guarantee::None {
                reason: lemma_void.to_string(),
            }
        } else if !outside.is_empty() {
            Guarantee::None {
                reason: format!(
                    "{} shifted or kept, outside the lemma; the other labels' eps is under labels",
                    outside.join(", ")
                ),
            }
        } else {
            Guarantee::Replacement { eps, p: spec.p }
        };
        let worst_case_eps = if matches!(guarantee, Guarantee::None { .. }) {
            f64::INFINITY
        } else {
            eps * spans.len() as f64
        };
        let cost = Cost {
            mechanism: "deidentify",
            guarantee,
            tokens: spans.len(),
            oov_tokens: 0,
            kept_tokens: kept,
            composition:
                "the lemma's eps per span (max over the surrogates drawn); spans compose by sum"
                    .to_string(),
            worst_case_eps,
            diameter_bound: 0.0,
            embedding: String::new(),
            output_set_size: replaced,
            labels,
            stages: Vec::new(),
            vocabulary: None,
        };
        Sanitized {
            text: out,
            cost,
            protected,
        }
    }
}

impl Mechanism for Deidentify {
    fn name(&self) -> &'static str {
        "deidentify"
    }

    fn uses_detection(&self) -> bool {
        true
    }

    fn params(&self) -> String {
        self.spec.key_params()
    }

    fn needs_key(&self) -> Option<&'static str> {
        self.spec.group.as_ref().map(|_| {
            "a rule GROUPED BY a column moves every value of a group by one date shift only under a secret key (without one, each value would move by its own)"
        })
    }

    fn sanitize(&self, text: &str, rng: &mut dyn RngCore, mode: &RandomMode) -> Result<Sanitized> {
        self.sanitize_many(&mut [(text, rng)], mode)
            .pop()
            .unwrap_or_else(|| Err(crate::Error::Model("no result".into())))
    }

    fn sanitize_many(
        &self,
        values: &mut [(&str, &mut dyn RngCore)],
        mode: &RandomMode,
    ) -> Vec<Result<Sanitized>> {
        self.sanitize_many_keeping(values, &[], mode)
    }

    /// Detection over every value in shared model calls; spans that
    /// overlap a kept range (what an earlier stage of a chain wrote) are
    /// left alone.
    fn sanitize_many_keeping(
        &self,
        values: &mut [(&str, &mut dyn RngCore)],
        keep: &[Vec<std::ops::Range<usize>>],
        mode: &RandomMode,
    ) -> Vec<Result<Sanitized>> {
        let texts: Vec<&str> = values.iter().map(|(t, _)| *t).collect();
        let spans = if self.spec.whole {
            texts.iter().map(|t| Ok(whole_value(t))).collect()
        } else {
            self.model.detect_many(&texts)
        };
        values
            .iter_mut()
            .zip(spans)
            .enumerate()
            .map(|(i, ((text, rng), spans))| {
                let keep = keep.get(i).map_or(&[][..], Vec::as_slice);
                let mut spans = spans?;
                spans.retain(|s| !super::overlaps(&(s.start..s.end), keep));
                // Surrogates cost microseconds a span: one check after detection.
                crate::cancel::check()?;
                Ok(self.replace_spans_keeping(text, &spans, keep, &mut **rng, mode))
            })
            .collect()
    }
}

/// A name column: the whole value is one person, its spacing included
/// (leading or trailing blanks would otherwise pass and tell how the raw
/// value was typed), and so is an empty or blank value (it is replaced
/// too, so that nothing of the value passes, emptiness included).
fn whole_value(text: &str) -> Vec<detect::Span> {
    vec![detect::Span {
        start: 0,
        end: text.len(),
        label: Label::Person,
        score: 1.0,
        source: detect::Source::Rule("whole_value"),
    }]
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::detect::{Source, Span};
    use crate::mechanisms::surrogates::lists;
    use rand::SeedableRng;
    use rand_chacha::ChaCha20Rng;

    fn model() -> Option<Arc<Detector>> {
        crate::assets::load_or_skip(|dir| Detector::load(dir, 1)).map(Arc::new)
    }

    fn spec(params: serde_json::Value) -> DeidentifySpec {
        match crate::mechanisms::MechanismSpec::parse("deidentify", &params).unwrap() {
            crate::mechanisms::MechanismSpec::Deidentify(d) => d,
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn operators_per_label_shift_dates_and_report_per_label() {
        let Some(m) = model() else { return };
        let d = Deidentify::from_spec(
            m,
            spec(serde_json::json!({"operators": {"DATE": "shift", "ID": "redact"}, "shift_days": 30})),
        )
        .unwrap();
        let text =
            "Admitted 03/14/2019, discharged 03/20/2019. Attending: Dr. Ybarra. MRN: 8249813.";
        let mut rng = rand_chacha::ChaCha20Rng::seed_from_u64(9);
        let out = d.sanitize(text, &mut rng, &RandomMode::Os).unwrap();
        assert!(
            !out.text.contains("Ybarra") && !out.text.contains("8249813"),
            "{}",
            out.text
        );
        assert!(out.text.contains("MRN: [REDACTED]"), "{}", out.text);
        // Both dates moved by the same non-zero number of days: 6 days apart still.
        let dates: Vec<&str> = out
            .text
            .split([' ', ',', '.'])
            .filter(|w| w.matches('/').count() == 2)
            .collect();
        assert_eq!(dates.len(), 2, "{}", out.text);
        assert_ne!(dates[0], "03/14/2019");
        // Shifting the first output date by 6 days gives the second.
        assert_eq!(
            super::dateshift::shift_date(dates[0], 6).as_deref(),
            Some(dates[1]),
            "{dates:?}"
        );
        let labels: Vec<(&str, &str)> = out
            .cost
            .labels
            .iter()
            .map(|l| (l.label, l.operator))
            .collect();
        assert!(
            labels.contains(&("DATE", "shift")) && labels.contains(&("ID", "redact")),
            "{labels:?}"
        );
        assert!(matches!(out.cost.guarantee, Guarantee::None { .. }));
        let person = out
            .cost
            .labels
            .iter()
            .find(|l| l.label == "PERSON")
            .unwrap();
        assert!(matches!(person.guarantee, Guarantee::Replacement { .. }));
    }

    #[test]
    fn a_group_fixes_the_shift_under_a_key() {
        let Some(m) = model() else { return };
        let key = RandomMode::Keyed(crate::rng::Secret::new("k"));
        let run = |group: &str, text: &str| {
            let d = Deidentify::from_spec(
                m.clone(),
                spec(serde_json::json!({"operators": "DATE:shift", "group": group})),
            )
            .unwrap();
            let mut rng = key.rng_for(&[text.as_bytes()]);
            d.sanitize(text, &mut rng, &key).unwrap().text
        };
        // Two notes of one patient: the same shift; another patient: another.
        let a = run("patient 7", "Seen 2019-03-14.");
        let b = run("patient 7", "Follow-up visit on 2019-03-14 went well.");
        let c = run("patient 8", "Seen 2019-03-14.");
        let date = |s: &str| {
            s.split_whitespace()
                .find(|w| w.starts_with("20"))
                .unwrap()
                .trim_end_matches('.')
                .to_string()
        };
        assert_eq!(date(&a), date(&b));
        assert_ne!(date(&a), date(&c), "{a} / {c}");
    }

    #[test]
    fn whole_values_are_one_person_detected_or_not() {
        let Some(m) = model() else { return };
        let d = Deidentify::from_spec(m, spec(serde_json::json!({"whole": true}))).unwrap();
        let mut rng = rand_chacha::ChaCha20Rng::seed_from_u64(1);
        for name in [
            "Maria Lopez",
            "  zzq qxv  ",
            "O'Brien-Smythe, Jr.",
            "   ",
            "",
        ] {
            let out = d.sanitize(name, &mut rng, &RandomMode::Os).unwrap();
            assert_eq!(out.cost.tokens, 1, "{name:?}");
            // Nothing of the value passes: not its words, nor its spacing,
            // nor its being blank.
            assert!(
                name.trim().is_empty() || !out.text.contains(name.trim()),
                "{name} -> {}",
                out.text
            );
            assert!(!out.text.trim().is_empty(), "{name:?} -> {:?}", out.text);
            assert_eq!(out.text, out.text.trim(), "{name:?} -> {:?}", out.text);
        }
    }

    #[test]
    fn strategies_replace_every_span_and_keep_the_rest() {
        let Some(m) = model() else { return };
        let t = "Patient Kathryn Herrera (MRN-580486) was seen on July 19, 2022 at Northgate University Hospital; call (555) 123-4567.";
        let spans = m.detect(t).unwrap();
        assert!(spans.len() >= 5, "{spans:?}");
        let mut rng = ChaCha20Rng::seed_from_u64(3);
        for strategy in [
            "redact",
            "typed_placeholder",
            "named_placeholder",
            "word_by_word",
            "full_entity",
        ] {
            let d = Deidentify::new(m.clone(), strategy.parse().unwrap(), 1.0, false).unwrap();
            let out = d.replace_spans(t, &spans, &mut rng);
            for s in &spans {
                assert!(
                    !out.text.contains(&t[s.start..s.end]),
                    "{strategy}: {} survived in {}",
                    &t[s.start..s.end],
                    out.text
                );
            }
            assert!(
                out.text.starts_with("Patient ") && out.text.contains(" was seen on "),
                "{}",
                out.text
            );
            assert_eq!(out.cost.kept_tokens, 0);
            assert!(
                matches!(out.cost.guarantee, Guarantee::Replacement { eps, .. } if eps == 0.0),
                "p = 1 gives eps 0"
            );
        }
        let typed =
            Deidentify::new(m.clone(), ReplaceStrategy::TypedPlaceholder, 1.0, false).unwrap();
        assert!(typed
            .replace_spans(t, &spans, &mut rng)
            .text
            .contains("<PERSON>"));
    }

    #[test]
    fn keep_rate_is_one_minus_p_and_eps_follows_the_lemma() {
        let Some(m) = model() else { return };
        let spans: Vec<Span> = (0..1)
            .map(|_| Span {
                start: 0,
                end: 4,
                label: Label::Person,
                score: 1.0,
                source: Source::Model,
            })
            .collect();
        let d = Deidentify::new(m, ReplaceStrategy::FullEntity, 0.7, false).unwrap();
        let mut rng = ChaCha20Rng::seed_from_u64(8);
        let n = 20_000;
        let kept = (0..n)
            .filter(|_| d.replace_spans("John", &spans, &mut rng).text == "John")
            .count();
        let share = kept as f64 / n as f64;
        // 4.5 standard deviations of a binomial proportion around 0.3.
        assert!(
            (share - 0.3).abs() < 4.5 * (0.21f64 / n as f64).sqrt(),
            "kept {share}"
        );
        let out = d.replace_spans("John", &spans, &mut rng);
        let l = lists();
        let want = lemma_eps(0.7, l.given.min_pi() * l.surnames.min_pi());
        assert!(
            matches!(out.cost.guarantee, Guarantee::Replacement { eps, .. } if (eps - want).abs() < 1e-9)
        );
    }

    #[test]
    fn consistent_replacement_maps_repeats_alike_and_says_the_lemma_is_void() {
        let Some(m) = model() else { return };
        let t = "Anna Berg met Anna Berg.";
        let spans = vec![
            Span {
                start: 0,
                end: 9,
                label: Label::Person,
                score: 1.0,
                source: Source::Model,
            },
            Span {
                start: 14,
                end: 23,
                label: Label::Person,
                score: 1.0,
                source: Source::Model,
            },
        ];
        let d = Deidentify::new(m, ReplaceStrategy::FullEntity, 1.0, true).unwrap();
        let out = d.replace_spans(t, &spans, &mut ChaCha20Rng::seed_from_u64(1));
        let parts: Vec<&str> = out.text.trim_end_matches('.').split(" met ").collect();
        assert_eq!(parts[0], parts[1], "{}", out.text);
        assert!(matches!(out.cost.guarantee, Guarantee::None { .. }));
        // Keyed: the same original maps alike across values, whatever the
        // value's own random stream.
        let key = RandomMode::from_settings(None, Some(b"consistent replacement key")).unwrap();
        let one = &spans[..1];
        let a = d
            .replace_spans_in("Anna Berg", one, &mut ChaCha20Rng::seed_from_u64(1), &key)
            .text;
        let b = d
            .replace_spans_in("Anna Berg", one, &mut ChaCha20Rng::seed_from_u64(2), &key)
            .text;
        assert_eq!(a, b);
        let c = d
            .replace_spans_in(
                "Anna Berg",
                one,
                &mut ChaCha20Rng::seed_from_u64(1),
                &RandomMode::Os,
            )
            .text;
        let e = d
            .replace_spans_in(
                "Anna Berg",
                one,
                &mut ChaCha20Rng::seed_from_u64(2),
                &RandomMode::Os,
            )
            .text;
        assert_ne!(c, e, "without a key, consistency is per value only");
    }

    #[test]
    fn p_zero_changes_nothing() {
        let Some(m) = model() else { return };
        let t = "Call Kathryn Herrera at (555) 123-4567 on May 3, 2024.";
        let spans = m.detect(t).unwrap();
        assert!(!spans.is_empty());
        let d = Deidentify::new(m, ReplaceStrategy::FullEntity, 0.0, false).unwrap();
        let out = d.replace_spans(t, &spans, &mut ChaCha20Rng::seed_from_u64(4));
        assert_eq!(out.text, t);
        assert_eq!(out.cost.kept_tokens, spans.len());
    }
}
