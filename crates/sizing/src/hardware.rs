//! The hardware catalog (`hardware.toml`): what a GPU can do, as its datasheet says.
//!
//! Read the same way as the model catalog (`goodput_core::catalog`): the repository's file is
//! compiled into the binary ([`HardwareCatalog::builtin`]), another can be read with
//! [`HardwareCatalog::from_path`] and laid over it with [`HardwareCatalog::extend`] (the
//! `--hardware FILE` option). Every entry is validated when read; an error names the entry and
//! the field.
//!
//! Conventions, the same for every entry:
//! - **Decimal units**, as vendors print them: `memory_gb` is 10⁹ bytes (an "80 GB" H100 is
//!   80e9 bytes, not 80 GiB), `memory_bandwidth_gbps` and `interconnect_gbps` are 10⁹ B/s,
//!   `*_tflops` are 10¹² FLOP/s. The helpers on [`Gpu`] return plain bytes, B/s and FLOP/s.
//! - **Dense FLOP/s**: tensor-core peak without 2:4 structured sparsity (half the figure NVIDIA
//!   prints with an asterisk). A peak, not a sustained rate: the roofline applies efficiencies.
//! - **Unidirectional link bandwidth**: `interconnect_gbps` is what one GPU can send to its peers,
//!   all links together, in one direction while receiving as much: the rate an all-reduce can
//!   use (NVLink 4: 450, half the bidirectional 900 of the datasheet; PCIe Gen5 x16: 64).

use crate::error::SizingError;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::fmt;
use std::path::{Path, PathBuf};
use std::str::FromStr;

const BUILTIN: &str = include_str!("../hardware.toml");

/// Why a hardware catalog could not be read, or a GPU not found in it.
#[derive(Debug, thiserror::Error)]
pub enum HardwareError {
    /// The file could not be read.
    #[error("cannot read hardware catalog {path}: {err}")]
    Io { path: PathBuf, err: std::io::Error },
    /// The text is not TOML.
    #[error("hardware catalog {origin} is not valid TOML: {message}")]
    Toml { origin: String, message: String },
    /// A top-level key other than `gpus`.
    #[error("hardware catalog {origin}: unknown top-level key `{key}` (a catalog holds only [gpus.<name>] tables)")]
    UnknownKey { origin: String, key: String },
    /// No `[gpus.<name>]` table at all.
    #[error("hardware catalog {origin}: no [gpus.<name>] table")]
    NoGpus { origin: String },
    /// One entry is malformed; `message` names the field.
    #[error("hardware catalog {origin}: gpu `{gpu}`: {err}")]
    Entry { origin: String, gpu: String, err: SizingError },
    /// [`HardwareCatalog::get`] was asked for a name the catalog lacks.
    #[error("unknown gpu `{name}`; the hardware catalog has: {available}")]
    UnknownGpu { name: String, available: String },
}

/// The element types the roofline prices: weights, activations and KV cache.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum DType {
    /// bfloat16, 2 bytes.
    Bf16,
    /// IEEE half precision, 2 bytes.
    Fp16,
    /// 8-bit float (E4M3/E5M2), 1 byte; only on GPUs whose entry gives `fp8_tflops`.
    Fp8,
    /// IEEE single precision, 4 bytes; the catalog gives no f32 peak.
    F32,
    /// OCP microscaling FP4 (E2M1) in blocks of 32 with one E8M0 byte of scale: 4.25 bits per
    /// weight (gpt-oss's experts as published). Weights only.
    Mxfp4,
    /// NVIDIA's FP4 (E2M1) in blocks of 16 with one E4M3 byte of scale (and one f32 per
    /// tensor, not counted): 4.5 bits per weight. Weights only.
    Nvfp4,
}

impl DType {
    /// Every dtype, in declaration order.
    pub const ALL: [DType; 6] = [DType::Bf16, DType::Fp16, DType::Fp8, DType::F32, DType::Mxfp4, DType::Nvfp4];

    /// Bytes one element occupies, its share of block scales included: MXFP4 one byte per 32
    /// (4.25 bits); NVFP4 one byte per 16 (4.5 bits). FP8's scales are per tensor (DeepSeek's
    /// 128×128 f32 block scales would add 0.02 %, left out).
    pub fn bytes(self) -> f64 {
        match self {
            DType::Bf16 | DType::Fp16 => 2.0,
            DType::Fp8 => 1.0,
            DType::F32 => 4.0,
            DType::Mxfp4 => 4.25 / 8.0,
            DType::Nvfp4 => 4.5 / 8.0,
        }
    }

    /// A 4-bit weight format (no KV cache or activations in it).
    pub fn is_fp4(self) -> bool {
        matches!(self, DType::Mxfp4 | DType::Nvfp4)
    }

    /// The lowercase name, as written on the command line and in JSON.
    pub fn as_str(self) -> &'static str {
        match self {
            DType::Bf16 => "bf16",
            DType::Fp16 => "fp16",
            DType::Fp8 => "fp8",
            DType::F32 => "f32",
            DType::Mxfp4 => "mxfp4",
            DType::Nvfp4 => "nvfp4",
        }
    }
}

impl fmt::Display for DType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A dtype name [`DType::from_str`] does not know.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unknown dtype `{0}`: expected bf16, fp16, fp8, f32, mxfp4 or nvfp4")]
pub struct UnknownDType(pub String);

impl DType {
    /// The dtype of a measured run or bench by the name the engine gives it (`f32`, `f16`,
    /// `bf16`, `fp8`, in any case; `fp16` too): the one place an engine's dtype name becomes a
    /// size, so every reader sizes it alike. `None` for a name it does not know.
    pub fn of_engine(name: &str) -> Option<DType> {
        match name.to_ascii_lowercase().as_str() {
            "f16" => Some(DType::Fp16),
            other => other.parse().ok(),
        }
    }
}

impl FromStr for DType {
    type Err = UnknownDType;

    /// Parses `bf16`, `fp16`, `fp8`, `f32`, `mxfp4` or `nvfp4` (exactly, lowercase).
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        DType::ALL.into_iter().find(|d| d.as_str() == s).ok_or_else(|| UnknownDType(s.to_string()))
    }
}

/// One catalog entry: a GPU's datasheet figures, in the units the file uses (see the module doc).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Gpu {
    /// The catalog key (`h100-sxm`), filled in from the table name when read.
    #[serde(skip_deserializing)]
    pub name: String,
    /// Maker, lowercase (`nvidia`, `amd`).
    pub vendor: String,
    /// Full product name, with form factor and memory size.
    pub description: String,
    /// Memory capacity as sold, decimal GB (10⁹ bytes).
    pub memory_gb: f64,
    /// Peak memory bandwidth, decimal GB/s.
    pub memory_bandwidth_gbps: f64,
    /// Dense bf16 tensor peak, TFLOP/s.
    pub bf16_tflops: f64,
    /// Dense fp16 tensor peak, TFLOP/s.
    pub fp16_tflops: f64,
    /// Dense fp8 tensor peak, TFLOP/s; `None` where the GPU has no fp8 tensor cores.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fp8_tflops: Option<f64>,
    /// Dense FP4 tensor peak (NVFP4/MXFP4 matmuls), TFLOP/s; `None` before Blackwell, where FP4
    /// weights can only be unpacked to a wider type (the planner then refuses them unless
    /// asked to emulate).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fp4_tflops: Option<f64>,
    /// Link kind between GPUs of a node (`nvlink4`, `pcie5`, `infinity-fabric`, …).
    pub interconnect: String,
    /// Per-GPU unidirectional bandwidth to its peers, decimal GB/s.
    pub interconnect_gbps: f64,
    /// GPUs of one node joined by `interconnect`; 8 (an HGX/DGX board) when the entry omits it.
    #[serde(default = "eight")]
    pub gpus_per_node: usize,
    /// The network between nodes (`infiniband-ndr`, `roce`, …); `None` where the catalog
    /// knows no reference multi-node system, and the planner stays within one node.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub internode: Option<String>,
    /// Per-GPU unidirectional bandwidth to other nodes, decimal GB/s (one 400 Gb/s NIC per
    /// GPU: 50).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub internode_gbps: Option<f64>,
    /// Price of one GPU-hour in USD, if the file gives one. The builtin catalog gives none; a
    /// price on the command line takes precedence.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub price_per_hour: Option<f64>,
}

fn eight() -> usize {
    8
}

impl Gpu {
    /// Memory capacity in bytes (`memory_gb` × 10⁹).
    pub fn memory_bytes(&self) -> f64 {
        self.memory_gb * 1e9
    }

    /// Peak memory bandwidth in bytes per second (`memory_bandwidth_gbps` × 10⁹).
    pub fn bandwidth_bytes_per_s(&self) -> f64 {
        self.memory_bandwidth_gbps * 1e9
    }

    /// Dense tensor peak for `dtype` in FLOP/s; `None` for fp8 or fp4 on GPUs without them and
    /// for f32, which the catalog does not carry.
    pub fn flops_per_s(&self, dtype: DType) -> Option<f64> {
        let tflops = match dtype {
            DType::Bf16 => Some(self.bf16_tflops),
            DType::Fp16 => Some(self.fp16_tflops),
            DType::Fp8 => self.fp8_tflops,
            DType::F32 => None,
            DType::Mxfp4 | DType::Nvfp4 => self.fp4_tflops,
        };
        tflops.map(|t| t * 1e12)
    }

    /// Per-GPU unidirectional link bandwidth in bytes per second (`interconnect_gbps` × 10⁹).
    pub fn link_bytes_per_s(&self) -> f64 {
        self.interconnect_gbps * 1e9
    }

    /// Per-GPU unidirectional bandwidth to other nodes in bytes per second; `None` without one.
    pub fn internode_bytes_per_s(&self) -> Option<f64> {
        self.internode_gbps.map(|g| g * 1e9)
    }

    /// Checks every field; the message names the field.
    pub fn validate(&self) -> Result<(), SizingError> {
        for (field, text) in
            [("vendor", &self.vendor), ("description", &self.description), ("interconnect", &self.interconnect)]
        {
            if text.trim().is_empty() {
                return Err(SizingError::EmptyField { field });
            }
        }
        let required = [
            ("memory_gb", self.memory_gb),
            ("memory_bandwidth_gbps", self.memory_bandwidth_gbps),
            ("bf16_tflops", self.bf16_tflops),
            ("fp16_tflops", self.fp16_tflops),
            ("interconnect_gbps", self.interconnect_gbps),
        ];
        let optional = [
            ("fp8_tflops", self.fp8_tflops),
            ("fp4_tflops", self.fp4_tflops),
            ("internode_gbps", self.internode_gbps),
            ("price_per_hour", self.price_per_hour),
        ];
        let present = optional.into_iter().filter_map(|(field, v)| v.map(|v| (field, v)));
        for (field, v) in required.into_iter().chain(present) {
            if !(v.is_finite() && v > 0.0) {
                return Err(SizingError::NotPositive { field, value: v });
            }
        }
        if self.gpus_per_node == 0 || self.gpus_per_node > 576 {
            return Err(SizingError::Entry(format!("field `gpus_per_node` must be 1–576, got {}", self.gpus_per_node)));
        }
        if self.internode.is_some() != self.internode_gbps.is_some() {
            return Err(SizingError::Entry("`internode` and `internode_gbps` come together or not at all".into()));
        }
        Ok(())
    }
}

/// Every GPU of a catalog, by name (sorted).
#[derive(Clone, Debug)]
pub struct HardwareCatalog {
    /// Where the entries came from (`<builtin hardware.toml>`, a path, or both joined by ` + `).
    pub origin: String,
    /// The entries, keyed by their lowercase name.
    pub gpus: BTreeMap<String, Gpu>,
}

impl HardwareCatalog {
    /// The catalog compiled into the binary (the repository's `hardware.toml`).
    pub fn builtin() -> Self {
        Self::parse(BUILTIN, "<builtin hardware.toml>").expect("the builtin hardware catalog is validated by a test")
    }

    /// Reads and validates the catalog at `path`.
    pub fn from_path(path: &Path) -> Result<Self, HardwareError> {
        let text = goodput_core::input::read_to_string(path, "hardware catalog", goodput_core::input::MAX_WHOLE_FILE)
            .map_err(|err| HardwareError::Io { path: path.to_path_buf(), err })?;
        Self::parse(&text, &path.display().to_string())
    }

    /// Parses and validates catalog text; `origin` names it in errors.
    pub fn parse(text: &str, origin: &str) -> Result<Self, HardwareError> {
        let origin = origin.to_string();
        let table: toml::Table =
            toml::from_str(text).map_err(|e| HardwareError::Toml { origin: origin.clone(), message: e.to_string() })?;
        if let Some(other) = table.keys().find(|k| *k != "gpus") {
            return Err(HardwareError::UnknownKey { origin, key: other.clone() });
        }
        let entries = match table.get("gpus") {
            Some(toml::Value::Table(t)) if !t.is_empty() => t,
            _ => return Err(HardwareError::NoGpus { origin }),
        };
        let mut gpus = BTreeMap::new();
        for (name, value) in entries {
            let gpu = parse_entry(name, value).map_err(|err| HardwareError::Entry {
                origin: origin.clone(),
                gpu: name.clone(),
                err,
            })?;
            gpus.insert(name.clone(), gpu);
        }
        Ok(Self { origin, gpus })
    }

    /// The entry called `name` (case-insensitive); the error lists the names there are.
    pub fn get(&self, name: &str) -> Result<&Gpu, HardwareError> {
        self.gpus.get(&name.to_ascii_lowercase()).ok_or_else(|| HardwareError::UnknownGpu {
            name: name.to_string(),
            available: self.gpus.keys().cloned().collect::<Vec<_>>().join(", "),
        })
    }

    /// The entry for a GPU as its driver names it (`NVIDIA H200`, `NVIDIA H100 80GB HBM3`,
    /// `NVIDIA A100-SXM4-40GB`): the entry all of whose name parts appear among the device
    /// name's words (`sxm` also as `sxm4`/`sxm5`), the most specific first; failing that, the
    /// entry of the same model number, with the SXM form unless the name says PCIe.
    pub fn for_device_name(&self, device: &str) -> Option<&Gpu> {
        let lower = device.to_ascii_lowercase().replace(['-', '_'], " ");
        let words: Vec<&str> = lower.split_whitespace().collect();
        let has = |part: &str| words.iter().any(|w| *w == part || (part == "sxm" && w.starts_with("sxm")));
        let full = self.gpus.values().filter(|g| g.name.split('-').all(has)).max_by_key(|g| g.name.split('-').count());
        full.or_else(|| {
            self.gpus.values().find(|g| {
                let mut parts = g.name.split('-');
                parts.next().is_some_and(has) && parts.all(|p| p != "pcie" && (p == "sxm" || has(p)))
            })
        })
    }

    /// Lays `other` over this catalog: its entries are added, replacing any of the same name
    /// whole (no field-by-field merge). `origin` records both.
    pub fn extend(&mut self, other: HardwareCatalog) {
        self.origin = format!("{} + {}", self.origin, other.origin);
        self.gpus.extend(other.gpus);
    }
}

/// One `[gpus.<name>]` table to a validated [`Gpu`]; the error message names the field.
fn parse_entry(name: &str, value: &toml::Value) -> Result<Gpu, SizingError> {
    if name.is_empty() || name.chars().any(|c| c.is_ascii_uppercase() || c.is_whitespace()) {
        return Err(SizingError::GpuName);
    }
    // Through text rather than `Value::try_into`, whose errors have no span: the span gives the
    // field a type error is about ("invalid type: string, expected f64" alone names none).
    let text = toml::to_string(value).map_err(|e| SizingError::Entry(e.to_string()))?;
    let mut gpu: Gpu = toml::from_str(&text).map_err(|e| SizingError::Entry(with_field(&text, &e)))?;
    gpu.name = name.to_string();
    gpu.validate()?;
    Ok(gpu)
}

/// A deserialization error's message, prefixed with the key of the line its span falls on
/// unless the message already names a field (`unknown field`, `missing field`).
fn with_field(text: &str, e: &toml::de::Error) -> String {
    let message = e.message();
    let named = message.starts_with("unknown field") || message.starts_with("missing field");
    let key = e.span().filter(|_| !named).and_then(|span| {
        let line_start = text[..span.start.min(text.len())].rfind('\n').map_or(0, |i| i + 1);
        text[line_start..].lines().next()?.split_once('=').map(|(key, _)| key.trim())
    });
    match key {
        Some(key) => format!("field `{key}`: {message}"),
        None => message.to_string(),
    }
}

#[cfg(test)]
mod tests;
