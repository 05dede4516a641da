use super::*;

const ALL_GPUS: [&str; 10] =
    ["h100-sxm", "h100-pcie", "h200", "a100-40gb", "a100-80gb", "l40s", "l4", "a10", "b200", "mi300x"];

/// A valid entry `[gpus.g]`, less the line starting with `drop`, plus `extra`.
fn entry(extra: &str, drop: &str) -> String {
    let base = "vendor = \"nvidia\"\ndescription = \"Test GPU\"\nmemory_gb = 80.0\nmemory_bandwidth_gbps = 2000.0\n\
                bf16_tflops = 500.0\nfp16_tflops = 500.0\nfp8_tflops = 1000.0\ninterconnect = \"pcie5\"\n\
                interconnect_gbps = 64.0\n";
    let body: String =
        base.lines().filter(|l| drop.is_empty() || !l.starts_with(drop)).map(|l| format!("{l}\n")).collect();
    format!("[gpus.g]\n{body}{extra}")
}

fn parse_err(text: &str) -> String {
    HardwareCatalog::parse(text, "t.toml").unwrap_err().to_string()
}

#[test]
fn builtin_catalog_is_valid_and_has_every_gpu() {
    let c = HardwareCatalog::parse(BUILTIN, "builtin").unwrap();
    assert_eq!(c.gpus.len(), ALL_GPUS.len(), "{:?}", c.gpus.keys());
    for name in ALL_GPUS {
        let gpu = c.get(name).unwrap();
        assert_eq!(gpu.name, name);
        assert!(gpu.price_per_hour.is_none(), "{name}: prices come from the command line");
    }
    assert_eq!(HardwareCatalog::builtin().gpus.len(), ALL_GPUS.len());
}

#[test]
fn builtin_figures_are_consistent() {
    for gpu in HardwareCatalog::builtin().gpus.values() {
        let n = &gpu.name;
        // fp16 and bf16 run at the same tensor rate on every GPU of the catalog.
        assert!(gpu.fp16_tflops >= gpu.bf16_tflops * 0.99 && gpu.fp16_tflops <= gpu.bf16_tflops * 1.01, "{n}");
        // Where fp8 exists it doubles the 16-bit rate, within the datasheets' own rounding (the
        // L40S sheet prints 362.05 bf16 dense beside 733 bf16 sparse and 733 fp8 dense: 2.5% off).
        if let Some(fp8) = gpu.fp8_tflops {
            assert!((fp8 / gpu.bf16_tflops - 2.0).abs() < 0.03, "{n}: fp8 {fp8} vs bf16 {}", gpu.bf16_tflops);
        }
        // Ranges that catch a unit slip (TB/s for GB/s, GiB for GB, sparse for dense).
        assert!((16.0..=300.0).contains(&gpu.memory_gb), "{n}");
        assert!((200.0..=10_000.0).contains(&gpu.memory_bandwidth_gbps), "{n}");
        assert!((50.0..=3_000.0).contains(&gpu.bf16_tflops), "{n}");
        assert!(gpu.interconnect_gbps < gpu.memory_bandwidth_gbps, "{n}: a link is slower than HBM");
        assert_eq!(gpu.flops_per_s(DType::F32), None, "{n}");
    }
    let c = HardwareCatalog::builtin();
    for no_fp8 in ["a100-40gb", "a100-80gb", "a10"] {
        assert_eq!(c.get(no_fp8).unwrap().flops_per_s(DType::Fp8), None, "{no_fp8}");
    }
}

#[test]
fn hand_checked_figures() {
    let c = HardwareCatalog::builtin();
    let h100 = c.get("h100-sxm").unwrap();
    // Datasheet: 80 GB, 3.35 TB/s, 1,979 TFLOPS bf16 with sparsity (989 dense), NVLink 900 GB/s both ways.
    assert_eq!(h100.memory_bytes(), 80e9);
    assert_eq!(h100.bandwidth_bytes_per_s(), 3.35e12);
    assert_eq!(h100.flops_per_s(DType::Bf16), Some(989e12));
    assert_eq!(h100.flops_per_s(DType::Fp8), Some(1979e12));
    assert_eq!(h100.link_bytes_per_s(), 450e9);
    // H200: the H100 SXM die with more and faster memory.
    let h200 = c.get("h200").unwrap();
    assert_eq!(h200.bf16_tflops, h100.bf16_tflops);
    assert_eq!(h200.memory_bytes(), 141e9);
    assert_eq!(c.get("l40s").unwrap().link_bytes_per_s(), 32e9);
    assert_eq!(c.get("mi300x").unwrap().flops_per_s(DType::Fp16), Some(1307.4e12));
}

#[test]
fn lookup_ignores_case_and_unknown_names_list_the_catalog() {
    let c = HardwareCatalog::builtin();
    assert_eq!(c.get("H100-SXM").unwrap().name, "h100-sxm");
    let e = c.get("tpu-v5").unwrap_err().to_string();
    assert!(e.contains("unknown gpu `tpu-v5`"), "{e}");
    for name in ALL_GPUS {
        assert!(e.contains(name), "{e}");
    }
}

#[test]
fn bad_entries_name_the_gpu_and_field() {
    assert!(HardwareCatalog::parse(&entry("", ""), "t").is_ok());
    // Whole numbers are read as floats.
    assert!(HardwareCatalog::parse(&(entry("", "memory_gb") + "memory_gb = 80\n"), "t").is_ok());
    let cases = [
        (entry("colour = \"green\"\n", ""), "colour"),
        (entry("", "memory_bandwidth_gbps") + "memory_bandwidth_gbps = -1.0\n", "memory_bandwidth_gbps"),
        (entry("", "memory_gb"), "missing field `memory_gb`"),
        (entry("", "bf16_tflops") + "bf16_tflops = nan\n", "bf16_tflops"),
        (entry("", "fp8_tflops") + "fp8_tflops = 0.0\n", "fp8_tflops"),
        (entry("price_per_hour = inf\n", ""), "price_per_hour"),
        (entry("", "vendor") + "vendor = \" \"\n", "vendor"),
        (entry("", "interconnect_gbps") + "interconnect_gbps = \"fast\"\n", "field `interconnect_gbps`: invalid type"),
        (entry("", "vendor") + "vendor = 3\n", "field `vendor`: invalid type"),
    ];
    for (text, field) in cases {
        let e = parse_err(&text);
        assert!(e.contains("gpu `g`") && e.contains(field) && e.contains("t.toml"), "{field}: {e}");
    }
    let e = parse_err(&entry("", "").replace("[gpus.g]", "[gpus.Big]"));
    assert!(e.contains("gpu `Big`") && e.contains("lowercase"), "{e}");
}

#[test]
fn bad_files_say_what_is_wrong() {
    assert!(parse_err("gpus = [").contains("not valid TOML"));
    assert!(parse_err("x = 1").contains("unknown top-level key `x`"));
    assert!(parse_err("").contains("no [gpus"));
    assert!(parse_err("[gpus]\n").contains("no [gpus"));
    let e = HardwareCatalog::from_path(Path::new("/nonexistent/hardware.toml")).unwrap_err().to_string();
    assert!(e.contains("cannot read") && e.contains("/nonexistent/hardware.toml"), "{e}");
}

#[test]
fn without_fp8_the_entry_has_no_fp8_rate() {
    let c = HardwareCatalog::parse(&entry("", "fp8_tflops"), "t").unwrap();
    let g = c.get("g").unwrap();
    assert_eq!(g.fp8_tflops, None);
    assert_eq!(g.flops_per_s(DType::Fp8), None);
    assert_eq!(g.flops_per_s(DType::Fp16), Some(500e12));
}

#[test]
fn extend_replaces_and_adds() {
    let mut c = HardwareCatalog::builtin();
    let mine = entry("price_per_hour = 2.5\n", "").replace("[gpus.g]", "[gpus.h100-sxm]")
        + &entry("", "").replace("[gpus.g]", "[gpus.my-card]");
    c.extend(HardwareCatalog::parse(&mine, "mine.toml").unwrap());
    assert_eq!(c.gpus.len(), ALL_GPUS.len() + 1);
    let replaced = c.get("h100-sxm").unwrap();
    assert_eq!((replaced.memory_bandwidth_gbps, replaced.price_per_hour), (2000.0, Some(2.5)));
    assert_eq!(c.get("my-card").unwrap().description, "Test GPU");
    assert_eq!(c.get("h200").unwrap().memory_gb, 141.0, "entries not named stay");
    assert!(c.origin.contains("builtin") && c.origin.contains("mine.toml"), "{}", c.origin);
}

#[test]
fn gpu_round_trips_through_toml_and_json() {
    let c = HardwareCatalog::builtin();
    let a100 = c.get("a100-80gb").unwrap();
    let json = serde_json::to_value(a100).unwrap();
    assert_eq!(json["name"], "a100-80gb");
    assert!(json.get("fp8_tflops").is_none() && json.get("price_per_hour").is_none(), "{json}");
    let mut text = toml::to_string(a100).unwrap();
    text = text.lines().filter(|l| !l.starts_with("name")).map(|l| format!("{l}\n")).collect();
    let back = HardwareCatalog::parse(&format!("[gpus.a100-80gb]\n{text}"), "t").unwrap();
    assert_eq!(back.get("a100-80gb").unwrap(), a100);
}

#[test]
fn dtype_names_and_sizes() {
    for d in DType::ALL {
        assert_eq!(d.as_str().parse::<DType>(), Ok(d));
        assert_eq!(serde_json::to_value(d).unwrap(), d.to_string());
    }
    assert_eq!([DType::Bf16, DType::Fp16, DType::F32].map(DType::bytes), [2.0, 2.0, 4.0]);
    // FP8 per-tensor scaled; MXFP4 4 bits + 1 byte per 32; NVFP4 per 16.
    assert_eq!(DType::Fp8.bytes(), 1.0);
    assert_eq!(DType::Mxfp4.bytes(), 0.53125);
    assert_eq!(DType::Nvfp4.bytes(), 0.5625);
    assert!(DType::Nvfp4.is_fp4() && !DType::Fp8.is_fp4());
    assert_eq!(serde_json::from_str::<DType>("\"fp8\"").unwrap(), DType::Fp8);
    let e = "int4".parse::<DType>().unwrap_err().to_string();
    assert!(e.contains("int4") && e.contains("fp8, f32, mxfp4 or nvfp4"), "{e}");
}

#[test]
fn driver_names_find_their_catalog_entry() {
    let cat = HardwareCatalog::builtin();
    let name = |d: &str| cat.for_device_name(d).map(|g| g.name.as_str());
    assert_eq!(name("NVIDIA H200"), Some("h200"));
    assert_eq!(name("NVIDIA H100 80GB HBM3"), Some("h100-sxm"));
    assert_eq!(name("NVIDIA H100 PCIe"), Some("h100-pcie"));
    assert_eq!(name("NVIDIA A100-SXM4-40GB"), Some("a100-40gb"));
    assert_eq!(name("NVIDIA A100-SXM4-80GB"), Some("a100-80gb"));
    assert_eq!(name("NVIDIA L4"), Some("l4"));
    assert_eq!(name("NVIDIA L40S"), Some("l40s"));
    assert_eq!(name("NVIDIA A10"), Some("a10"));
    assert_eq!(name("NVIDIA GeForce RTX 4090"), None);
    assert_eq!(name("cpu"), None);
}

#[test]
fn fp4_peaks_only_on_blackwell_and_nodes_by_their_network() {
    let c = HardwareCatalog::builtin();
    assert_eq!(c.get("b200").unwrap().flops_per_s(DType::Nvfp4), Some(9000e12));
    assert_eq!(c.get("b200").unwrap().flops_per_s(DType::Mxfp4), Some(9000e12));
    for hopper in ["h100-sxm", "h200", "h100-pcie", "a100-80gb", "mi300x"] {
        assert_eq!(c.get(hopper).unwrap().flops_per_s(DType::Mxfp4), None, "{hopper}");
    }
    for g in c.gpus.values() {
        assert_eq!(g.gpus_per_node, 8, "{}", g.name);
    }
    assert_eq!(c.get("h200").unwrap().internode_bytes_per_s(), Some(50e9));
    assert_eq!(c.get("a100-80gb").unwrap().internode_bytes_per_s(), Some(25e9));
    assert_eq!(c.get("l40s").unwrap().internode_bytes_per_s(), None);
    // An entry may omit the node (8 GPUs) but not give half a network.
    let g = HardwareCatalog::parse(&entry("", ""), "t").unwrap();
    assert_eq!(g.get("g").unwrap().gpus_per_node, 8);
    let half = parse_err(&entry("internode_gbps = 50.0\n", ""));
    assert!(half.contains("internode"), "{half}");
    let zero = parse_err(&entry("gpus_per_node = 0\n", ""));
    assert!(zero.contains("gpus_per_node"), "{zero}");
}

/// An engine's dtype name sized in one place: fp8 is 1 byte, bf16 and f16 2, f32 4, whoever
/// reads it (a run's profile, a bench file).
#[test]
fn engine_dtype_names_are_sized_once() {
    let bytes = |n: &str| DType::of_engine(n).map(DType::bytes);
    assert_eq!(
        [bytes("f32"), bytes("F32"), bytes("bf16"), bytes("BF16"), bytes("f16"), bytes("fp8")],
        [Some(4.0), Some(4.0), Some(2.0), Some(2.0), Some(2.0), Some(1.0)]
    );
    assert_eq!(DType::of_engine("int3"), None);
}
