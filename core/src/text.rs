//! Word segmentation with byte offsets, and re-assembly.
//!
//! A text is cut into alternating *words* (maximal runs of Unicode
//! alphanumeric characters) and *gaps* (everything else: whitespace,
//! punctuation, symbols, emoji). Mechanisms replace words; gaps are copied
//! back byte for byte, so the sanitized text keeps the layout of the original.
//! The casing of each original word (lower, Title, UPPER) is carried over to
//! its replacement, because the vocabularies are lower-case.

use std::ops::Range;

/// One word of a text: its byte range in the original string.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Word {
    /// Byte offsets into the original string (`&text[span]` is the word).
    pub span: Range<usize>,
}

/// A text cut into words, keeping the original for re-assembly.
#[derive(Debug, Clone)]
pub struct Segmented<'a> {
    text: &'a str,
    words: Vec<Word>,
}

impl<'a> Segmented<'a> {
    /// Cuts `text` into words.
    ///
    /// ```
    /// let s = dptext_core::text::Segmented::new("Dr. Ann  saw 3 patients!");
    /// let words: Vec<&str> = s.words().map(|w| s.word_str(w)).collect();
    /// assert_eq!(words, ["Dr", "Ann", "saw", "3", "patients"]);
    /// ```
    pub fn new(text: &'a str) -> Self {
        let mut words = Vec::new();
        let mut start: Option<usize> = None;
        for (i, c) in text.char_indices() {
            if c.is_alphanumeric() {
                if start.is_none() {
                    start = Some(i);
                }
            } else if let Some(s) = start.take() {
                words.push(Word { span: s..i });
            }
        }
        if let Some(s) = start {
            words.push(Word {
                span: s..text.len(),
            });
        }
        Segmented { text, words }
    }

    /// The original text.
    pub fn text(&self) -> &'a str {
        self.text
    }

    /// The words, in order.
    pub fn words(&self) -> impl Iterator<Item = &Word> {
        self.words.iter()
    }

    /// Number of words.
    pub fn len(&self) -> usize {
        self.words.len()
    }

    /// True when the text has no word at all (empty, only punctuation, ...).
    pub fn is_empty(&self) -> bool {
        self.words.is_empty()
    }

    /// The text of one word.
    pub fn word_str(&self, w: &Word) -> &'a str {
        &self.text[w.span.clone()]
    }

    /// Re-assembles the text with word `i` replaced by `replacements[i]`, the
    /// gaps copied unchanged and each original word's casing carried over.
    ///
    /// `replacements` must have one entry per word; `None` keeps the word.
    pub fn render(&self, replacements: &[Option<String>]) -> String {
        debug_assert_eq!(replacements.len(), self.words.len());
        let mut out = String::with_capacity(self.text.len() + self.text.len() / 4);
        let mut pos = 0;
        for (w, r) in self.words.iter().zip(replacements) {
            out.push_str(&self.text[pos..w.span.start]);
            let original = &self.text[w.span.clone()];
            match r {
                Some(r) => out.push_str(&Casing::of(original).apply(r)),
                None => out.push_str(original),
            }
            pos = w.span.end;
        }
        out.push_str(&self.text[pos..]);
        out
    }
}

/// The casing of a word, as far as it can be carried to another word.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Casing {
    /// No upper-case letter (or no letter at all): the replacement is used as is.
    Lower,
    /// First letter upper-case, the rest not: `Title`.
    Title,
    /// Every letter upper-case and at least two letters: `UPPER`.
    Upper,
}

impl Casing {
    /// Detects the casing of `word`.
    ///
    /// ```
    /// use dptext_core::text::Casing;
    /// assert_eq!(Casing::of("NHS"), Casing::Upper);
    /// assert_eq!(Casing::of("London"), Casing::Title);
    /// assert_eq!(Casing::of("I"), Casing::Title);
    /// assert_eq!(Casing::of("iPhone"), Casing::Lower);
    /// ```
    pub fn of(word: &str) -> Casing {
        let mut letters = word.chars().filter(|c| c.is_alphabetic());
        let Some(first) = letters.next() else {
            return Casing::Lower;
        };
        if !first.is_uppercase() {
            return Casing::Lower;
        }
        let (mut upper, mut lower) = (0usize, 0usize);
        for c in letters {
            if c.is_uppercase() {
                upper += 1;
            } else {
                lower += 1;
            }
        }
        match (upper, lower) {
            (0, _) => Casing::Title,
            (_, 0) => Casing::Upper,
            _ => Casing::Lower,
        }
    }

    /// Applies this casing to `word`.
    pub fn apply(self, word: &str) -> String {
        match self {
            Casing::Lower => word.to_string(),
            Casing::Upper => word.to_uppercase(),
            Casing::Title => {
                let mut chars = word.chars();
                match chars.next() {
                    Some(f) => f.to_uppercase().chain(chars).collect(),
                    None => String::new(),
                }
            }
        }
    }
}

/// The at most `max` bytes of `text` just before byte `at`, starting on a
/// character boundary (so possibly a few bytes fewer): the context a rule
/// reads before a match.
///
/// ```
/// assert_eq!(dptext_core::text::before("lives in Springfield", 9, 6), "es in ");
/// assert_eq!(dptext_core::text::before("é x", 3, 2), " ");
/// ```
pub fn before(text: &str, at: usize, max: usize) -> &str {
    let mut from = at.saturating_sub(max);
    while !text.is_char_boundary(from) {
        from += 1;
    }
    &text[from..at]
}

#[cfg(test)]
mod tests {
    use super::*;

    fn words(t: &str) -> Vec<String> {
        let s = Segmented::new(t);
        s.words().map(|w| s.word_str(w).to_string()).collect()
    }

    #[test]
    fn segments_words_with_offsets() {
        let t = "Mr. O'Neil, 45 y/o — seen 2024-01-03.";
        let s = Segmented::new(t);
        let got: Vec<(usize, usize)> = s.words().map(|w| (w.span.start, w.span.end)).collect();
        assert_eq!(
            words(t),
            ["Mr", "O", "Neil", "45", "y", "o", "seen", "2024", "01", "03"]
        );
        for ((a, b), w) in got.iter().zip(words(t)) {
            assert_eq!(&t[*a..*b], w);
        }
    }

    #[test]
    fn non_ascii_and_empty_inputs() {
        assert!(Segmented::new("").is_empty());
        assert!(Segmented::new(" ,.;!? 🙂 ").is_empty());
        assert_eq!(words("Пациент жалуется"), ["Пациент", "жалуется"]);
        assert_eq!(words("naïve café"), ["naïve", "café"]);
        assert_eq!(words("a🙂b"), ["a", "b"]);
    }

    #[test]
    fn render_keeps_gaps_and_casing() {
        let t = "  Patient JOHN said: fine!\n";
        let s = Segmented::new(t);
        let r = vec![
            Some("person".to_string()),
            Some("mary".to_string()),
            None,
            Some("good".to_string()),
        ];
        assert_eq!(s.render(&r), "  Person MARY said: good!\n");
        assert_eq!(s.render(&[None, None, None, None]), t);
    }

    #[test]
    fn casing_round_trip() {
        assert_eq!(Casing::of("Ä").apply("über"), "Über");
        assert_eq!(Casing::of("HELLO").apply("straße"), "STRASSE");
        assert_eq!(Casing::of("hello").apply("x"), "x");
        assert_eq!(Casing::of("123").apply("abc"), "abc");
    }
}
