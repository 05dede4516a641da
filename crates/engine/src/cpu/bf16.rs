//! `x · Wᵀ` with bf16 weights and f32 activations: the CPU matmul of `--dtype bf16`.
//!
//! On CPU, `--dtype bf16` keeps the weights in bf16 (half the bytes of f32; decode streams
//! every weight once per step, so it reads half as much) while activations, norms, RoPE and
//! softmax stay in f32 and every product accumulates in f32. Two paths:
//!
//! - **Few rows** (decode, up to [`SKINNY_ROWS`]): the weight matrix is walked once, each row
//!   widened bf16 → f32 in registers and dotted with up to 4 rows of `x` per widening; weight
//!   rows are split across threads. Widening is exact and costs two instructions per 16
//!   weights: of each 32-bit pair of bf16 values, a shift left by 16 gives the even element and
//!   a mask the odd one, so `x` is laid out once per call with each 16-block's even elements
//!   first and its odd ones after ([`pair_layout`]).
//! - **Many rows** (prefill): on CPUs with AVX-512 BF16, a blocked GEMM on `vdpbf16ps`
//!   with `x` rounded to bf16 (`bf16_dot.rs`, twice the products per instruction of f32
//!   FMA). Elsewhere the weight is cut into panels of rows sized for L2; each task widens its
//!   panel to f32 once and multiplies it with gemm's f32 kernel (single-threaded per panel,
//!   panels in parallel). Widening is one pass over the panel for `m` rows of FMAs.
//!
//! Why not candle's bf16 matmul: it runs gemm's generic bf16 path, which converts inside the
//! microkernel and is far slower than f32 (measured on SmolLM2-135M, 2 threads: prefill of 512
//! tokens 4.07 s in bf16 against 1.51 s in f32, decode at batch 1 112 ms against 25 ms).

use crate::cpu::amx;
use crate::cpu::bf16_dot::{self, Packed};
use crate::cpu::common::{untranspose, widen, OutPtr};
use candle_core::{CpuStorage, CustomOp2, DType, Layout, Result, Shape, Tensor};
use half::slice::HalfFloatSliceExt;
use rayon::prelude::*;
use std::sync::OnceLock;

/// Largest row count of the few-rows kernel; above it, widened panels and gemm.
pub const SKINNY_ROWS: usize = 16;

/// Largest row count of the few-rows kernel for a weight of `elems` values. Without AVX-512
/// BF16: on large matrices (an LM head) the panels win from 16 rows on (`examples/mm.rs`,
/// SmolLM2's LM head 49152 × 576 at 16 rows: 16.1 ms against 19.0 ms; at 12 rows they tie).
/// With it, `vdpbf16ps` wins from 9 rows on SmolLM2's layer matrices (12 rows: gate|up 0.26
/// against 0.33 ms, down 0.16 against 0.21 ms; 8 rows: 0.24 against 0.20, 0.15 against 0.11)
/// and from 13 on its LM head (16 rows: 5.6 against 8.8 ms; 12 rows: 5.2 against 4.9 ms).
fn few_rows_limit(elems: usize) -> usize {
    let large = elems > 1 << 22;
    match (bf16_dot::available(), large) {
        (true, false) => 8,
        (true, true) => 12,
        (false, false) => SKINNY_ROWS,
        (false, true) => SKINNY_ROWS - 4,
    }
}

/// Weight rows per parallel task of the few-rows kernel.
const ROWS_PER_TASK: usize = 64;

/// Bytes of one widened f32 panel (about half a core's L2).
const PANEL_BYTES: usize = 256 * 1024;

/// `out[r * m + i] = Σ_t w[r * k + t] · x[i * k + t]` for the `out.len() / m` weight rows of
/// `w`, with `x` in [`pair_layout`].
type BlockFn = unsafe fn(x: &[f32], m: usize, k: usize, w: &[u16], out: &mut [f32]);

fn block_kernel() -> BlockFn {
    static K: OnceLock<BlockFn> = OnceLock::new();
    *K.get_or_init(|| {
        #[cfg(target_arch = "x86_64")]
        if std::is_x86_feature_detected!("avx2") && std::is_x86_feature_detected!("fma") {
            return x86::block;
        }
        block_scalar
    })
}

/// Which of the two paths runs a product.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Path {
    /// By row count: [`Path::FewRows`] up to the limit for the matrix, else [`Path::Dot`]
    /// where the CPU has AVX-512 BF16, else [`Path::Panels`].
    Auto,
    FewRows,
    /// Widened f32 panels and gemm's f32 kernel (f32 activations).
    Panels,
    /// `vdpbf16ps` on `x` rounded to bf16 (`bf16_dot.rs`); [`Path::Panels`] on CPUs
    /// without AVX-512 BF16.
    Dot,
}

/// `x · wᵀ` for `x (…, k)` in f32 and `w (n, k)` in bf16, on CPU; the result is f32
/// `(…, n)`. `None` when the inputs are not those (other dtypes, devices or shapes).
pub fn matmul_t(x: &Tensor, w: &Tensor) -> Result<Option<Tensor>> {
    matmul_t_via(x, w, Path::Auto)
}

/// [`matmul_t`] through the given path (benchmarks compare them).
pub fn matmul_t_via(x: &Tensor, w: &Tensor, path: Path) -> Result<Option<Tensor>> {
    matmul_t_packed(x, w, None, path)
}

/// [`matmul_t_via`] with `w` also packed for `vdpbf16ps` ([`Packed`], made
/// at load): the `Dot` path then reads it instead of packing `w` per call, and takes every
/// product above [`PACKED_FEW_ROWS`] rows.
pub fn matmul_t_packed(
    x: &Tensor,
    w: &Tensor,
    packed: Option<std::sync::Arc<Packed>>,
    path: Path,
) -> Result<Option<Tensor>> {
    if !x.device().is_cpu() || x.dtype() != DType::F32 || w.dtype() != DType::BF16 {
        return Ok(None);
    }
    let (Ok((n, kw)), Some(&k)) = (w.dims2(), x.dims().last()) else { return Ok(None) };
    if k != kw || k == 0 || x.elem_count() == 0 || !w.is_contiguous() {
        return Ok(None);
    }
    let mut out_dims = x.dims().to_vec();
    *out_dims.last_mut().expect("x has a last dimension") = n;
    let x2 = x.reshape((x.elem_count() / k, k))?.contiguous()?;
    let packed = packed.filter(|p| p.dims() == (n, k));
    Ok(Some(x2.apply_op2_no_bwd(w, &Bf16Matmul(path, packed))?.reshape(out_dims)?))
}

/// Rows up to which the f32-activation few-rows kernel runs even where the weight is packed
/// (without AMX): there both stream the weight once, and f32 activations round nothing.
pub const PACKED_FEW_ROWS: usize = 4;

struct Bf16Matmul(Path, Option<std::sync::Arc<Packed>>);

impl CustomOp2 for Bf16Matmul {
    fn name(&self) -> &'static str {
        "bf16-weight-matmul"
    }

    fn cpu_fwd(&self, xs: &CpuStorage, xl: &Layout, ws: &CpuStorage, wl: &Layout) -> Result<(CpuStorage, Shape)> {
        let (CpuStorage::F32(x), CpuStorage::BF16(w)) = (xs, ws) else {
            candle_core::bail!("bf16 matmul: x must be f32 and w bf16")
        };
        let (Some((x0, x1)), Some((w0, w1))) = (xl.contiguous_offsets(), wl.contiguous_offsets()) else {
            candle_core::bail!("bf16 matmul: contiguous inputs only")
        };
        let (m, k) = xl.shape().dims2()?;
        let (n, _) = wl.shape().dims2()?;
        let (x, w) = (&x[x0..x1], w[w0..w1].reinterpret_cast());
        let limit = match (&self.1, amx::takes(m, k)) {
            // From 2 rows the tiles beat the few-rows kernel (SmolLM2 bf16 decode step at batch
            // 4: 20.6 against 26.9 ms, engine-bench).
            (Some(_), true) => 1,
            (Some(_), false) => PACKED_FEW_ROWS,
            (None, _) => few_rows_limit(n * k),
        };
        let path = match self.0 {
            Path::Auto if m <= limit => Path::FewRows,
            Path::Auto | Path::Dot if bf16_dot::available() => Path::Dot,
            Path::Auto | Path::Dot => Path::Panels,
            p => p,
        };
        let out = match path {
            Path::FewRows => few_rows(x, w, m, k, n),
            Path::Dot => match &self.1 {
                Some(p) => bf16_dot::matmul_packed(x, p, m),
                None => bf16_dot::matmul(x, w, m, k, n),
            },
            _ => panels(x, w, m, k, n),
        };
        Ok((CpuStorage::F32(out), Shape::from((m, n))))
    }
}

/// `x` (`m` rows of `k`) with each full block of 16 values of a row reordered as its 8 even
/// elements then its 8 odd ones (the order the kernels widen a block of 16 bf16 weights in);
/// the last `k % 16` values of a row stay in place.
fn pair_layout(x: &[f32], m: usize, k: usize) -> Vec<f32> {
    let mut out = x[..m * k].to_vec();
    for row in out.chunks_exact_mut(k) {
        for block in row.chunks_exact_mut(16) {
            let src: [f32; 16] = block.try_into().expect("a block of 16");
            for j in 0..8 {
                block[j] = src[2 * j];
                block[8 + j] = src[2 * j + 1];
            }
        }
    }
    out
}

/// The few-rows path: weight rows split across threads, output written transposed `(n, m)`
/// (each task a contiguous run), then turned back.
fn few_rows(x: &[f32], w: &[u16], m: usize, k: usize, n: usize) -> Vec<f32> {
    let kernel = block_kernel();
    let x = &pair_layout(x, m, k)[..];
    let mut out_t = vec![0f32; n * m];
    out_t.par_chunks_mut(ROWS_PER_TASK * m).enumerate().for_each(|(task, out)| {
        let r0 = task * ROWS_PER_TASK;
        let rows = out.len() / m;
        // SAFETY: the kernel's CPU features were detected at run time; `w` holds rows × k,
        // `x` m × k and `out` rows × m values.
        unsafe { kernel(x, m, k, &w[r0 * k..(r0 + rows) * k], out) }
    });
    untranspose(out_t, m, n)
}

/// Rows of one widened panel for a reduction of `k`: a multiple of 8, at least 16.
fn panel_rows(k: usize) -> usize {
    ((PANEL_BYTES / 4 / k.max(1)) / 8 * 8).clamp(16, 256)
}

/// The many-rows path: panels of weight rows widened to f32, each multiplied by gemm.
fn panels(x: &[f32], w: &[u16], m: usize, k: usize, n: usize) -> Vec<f32> {
    panels_with(x, m, k, n, |r0, rows, buf| buf.extend(w[r0 * k..(r0 + rows) * k].iter().map(|&b| widen(b))))
}

/// `x · Wᵀ` (`x` `m × k`, `W` `n × k`) by panels of weight rows sized for L2: in parallel,
/// each task has `widen(r0, rows, buf)` append rows `r0..r0 + rows` of `W` to `buf` as f32
/// (a bf16 widening, an MXFP4 decoding), then multiplies them with gemm's f32 kernel.
pub(crate) fn panels_with(
    x: &[f32],
    m: usize,
    k: usize,
    n: usize,
    widen: impl Fn(usize, usize, &mut Vec<f32>) + Sync,
) -> Vec<f32> {
    let mut out = vec![0f32; m * n];
    let nb = panel_rows(k);
    let dst = OutPtr(out.as_mut_ptr());
    (0..n.div_ceil(nb)).into_par_iter().for_each_init(Vec::new, |buf: &mut Vec<f32>, p| {
        let r0 = p * nb;
        let rows = nb.min(n - r0);
        buf.clear();
        widen(r0, rows, buf);
        // gemm below reads rows × k values from buf: a widener that wrote fewer is a bug of ours.
        assert_eq!(buf.len(), rows * k, "a widened panel of {rows} rows × {k}");
        // SAFETY: dst is m × n (row stride n) and this task writes its columns r0..r0 + rows
        // only; x is m × k row-major; the panel is rows × k row-major, read as the k × rows
        // right-hand side (row stride 1, column stride k).
        unsafe {
            gemm::gemm(
                m,
                rows,
                k,
                dst.get().add(r0),
                1,
                n as isize,
                false,
                x.as_ptr(),
                1,
                k as isize,
                buf.as_ptr(),
                k as isize,
                1,
                0.0,
                1.0,
                false,
                false,
                false,
                gemm::Parallelism::None,
            )
        }
    });
    out
}

/// Portable version of the few-rows block (16 independent sums, which the compiler
/// vectorizes), `x` in [`pair_layout`].
///
/// # Safety
/// Safe to call; `unsafe` only to share [`BlockFn`]'s type.
unsafe fn block_scalar(x: &[f32], m: usize, k: usize, w: &[u16], out: &mut [f32]) {
    for (r, wr) in w.chunks_exact(k).enumerate() {
        for i in 0..m {
            let xr = &x[i * k..(i + 1) * k];
            let mut acc = [0f32; 16];
            let (wc, xc) = (wr.chunks_exact(16), xr.chunks_exact(16));
            let tail: f32 = wc.remainder().iter().zip(xc.remainder()).map(|(&a, b)| widen(a) * b).sum();
            for (a, b) in wc.zip(xc) {
                for j in 0..8 {
                    acc[j] += widen(a[2 * j]) * b[j];
                    acc[8 + j] += widen(a[2 * j + 1]) * b[8 + j];
                }
            }
            out[r * m + i] = acc.iter().sum::<f32>() + tail;
        }
    }
}

// Raw SIMD over pointers whose bounds `block` establishes from the slice lengths (checked in
// debug builds); every function here needs AVX2+FMA, which `block_kernel` verified.
#[cfg(target_arch = "x86_64")]
#[allow(unsafe_op_in_unsafe_fn)]
mod x86 {
    use crate::cpu::common::x86::hsum;
    use std::arch::x86_64::*;

    /// 16 bf16 values at `p` as two f32 vectors: the even elements and the odd ones (exact:
    /// bf16 is the top half of an f32).
    #[target_feature(enable = "avx2,fma")]
    unsafe fn widen16(p: *const u16) -> (__m256, __m256) {
        let v = _mm256_loadu_si256(p.cast::<__m256i>());
        let even = _mm256_castsi256_ps(_mm256_slli_epi32(v, 16));
        let odd = _mm256_castsi256_ps(_mm256_and_si256(v, _mm256_set1_epi32(0xFFFF_0000u32 as i32)));
        (even, odd)
    }

    /// Dot products of one bf16 weight row with `R` rows of `x` (row stride `k`, in
    /// `pair_layout`), each widened block used `R` times, `U` blocks of 16 per iteration
    /// (2·U accumulators per row, for the FMA latency).
    #[target_feature(enable = "avx2,fma")]
    unsafe fn row_dots<const R: usize, const U: usize>(wr: *const u16, x: *const f32, k: usize, out: *mut f32) {
        let mut acc = [[[_mm256_setzero_ps(); 2]; U]; R];
        let mut t = 0;
        while t + 16 * U <= k {
            for u in 0..U {
                let (even, odd) = widen16(wr.add(t + 16 * u));
                for (r, a) in acc.iter_mut().enumerate() {
                    let xr = x.add(r * k + t + 16 * u);
                    a[u][0] = _mm256_fmadd_ps(even, _mm256_loadu_ps(xr), a[u][0]);
                    a[u][1] = _mm256_fmadd_ps(odd, _mm256_loadu_ps(xr.add(8)), a[u][1]);
                }
            }
            t += 16 * U;
        }
        while t + 16 <= k {
            let (even, odd) = widen16(wr.add(t));
            for (r, a) in acc.iter_mut().enumerate() {
                let xr = x.add(r * k + t);
                a[0][0] = _mm256_fmadd_ps(even, _mm256_loadu_ps(xr), a[0][0]);
                a[0][1] = _mm256_fmadd_ps(odd, _mm256_loadu_ps(xr.add(8)), a[0][1]);
            }
            t += 16;
        }
        for (r, a) in acc.iter().enumerate() {
            let mut v = _mm256_add_ps(a[0][0], a[0][1]);
            for au in &a[1..] {
                v = _mm256_add_ps(v, _mm256_add_ps(au[0], au[1]));
            }
            let mut s = hsum(v);
            for j in t..k {
                s += super::widen(*wr.add(j)) * *x.add(r * k + j);
            }
            *out.add(r) = s;
        }
    }

    /// AVX2 version of the few-rows block: for each weight row, groups of 4 rows of `x`.
    ///
    /// # Safety
    /// AVX2 and FMA must be available; `x` holds m × k, `w` rows × k and `out` rows × m values.
    #[target_feature(enable = "avx2,fma")]
    pub(super) unsafe fn block(x: &[f32], m: usize, k: usize, w: &[u16], out: &mut [f32]) {
        let rows = out.len() / m;
        debug_assert!(x.len() >= m * k && w.len() >= rows * k);
        let (xp, wp, op) = (x.as_ptr(), w.as_ptr(), out.as_mut_ptr());
        for r in 0..rows {
            let (wr, o) = (wp.add(r * k), op.add(r * m));
            let mut i = 0;
            while i + 4 <= m {
                row_dots::<4, 1>(wr, xp.add(i * k), k, o.add(i));
                i += 4;
            }
            match m - i {
                3 => row_dots::<3, 1>(wr, xp.add(i * k), k, o.add(i)),
                2 => row_dots::<2, 2>(wr, xp.add(i * k), k, o.add(i)),
                1 => row_dots::<1, 2>(wr, xp.add(i * k), k, o.add(i)),
                _ => {}
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cpu::common::test_values;
    use candle_core::Device;
    use half::bf16;
    use proptest::prelude::*;

    /// The product in f64 of the f32 `x` and the widened bf16 `w`: what both paths approximate.
    fn reference(x: &Tensor, w: &Tensor) -> Tensor {
        let xd = x.to_dtype(DType::F64).unwrap();
        let wd = w.to_dtype(DType::F64).unwrap();
        xd.matmul(&wd.t().unwrap()).unwrap()
    }

    fn check(m: usize, k: usize, n: usize, seed: u64) {
        let dev = Device::Cpu;
        let mut next = test_values(seed);
        let x = Tensor::from_vec((0..m * k).map(|_| next()).collect::<Vec<_>>(), (m, k), &dev).unwrap();
        let w = Tensor::from_vec((0..n * k).map(|_| next()).collect::<Vec<_>>(), (n, k), &dev).unwrap();
        let w = w.to_dtype(DType::BF16).unwrap();
        // The f32-activation paths (the bf16-activation one has its own tests in bf16_dot).
        let path = if m <= few_rows_limit(n * k) { Path::FewRows } else { Path::Panels };
        let got = matmul_t_via(&x, &w, path).unwrap().expect("f32 x, bf16 w on the CPU").to_dtype(DType::F64).unwrap();
        assert_eq!(got.dims(), &[m, n]);
        let d = (got - reference(&x, &w)).unwrap().abs().unwrap().max_all().unwrap().to_scalar::<f64>().unwrap();
        // f32 accumulation of k products of magnitude ≤ 1.
        assert!(d < 1e-5 * k as f64, "{m}×{k}×{n}: max |Δ| {d}");
    }

    #[test]
    fn both_paths_match_an_f64_product_on_odd_shapes() {
        for (m, k, n) in
            [(1, 8, 1), (3, 13, 7), (4, 256, 130), (16, 72, 65), (5, 1000, 3), (17, 40, 300), (64, 576, 97)]
        {
            check(m, k, n, (m * 31 + k * 7 + n) as u64);
        }
    }

    #[test]
    fn the_scalar_block_matches_the_dispatched_one() {
        let (m, k, rows) = (5, 53, 3);
        let x: Vec<f32> = (0..m * k).map(|i| (i as f32 * 0.37).sin()).collect();
        let w: Vec<u16> = (0..rows * k).map(|i| bf16::from_f32((i as f32 * 0.11).cos()).to_bits()).collect();
        let want: Vec<f32> =
            (0..rows * m).map(|o| (0..k).map(|t| widen(w[(o / m) * k + t]) * x[(o % m) * k + t]).sum()).collect();
        let xp = pair_layout(&x, m, k);
        let (mut a, mut b) = (vec![0f32; rows * m], vec![0f32; rows * m]);
        // SAFETY: sizes as documented; the dispatched kernel's features were detected.
        unsafe {
            block_scalar(&xp, m, k, &w, &mut a);
            block_kernel()(&xp, m, k, &w, &mut b);
        }
        for ((p, q), r) in a.iter().zip(&b).zip(&want) {
            assert!((p - r).abs() < 1e-4 && (q - r).abs() < 1e-4, "{p} and {q} vs {r}");
        }
    }

    #[test]
    fn other_inputs_are_not_taken() {
        let dev = Device::Cpu;
        let x = Tensor::zeros((2, 8), DType::F32, &dev).unwrap();
        let w32 = Tensor::zeros((4, 8), DType::F32, &dev).unwrap();
        assert!(matmul_t(&x, &w32).unwrap().is_none(), "f32 weights go to the f32 kernels");
        let w = Tensor::zeros((4, 9), DType::BF16, &dev).unwrap();
        assert!(matmul_t(&x, &w).unwrap().is_none(), "k differs");
        let x3 = Tensor::ones((2, 3, 8), DType::F32, &dev).unwrap();
        let w = Tensor::ones((4, 8), DType::BF16, &dev).unwrap();
        let y = matmul_t(&x3, &w).unwrap().unwrap();
        assert_eq!(y.dims(), &[2, 3, 4], "leading dimensions are kept");
        assert_eq!(y.flatten_all().unwrap().to_vec1::<f32>().unwrap(), vec![8f32; 24]);
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(24))]
        #[test]
        fn any_shape_matches_the_f64_product(m in 1usize..40, k in 1usize..300, n in 1usize..200, seed in any::<u64>()) {
            check(m, k, n, seed);
        }
    }
}
