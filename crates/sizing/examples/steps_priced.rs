//! Each step of a steps file beside its profile's price, as CSV on stdout: where a run's
//! steps leave the model, step by step (`profile --price-with` sums them by kind).
//!
//! `cargo run --release -p goodput-sizing --example steps_priced -- PROFILE STEPS.jsonl`

use goodput_core::StepRecord;
use goodput_sizing::cost::StepCost;
use std::io::BufRead;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let [profile, steps] = args.as_slice() else {
        return Err("usage: steps_priced PROFILE STEPS.jsonl".into());
    };
    let cost = goodput_sizing::profile::Profile::read(std::path::Path::new(profile))?.cost();
    let mut records: Vec<StepRecord> = Vec::new();
    for (n, line) in std::io::BufReader::new(std::fs::File::open(steps)?).lines().enumerate() {
        let line = line?;
        if !line.trim().is_empty() {
            records.push(serde_json::from_str(&line).map_err(|e| format!("{steps}:{}: {e}", n + 1))?);
        }
    }
    let gap = goodput_sizing::price::gap(&records);
    println!("step,measured_s,priced_s,prefill_tokens,decode_seqs,decode_context");
    for (s, w, secs) in goodput_sizing::price::periods(&records, gap) {
        let priced = cost.step_seconds(&w) + gap;
        println!("{},{secs},{priced},{},{},{}", s.step, s.prefill_tokens, s.decode_seqs, s.decode_context);
    }
    Ok(())
}
