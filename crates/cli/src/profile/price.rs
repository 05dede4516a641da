//! `goodput profile --from-steps FILES --price-with PROFILE`: measured steps priced by a
//! profile, without fitting. For each file (a replica's steps under a run, or a simulated
//! replica's from `plan --trace --steps-out`) what its engine did — steps, busy time, prefill
//! tokens, mixed steps, preemptions, prefix hits — and how its step periods compare with the
//! profile's price of the same work, by kind of step: where a simulation built on the profile
//! gains or loses time against the run, step by step (`goodput_sizing::price`).

use anyhow::{bail, Result};
use goodput_core::StepRecord;
use goodput_report::console as table;
use goodput_sizing::price::{price, Priced};
use goodput_sizing::profile::Profile;
use std::path::{Path, PathBuf};

/// Prices each file's steps with `profile`, prints the tables, and writes them as JSON where asked.
pub fn run(files: &[PathBuf], profile: &Path, json: Option<&Path>) -> Result<()> {
    let p = Profile::read(profile)?;
    let cost = p.cost();
    let mut all = Vec::new();
    for path in files {
        if !path.exists() {
            bail!("--from-steps {}: no such file", path.display());
        }
        let steps: Vec<StepRecord> = goodput_results::files::read_jsonl(path)?;
        if steps.is_empty() {
            bail!("{}: no step records", path.display());
        }
        all.push(price(path.display().to_string(), &steps, &cost));
    }
    print(&all, profile);
    if let Some(out) = json {
        std::fs::write(out, serde_json::to_string_pretty(&all)? + "\n")
            .map_err(|e| anyhow::anyhow!("writing {}: {e}", out.display()))?;
    }
    Ok(())
}

fn print(all: &[Priced], profile: &Path) {
    let pct =
        |a: usize, b: usize| if b == 0 { "-".to_string() } else { format!("{:.1} %", a as f64 * 100.0 / b as f64) };
    let mut t = table::new(&[
        "steps of",
        "steps",
        "busy",
        "priced",
        "busy ÷ priced",
        "prefill tokens",
        "mixed steps",
        "preempted",
        "prefix hits",
        "mean seqs",
    ]);
    for x in all {
        t.add_row(vec![
            x.file.clone(),
            x.steps.to_string(),
            super::secs(x.busy_s),
            super::secs(x.priced_s),
            format!("{:.3}", x.busy_s / x.priced_s),
            x.prefill_tokens.to_string(),
            x.mixed_steps.to_string(),
            x.preemptions.to_string(),
            pct(x.prefix_hit_tokens, x.prefix_query_tokens),
            format!("{:.2}", x.mean_seqs),
        ]);
    }
    println!("Steps priced by {} (a step's period: start to the next start while busy)\n{t}", profile.display());
    let mut k = table::new(&["steps of", "kind", "steps", "period P50", "÷ price P50", "P10 – P90", "Σ ÷ Σ price"]);
    for x in all {
        for kind in &x.kinds {
            k.add_row(vec![
                x.file.clone(),
                kind.kind.clone(),
                kind.steps.to_string(),
                super::secs(kind.period_p50_s),
                format!("{:.3}", kind.ratio_p50),
                format!("{:.3} – {:.3}", kind.ratio_p10, kind.ratio_p90),
                format!("{:.3}", kind.ratio_total),
            ]);
        }
    }
    println!("{k}");
}
