//! `goodput engine-bench`: the engine's own step costs, in the manner of TGI's
//! `text-generation-benchmark`, measured by [`goodput_engine::bench`] and printed through
//! `goodput_report::engine_bench`; a GPU's roofline from the hardware catalog.

use crate::args::ModelArgs;
use anyhow::Result;
use clap::Args;
use goodput_engine::bench::{Attention, BenchSpec};
use std::path::PathBuf;

#[derive(Args, Debug)]
pub struct BenchArgs {
    #[command(flatten)]
    pub model: ModelArgs,
    /// Prompt lengths of the prefill benchmark.
    #[arg(long, value_delimiter = ',', default_value = "128,512,2048")]
    pub prompt_lens: Vec<usize>,
    /// Batch sizes of the decode benchmark.
    #[arg(long, value_delimiter = ',', default_value = "1,4,8,16,32")]
    pub batch_sizes: Vec<usize>,
    /// Prompt length of each sequence in the decode benchmark.
    #[arg(long, default_value_t = 128)]
    pub decode_context: usize,
    /// Timed decode steps per repeat.
    #[arg(long, default_value_t = 16)]
    pub decode_steps: usize,
    /// Timed repeats of each prefill length and decode batch.
    #[arg(long, default_value_t = 3)]
    pub repeats: usize,
    /// Untimed warm-up runs (prefill) or steps (decode) before the timed ones.
    #[arg(long, default_value_t = 1)]
    pub warmup: usize,
    #[arg(long, default_value_t = 16)]
    pub block_size: usize,
    /// paged: the paged-attention kernel reading blocks in place (on CUDA: goodput's kernels, the
    /// fused layer and on-device sampling); gather: each sequence's blocks gathered into a
    /// contiguous copy, then candle ops (on CUDA: the candle-op path, logits sampled on the host).
    #[arg(long, default_value = "paged", value_parser = attention())]
    pub attention: Attention,
    /// On CUDA: also capture a decode step (batch 1 and 32) as a CUDA graph and time its
    /// replay against launching it kernel by kernel.
    #[arg(long)]
    pub graph_probe: bool,
    /// On CUDA: the GPU time of each op of a decode step (batch 1 and 32) and of a prefill of
    /// the first prompt length, from events recorded between the ops (launched eagerly: where
    /// the host launches slower than the GPU runs, gaps count too), with each matmul's achieved
    /// bandwidth.
    #[arg(long)]
    pub step_profile: bool,
    /// On CUDA: time steps launched kernel by kernel instead of replayed from CUDA graphs.
    #[arg(long)]
    pub no_cuda_graphs: bool,
    /// On CUDA: replay only decode steps from CUDA graphs (prefills launched kernel by kernel).
    #[arg(long)]
    pub no_mixed_graphs: bool,
    /// On CUDA: launch every kernel after the previous one has finished, instead of with
    /// programmatic dependent launch (from the load's matmul tuning on).
    #[arg(long)]
    pub no_pdl: bool,
    /// On CUDA: prefill chunks longer than this take the long-chunk attention path (the
    /// tensor-core prefill kernel in f16/bf16, cuBLAS in f32) instead of the paged kernel
    /// (default 32).
    #[arg(long)]
    pub cuda_long_chunk: Option<usize>,
    /// On CUDA: long prefill chunks through cuBLAS (matmul, causal softmax, matmul) instead of
    /// the tensor-core prefill kernel: the A/B of that kernel.
    #[arg(long)]
    pub no_flash_prefill: bool,
    /// On CUDA: the small-batch gate|up matmul, then SwiGLU, instead of SwiGLU in the matmul's
    /// epilogue: the A/B of that fusion.
    #[arg(long)]
    pub no_fused_swiglu: bool,
    /// Skip measuring the machine's memory read bandwidth.
    #[arg(long)]
    pub no_bandwidth: bool,
    /// Also write the results as JSON to this file.
    #[arg(long)]
    pub json: Option<PathBuf>,
}

/// `--attention`'s values, listed in the help, completions and man page.
fn attention() -> impl clap::builder::TypedValueParser<Value = Attention> {
    use clap::builder::{PossibleValue, PossibleValuesParser, TypedValueParser};
    PossibleValuesParser::new([
        PossibleValue::new("paged").help("the paged-attention kernel reading blocks in place"),
        PossibleValue::new("gather").help("each sequence's blocks gathered into a copy, then candle ops"),
    ])
    .map(|s| Attention::parse(&s).expect("a listed value"))
}

impl BenchArgs {
    /// The benchmark these flags ask for.
    fn spec(&self) -> BenchSpec {
        BenchSpec {
            model: self.model.source(),
            prompt_lens: self.prompt_lens.clone(),
            batch_sizes: self.batch_sizes.clone(),
            decode_context: self.decode_context,
            decode_steps: self.decode_steps,
            repeats: self.repeats,
            warmup: self.warmup,
            block_size: self.block_size,
            attention: self.attention,
            graph_probe: self.graph_probe,
            step_profile: self.step_profile,
            cuda_graphs: !self.no_cuda_graphs,
            mixed_graphs: !self.no_mixed_graphs,
            pdl: !self.no_pdl,
            cuda_long_chunk: self.cuda_long_chunk,
            flash_prefill: !self.no_flash_prefill,
            fused_swiglu: !self.no_fused_swiglu,
            bandwidth: !self.no_bandwidth,
        }
    }
}

pub fn run(a: BenchArgs) -> Result<()> {
    let report = goodput_engine::bench::run(a.spec(), &goodput_bench::gpu::roofline, &mut |line| eprintln!("{line}"))?;
    print!("{}", goodput_report::engine_bench::text(&report));
    if let Some(path) = &a.json {
        std::fs::write(path, serde_json::to_string_pretty(&report)?)
            .map_err(|e| anyhow::anyhow!("cannot write {}: {e}", path.display()))?;
    }
    Ok(())
}
