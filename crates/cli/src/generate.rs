//! `goodput generate`: one prompt through the in-process engine ([`goodput_engine::generate`]),
//! streamed to stdout.

use crate::args::{EngineArgs, ModelArgs};
use anyhow::{anyhow, bail, Result};
use clap::Args;
use goodput_core::SamplingParams;
use goodput_engine::generate::{self, Prompt};
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
    let mut warnings = Vec::new();
    let loaded = a.model.source().load(max_len, &mut warnings)?;
    warnings.iter().for_each(|w| eprintln!("goodput: warning: {w}"));
    let prompt = match (&a.prompt, &a.prompt_ids) {
        (_, Some(ids)) => Prompt::Ids(generate::parse_ids(ids).map_err(|e| anyhow!("--prompt-ids: {e}"))?),
        (Some(text), None) => Prompt::Text { text, chat: a.chat },
        (None, None) => bail!("give --prompt TEXT or --prompt-ids 1,2,3"),
    };
    let prompt = generate::prompt_ids(&loaded.tokenizer, prompt)?;
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
    let (kind, origin, load_secs) = (loaded.weights_kind, loaded.weights_origin.clone(), loaded.load_secs);
    let mut out = std::io::stdout().lock();
    let mut write = |token: u32, piece: Option<&str>| {
        match (a.ids, piece) {
            (true, _) => write!(out, "{token} ")?,
            (false, Some(piece)) => write!(out, "{piece}")?,
            (false, None) => {}
        }
        out.flush()
    };
    let r = generate::generate(loaded, a.engine.options().config()?, prompt, params, &mut write)?;
    writeln!(out)?;
    eprintln!(
        "model {} ({kind} weights, {origin}), prompt {} tokens, generated {} ({:?}); queue {:.1} ms, prefill {:.1} ms, decode {:.1} tok/s; load {load_secs:.2} s",
        spec.name,
        r.prompt_tokens,
        r.generated_tokens,
        r.finish_reason,
        em::queue_time(&r).unwrap_or(f64::NAN) * 1e3,
        em::prefill_time(&r).unwrap_or(f64::NAN) * 1e3,
        generate::decode_rate(&r),
    );
    Ok(())
}
