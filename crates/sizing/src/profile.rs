//! A profile (`profile.json`): a fitted step-cost model with everything needed to trust it or
//! not — the model and device it was measured on, the engine settings, the machine's
//! fingerprint, the fit's intervals and residuals, each term against its roofline floor, and
//! goodput's version.

use crate::cost::{LinearCost, StepCost, Term};
use crate::error::SizingError;
use crate::fit::Fit;
use crate::roofline::Efficiencies;
use serde::{Deserialize, Serialize};
use std::path::Path;

/// What every profile's `kind` says: a JSON file without it is not a profile.
pub const PROFILE_KIND: &str = "goodput-profile";
/// The format this build writes and reads.
pub const PROFILE_FORMAT: u32 = 1;

/// The machine a profile was measured on: two profiles of the same fingerprint can be compared.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Fingerprint {
    pub cpu: String,
    pub logical_cpus: usize,
    pub memory_gib: f64,
    pub kernel: String,
    /// `cpu`, or the accelerator.
    pub device: String,
    /// The engine's CPUs when pinned (`--engine-cpus`).
    pub engine_cpus: Option<String>,
}

impl Fingerprint {
    /// Whether `other` is the same machine and placement (the kernel may differ).
    pub fn same_machine(&self, other: &Fingerprint) -> bool {
        self.cpu == other.cpu
            && self.logical_cpus == other.logical_cpus
            && self.device == other.device
            && self.engine_cpus == other.engine_cpus
    }
}

/// The engine settings the steps were measured with.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ProfileEngine {
    pub block_size: usize,
    /// KV blocks in the pool (including the null block).
    pub num_blocks: usize,
    pub max_num_batched_tokens: usize,
    /// Prefill tokens past which a step started no further prompt (`None`: no cap; older
    /// profiles have none).
    #[serde(default)]
    pub max_prefill_tokens: Option<usize>,
    pub max_num_seqs: usize,
    pub max_model_len: usize,
    pub prefix_caching: bool,
}

/// One term against its roofline floor on the measured machine.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TermFloor {
    pub term: Term,
    /// Seconds per unit at 100 % of the machine (bandwidth or FLOP/s).
    pub floor_s: f64,
    /// floor ÷ fitted coefficient: the fraction of the roofline reached (MBU for the memory
    /// terms, MFU for the compute terms); `None` when the term was not measured.
    pub efficiency: Option<f64>,
    /// `memory` or `compute`.
    pub bound: String,
}

/// The measured machine's limits and each term against them.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct MachineRoofline {
    /// Memory bandwidth, bytes/s.
    pub bandwidth: f64,
    /// FLOP/s at the profile's dtype.
    pub flops: f64,
    /// How the two were obtained (a catalog entry, or measured here and how).
    pub how: String,
    /// Every fitted term against its floor.
    pub terms: Vec<TermFloor>,
    /// A one-token decode step at no context against its floor, weights ÷ bandwidth: the
    /// engine's memory-bandwidth utilisation (MBU) where decode lives.
    pub memory_efficiency: Option<f64>,
    /// The marginal cost of a token in the largest measured batches against its floor, linear
    /// FLOPs ÷ FLOP/s: the engine's model FLOP utilisation (MFU) where prefill lives.
    pub compute_efficiency: Option<f64>,
}

impl MachineRoofline {
    pub fn efficiency(&self, t: Term) -> Option<f64> {
        self.terms.iter().find(|f| f.term == t).and_then(|f| f.efficiency)
    }
}

/// A fitted step-cost model and its provenance.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Profile {
    /// Always [`PROFILE_KIND`].
    pub kind: String,
    /// [`PROFILE_FORMAT`] when written.
    pub format: u32,
    pub goodput_version: String,
    /// Seconds since the Unix epoch when it was written.
    pub created_unix_s: u64,
    /// The catalog name of the model.
    pub model: String,
    /// The model's dtype as run (`f32`, `bf16`, `q4_1`, …).
    pub dtype: String,
    /// Dummy or real weights, and from where.
    pub weights: String,
    pub engine: ProfileEngine,
    pub fingerprint: Fingerprint,
    /// What the steps came from: the profiling grid, or a run's steps.jsonl.
    pub source: String,
    pub fit: Fit,
    /// Seconds added after every simulated step beyond the fitted terms. `goodput profile`
    /// fits step *periods* (start to the next start while the engine stays busy), which hold
    /// the engine's work between steps already, and writes 0.
    pub gap_s: f64,
    pub roofline: Option<MachineRoofline>,
    /// Roofline step costs of a device the profile was not measured on (`goodput plan
    /// --export-profile`): a projection. When present the simulator runs it, not the fit
    /// (which is then empty).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub projection: Option<crate::roofline::ProjectedCost>,
    /// The model's experts, so a simulated step expects the expert reads its fit prices
    /// (`experts_touched`); `None` for a dense model.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub experts: Option<crate::cost::ExpertShape>,
    /// The decode-attention terms compared by their held-out error before the fit, the one
    /// fitted marked; empty when the terms were named (`--context-term`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub selection: Vec<Candidate>,
}

/// A set of terms compared by how well it prices steps it was not fitted on.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Candidate {
    pub name: String,
    pub held_out: crate::fit::HeldOut,
    pub chosen: bool,
}

/// The seed of the simulated steps' spread.
pub const SPREAD_SEED: u64 = 0x005e_ed0f_57e9;

/// Why a profile cannot be used.
#[derive(Debug, thiserror::Error)]
pub enum ProfileError {
    #[error("cannot read profile {path}: {err}")]
    Io { path: String, err: std::io::Error },
    #[error("{path} is empty; a profile is written by `goodput profile`")]
    Empty { path: String },
    #[error("{path} is not a goodput profile ({reason}); profiles are written by `goodput profile`")]
    Foreign { path: String, reason: String },
    #[error("{path} is profile format {found}; this goodput reads format {PROFILE_FORMAT} (profile again)")]
    Format { path: String, found: u32 },
    #[error("{path}: {reason}")]
    Invalid { path: String, reason: String },
    #[error("{path}: {err}")]
    Check { path: String, err: SizingError },
}

impl Profile {
    /// A profile of `model` written now by this goodput: its kind, format, version and time
    /// filled in, the rest to be given (`Profile { dtype: …, ..Profile::now(model, fit) }`).
    pub fn now(model: String, fit: Fit) -> Self {
        Self {
            kind: PROFILE_KIND.into(),
            format: PROFILE_FORMAT,
            goodput_version: env!("CARGO_PKG_VERSION").into(),
            created_unix_s: std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(0, |d| d.as_secs()),
            model,
            dtype: String::new(),
            weights: String::new(),
            engine: ProfileEngine::default(),
            fingerprint: Fingerprint::default(),
            source: String::new(),
            fit,
            gap_s: 0.0,
            roofline: None,
            projection: None,
            experts: None,
            selection: Vec::new(),
        }
    }

    /// Reads and checks a profile.
    pub fn read(path: &Path) -> Result<Self, ProfileError> {
        let p = path.display().to_string();
        let text = goodput_core::input::read_to_string(path, "profile", goodput_core::input::MAX_WHOLE_FILE)
            .map_err(|err| ProfileError::Io { path: p.clone(), err })?;
        Self::parse(&text, &p)
    }

    /// Parses and checks a profile's text; `origin` names it in errors.
    pub fn parse(text: &str, origin: &str) -> Result<Self, ProfileError> {
        let path = origin.to_string();
        if text.trim().is_empty() {
            return Err(ProfileError::Empty { path });
        }
        #[derive(Deserialize)]
        struct Head {
            kind: Option<String>,
            format: Option<u32>,
        }
        let head: Head = serde_json::from_str(text)
            .map_err(|e| ProfileError::Foreign { path: path.clone(), reason: format!("not a JSON object: {e}") })?;
        if head.kind.as_deref() != Some(PROFILE_KIND) {
            let reason = match head.kind {
                Some(k) => format!("its kind is `{k}`"),
                None => "it has no `kind`".into(),
            };
            return Err(ProfileError::Foreign { path, reason });
        }
        if head.format != Some(PROFILE_FORMAT) {
            return Err(ProfileError::Format { path, found: head.format.unwrap_or(0) });
        }
        let profile: Profile = serde_json::from_str(text)
            .map_err(|e| ProfileError::Invalid { path: path.clone(), reason: e.to_string() })?;
        profile.check().map_err(|err| ProfileError::Check { path, err })?;
        Ok(profile)
    }

    /// Checks the numbers: finite, non-negative coefficients, at least one measured term.
    pub fn check(&self) -> Result<(), SizingError> {
        if let Some(p) = &self.projection {
            return check_projection(p, &self.engine);
        }
        if self.fit.terms.is_empty() || !self.fit.terms.iter().any(|t| t.measured && t.coefficient > 0.0) {
            return Err(SizingError::NoMeasuredTerm);
        }
        let mut seen = std::collections::HashSet::new();
        for t in &self.fit.terms {
            if !(t.coefficient.is_finite() && t.coefficient >= 0.0) {
                return Err(SizingError::Coefficient { term: t.term.name(), value: t.coefficient });
            }
            if matches!(t.term, Term::Tokens(0) | Term::Rows(0) | Term::Context(0)) {
                return Err(SizingError::KnotAtZero { term: t.term.name() });
            }
            if !seen.insert(t.term) {
                return Err(SizingError::TermTwice { term: t.term.name() });
            }
        }
        if !(self.gap_s.is_finite() && self.gap_s >= 0.0) {
            return Err(SizingError::Gap(self.gap_s));
        }
        let e = &self.engine;
        if e.block_size == 0 || e.num_blocks < 2 || e.max_num_batched_tokens == 0 || e.max_num_seqs == 0 {
            return Err(SizingError::EngineSettings);
        }
        Ok(())
    }

    /// Writes the profile as pretty JSON.
    pub fn write(&self, path: &Path) -> std::io::Result<()> {
        let json = serde_json::to_string_pretty(self).map_err(std::io::Error::other)?;
        std::fs::write(path, json + "\n")
    }

    /// The fitted model, with the gap between busy steps.
    pub fn cost(&self) -> LinearCost {
        self.fit.cost(self.gap_s).with_experts(self.experts)
    }

    /// What the simulator runs: the projection if there is one, else the fitted model with
    /// each step's time drawn from the measured spread around it (seeded: the same run
    /// simulated twice draws alike), or the fitted time alone for a profile that kept no
    /// spread.
    pub fn step_cost(&self) -> std::sync::Arc<dyn StepCost> {
        if let Some(p) = &self.projection {
            return std::sync::Arc::new(p.clone());
        }
        let r = &self.fit.residuals;
        let sampled = match r.bands.is_empty() {
            true => crate::sampled::Sampled::new(self.cost(), r.ratios.clone(), SPREAD_SEED),
            false => {
                let bands = r.bands.iter().map(|b| (b.from_s, b.ratios.clone())).collect();
                crate::sampled::Sampled::banded(self.cost(), bands, SPREAD_SEED)
            }
        };
        match sampled {
            Some(sampled) => std::sync::Arc::new(sampled),
            None => std::sync::Arc::new(self.cost()),
        }
    }

    /// Where `self` (newer) drifted from `earlier` of the same machine, model and settings:
    /// one line per measured term whose coefficient left the earlier 95 % interval, or whose
    /// earlier coefficient is outside the new interval. Empty when they agree or are not
    /// comparable (see [`Profile::comparable`]).
    pub fn drift(&self, earlier: &Profile) -> Vec<String> {
        if !self.comparable(earlier) {
            return Vec::new();
        }
        let mut out = Vec::new();
        for new in self.fit.terms.iter().filter(|t| t.measured) {
            let Some(old) = earlier.fit.term(new.term).filter(|t| t.measured) else { continue };
            let outside = new.coefficient < old.lo || new.coefficient > old.hi;
            let reverse = old.coefficient < new.lo || old.coefficient > new.hi;
            if outside && reverse {
                out.push(format!(
                    "{}: {:.4e} s per {} now, {:.4e} before (earlier 95 % interval {:.4e}–{:.4e}; {:+.1} %)",
                    new.term.name(),
                    new.coefficient,
                    new.term.unit(),
                    old.coefficient,
                    old.lo,
                    old.hi,
                    (new.coefficient / old.coefficient - 1.0) * 100.0
                ));
            }
        }
        out
    }

    /// Same machine, model, dtype and engine settings.
    pub fn comparable(&self, other: &Profile) -> bool {
        self.fingerprint.same_machine(&other.fingerprint)
            && self.model == other.model
            && self.dtype == other.dtype
            && self.engine == other.engine
    }
}

/// Efficiencies carried over from a measured profile: its decode step's and its large
/// batches' measured ÷ roofline ratios ([`MachineRoofline`]) for memory and
/// compute, its prefill attention's for attention. Links cannot be measured on one device, nor
/// a GPU engine's per-step overhead on a CPU: their defaults stay.
pub fn calibrated(p: &Profile) -> Result<Efficiencies, SizingError> {
    let r = p.roofline.as_ref().ok_or(SizingError::NoRoofline)?;
    let ok = |e: Option<f64>, what: &'static str| {
        e.filter(|e| e.is_finite() && *e > 0.0).ok_or(SizingError::NotMeasured { what })
    };
    let d = Efficiencies::default();
    Ok(Efficiencies {
        memory: ok(r.memory_efficiency, "a one-token decode step")?.min(1.0),
        compute: ok(r.compute_efficiency, "large batches")?.min(1.0),
        attention: r
            .efficiency(Term::PrefillAttention)
            .filter(|e| e.is_finite() && *e > 0.0)
            .unwrap_or(d.attention)
            .min(1.0),
        source: format!(
            "calibrated from the profile of {} on {} ({})",
            p.model,
            if p.fingerprint.cpu.is_empty() { &p.fingerprint.device } else { &p.fingerprint.cpu },
            p.source
        ),
        ..d
    })
}

/// A projection's numbers: positive, finite limits and work, and valid engine settings.
fn check_projection(p: &crate::roofline::ProjectedCost, e: &ProfileEngine) -> Result<(), SizingError> {
    let d = &p.roofline.device;
    let w = &p.roofline.work;
    let positive = [
        ("device.bandwidth", d.bandwidth),
        ("device.flops", d.flops),
        ("device.expert_flops", d.expert_flops),
        ("device.attention_flops", d.attention_flops),
        ("device.lm_head_flops", d.lm_head_flops),
        ("device.link", d.link),
        ("work.read_bytes", w.read_bytes),
    ];
    for (field, v) in positive {
        if !(v.is_finite() && v > 0.0) {
            return Err(SizingError::NotPositive { field, value: v });
        }
    }
    if e.block_size == 0 || e.num_blocks < 2 || e.max_num_batched_tokens == 0 || e.max_num_seqs == 0 {
        return Err(SizingError::EngineSettings);
    }
    Ok(())
}

#[cfg(test)]
#[path = "profile/tests.rs"]
mod tests;
