//! `goodput models`: the catalog with parameter counts, weight and KV bytes.

use anyhow::Result;
use clap::Args;
use goodput_core::Catalog;
use goodput_report::console as table;
use std::io::Write;
use std::path::PathBuf;

#[derive(Args, Debug)]
pub struct ModelsArgs {
    /// Read the catalog from this TOML file instead of the built-in one.
    #[arg(long)]
    pub catalog: Option<PathBuf>,
    /// Print JSON instead of a table.
    #[arg(long)]
    pub json: bool,
}

pub fn run(a: ModelsArgs) -> Result<()> {
    let cat = match &a.catalog {
        Some(p) => Catalog::from_path(p)?,
        None => Catalog::builtin(),
    };
    if a.json {
        let rows: Vec<serde_json::Value> = cat
            .models
            .values()
            .map(|m| {
                serde_json::json!({
                    "name": m.name, "spec": m, "params": m.param_count(), "active_params": m.active_param_count(),
                    "params_by_part": m.params(), "sparse_layers": m.sparse_layers(), "expert_params": m.expert_params(),
                    "weight_bytes_bf16": m.weight_bytes(2), "weight_bytes_f32": m.weight_bytes(4),
                    "kv_bytes_per_token_bf16": m.kv_bytes_per_token(2), "kv_bytes_per_token_f32": m.kv_bytes_per_token(4),
                    "kv_per_token_bf16": m.kv_per_token(2), "sliding_window": m.sliding_window,
                })
            })
            .collect();
        writeln!(std::io::stdout().lock(), "{}", serde_json::to_string_pretty(&rows)?)?;
        return Ok(());
    }
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
    let mut out = std::io::stdout().lock();
    writeln!(out, "catalog: {}\n{t}", cat.origin)?;
    writeln!(out, "All models run with dummy weights by default (--weights dummy); see --weights for real ones.")?;
    writeln!(
        out,
        "active: the parameters one token uses (the routed experts it is not sent to left out); experts: top k of \
         the routed experts × sparse layers; KV kinds: bf16 bytes per token in full-attention, sliding-window \
         (kept for the window only) and latent (MLA) layers."
    )?;
    Ok(())
}

/// A parameter count in M, B or T.
fn params(n: u64) -> String {
    let n = n as f64;
    match n {
        x if x >= 1e12 => format!("{:.2} T", x / 1e12),
        x if x >= 1e9 => format!("{:.2} B", x / 1e9),
        x => format!("{:.1} M", x / 1e6),
    }
}

/// The KV bytes per token by layer kind, where a model has more than full attention.
fn kv_kinds(m: &goodput_core::ModelSpec) -> String {
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
