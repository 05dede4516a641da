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

fn main() {
    println!("cargo::rerun-if-changed=build.rs");
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
