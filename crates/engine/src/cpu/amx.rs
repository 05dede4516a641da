//! The many-rows (prefill) product on Intel AMX: `tdpbf16ps` multiplies a tile of 16 rows ×
//! 32 bf16 by one of 32 × 16 bf16 into 16 × 16 f32 sums, 16 384 FLOPs per instruction — on
//! this project's hosts about 30× what `vdpbf16ps` reaches per core (`peak.rs` measures both).
//!
//! The tiles read the layouts `bf16_dot.rs` already makes, with no new packing: a row of `x`
//! as pairs `(x[2p], x[2p+1])` is a row of an A tile (16 pairs, 64 bytes), and a packed panel
//! of 32 weight rows, for each pair index the 32 rows' pairs side by side (128 bytes), holds
//! two B tiles of 16 columns at a row stride of 128 bytes — AMX's own "VNNI" layout. A block
//! of 32 rows of `x` × one panel keeps four accumulator tiles (`tmm0..3`), two A tiles
//! (`tmm4`, `tmm5`) and two B tiles (`tmm6`, `tmm7`): the 2 × 2 blocking of Intel's guides.
//! Products are exact and accumulate in f32, as on `vdpbf16ps`; only the order of the sums
//! differs (and the rounding of `x` to bf16, as in every bf16 GEMM).
//!
//! The tile registers are not allocated by the compiler: the instructions are written with
//! `asm!` (the intrinsics are not stable Rust), each task loads the tile configuration and
//! releases the tiles when it ends. Linux grants a process the 8 KiB tile state only on request
//! (`arch_prctl(ARCH_REQ_XCOMP_PERM)`), made once by [`available`]; where it is refused, or the
//! CPU has no AMX, or `GOODPUT_CPU_AMX=0` is set, [`available`] is false and nothing here runs.
#![cfg_attr(not(target_arch = "x86_64"), allow(unused_variables, unused_mut))]

use crate::cpu::common::OutPtr;
use rayon::prelude::*;
use std::mem::MaybeUninit;
use std::ops::Range;
use std::sync::OnceLock;

/// Weight rows of one packed panel (`bf16_dot::NR`): two B tiles of 16 columns.
pub const PANEL: usize = 32;
/// Pairs per tile row (64 bytes): the reduction advances 32 values per step.
pub const PAIRS: usize = 16;
/// Rows of `x` per block: two A tiles.
const ROWS: usize = 32;

/// Whether AMX bf16 tiles can run in this process (CPU, kernel permission, not turned off
/// by `GOODPUT_CPU_AMX=0`).
pub fn available() -> bool {
    static A: OnceLock<bool> = OnceLock::new();
    *A.get_or_init(|| std::env::var("GOODPUT_CPU_AMX").map_or(true, |v| v != "0") && detect())
}

#[cfg(target_arch = "x86_64")]
fn detect() -> bool {
    use std::arch::x86_64::__cpuid_count;
    // Leaf 7 sub-leaf 0: the extended features.
    let edx = __cpuid_count(7, 0).edx;
    let (amx_bf16, amx_tile) = (edx & (1 << 22) != 0, edx & (1 << 24) != 0);
    let vectors = std::is_x86_feature_detected!("avx512f")
        && std::is_x86_feature_detected!("avx512bw")
        && std::is_x86_feature_detected!("avx512bf16");
    if !(amx_bf16 && amx_tile && vectors) {
        return false;
    }
    const ARCH_REQ_XCOMP_PERM: libc::c_long = 0x1023;
    const XFEATURE_XTILEDATA: libc::c_long = 18;
    // SAFETY: a request for a permission; it changes nothing else in the process.
    unsafe { libc::syscall(libc::SYS_arch_prctl, ARCH_REQ_XCOMP_PERM, XFEATURE_XTILEDATA) == 0 }
}

#[cfg(not(target_arch = "x86_64"))]
fn detect() -> bool {
    false
}

/// Fewest rows of `x` a product takes the tiles from (padded with zero rows to 16): even a
/// 2-row product streams its weight faster through tiles than through `vdpbf16ps`
/// (SmolLM2 bf16 decode step at batch 8: 22.5 against 33.3 ms on `vdpbf16ps`, engine-bench).
pub const MIN_ROWS: usize = 2;

/// Whether a product of `m` rows of `x` with `k` values takes the tiles: AMX here, at least
/// [`MIN_ROWS`], and whole tile rows of reduction (`k` a multiple of 32).
pub fn takes(m: usize, k: usize) -> bool {
    m >= MIN_ROWS && k.is_multiple_of(2 * PAIRS) && available()
}

/// `x · wᵀ` on tiles: `xa` holds `m` rows of `k2` pairs (`bf16_dot::pack_x`) and then zero
/// rows up to a multiple of 16; `panels` the weight in [`PANEL`]-row panels of `k2` pair
/// rows each (`bf16_dot::Packed`), `n` weight rows in all. Returns `m × n` f32. Needs
/// [`available`] and `k2` a multiple of [`PAIRS`].
pub fn matmul(xa: &[u32], m: usize, k2: usize, panels: &[u32], n: usize) -> Vec<f32> {
    assert!(available(), "amx::matmul needs AMX");
    let m16 = m.div_ceil(16) * 16;
    assert!(
        k2.is_multiple_of(PAIRS) && xa.len() >= m16 * k2,
        "amx::matmul: x must be padded to 16 rows of whole tiles"
    );
    assert!(panels.len() >= n.div_ceil(PANEL) * k2 * PANEL, "amx::matmul: fewer panels than columns");
    // Every element is written by exactly one task before the length is set: no zeroing
    // pass (at prefill sizes, megabytes of fresh pages per product).
    let mut out = Vec::<f32>::with_capacity(m * n);
    let dst = OutPtr(out.as_mut_ptr());
    tasks(m16, k2, n.div_ceil(PANEL)).for_each(|(rows, cols)| {
        // SAFETY: AMX was granted (`available`); the block reads rows `rows` of xa (within
        // m16 × k2) and panels `cols` (within the panels' length), and writes rows below `m`
        // of columns `cols × PANEL` below `n` of the m × n output, which no other task writes.
        #[cfg(target_arch = "x86_64")]
        unsafe {
            x86::task(xa, k2, rows, cols, panels, dst, m, n)
        }
    });
    // SAFETY: the tasks wrote all m × n elements (rows below m of every panel's columns).
    unsafe { out.set_len(m * n) };
    out
}

/// The tasks of a product of `m16` rows of `k2` pairs with `n_panels` panels: blocks of rows
/// whose pairs fit an eighth of L2 (256 KiB) × runs of panels, row blocks outer so each thread
/// keeps its rows of `x` in cache while the panels stream through.
fn tasks(m16: usize, k2: usize, n_panels: usize) -> impl ParallelIterator<Item = (Range<usize>, Range<usize>)> {
    let rows_per = ((256 * 1024 / (k2 * 4)).max(ROWS) / ROWS * ROWS).min(m16.div_ceil(ROWS) * ROWS);
    let row_blocks = m16.div_ceil(rows_per);
    let want = 4 * rayon::current_num_threads();
    let per_task = n_panels.div_ceil(want.div_ceil(row_blocks)).max(1);
    let panel_tasks = n_panels.div_ceil(per_task);
    (0..row_blocks * panel_tasks).into_par_iter().map(move |t| {
        let (rb, pt) = (t / panel_tasks, t % panel_tasks);
        (rb * rows_per..((rb + 1) * rows_per).min(m16), pt * per_task..((pt + 1) * per_task).min(n_panels))
    })
}

/// SwiGLU of a fused gate|up product on tiles, straight into bf16 pairs: `panels` holds the
/// `2i` weight rows (gate then up, `i` a multiple of [`PANEL`]) of `k2` pairs; for each row of
/// `xa` (`m` rows then zero rows up to a multiple of 16) `ya` gets `silu(gate) · up` rounded to
/// bf16 as `i / 2` pairs — the next product's `x`, as `bf16_dot::pack_x` would have rounded
/// `swiglu`'s f32 rows, bit for bit. The `m × 2i` f32 product, its `m × i` f32 SwiGLU and the
/// rounding pass over it are never in memory. Writes the first `m` rows of `ya` (which may
/// hold anything before), every word of them. Needs [`available`], AVX-512 BF16 and `k2` a
/// multiple of [`PAIRS`].
pub(crate) fn swiglu_pairs(xa: &[u32], m: usize, k2: usize, panels: &[u32], i: usize, ya: &mut [MaybeUninit<u32>]) {
    let m16 = m.div_ceil(16) * 16;
    assert!(available() && k2.is_multiple_of(PAIRS) && i.is_multiple_of(PANEL) && xa.len() >= m16 * k2);
    assert!(panels.len() >= 2 * i * k2 && ya.len() >= m * i / 2, "amx::swiglu_pairs: short panels or output");
    let dst = OutPtr(ya.as_mut_ptr().cast());
    tasks(m16, k2, i / PANEL).for_each(|(rows, cols)| {
        // SAFETY: AMX was granted; reads stay within xa (m16 × k2) and the 2i / PANEL panels;
        // the task writes pairs 16j..16j + 16 (j in cols) of rows below m of ya (i / 2 pairs
        // per row), which no other task writes.
        #[cfg(target_arch = "x86_64")]
        unsafe {
            configure();
            for j in cols {
                let (g, u) = (panels.as_ptr().add(j * k2 * PANEL), panels.as_ptr().add((j + i / PANEL) * k2 * PANEL));
                x86::swiglu_panel(xa, k2, rows.clone(), g, u, dst.get().cast::<u32>().add(j * PANEL / 2), m, i / 2);
            }
            release();
        }
    });
}

/// One packed panel (`PANEL` weight rows of `k2` pairs, as `bf16_dot::pack_w` makes it)
/// against every row of `xa` (`m` rows then zero rows up to a multiple of 16), into columns
/// `c0..c0 + PANEL.min(n - c0)` of the `m × n` output at `dst`, which no other caller may
/// write at the same time. For weights packed per call, one panel per task (no copy of the
/// whole weight). Needs [`available`] and `k2` a multiple of [`PAIRS`].
pub(crate) fn panel(xa: &[u32], m: usize, k2: usize, panel: &[u32], dst: OutPtr, c0: usize, n: usize) {
    let m16 = m.div_ceil(16) * 16;
    assert!(available() && k2.is_multiple_of(PAIRS) && xa.len() >= m16 * k2 && panel.len() >= k2 * PANEL && c0 < n);
    // SAFETY: AMX was granted; the reads stay within xa (m16 × k2) and the panel (k2 × PANEL);
    // the writes are rows below m of columns c0..c0 + PANEL.min(n - c0), the caller's own.
    #[cfg(target_arch = "x86_64")]
    unsafe {
        configure();
        x86::one_panel(xa, k2, 0..m16, panel.as_ptr(), dst, c0, m, n);
        release();
    }
}

/// FLOP/s of one core on `tdpbf16ps` from registers (the four accumulators of a 2 × 2 block),
/// over `iters` instructions; `None` without AMX.
pub fn peak_flops(iters: u64) -> Option<f64> {
    if !available() {
        return None;
    }
    #[cfg(target_arch = "x86_64")]
    {
        let t = std::time::Instant::now();
        // SAFETY: AMX was granted; the loop touches tile registers only.
        unsafe { x86::spin(iters.div_ceil(4)) };
        let s = t.elapsed().as_secs_f64();
        return Some(iters.div_ceil(4) as f64 * 4.0 * (16.0 * 16.0 * 32.0 * 2.0) / s);
    }
    #[allow(unreachable_code)]
    None
}

/// Loads this thread's tile configuration: eight tiles of 16 rows × 64 bytes (the only shape
/// goodput's tile kernels use).
///
/// # Safety
/// [`available`] must be true; the thread must call [`release`] when its tiles are done.
#[cfg(target_arch = "x86_64")]
pub(crate) unsafe fn configure() {
    // SAFETY: as the caller promises.
    unsafe { x86::configure() }
}

/// Releases this thread's tiles (their state no longer saved on a context switch).
///
/// # Safety
/// After [`configure`], on the same thread.
#[cfg(target_arch = "x86_64")]
pub(crate) unsafe fn release() {
    // SAFETY: as the caller promises.
    unsafe { std::arch::asm!("tilerelease", options(nostack, nomem)) };
}

#[cfg(target_arch = "x86_64")]
#[allow(unsafe_op_in_unsafe_fn)]
mod x86 {
    use super::{OutPtr, PAIRS, PANEL, ROWS};
    use crate::cpu::common::x86::silu_mul;
    use std::arch::asm;
    use std::arch::x86_64::*;
    use std::mem::MaybeUninit;
    use std::ops::Range;

    /// Palette 1, eight tiles of 16 rows × 64 bytes.
    #[repr(C, align(64))]
    struct TileConfig {
        palette: u8,
        start_row: u8,
        reserved: [u8; 14],
        colsb: [u16; 16],
        rows: [u8; 16],
    }

    const CONFIG: TileConfig = {
        let mut c = TileConfig { palette: 1, start_row: 0, reserved: [0; 14], colsb: [0; 16], rows: [0; 16] };
        let mut i = 0;
        while i < 8 {
            c.colsb[i] = 64;
            c.rows[i] = 16;
            i += 1;
        }
        c
    };

    pub(super) unsafe fn configure() {
        asm!("ldtilecfg [{}]", in(reg) &CONFIG as *const TileConfig, options(nostack, readonly));
    }

    /// Rows `rows` of `xa` against panels `cols`, into the `m × n` output.
    #[allow(clippy::too_many_arguments)]
    pub(super) unsafe fn task(
        xa: &[u32],
        k2: usize,
        rows: Range<usize>,
        cols: Range<usize>,
        panels: &[u32],
        dst: OutPtr,
        m: usize,
        n: usize,
    ) {
        configure();
        for j in cols {
            one_panel(xa, k2, rows.clone(), panels.as_ptr().add(j * k2 * PANEL), dst, j * PANEL, m, n);
        }
        asm!("tilerelease", options(nostack, nomem));
    }

    /// Rows `rows` of `xa` against the panel at `b`, into columns `c0..` of the `m × n`
    /// output. The tiles must be configured.
    #[allow(clippy::too_many_arguments)]
    pub(super) unsafe fn one_panel(
        xa: &[u32],
        k2: usize,
        rows: Range<usize>,
        b: *const u32,
        dst: OutPtr,
        c0: usize,
        m: usize,
        n: usize,
    ) {
        // Written by the tiles before each read (16 or 32 rows of 32): never zeroed.
        let mut buf = MaybeUninit::<[f32; ROWS * PANEL]>::uninit();
        let buf = buf.as_mut_ptr().cast::<f32>();
        let width = PANEL.min(n - c0);
        let mut r = rows.start;
        while r < rows.end {
            let two = r + ROWS <= rows.end;
            let a = xa.as_ptr().add(r * k2);
            let height = (if two { ROWS } else { 16 }).min(m.saturating_sub(r));
            // A whole 32 × 32 block inside the output is stored there by the tiles; edges
            // go through `buf`.
            if two && height == ROWS && width == PANEL {
                block2(a, k2, b, dst.get().add(r * n + c0), n);
                r += ROWS;
                continue;
            }
            if two {
                block2(a, k2, b, buf, PANEL);
            } else {
                block1(a, k2, b, buf);
            }
            for i in 0..height {
                let o = dst.get().add((r + i) * n + c0);
                std::ptr::copy_nonoverlapping(buf.add(i * PANEL), o, width);
            }
            r += if two { ROWS } else { 16 };
        }
    }

    /// Rows `rows` of `xa` against the gate panel at `g` and the up panel at `u`: SwiGLU of
    /// each row's 32 columns as 16 bf16 pairs at `y` (row stride `ys` words), rows below `m`.
    #[allow(clippy::too_many_arguments)]
    pub(super) unsafe fn swiglu_panel(
        xa: &[u32],
        k2: usize,
        rows: Range<usize>,
        g: *const u32,
        u: *const u32,
        y: *mut u32,
        m: usize,
        ys: usize,
    ) {
        // Written by the tiles before each read: never zeroed.
        let (mut gb, mut ub) =
            (MaybeUninit::<[f32; ROWS * PANEL]>::uninit(), MaybeUninit::<[f32; ROWS * PANEL]>::uninit());
        let (gb, ub) = (gb.as_mut_ptr().cast::<f32>(), ub.as_mut_ptr().cast::<f32>());
        let mut r = rows.start;
        while r < rows.end {
            let two = r + ROWS <= rows.end;
            let a = xa.as_ptr().add(r * k2);
            if two {
                block2(a, k2, g, gb, PANEL);
                block2(a, k2, u, ub, PANEL);
            } else {
                block1(a, k2, g, gb);
                block1(a, k2, u, ub);
            }
            let height = (if two { ROWS } else { 16 }).min(m.saturating_sub(r));
            for i in 0..height {
                silu_row(gb.add(i * PANEL), ub.add(i * PANEL), y.add((r + i) * ys));
            }
            r += if two { ROWS } else { 16 };
        }
    }

    /// `silu(g) · u` of 32 values, rounded to bf16 (nearest, ties to even) as 16 pairs at `y`.
    #[target_feature(enable = "avx512f,avx512bf16")]
    unsafe fn silu_row(g: *const f32, u: *const f32, y: *mut u32) {
        let lo = silu_mul(_mm512_loadu_ps(g), _mm512_loadu_ps(u));
        let hi = silu_mul(_mm512_loadu_ps(g.add(16)), _mm512_loadu_ps(u.add(16)));
        let w: __m512i = std::mem::transmute(_mm512_cvtne2ps_pbh(hi, lo));
        _mm512_storeu_si512(y.cast(), w);
    }

    /// 32 rows of pairs at `a` (row stride `k2` words) × the panel at `b`, into `c` (32 × 32
    /// f32, row stride `ldc` values).
    unsafe fn block2(a: *const u32, k2: usize, b: *const u32, c: *mut f32, ldc: usize) {
        asm!("tilezero tmm0", "tilezero tmm1", "tilezero tmm2", "tilezero tmm3", options(nostack, nomem));
        let (sa, sb) = (k2 * 4, PANEL * 4);
        for p in (0..k2).step_by(PAIRS) {
            asm!(
                "tileloadd tmm4, [{a0} + {sa}*1]",
                "tileloadd tmm5, [{a1} + {sa}*1]",
                "tileloadd tmm6, [{b0} + {sb}*1]",
                "tileloadd tmm7, [{b1} + {sb}*1]",
                "tdpbf16ps tmm0, tmm4, tmm6",
                "tdpbf16ps tmm1, tmm4, tmm7",
                "tdpbf16ps tmm2, tmm5, tmm6",
                "tdpbf16ps tmm3, tmm5, tmm7",
                a0 = in(reg) a.add(p),
                a1 = in(reg) a.add(16 * k2 + p),
                b0 = in(reg) b.add(p * PANEL),
                b1 = in(reg) b.add(p * PANEL + 16),
                sa = in(reg) sa,
                sb = in(reg) sb,
                options(nostack, readonly),
            );
        }
        let sc = ldc * 4;
        asm!(
            "tilestored [{c0} + {sc}*1], tmm0",
            "tilestored [{c1} + {sc}*1], tmm1",
            "tilestored [{c2} + {sc}*1], tmm2",
            "tilestored [{c3} + {sc}*1], tmm3",
            c0 = in(reg) c,
            c1 = in(reg) c.add(16),
            c2 = in(reg) c.add(16 * ldc),
            c3 = in(reg) c.add(16 * ldc + 16),
            sc = in(reg) sc,
            options(nostack),
        );
    }

    /// [`block2`] for 16 rows: into the first 16 rows of `c`.
    unsafe fn block1(a: *const u32, k2: usize, b: *const u32, c: *mut f32) {
        asm!("tilezero tmm0", "tilezero tmm1", options(nostack, nomem));
        let (sa, sb) = (k2 * 4, PANEL * 4);
        for p in (0..k2).step_by(PAIRS) {
            asm!(
                "tileloadd tmm4, [{a0} + {sa}*1]",
                "tileloadd tmm6, [{b0} + {sb}*1]",
                "tileloadd tmm7, [{b1} + {sb}*1]",
                "tdpbf16ps tmm0, tmm4, tmm6",
                "tdpbf16ps tmm1, tmm4, tmm7",
                a0 = in(reg) a.add(p),
                b0 = in(reg) b.add(p * PANEL),
                b1 = in(reg) b.add(p * PANEL + 16),
                sa = in(reg) sa,
                sb = in(reg) sb,
                options(nostack, readonly),
            );
        }
        let sc = PANEL * 4;
        asm!(
            "tilestored [{c0} + {sc}*1], tmm0",
            "tilestored [{c1} + {sc}*1], tmm1",
            c0 = in(reg) c,
            c1 = in(reg) c.add(16),
            sc = in(reg) sc,
            options(nostack),
        );
    }

    /// `4 · quads` `tdpbf16ps` on registers only (the peak).
    pub(super) unsafe fn spin(quads: u64) {
        configure();
        asm!("tilezero tmm0", "tilezero tmm1", "tilezero tmm2", "tilezero tmm3", options(nostack, nomem));
        asm!("tilezero tmm4", "tilezero tmm5", "tilezero tmm6", "tilezero tmm7", options(nostack, nomem));
        for _ in 0..quads {
            asm!(
                "tdpbf16ps tmm0, tmm4, tmm6",
                "tdpbf16ps tmm1, tmm4, tmm7",
                "tdpbf16ps tmm2, tmm5, tmm6",
                "tdpbf16ps tmm3, tmm5, tmm7",
                options(nostack, nomem),
            );
        }
        asm!("tilerelease", options(nostack, nomem));
    }
}
