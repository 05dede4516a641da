//! Errors of the engine crate.

use goodput_scheduler::AdmissionError;

#[derive(Debug, thiserror::Error)]
pub enum EngineError {
    #[error(transparent)]
    Candle(#[from] candle_core::Error),
    #[error("weights: {0}")]
    Weights(String),
    #[error("config: {0}")]
    Config(String),
    /// Not a `#[source]`: the message already carries it, and a chain printer would repeat it.
    #[error("request refused: {0}")]
    Admission(AdmissionError),
    #[error("tokenizer: {0}")]
    Tokenizer(String),
    #[error("the engine has stopped")]
    Stopped,
    /// An admission limit: `waiting` requests wait for the engine (limit `limit`).
    #[error("{waiting} requests are waiting (limit {limit})")]
    Overloaded { waiting: usize, limit: usize },
    #[error("{0}")]
    Other(String),
}

pub type Result<T, E = EngineError> = std::result::Result<T, E>;

impl From<AdmissionError> for EngineError {
    fn from(e: AdmissionError) -> Self {
        Self::Admission(e)
    }
}
