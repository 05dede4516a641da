//! One prompt through the engine, its tokens handed out as they come (`goodput generate`):
//! the prompt as text (optionally wrapped as one ChatML user turn) or as token ids, the engine
//! started on a loaded model, and the request's record when it ends.

use crate::loader::LoadedModel;
use crate::tokenizer::{Tokenizer, TokenizerError};
use crate::EngineError;
use crate::{Engine, EngineConfig, RequestEvent};
use goodput_core::{Clock, EngineRecord, SamplingParams};

/// What to send.
pub enum Prompt<'a> {
    /// Text, tokenized; with `chat`, wrapped as one user turn of a ChatML conversation
    /// (`<|im_start|>user …`), when the tokenizer has those tokens.
    Text { text: &'a str, chat: bool },
    /// Token ids as given.
    Ids(Vec<u32>),
}

/// Why a generation failed.
#[derive(Debug, thiserror::Error)]
pub enum GenerateError {
    #[error("--chat: this tokenizer has no <|im_start|> token (ChatML); pass the prompt as it should be sent")]
    NoChatml,
    #[error("tokenizing the prompt: {0}")]
    Tokenize(#[source] TokenizerError),
    #[error("decoding a token: {0}")]
    Decode(#[source] TokenizerError),
    #[error(transparent)]
    Engine(#[from] EngineError),
    #[error("generation failed: {0}")]
    Failed(String),
    #[error("the engine stopped before the request finished")]
    Stopped,
    #[error("writing the output: {0}")]
    Output(#[from] std::io::Error),
}

/// Token ids written `1,2,3` (0 is a valid id).
pub fn parse_ids(s: &str) -> Result<Vec<u32>, goodput_core::ValueError> {
    s.split(',')
        .map(|x| {
            let x = x.trim();
            x.parse::<u32>().map_err(|_| match x.parse::<u64>() {
                Ok(_) => goodput_core::ValueError::new(x, "a token id too large (token ids are u32)"),
                Err(_) => goodput_core::ValueError::new(x, "not a token id (expected ids like 1,2,3)"),
            })
        })
        .collect()
}

/// The prompt's token ids.
pub fn prompt_ids(tok: &Tokenizer, prompt: Prompt) -> Result<Vec<u32>, GenerateError> {
    let (text, chat) = match prompt {
        Prompt::Ids(ids) => return Ok(ids),
        Prompt::Text { text, chat } => (text, chat),
    };
    let text = if chat {
        if tok.token_to_id("<|im_start|>").is_none() {
            return Err(GenerateError::NoChatml);
        }
        format!("<|im_start|>user\n{text}<|im_end|>\n<|im_start|>assistant\n")
    } else {
        text.to_string()
    };
    tok.encode(&text).map_err(GenerateError::Tokenize)
}

/// Generates from `prompt` on `loaded`'s model with `config`: `on_token` takes each token id
/// and the text it completes (none while a character is still incomplete); returns the
/// request's record once it ends and the engine has stopped.
pub fn generate(
    loaded: LoadedModel,
    config: EngineConfig,
    prompt: Vec<u32>,
    params: SamplingParams,
    on_token: &mut dyn FnMut(u32, Option<&str>) -> std::io::Result<()>,
) -> Result<EngineRecord, GenerateError> {
    let engine = Engine::start(loaded.model, config, Clock::new(), None)?;
    let stream = engine.handle().submit(prompt, params)?;
    let mut decoder = loaded.tokenizer.decode_stream();
    let mut record = None;
    for ev in stream.events.iter() {
        match ev {
            RequestEvent::Token { token, .. } => {
                let piece = decoder.step(token).map_err(GenerateError::Decode)?;
                on_token(token, piece.as_deref())?;
            }
            RequestEvent::Finished { record: r, .. } => {
                record = Some(r);
                break;
            }
            RequestEvent::Error(e) => return Err(GenerateError::Failed(e)),
        }
    }
    drop(stream);
    engine.shutdown(false);
    record.ok_or(GenerateError::Stopped)
}

/// Decode tokens per second of a request: its tokens after the first over its decode time
/// (NaN with fewer than two tokens).
pub fn decode_rate(r: &EngineRecord) -> f64 {
    match (goodput_metrics::engine::decode_time(r), r.generated_tokens) {
        (Some(d), n) if n > 1 && d > 0.0 => (n - 1) as f64 / d,
        _ => f64::NAN,
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn prompt_ids() {
        assert_eq!(super::parse_ids("0, 5,7").unwrap(), vec![0, 5, 7]);
        assert_eq!(super::parse_ids("5,x").unwrap_err().value, "x");
        assert!(super::parse_ids("4294967301").unwrap_err().expected.contains("too large"));
        assert!(super::parse_ids("").is_err());
    }
}
