//! `goodput models`: the catalog as a table (parameter counts, weight and KV bytes, the kinds
//! of KV a token leaves) and as JSON, one typed row per model.

use crate::console as table;
use goodput_core::sizes::{KvPerToken, Params};
use goodput_core::{Catalog, ModelSpec};
use serde::Serialize;

/// One model of the catalog as `models --json` writes it.
#[derive(Serialize)]
pub struct Row<'a> {
    pub name: &'a str,
    pub spec: &'a ModelSpec,
    pub params: u64,
    pub active_params: u64,
    pub params_by_part: Params,
    pub sparse_layers: usize,
    pub expert_params: u64,
    pub weight_bytes_bf16: u64,
    pub weight_bytes_f32: u64,
    pub kv_bytes_per_token_bf16: u64,
    pub kv_bytes_per_token_f32: u64,
    pub kv_per_token_bf16: KvPerToken,
    pub sliding_window: Option<usize>,
}

impl<'a> Row<'a> {
    pub fn of(m: &'a ModelSpec) -> Self {
        Row {
            name: &m.name,
            spec: m,
            params: m.param_count(),
            active_params: m.active_param_count(),
            params_by_part: m.params(),
            sparse_layers: m.sparse_layers(),
            expert_params: m.expert_params(),
            weight_bytes_bf16: m.weight_bytes(2),
            weight_bytes_f32: m.weight_bytes(4),
            kv_bytes_per_token_bf16: m.kv_bytes_per_token(2),
            kv_bytes_per_token_f32: m.kv_bytes_per_token(4),
            kv_per_token_bf16: m.kv_per_token(2),
            sliding_window: m.sliding_window,
        }
    }
}

/// The catalog's rows as pretty JSON, every object's keys sorted (as `models --json` has
/// always written them).
pub fn json(cat: &Catalog) -> serde_json::Result<String> {
    let rows: Vec<Row> = cat.models.values().map(Row::of).collect();
    serde_json::to_string_pretty(&serde_json::to_value(&rows)?)
}

/// The catalog as a table, with where it came from and what its columns mean.
pub fn text(cat: &Catalog) -> String {
    let mut t = table::new(&[
        "model",
        "arch",
        "layers",
        "hidden",
        "heads/kv",
        "ctx",
        "params",
        "active",
        "experts",
        "weights bf16",
        "KV/token bf16",
        "KV kinds",
        "real weights",
    ]);
    for m in cat.models.values() {
        t.add_row(vec![
            m.name.clone(),
            m.architecture.name().to_string(),
            m.num_layers.to_string(),
            m.hidden_size.to_string(),
            format!("{}/{}", m.num_heads, m.num_kv_heads),
            m.max_position_embeddings.to_string(),
            params(m.param_count()),
            params(m.active_param_count()),
            m.moe
                .as_ref()
                .map_or("-".into(), |e| format!("{}/{} × {}", e.experts_per_token, e.num_experts, m.sparse_layers())),
            table::bytes(m.weight_bytes(2)),
            table::bytes(m.kv_bytes_per_token(2)),
            kv_kinds(m),
            m.hf_repo.clone().unwrap_or_else(|| "dummy only".into()),
        ]);
    }
    format!(
        "catalog: {}\n{t}\nAll models run with dummy weights by default (--weights dummy); see --weights for real ones.\n\
         active: the parameters one token uses (the routed experts it is not sent to left out); experts: top k of \
         the routed experts × sparse layers; KV kinds: bf16 bytes per token in full-attention, sliding-window \
         (kept for the window only) and latent (MLA) layers.",
        cat.origin
    )
}

fn params(n: u64) -> String {
    let n = n as f64;
    match n {
        x if x >= 1e12 => format!("{:.2} T", x / 1e12),
        x if x >= 1e9 => format!("{:.2} B", x / 1e9),
        x => format!("{:.1} M", x / 1e6),
    }
}

fn kv_kinds(m: &ModelSpec) -> String {
    let kv = m.kv_per_token(2);
    let mut parts = Vec::new();
    if kv.full > 0 {
        parts.push(format!("full {}", table::bytes(kv.full)));
    }
    if kv.sliding > 0 {
        parts.push(format!("window {} {}", m.sliding_window.unwrap_or(0), table::bytes(kv.sliding)));
    }
    if kv.latent > 0 {
        parts.push(format!("latent {}", table::bytes(kv.latent)));
    }
    parts.join(", ")
}
