//! A value of a model's shape or config refused: which field, and why.

/// A field of a model's shape (a catalog entry, a `config.json`, a GGUF's metadata) that
/// goodput cannot use: `field` names it as the file does (`moe.n_group`, `rope_scaling`),
/// `message` says why, naming it too.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{message}")]
pub struct FieldError {
    pub field: String,
    pub message: String,
}

impl FieldError {
    pub fn new(field: impl Into<String>, message: impl Into<String>) -> Self {
        Self { field: field.into(), message: message.into() }
    }
}

/// Why a `config.json` gives no model spec: not JSON of a config, or a field refused.
#[derive(Debug, thiserror::Error)]
pub enum HfConfigError {
    #[error("config.json: {0}")]
    Json(#[from] serde_json::Error),
    #[error("config.json: {0}")]
    Field(#[from] FieldError),
}
