//! The host's bf16 compute peak, measured: what one core does on `vdpbf16ps` (AVX-512 BF16)
//! and on AMX's `tdpbf16ps`, each from registers with enough independent accumulators to
//! hide the latency — the ceiling a prefill's FLOP/s is held against (`engine-bench`).

use crate::cpu::{amx, bf16_dot};
use serde::{Deserialize, Serialize};

/// FLOP/s of one core on each bf16 instruction this CPU has (`None`: it has not).
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Bf16Peak {
    /// `vdpbf16ps` on 512-bit vectors: 64 FLOPs per instruction.
    pub vdpbf16ps_per_core: Option<f64>,
    /// AMX `tdpbf16ps` on 16 × 32 by 32 × 16 tiles: 16 384 FLOPs per instruction.
    pub amx_per_core: Option<f64>,
}

impl Bf16Peak {
    /// The best of 5 short runs of each (about 20 ms each): a core shared with other work
    /// reads low, never high.
    pub fn measure() -> Bf16Peak {
        let best = |f: &dyn Fn() -> Option<f64>| {
            (0..5).filter_map(|_| f()).fold(None, |b: Option<f64>, x| Some(b.map_or(x, |b| b.max(x))))
        };
        Bf16Peak {
            vdpbf16ps_per_core: best(&|| bf16_dot::peak_flops(3_000_000)),
            amx_per_core: best(&|| amx::peak_flops(200_000)),
        }
    }

    /// The peak the bf16 prefill's matmuls run at: AMX where the engine uses it, else
    /// `vdpbf16ps`.
    pub fn engine_per_core(&self) -> Option<f64> {
        self.amx_per_core.filter(|_| amx::available()).or(self.vdpbf16ps_per_core)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    #[cfg_attr(not(host_avx512bf16), ignore = "this CPU has no AVX-512 BF16: the kernel cannot run here")]
    fn a_measured_peak_is_a_plausible_rate() {
        let p = Bf16Peak::measure();
        // 64 FLOPs per instruction: between 0.1 and 8 instructions per ns on any core.
        let v = p.vdpbf16ps_per_core.expect("AVX-512 BF16 was built for");
        assert!((6.4e9..5.12e11).contains(&v), "vdpbf16ps at {v:e} FLOP/s");
        if let Some(a) = p.amx_per_core {
            assert!(a > v, "AMX at {a:e} FLOP/s, below vdpbf16ps at {v:e}");
        }
        assert_eq!(p.engine_per_core(), if amx::available() { p.amx_per_core } else { p.vdpbf16ps_per_core });
    }
}
