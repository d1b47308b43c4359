//! WordPiece tokenization of single words over an [`Embeddings`] vocabulary.
//!
//! The text module has already cut the text into words; here each word is
//! normalised as BERT's uncased tokenizer does (lower-case, accents removed)
//! and split greedily, longest match first, into pieces (`##` marks a piece
//! that continues a word). A word that cannot be split is out of vocabulary.

use unicode_normalization::UnicodeNormalization;

use super::Embeddings;

/// Words longer than this (in characters) are out of vocabulary, as in BERT.
const MAX_WORD_CHARS: usize = 100;

/// Splits words into WordPiece ids.
pub struct WordPieces<'a> {
    emb: &'a Embeddings,
}

impl<'a> WordPieces<'a> {
    /// A tokenizer over `emb`'s vocabulary.
    pub fn new(emb: &'a Embeddings) -> Self {
        WordPieces { emb }
    }

    /// The BERT-uncased normal form of a word: NFD, combining marks
    /// dropped, lower-cased.
    pub fn normalise(word: &str) -> String {
        word.nfd()
            .filter(|c| !unicode_normalization::char::is_combining_mark(*c))
            .flat_map(char::to_lowercase)
            .collect()
    }

    /// The pieces of `word`, or `None` if it cannot be split over the vocabulary.
    ///
    /// ```
    /// use dptext_core::embeddings::{Embeddings, VocabKind, WordPieces};
    /// let words = ["the", "play", "##ing", "##s"].map(String::from).to_vec();
    /// let e = Embeddings::from_parts("t", VocabKind::Wordpiece, words, vec![0.0; 4], 1).unwrap();
    /// let wp = WordPieces::new(&e);
    /// assert_eq!(wp.split("Playing"), Some(vec![1, 2]));
    /// assert_eq!(wp.split("zebra"), None);
    /// ```
    pub fn split(&self, word: &str) -> Option<Vec<u32>> {
        let norm = Self::normalise(word);
        let chars: Vec<(usize, char)> = norm.char_indices().collect();
        if chars.is_empty() || chars.len() > MAX_WORD_CHARS {
            return None;
        }
        let mut pieces = Vec::new();
        let mut start = 0;
        let mut candidate = String::with_capacity(norm.len() + 2);
        while start < chars.len() {
            let mut end = chars.len();
            let mut found = None;
            while end > start {
                candidate.clear();
                if start > 0 {
                    candidate.push_str("##");
                }
                let b0 = chars[start].0;
                let b1 = chars.get(end).map_or(norm.len(), |c| c.0);
                candidate.push_str(&norm[b0..b1]);
                if let Some(id) = self.emb.id(&candidate) {
                    found = Some(id);
                    break;
                }
                end -= 1;
            }
            pieces.push(found?);
            start = end;
        }
        Some(pieces)
    }

    /// Joins sampled pieces back into a word: continuation markers are
    /// dropped, so `["play", "##ing"]` gives `playing`.
    pub fn join<'s>(pieces: impl IntoIterator<Item = &'s str>) -> String {
        pieces
            .into_iter()
            .map(|p| p.strip_prefix("##").unwrap_or(p))
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::embeddings::VocabKind;

    #[test]
    fn greedy_longest_match() {
        let words = ["un", "##aff", "##able", "una", "##ffable", "cafe"]
            .map(String::from)
            .to_vec();
        let e = Embeddings::from_parts("t", VocabKind::Wordpiece, words, vec![0.0; 6], 1).unwrap();
        let wp = WordPieces::new(&e);
        // "una" is longer than "un", so it wins; then "##ffable".
        assert_eq!(wp.split("unaffable"), Some(vec![3, 4]));
        assert_eq!(wp.split("Café"), Some(vec![5]));
        assert_eq!(wp.split(""), None);
        assert_eq!(wp.split(&"a".repeat(101)), None);
        assert_eq!(WordPieces::join(["una", "##ffable"]), "unaffable");
    }
}
