//! How one replica of a model is laid over GPUs: tensor parallelism inside an attention group,
//! attention data parallelism (the wide-EP layout of SGLang and vLLM: every GPU, or every TP
//! group, its own batch and KV cache), expert parallelism across all GPUs of a pipeline stage,
//! and pipeline stages.
//!
//! A replica has `pp` stages of `tp × dp` GPUs. Attention, dense MLPs, shared experts, the
//! embedding and the LM head are split `tp` ways and copied `dp` times; the routed experts
//! are split over all `tp × dp` GPUs of a stage: `ep` ranks holding `experts / ep` experts
//! each, every expert sliced `tp × dp / ep` ways (vLLM's and SGLang's expert tensor
//! parallelism; `ep = 1` is plain TP of the experts).

use goodput_core::ModelSpec;
use serde::{Deserialize, Serialize};

/// One replica's parallel layout.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct Layout {
    pub tp: usize,
    /// Attention data-parallel groups per stage.
    pub dp: usize,
    /// Expert-parallel ranks per stage (a divisor of `tp × dp`).
    pub ep: usize,
    pub pp: usize,
}

/// Why a model cannot be laid out this way.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum ShardError {
    #[error("tensor parallelism must be at least 1")]
    Zero,
    #[error("TP, DP, EP and PP must each be at least 1")]
    ZeroDegree,
    #[error("TP {tp} does not divide {model}'s {heads} attention heads")]
    Heads { model: String, tp: usize, heads: usize },
    #[error("TP {tp} does not divide {model}'s {kv} KV heads (nor do the KV heads divide it, to replicate them)")]
    KvHeads { model: String, tp: usize, kv: usize },
    #[error("EP {ep} needs a mixture of experts; {model} is dense")]
    NoExperts { model: String, ep: usize },
    #[error("EP {ep} does not divide {model}'s {experts} routed experts")]
    Experts { model: String, ep: usize, experts: usize },
    #[error("EP {ep} does not divide the {gpus} GPUs of a stage (TP {tp} × DP {dp})")]
    EpGpus { ep: usize, gpus: usize, tp: usize, dp: usize },
    #[error("expert TP {etp} (TP × DP ÷ EP) does not divide {model}'s expert width {width}")]
    ExpertWidth { model: String, etp: usize, width: usize },
    #[error("PP {pp} exceeds {model}'s {layers} layers")]
    Stages { model: String, pp: usize, layers: usize },
    #[error("TP {tp} groups would span nodes of {per_node} GPUs (tensor parallelism stays within a node)")]
    TpAcrossNodes { tp: usize, per_node: usize },
    #[error("stages of {gpus} GPUs do not line up with nodes of {per_node} (a stage fills whole nodes, or a node whole stages)")]
    StageAcrossNodes { gpus: usize, per_node: usize },
    #[error("{gpus} GPUs span {nodes} nodes, but the catalog gives this GPU no network between nodes")]
    NoNetwork { gpus: usize, nodes: usize },
}

impl Layout {
    /// Plain tensor parallelism.
    pub fn tp(tp: usize) -> Self {
        Self { tp, dp: 1, ep: 1, pp: 1 }
    }

    /// GPUs of one pipeline stage.
    pub fn stage_gpus(&self) -> usize {
        self.tp * self.dp
    }

    /// GPUs of the replica.
    pub fn gpus(&self) -> usize {
        self.tp * self.dp * self.pp
    }

    /// Ways each routed expert is sliced.
    pub fn expert_tp(&self) -> usize {
        self.stage_gpus() / self.ep.max(1)
    }

    /// Nodes of `per_node` GPUs the replica needs.
    pub fn nodes(&self, per_node: usize) -> usize {
        self.gpus().div_ceil(per_node.max(1))
    }

    /// `TP8`, `TP1·DP8·EP8`, `TP4·PP2`: the degrees above 1 after TP.
    pub fn label(&self) -> String {
        let mut s = format!("TP{}", self.tp);
        for (name, d) in [("DP", self.dp), ("EP", self.ep), ("PP", self.pp)] {
            if d > 1 {
                s.push_str(&format!("·{name}{d}"));
            }
        }
        s
    }

    /// Checks the layout against the model and a node of `per_node` GPUs, `networked` when
    /// nodes can be joined.
    pub fn check(&self, m: &ModelSpec, per_node: usize, networked: bool) -> Result<(), ShardError> {
        let Layout { tp, dp, ep, pp } = *self;
        if tp == 0 {
            return Err(ShardError::Zero);
        }
        if dp == 0 || ep == 0 || pp == 0 {
            return Err(ShardError::ZeroDegree);
        }
        let model = || m.name.clone();
        if !m.num_heads.is_multiple_of(tp) {
            return Err(ShardError::Heads { model: model(), tp, heads: m.num_heads });
        }
        if m.mla.is_none() && !m.num_kv_heads.is_multiple_of(tp) && !tp.is_multiple_of(m.num_kv_heads) {
            return Err(ShardError::KvHeads { model: model(), tp, kv: m.num_kv_heads });
        }
        if !self.stage_gpus().is_multiple_of(ep) {
            return Err(ShardError::EpGpus { ep, gpus: self.stage_gpus(), tp, dp });
        }
        match &m.moe {
            None if ep > 1 => return Err(ShardError::NoExperts { model: model(), ep }),
            Some(moe) if !moe.num_experts.is_multiple_of(ep) => {
                return Err(ShardError::Experts { model: model(), ep, experts: moe.num_experts })
            }
            Some(moe) if !moe.expert_intermediate_size.is_multiple_of(self.expert_tp()) => {
                let width = moe.expert_intermediate_size;
                return Err(ShardError::ExpertWidth { model: model(), etp: self.expert_tp(), width });
            }
            _ => {}
        }
        if pp > m.num_layers {
            return Err(ShardError::Stages { model: model(), pp, layers: m.num_layers });
        }
        if tp > per_node || !per_node.is_multiple_of(tp) {
            return Err(ShardError::TpAcrossNodes { tp, per_node });
        }
        let g = self.stage_gpus();
        if self.gpus() > per_node && !(g.is_multiple_of(per_node) || per_node.is_multiple_of(g)) {
            return Err(ShardError::StageAcrossNodes { gpus: g, per_node });
        }
        if self.nodes(per_node) > 1 && !networked {
            return Err(ShardError::NoNetwork { gpus: self.gpus(), nodes: self.nodes(per_node) });
        }
        Ok(())
    }
}

impl std::fmt::Display for Layout {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.label())
    }
}
