//! Values refused: a field of a model's shape or config ([`FieldError`], [`HfConfigError`]),
//! a command-line value by its parser ([`ValueError`]).

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

/// A value refused by its parser (a flag's value, a `KEY=VALUE` part of one): the value as
/// given and what was expected instead (or what is wrong with it).
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("`{value}`: {expected}")]
pub struct ValueError {
    pub value: String,
    pub expected: String,
}

impl ValueError {
    pub fn new(value: impl Into<String>, expected: impl Into<String>) -> Self {
        Self { value: value.into(), expected: expected.into() }
    }
}
