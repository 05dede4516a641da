//! Text ↔ token ids: what the HTTP client needs to write prompts as text and count what it
//! receives, and what the workloads need to build prompts from text (RAG's assembled prompt,
//! a dataset's conversations). The model's tokenizer lives in the engine; a front end hands
//! it over as a [`TextCodec`], so neither the client nor the workloads depend on the engine.

use crate::request::TokenId;

/// Text ↔ token ids, for text prompts, counting received tokens and conversation history.
pub trait TextCodec: Send + Sync + 'static {
    fn encode(&self, text: &str) -> Result<Vec<TokenId>, CodecError>;
    fn decode(&self, ids: &[TokenId]) -> Result<String, CodecError>;
    /// A prompt's ids as they are to be written as text: a codec whose decoding loses
    /// arbitrary ids (the byte scheme of dummy models: bytes that are not UTF-8 become U+FFFD,
    /// so random prompts would read back as runs of one character, shared by every request)
    /// maps each onto an id that reads back as itself. Equal ids stay equal, so prefixes
    /// shared by token stay shared by text. Others keep the ids.
    fn writable(&self, ids: &[TokenId]) -> Vec<TokenId> {
        ids.to_vec()
    }
}

/// A codec's failure: the tokenizer's own error, kept as the cause (shown as its message).
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct CodecError(pub Box<dyn std::error::Error + Send + Sync>);

impl CodecError {
    pub fn new(e: impl Into<Box<dyn std::error::Error + Send + Sync>>) -> Self {
        Self(e.into())
    }
}
