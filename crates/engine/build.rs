//! With the `cuda` feature: compiles `kernels/goodput.cu` to PTX with nvcc (found on PATH or
//! under CUDA_ROOT / CUDA_HOME / CUDA_PATH), for the compute capability in CUDA_COMPUTE_CAP
//! (default 90, the H100/H200). The driver JIT-compiles the PTX for the GPU it runs on.
//! Without the feature it does nothing.

use std::path::PathBuf;
use std::process::Command;

fn nvcc() -> PathBuf {
    for var in ["CUDA_ROOT", "CUDA_HOME", "CUDA_PATH"] {
        if let Some(root) = std::env::var_os(var) {
            let p = PathBuf::from(root).join("bin/nvcc");
            if p.exists() {
                return p;
            }
        }
    }
    PathBuf::from("nvcc")
}

/// The CPU kernels' tests run only where their instructions exist: this sets
/// `host_avx2`, `host_avx512bf16` and `host_amx` when the machine building the tests has them (and builds
/// for itself), so a test of a kernel the CPU lacks is marked `ignored` with its reason,
/// counted as such, instead of passing without running. `GOODPUT_PRETEND_NO_SIMD=1` builds as
/// a host without them would (to see those tests ignored on a host that has them).
fn host_cpu_features() {
    println!("cargo::rustc-check-cfg=cfg(host_avx2)");
    println!("cargo::rustc-check-cfg=cfg(host_avx512bf16)");
    println!("cargo::rustc-check-cfg=cfg(host_amx)");
    println!("cargo::rerun-if-env-changed=GOODPUT_PRETEND_NO_SIMD");
    let (host, target) = (std::env::var("HOST").unwrap_or_default(), std::env::var("TARGET").unwrap_or_default());
    if host != target || std::env::var_os("GOODPUT_PRETEND_NO_SIMD").is_some() {
        return;
    }
    #[cfg(target_arch = "x86_64")]
    {
        if std::is_x86_feature_detected!("avx2") && std::is_x86_feature_detected!("fma") {
            println!("cargo::rustc-cfg=host_avx2");
        }
        if std::is_x86_feature_detected!("avx512bf16") && std::is_x86_feature_detected!("avx512f") {
            println!("cargo::rustc-cfg=host_avx512bf16");
        }
        // AMX-BF16 and AMX-TILE (cpuid leaf 7, edx bits 22 and 24): not yet detectable by
        // `is_x86_feature_detected!` in stable Rust.
        let edx = std::arch::x86_64::__cpuid_count(7, 0).edx;
        // And an OS that saves the tile state (XCR0 bits 17 and 18), read only where the CPU
        // has OSXSAVE (cpuid leaf 1, ecx bit 27).
        let osxsave = std::arch::x86_64::__cpuid(1).ecx & (1 << 27) != 0;
        // SAFETY: xgetbv exists where OSXSAVE is set.
        let os_tiles = osxsave && unsafe { xcr0() } & (0b11 << 17) == 0b11 << 17;
        if edx & (1 << 22) != 0 && edx & (1 << 24) != 0 && os_tiles {
            println!("cargo::rustc-cfg=host_amx");
        }
    }
}

fn main() {
    println!("cargo::rerun-if-changed=build.rs");
    host_cpu_features();
    for f in ["goodput.cu", "gemv.cuh", "sample.cuh", "flash.cuh"] {
        println!("cargo::rerun-if-changed=kernels/{f}");
    }
    println!("cargo::rerun-if-env-changed=CUDA_COMPUTE_CAP");
    if std::env::var_os("CARGO_FEATURE_CUDA").is_none() {
        return;
    }
    let cap = std::env::var("CUDA_COMPUTE_CAP").unwrap_or_else(|_| "90".into());
    let cap = cap.trim_end_matches(|c: char| !c.is_ascii_digit());
    // The kernels' PDL waits exist only in PTX for 9.0 and later (src/cuda/launch.rs).
    println!("cargo::rustc-env=GOODPUT_PTX_CAP={cap}");
    let out = PathBuf::from(std::env::var_os("OUT_DIR").expect("cargo sets OUT_DIR")).join("goodput.ptx");
    let nvcc = nvcc();
    let status = Command::new(&nvcc)
        .args(["--ptx", "-O3", "-std=c++17", &format!("--gpu-architecture=compute_{cap}"), "-o"])
        .arg(&out)
        .arg("kernels/goodput.cu")
        .status()
        .unwrap_or_else(|e| panic!("the `cuda` feature needs nvcc ({}): {e}", nvcc.display()));
    assert!(status.success(), "nvcc failed to compile kernels/goodput.cu ({status})");
}

/// The OS's enabled state components (XCR0).
///
/// # Safety
/// Only where cpuid says OSXSAVE.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "xsave")]
unsafe fn xcr0() -> u64 {
    // SAFETY: as the caller promises.
    unsafe { std::arch::x86_64::_xgetbv(0) }
}
