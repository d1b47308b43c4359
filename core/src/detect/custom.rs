//! Recognizers a user adds without rebuilding anything (Presidio's pattern
//! and deny-list recognizers, allow list and score threshold): a table
//! `dptext.recognizers` in SQL, a JSON file for the CLI.
//!
//! ```json
//! {"threshold": 0.0,
//!  "allow": ["Dr. Seuss"],
//!  "recognizers": [
//!    {"name": "badge", "label": "ID", "pattern": "\\bB-[0-9]{5}\\b", "context": ["badge"], "score": 0.6},
//!    {"name": "our hospitals", "label": "ORGANIZATION", "words": ["MGH", "Boston Children's"]}]}
//! ```
//!
//! - A **pattern** recognizer reports every match of its regular expression
//!   (the group named `v` when it has one) with its score, raised by 0.35
//!   (at most to 1) when one of its context words is within 50 bytes before.
//! - A **words** recognizer (a deny list) reports every whole-word,
//!   case-insensitive occurrence of its words.
//! - The **allow** list drops any span, from any layer, whose text is on it
//!   (case-insensitive).
//! - The **threshold** drops any span scoring below it (0 keeps all).
//!
//! Custom spans rank with the built-in rules when overlaps are resolved;
//! their source is `custom`.

use std::collections::HashSet;

use regex::Regex;
use serde::Deserialize;

use super::{Label, Source, Span};
use crate::error::{Error, Result};

/// Longest pattern accepted, in bytes.
pub const MAX_PATTERN_BYTES: usize = 4096;
/// Compiled size limit of one pattern (bytes of automaton).
const REGEX_SIZE_LIMIT: usize = 1 << 20;
const CONTEXT_WINDOW: usize = 50;
const CONTEXT_BOOST: f32 = 0.35;

/// One recognizer as written in the table or the file.
#[derive(Debug, Clone, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct RecognizerDef {
    /// A name for errors and for the span's source.
    pub name: String,
    /// The label its spans get.
    pub label: String,
    /// A regular expression (Rust `regex` syntax), or
    #[serde(default)]
    pub pattern: Option<String>,
    /// words and phrases to flag wherever they occur.
    #[serde(default)]
    pub words: Option<Vec<String>>,
    /// Words that raise the score when found shortly before a match.
    #[serde(default)]
    pub context: Vec<String>,
    /// Score of a match, in (0, 1].
    #[serde(default = "default_score")]
    pub score: f32,
}

fn default_score() -> f32 {
    0.85
}

/// The whole configuration as the CLI reads it.
#[derive(Debug, Clone, Default, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct CustomDef {
    /// Spans scoring below this are dropped (0 keeps all).
    #[serde(default)]
    pub threshold: f32,
    /// Texts that are never PII.
    #[serde(default)]
    pub allow: Vec<String>,
    /// The recognizers.
    #[serde(default)]
    pub recognizers: Vec<RecognizerDef>,
}

#[derive(Debug)]
struct Recognizer {
    label: Label,
    /// The pattern, or the word list compiled to one.
    re: Regex,
    context: Vec<String>,
    score: f32,
}

/// Compiled custom recognizers, allow list and threshold.
#[derive(Debug, Default)]
pub struct Custom {
    recognizers: Vec<Recognizer>,
    allow: HashSet<String>,
    threshold: f32,
}

fn bad(name: &str, why: impl std::fmt::Display) -> Error {
    Error::invalid("recognizers", format!("recognizer {name:?}: {why}"))
}

impl Custom {
    /// Compiles a configuration; errors name the recognizer at fault.
    pub fn new(def: CustomDef) -> Result<Self> {
        if !(0.0..=1.0).contains(&def.threshold) {
            return Err(Error::invalid(
                "threshold",
                format!("must be in [0, 1], got {}", def.threshold),
            ));
        }
        let mut recognizers = Vec::new();
        for r in def.recognizers {
            let label: Label = r.label.trim().to_ascii_uppercase().parse().map_err(|_| {
                bad(&r.name, format!("unknown label {:?}; the labels are PERSON, LOCATION, ORGANIZATION, DATE, AGE, CONTACT, ID", r.label))
            })?;
            if !(r.score > 0.0 && r.score <= 1.0) {
                return Err(bad(
                    &r.name,
                    format!("score must be in (0, 1], got {}", r.score),
                ));
            }
            let compile = |p: &str| {
                if p.len() > MAX_PATTERN_BYTES {
                    return Err(bad(
                        &r.name,
                        format!("pattern longer than {MAX_PATTERN_BYTES} bytes"),
                    ));
                }
                regex::RegexBuilder::new(p)
                    .size_limit(REGEX_SIZE_LIMIT)
                    .build()
                    .map_err(|e| bad(&r.name, e))
            };
            let re = match (&r.pattern, &r.words) {
                (Some(p), None) => compile(p)?,
                (None, Some(ws)) => {
                    let ws: Vec<String> = ws
                        .iter()
                        .map(|w| w.trim())
                        .filter(|w| !w.is_empty())
                        .map(regex::escape)
                        .collect();
                    if ws.is_empty() {
                        return Err(bad(&r.name, "the word list is empty"));
                    }
                    compile(&format!(
                        r"(?i)(?:^|\b|\W)(?P<v>{})(?:\b|\W|$)",
                        ws.join("|")
                    ))?
                }
                _ => return Err(bad(&r.name, "give exactly one of pattern and words")),
            };
            recognizers.push(Recognizer {
                label,
                re,
                context: r.context.iter().map(|c| c.to_ascii_lowercase()).collect(),
                score: r.score,
            });
        }
        Ok(Custom {
            recognizers,
            allow: def.allow.iter().map(|a| a.trim().to_lowercase()).collect(),
            threshold: def.threshold,
        })
    }

    /// Reads the JSON configuration (the CLI's `--recognizers FILE`).
    pub fn from_json(text: &str) -> Result<Self> {
        let def: CustomDef =
            serde_json::from_str(text).map_err(|e| Error::invalid("recognizers", e.to_string()))?;
        Custom::new(def)
    }

    /// Whether nothing is configured.
    pub fn is_empty(&self) -> bool {
        self.recognizers.is_empty() && self.allow.is_empty() && self.threshold == 0.0
    }

    /// Every custom recognizer's spans in `text`.
    pub fn find(&self, text: &str) -> Vec<Span> {
        // ASCII lower case keeps every byte offset of the text.
        let lower = text.to_ascii_lowercase();
        let mut out = Vec::new();
        for r in &self.recognizers {
            for c in r.re.captures_iter(text) {
                let Some(m) = c.name("v").or_else(|| c.get(0)) else {
                    continue;
                };
                if m.start() == m.end() {
                    continue;
                }
                let mut score = r.score;
                if !r.context.is_empty() {
                    let before = crate::text::before(&lower, m.start(), CONTEXT_WINDOW);
                    if r.context.iter().any(|w| before.contains(w.as_str())) {
                        score = (score + CONTEXT_BOOST).min(1.0);
                    }
                }
                out.push(Span {
                    start: m.start(),
                    end: m.end(),
                    label: r.label,
                    score,
                    source: Source::Rule("custom"),
                });
            }
        }
        out
    }

    /// Drops spans on the allow list or under the threshold.
    pub fn filter(&self, text: &str, spans: &mut Vec<Span>) {
        spans.retain(|s| {
            s.score >= self.threshold
                && !self
                    .allow
                    .contains(&text[s.start..s.end].trim().to_lowercase())
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn custom(json: &str) -> Custom {
        Custom::from_json(json).unwrap()
    }

    #[test]
    fn patterns_words_context_allow_and_threshold() {
        let c = custom(
            r#"{"threshold": 0.5, "allow": ["dr. seuss"],
                "recognizers": [
                  {"name": "badge", "label": "ID", "pattern": "\\bB-[0-9]{5}\\b", "context": ["badge"], "score": 0.4},
                  {"name": "ours", "label": "organization", "words": ["MGH", "Boston Children's"]}]}"#,
        );
        let t = "Badge B-12345 seen at mgh and Boston Children's; also B-99999. Dr. Seuss";
        let mut spans = c.find(t);
        let got: Vec<(&str, Label, f32)> = spans
            .iter()
            .map(|s| (&t[s.start..s.end], s.label, s.score))
            .collect();
        assert!(got.contains(&("B-12345", Label::Id, 0.75)), "{got:?}");
        assert!(got.contains(&("B-99999", Label::Id, 0.4)), "{got:?}");
        assert!(got.contains(&("mgh", Label::Organization, 0.85)), "{got:?}");
        assert!(
            got.contains(&("Boston Children's", Label::Organization, 0.85)),
            "{got:?}"
        );
        spans.push(Span {
            start: t.len() - 9,
            end: t.len(),
            label: Label::Person,
            score: 0.9,
            source: Source::Model,
        });
        c.filter(t, &mut spans);
        let kept: Vec<&str> = spans.iter().map(|s| &t[s.start..s.end]).collect();
        assert!(!kept.contains(&"B-99999"), "under the threshold: {kept:?}");
        assert!(!kept.contains(&"Dr. Seuss"), "allowed: {kept:?}");
        assert!(kept.contains(&"B-12345"));
        // Letters whose lower case is longer do not move offsets or turn context off.
        let t = "İİ Badge B-12345 Ω";
        let spans = c.find(t);
        assert!(
            spans
                .iter()
                .any(|s| &t[s.start..s.end] == "B-12345" && s.score == 0.75),
            "{spans:?}"
        );
    }

    #[test]
    fn bad_definitions_name_the_recognizer() {
        for (json, needle) in [
            (
                r#"{"recognizers": [{"name": "x", "label": "NAME", "words": ["a"]}]}"#,
                "unknown label",
            ),
            (
                r#"{"recognizers": [{"name": "y", "label": "ID", "pattern": "("}]}"#,
                "\"y\"",
            ),
            (
                r#"{"recognizers": [{"name": "z", "label": "ID"}]}"#,
                "exactly one",
            ),
            (
                r#"{"recognizers": [{"name": "w", "label": "ID", "words": ["a"], "score": 2}]}"#,
                "score",
            ),
            (r#"{"threshold": 3}"#, "threshold"),
            (r#"{"recognisers": []}"#, "unknown field"),
        ] {
            let e = Custom::from_json(json).unwrap_err().to_string();
            assert!(e.contains(needle), "{json}: {e}");
        }
    }
}
