//! `goodput generate`: one prompt through the in-process engine, streamed to stdout.

use crate::args::{EngineArgs, ModelArgs};
use anyhow::{bail, Context, Result};
use clap::Args;
use goodput_core::{Clock, SamplingParams};
use goodput_engine::{Engine, RequestEvent};
use goodput_metrics::engine as em;
use std::io::Write;

#[derive(Args, Debug)]
pub struct GenerateArgs {
    #[command(flatten)]
    pub model: ModelArgs,
    #[command(flatten)]
    pub engine: EngineArgs,
    /// The prompt text.
    #[arg(long, short = 'p', conflicts_with = "prompt_ids")]
    pub prompt: Option<String>,
    /// The prompt as token ids, `1,2,3`.
    #[arg(long)]
    pub prompt_ids: Option<String>,
    /// Wrap the prompt as one user turn of a ChatML conversation (`<|im_start|>user …`),
    /// when the tokenizer has those tokens.
    #[arg(long)]
    pub chat: bool,
    #[arg(long, default_value_t = 64)]
    pub max_tokens: usize,
    #[arg(long, default_value_t = 0)]
    pub min_tokens: usize,
    /// 0 = greedy.
    #[arg(long, default_value_t = 0.0)]
    pub temperature: f32,
    #[arg(long, default_value_t = 0)]
    pub top_k: usize,
    #[arg(long, default_value_t = 1.0)]
    pub top_p: f32,
    #[arg(long, default_value_t = 0)]
    pub seed: u64,
    /// Generate exactly --max-tokens, ignoring end-of-sequence.
    #[arg(long)]
    pub ignore_eos: bool,
    /// Print token ids instead of text.
    #[arg(long)]
    pub ids: bool,
}

pub fn run(a: GenerateArgs) -> Result<()> {
    let spec = a.model.source().spec()?;
    let max_len = a.engine.max_model_len.unwrap_or(spec.max_position_embeddings);
    a.engine.options().apply_before_load();
    let loaded = crate::args::load(&a.model.source(), max_len)?;
    let tok = &loaded.tokenizer;
    let prompt: Vec<u32> = match (&a.prompt, &a.prompt_ids) {
        (_, Some(ids)) => parse_ids(ids)?,
        (Some(text), None) => {
            let text = if a.chat {
                if tok.token_to_id("<|im_start|>").is_none() {
                    bail!("--chat: this tokenizer has no <|im_start|> token (ChatML); pass the prompt as it should be sent");
                }
                format!("<|im_start|>user\n{text}<|im_end|>\n<|im_start|>assistant\n")
            } else {
                text.clone()
            };
            tok.encode(&text).context("tokenizing the prompt")?
        }
        (None, None) => bail!("give --prompt TEXT or --prompt-ids 1,2,3"),
    };
    let params = SamplingParams {
        max_tokens: a.max_tokens,
        min_tokens: a.min_tokens,
        temperature: a.temperature,
        top_k: a.top_k,
        top_p: a.top_p,
        seed: a.seed,
        ignore_eos: a.ignore_eos,
        stop_token_ids: Vec::new(),
        reasoning_tokens: 0,
    };
    let engine = Engine::start(loaded.model, a.engine.options().config()?, Clock::new(), None)?;
    let stream = engine.handle().submit(prompt.clone(), params)?;
    let mut decoder = tok.decode_stream();
    let mut out = std::io::stdout().lock();
    let mut record = None;
    for ev in stream.events.iter() {
        match ev {
            RequestEvent::Token { token, .. } => {
                if a.ids {
                    write!(out, "{token} ")?;
                } else if let Some(piece) = decoder.step(token)? {
                    write!(out, "{piece}")?;
                }
                out.flush()?;
            }
            RequestEvent::Finished { record: r, .. } => {
                record = Some(r);
                break;
            }
            RequestEvent::Error(e) => bail!("generation failed: {e}"),
        }
    }
    writeln!(out)?;
    engine.shutdown(false);
    let r = record.context("the engine stopped before the request finished")?;
    let decode_tps = match (em::decode_time(&r), r.generated_tokens) {
        (Some(d), n) if n > 1 && d > 0.0 => (n - 1) as f64 / d,
        _ => f64::NAN,
    };
    eprintln!(
        "model {} ({} weights, {}), prompt {} tokens, generated {} ({:?}); queue {:.1} ms, prefill {:.1} ms, decode {:.1} tok/s; load {:.2} s",
        spec.name,
        loaded.weights_kind,
        loaded.weights_origin,
        r.prompt_tokens,
        r.generated_tokens,
        r.finish_reason,
        em::queue_time(&r).unwrap_or(f64::NAN) * 1e3,
        em::prefill_time(&r).unwrap_or(f64::NAN) * 1e3,
        decode_tps,
        loaded.load_secs,
    );
    Ok(())
}

/// Token ids, `1,2,3` (0 is a valid id).
fn parse_ids(s: &str) -> Result<Vec<u32>> {
    s.split(',')
        .map(|x| {
            let x = x.trim();
            x.parse::<u32>().map_err(|_| match x.parse::<u64>() {
                Ok(_) => anyhow::anyhow!("--prompt-ids: token id {x} is too large (token ids are u32)"),
                Err(_) => anyhow::anyhow!("--prompt-ids: `{x}` is not a token id (expected ids like 1,2,3)"),
            })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    #[test]
    fn prompt_ids() {
        assert_eq!(super::parse_ids("0, 5,7").unwrap(), vec![0, 5, 7]);
        assert!(super::parse_ids("5,x").unwrap_err().to_string().contains("`x` is not a token id"));
        assert!(super::parse_ids("4294967301").unwrap_err().to_string().contains("too large"));
        assert!(super::parse_ids("").is_err());
    }
}
