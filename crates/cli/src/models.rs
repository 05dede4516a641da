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
                    "name": m.name, "spec": m, "params": m.param_count(),
                    "weight_bytes_bf16": m.weight_bytes(2), "weight_bytes_f32": m.weight_bytes(4),
                    "kv_bytes_per_token_bf16": m.kv_bytes_per_token(2), "kv_bytes_per_token_f32": m.kv_bytes_per_token(4),
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
        "weights bf16",
        "weights f32",
        "KV/token bf16",
        "KV/token f32",
        "real weights",
    ]);
    for m in cat.models.values() {
        t.add_row(vec![
            m.name.clone(),
            format!("{:?}", m.architecture).to_lowercase(),
            m.num_layers.to_string(),
            m.hidden_size.to_string(),
            format!("{}/{}", m.num_heads, m.num_kv_heads),
            m.max_position_embeddings.to_string(),
            format!("{:.1} M", m.param_count() as f64 / 1e6),
            table::bytes(m.weight_bytes(2)),
            table::bytes(m.weight_bytes(4)),
            table::bytes(m.kv_bytes_per_token(2)),
            table::bytes(m.kv_bytes_per_token(4)),
            m.hf_repo.clone().unwrap_or_else(|| "dummy only".into()),
        ]);
    }
    let mut out = std::io::stdout().lock();
    writeln!(out, "catalog: {}\n{t}", cat.origin)?;
    writeln!(out, "All models run with dummy weights by default (--weights dummy); see --weights for real ones.")?;
    Ok(())
}
