//! The words a word mechanism draws from: the part of SanText's,
//! SanText+'s and CusText's parameters that picks their vocabulary.

use super::EmbeddingChoice;
use crate::error::{Error, Result};

/// The words a word mechanism (SanText, SanText+, CusText) draws from: an
/// embedding set, optionally restricted to a released vocabulary
/// ([`crate::vocab`]).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Words {
    /// Embedding set.
    pub embedding: EmbeddingChoice,
    /// A released vocabulary to restrict the words to ([`crate::vocab`]).
    pub vocabulary: Option<String>,
}

impl Words {
    /// The words of the JSON keys `embedding` (default `glove`) and
    /// `vocabulary` (default none; an empty name is none).
    pub fn parse(embedding: Option<&str>, vocabulary: Option<String>) -> Result<Self> {
        Ok(Words {
            embedding: embedding.map_or(Ok(EmbeddingChoice::default()), str::parse)?,
            vocabulary: vocabulary.filter(|v| !v.is_empty()),
        })
    }

    /// Checks the vocabulary's name, and that it restricts GloVe.
    pub fn validate(&self) -> Result<()> {
        if let Some(v) = &self.vocabulary {
            crate::vocab::check_name(v)?;
            if self.embedding != EmbeddingChoice::Glove {
                return Err(Error::invalid(
                    "vocabulary",
                    "a released vocabulary applies to the 'glove' embedding only",
                ));
            }
        }
        Ok(())
    }

    /// `params` with `embedding` added, and `vocabulary` after it when one
    /// is set (so that rules and provenance without one read as before).
    pub fn extend(&self, mut params: serde_json::Value) -> serde_json::Value {
        params["embedding"] = self.embedding.name().into();
        if let Some(v) = &self.vocabulary {
            params["vocabulary"] = v.as_str().into();
        }
        params
    }
}
