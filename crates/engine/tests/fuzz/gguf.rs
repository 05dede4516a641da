//! GGUF files built field by field, and read through goodput's entry points.

use crate::gguf_file::{GVal, GgufFile, TInfo};
use crate::{bounded, tiny};
use candle_core::{DType, Device};
use goodput_core::WeightsSource;
use goodput_engine::tokenizer::{gguf_chat_template, gguf_special_ids, Tokenizer};
use goodput_engine::weights::{GgufSource, Init, TensorSource};
use goodput_engine::EngineError;
use goodput_fuzzing::{byte_edits, config, mutate_bytes, small_bytes, temp_path};
use proptest::prelude::*;

/// Lengths a header may claim: true-ish small ones and ones far beyond the file.
pub(crate) fn claim() -> impl Strategy<Value = u64> {
    prop_oneof![
        2 => 0u64..64,
        1 => prop::sample::select(vec![
            u64::MAX,
            u64::MAX / 2,
            1 << 30,
            (1 << 30) + 1,
            1 << 32,
            (1 << 40) + 7,
            u32::MAX as u64,
            4096,
        ]),
        1 => any::<u64>(),
    ]
}

/// A metadata value of any type, arrays nested at most three deep.
pub(crate) fn gval() -> impl Strategy<Value = GVal> {
    let leaf = prop_oneof![
        any::<u8>().prop_map(GVal::U8),
        any::<i8>().prop_map(GVal::I8),
        any::<u16>().prop_map(GVal::U16),
        any::<i16>().prop_map(GVal::I16),
        prop_oneof![Just(0u32), Just(1), Just(32), Just(u32::MAX), any::<u32>()].prop_map(GVal::U32),
        any::<i32>().prop_map(GVal::I32),
        any::<f32>().prop_map(GVal::F32),
        prop_oneof![Just(0u8), Just(1), any::<u8>()].prop_map(GVal::Bool),
        prop_oneof!["\\PC{0,16}".prop_map(|s| s.into_bytes()), small_bytes(24), Just(b"llama\0\0".to_vec()),]
            .prop_map(GVal::Str),
        any::<u64>().prop_map(GVal::U64),
        any::<i64>().prop_map(GVal::I64),
        any::<f64>().prop_map(GVal::F64),
        (claim(), small_bytes(16)).prop_map(|(c, b)| GVal::LyingStr(c, b)),
        (0u32..14, claim(), small_bytes(32)).prop_map(|(t, c, b)| GVal::LyingArr(t, c, b)),
        (prop_oneof![13u32..20, any::<u32>()], small_bytes(8)).prop_map(|(t, b)| GVal::Raw(t, b)),
    ];
    leaf.prop_recursive(3, 32, 8, |inner| {
        prop_oneof![
            // Homogeneous: the declared type is the elements' own.
            prop::collection::vec(inner.clone(), 0..8).prop_map(|items| {
                let ty = items.first().map_or(4, GVal::ty);
                let items = items.into_iter().filter(|i| i.ty() == ty).collect();
                GVal::Arr(ty, items)
            }),
            // Any declared type over any elements.
            (0u32..14, prop::collection::vec(inner, 0..6)).prop_map(|(ty, items)| GVal::Arr(ty, items)),
        ]
    })
}

/// Dimensions a tensor may claim (GGUF stores them innermost first).
pub(crate) fn dim() -> impl Strategy<Value = u64> {
    prop_oneof![
        4 => prop::sample::select(vec![0u64, 1, 2, 4, 8, 32, 64, 256]),
        1 => prop::sample::select(vec![
            1 << 32,
            (1 << 32) + 1,
            1 << 40,
            1 << 62,
            1 << 63,
            u64::MAX,
            u64::MAX / 32 + 1,
            u32::MAX as u64,
        ]),
        1 => any::<u64>(),
    ]
}

/// GGML dtypes: every known one, some unknown.
pub(crate) fn ggml_dtype() -> impl Strategy<Value = u32> {
    prop_oneof![
        4 => prop::sample::select(vec![0u32, 1, 2, 3, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 30]),
        1 => prop_oneof![Just(4u32), Just(5), Just(16), Just(31), any::<u32>()],
    ]
}

pub(crate) fn tensor_name() -> impl Strategy<Value = Vec<u8>> {
    prop_oneof![
        4 => prop::sample::select(vec![
            "token_embd.weight",
            "output_norm.weight",
            "output.weight",
            "blk.0.attn_q.weight",
            "blk.0.attn_norm.weight",
            "blk.0.ffn_down.weight",
        ]).prop_map(|s| s.as_bytes().to_vec()),
        1 => small_bytes(12),
    ]
}

pub(crate) fn tinfo() -> impl Strategy<Value = TInfo> {
    let n_dims = prop_oneof![6 => Just(None), 1 => prop_oneof![Just(5u32), Just(64), Just(u32::MAX), any::<u32>()].prop_map(Some)];
    let offset = prop_oneof![4 => Just(0u64), 2 => prop::sample::select(vec![32u64, 64, 1 << 20, u64::MAX, u64::MAX - 31]), 1 => any::<u64>()];
    (tensor_name(), n_dims, prop::collection::vec(dim(), 0..5), ggml_dtype(), offset)
        .prop_map(|(name, n_dims, dims, dtype, offset)| TInfo { name, n_dims, dims, dtype, offset })
}

/// Counts in the header: usually true, sometimes far beyond the file.
pub(crate) fn count() -> impl Strategy<Value = Option<u64>> {
    prop_oneof![5 => Just(None), 1 => claim().prop_map(Some)]
}

/// Metadata keys goodput reads, and others.
pub(crate) fn md_key() -> impl Strategy<Value = Vec<u8>> {
    prop_oneof![
        3 => prop::sample::select(vec![
            "general.architecture",
            "general.alignment",
            "llama.embedding_length",
            "llama.block_count",
            "llama.attention.head_count",
            "llama.attention.head_count_kv",
            "llama.feed_forward_length",
            "llama.rope.freq_base",
            "tokenizer.ggml.model",
            "tokenizer.ggml.pre",
            "tokenizer.ggml.tokens",
            "tokenizer.ggml.token_type",
            "tokenizer.ggml.merges",
            "tokenizer.ggml.bos_token_id",
            "tokenizer.ggml.eos_token_id",
            "tokenizer.chat_template",
        ]).prop_map(|s| s.as_bytes().to_vec()),
        1 => "\\PC{0,16}".prop_map(|s| s.into_bytes()),
        1 => small_bytes(8),
    ]
}

/// Any GGUF: any version, any metadata, any tensor infos, any data.
pub(crate) fn any_gguf() -> impl Strategy<Value = GgufFile> {
    (
        prop_oneof![4 => 1u32..=3, 1 => any::<u32>()],
        count(),
        count(),
        prop::collection::vec((md_key(), gval()), 0..8),
        prop::collection::vec(tinfo(), 0..4),
        small_bytes(1024),
    )
        .prop_map(|(version, tensor_count, kv_count, kvs, tensors, data)| GgufFile {
            version,
            tensor_count,
            kv_count,
            kvs,
            tensors,
            data,
        })
}

/// The metadata of a GGUF of `tiny` with a small gpt2 tokenizer.
pub(crate) fn tiny_metadata() -> Vec<(&'static str, GVal)> {
    let spec = tiny();
    vec![
        ("general.architecture", GVal::s("llama")),
        ("llama.embedding_length", GVal::U32(spec.hidden_size as u32)),
        ("llama.block_count", GVal::U32(spec.num_layers as u32)),
        ("llama.attention.head_count", GVal::U32(spec.num_heads as u32)),
        ("llama.attention.head_count_kv", GVal::U32(spec.num_kv_heads as u32)),
        ("llama.feed_forward_length", GVal::U32(spec.intermediate_size as u32)),
        ("llama.rope.freq_base", GVal::F32(spec.rope_theta as f32)),
        ("tokenizer.ggml.model", GVal::s("gpt2")),
        ("tokenizer.ggml.pre", GVal::s("default")),
        (
            "tokenizer.ggml.tokens",
            GVal::strs(&["<|endoftext|>", "H", "e", "l", "o", "Ġ", "w", "r", "d", "ll", "He", "Ġw", "1", "2"]),
        ),
        ("tokenizer.ggml.token_type", GVal::Arr(5, [3, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 4].map(GVal::I32).to_vec())),
        ("tokenizer.ggml.merges", GVal::strs(&["l l", "H e", "Ġ w"])),
        ("tokenizer.ggml.bos_token_id", GVal::U32(0)),
        ("tokenizer.ggml.eos_token_id", GVal::U32(0)),
        ("tokenizer.chat_template", GVal::s("{% for m in messages %}{{ m.content }}{% endfor %}")),
    ]
}

/// A GGUF of `tiny`'s metadata and one tensor, `token_embd.weight` (f32, no data) of `dims`.
pub(crate) fn tiny_gguf(embd_dims: Vec<u64>) -> GgufFile {
    GgufFile {
        version: 3,
        tensor_count: None,
        kv_count: None,
        kvs: tiny_metadata().into_iter().map(|(k, v)| (k.as_bytes().to_vec(), v)).collect(),
        tensors: vec![TInfo {
            name: b"token_embd.weight".to_vec(),
            n_dims: None,
            dims: embd_dims,
            dtype: 0,
            offset: 0,
        }],
        data: Vec::new(),
    }
}

/// The metadata of `tiny` with a small gpt2 tokenizer, each entry kept (90%), replaced by
/// any value (10%); an alignment of any value (including 0) half the time; tensors like
/// `tiny`'s or any, with data enough for small f32 ones.
pub(crate) fn tiny_like_gguf() -> impl Strategy<Value = GgufFile> {
    let spec = tiny();
    let md = tiny_metadata();
    let n = md.len();
    let entry_edits = prop::collection::vec((prop::bool::weighted(0.1), gval()), n);
    let pre = prop::sample::select(vec!["default", "smollm", "llama3", "qwen2", "gpt2", "starcoder", ""]);
    let alignment = prop_oneof![
        1 => Just(None),
        1 => prop_oneof![
            Just(GVal::U32(0)),
            Just(GVal::U8(0)),
            Just(GVal::I32(0)),
            Just(GVal::U32(1)),
            Just(GVal::U32(3)),
            Just(GVal::U32(64)),
            Just(GVal::I32(-1)),
            Just(GVal::U32(u32::MAX)),
            Just(GVal::U64(0)),
        ].prop_map(Some),
    ];
    // token_embd.weight as tiny needs it ([vocab, hidden] = dims [256, 32000]), or small.
    let embd_dims = prop_oneof![
        1 => Just(vec![spec.hidden_size as u64, spec.vocab_size as u64]),
        2 => prop::collection::vec(dim(), 0..5),
    ];
    let embd =
        (embd_dims, ggml_dtype(), prop_oneof![3 => Just(0u64), 1 => any::<u64>()]).prop_map(|(dims, dtype, offset)| {
            TInfo { name: b"token_embd.weight".to_vec(), n_dims: None, dims, dtype, offset }
        });
    (
        md_entries(md),
        entry_edits,
        pre,
        alignment,
        embd,
        prop::collection::vec(tinfo(), 0..3),
        small_bytes(2048),
        any::<bool>(),
    )
        .prop_map(move |(md, edits, pre, alignment, embd, more, data, zero_data)| {
            let mut kvs: Vec<(Vec<u8>, GVal)> = md
                .into_iter()
                .zip(edits)
                .map(|((k, v), (replace, other))| (k.as_bytes().to_vec(), if replace { other } else { v }))
                .map(|(k, v)| if k == b"tokenizer.ggml.pre" { (k, GVal::s(pre)) } else { (k, v) })
                .collect();
            if let Some(a) = alignment {
                kvs.push((b"general.alignment".to_vec(), a));
            }
            let mut tensors = vec![embd];
            tensors.extend(more);
            // Data for the f32 tensors that are small, so that some reads succeed.
            let want: u64 = tensors
                .iter()
                .filter(|t| t.dtype == 0)
                .map(|t| t.dims.iter().try_fold(4u64, |a, &d| a.checked_mul(d)).unwrap_or(0))
                .filter(|&b| b <= 4096)
                .sum();
            let data = if zero_data { vec![0u8; want as usize] } else { data };
            GgufFile { version: 3, tensor_count: None, kv_count: None, kvs, tensors, data }
        })
}

pub(crate) fn md_entries(md: Vec<(&'static str, GVal)>) -> impl Strategy<Value = Vec<(&'static str, GVal)>> {
    Just(md)
}

/// A GGUF's bytes, edited at the byte level a quarter of the time.
pub(crate) fn encoded(file: impl Strategy<Value = GgufFile>) -> impl Strategy<Value = Vec<u8>> {
    (file, byte_edits()).prop_map(|(f, e)| mutate_bytes(f.encode(), &e))
}

/// Opens `bytes` as a GGUF through goodput's entry points, and reads what it can from what
/// opens: metadata, tokenizer, chat template, every tensor; then the whole load for `tiny`.
pub(crate) fn exercise_gguf(bytes: &[u8], tag: &str) -> Result<(), TestCaseError> {
    let path = temp_path(tag, "gguf");
    std::fs::write(&path, bytes).unwrap();
    bounded(bytes.len(), || {
        for dequantize in [false, true] {
            let Ok(mut src) = GgufSource::open(&path, dequantize, DType::F32, Device::Cpu) else { return };
            let _ = (src.arch(), src.md_u32("embedding_length"), src.md_f32("rope.freq_base"), src.rope_interleaved());
            let md = src.metadata().clone();
            let _ = (gguf_chat_template(&md), gguf_special_ids(&md));
            if let Ok(tok) = Tokenizer::from_gguf(&md) {
                let _ = tok.vocab_size();
                if let Ok(ids) = tok.encode("Hello world 123 <|endoftext|> ünï") {
                    let _ = tok.decode(&ids);
                }
                let _ = tok.decode(&[0, 1, 2, 13, 14, 1000, u32::MAX]);
            }
            // Every tensor, by its GGUF name and (for two) its Hugging Face one, at shapes
            // that match what the file claims and shapes that do not.
            for name in [
                "token_embd.weight",
                "output_norm.weight",
                "output.weight",
                "blk.0.attn_q.weight",
                "blk.0.attn_norm.weight",
                "blk.0.ffn_down.weight",
                "model.embed_tokens.weight",
                "model.layers.0.self_attn.q_proj.weight",
            ] {
                if src.contains(name) {
                    for shape in [&[256usize, 32000][..], &[8, 32], &[4], &[]] {
                        let _ = src.tensor(name, shape, Init::Ones);
                    }
                    let _ = src.linear(name, 32, 8);
                    let _ = src.linear(name, 32000, 256);
                }
            }
            let _ = src.tied_lm_head(32000, 256);
        }
        let spec = tiny();
        for dequantize in [false, true] {
            let w = WeightsSource::Gguf { path: path.clone(), dequantize };
            let _ = goodput_engine::loader::load(&spec, &w, &Device::Cpu, DType::F32, 64);
        }
    })?;
    let _ = std::fs::remove_file(&path);
    Ok(())
}

/// A GGUF v3 with the metadata `kvs` and one tensor `name` of `dims` (innermost first),
/// `dtype`, at offset 0, with no data.
pub(crate) fn gguf_with_one_tensor(kvs: Vec<(&str, GVal)>, name: &str, dims: Vec<u64>, dtype: u32) -> Vec<u8> {
    GgufFile {
        version: 3,
        tensor_count: None,
        kv_count: None,
        kvs: kvs.into_iter().map(|(k, v)| (k.as_bytes().to_vec(), v)).collect(),
        tensors: vec![TInfo { name: name.as_bytes().to_vec(), n_dims: None, dims, dtype, offset: 0 }],
        data: Vec::new(),
    }
    .encode()
}

// Found by this file's properties: minimal inputs on which candle 0.11.1's GGUF reader panics
// or aborts, which goodput now refuses with an error (`weights::GgufSource` checks each
// tensor's header first and runs the reader under `guard::quietly`).

/// `general.alignment = 0` (u32): `Content::read` computes `position.div_ceil(alignment)`:
/// "attempt to divide by zero" (gguf_file.rs:560), in release builds too.
#[test]
pub(crate) fn a_gguf_with_an_alignment_of_zero_is_refused() {
    let path = temp_path("alignment-zero", "gguf");
    let file = GgufFile {
        version: 3,
        tensor_count: None,
        kv_count: None,
        kvs: vec![(b"general.alignment".to_vec(), GVal::U32(0))],
        tensors: Vec::new(),
        data: Vec::new(),
    };
    std::fs::write(&path, file.encode()).unwrap();
    let e = GgufSource::open(&path, false, DType::F32, Device::Cpu).err().unwrap();
    assert!(matches!(&e, EngineError::File { what: "GGUF file", path: p, .. } if *p == path), "{e:?}");
    assert!(e.to_string().contains("not readable") && e.to_string().contains("divide by zero"), "{e}");
    let _ = std::fs::remove_file(&path);
}

/// A tensor of dims `[2^32, 2^32]` (f32): `TensorInfo::read` multiplies them in
/// `Shape::elem_count`: "attempt to multiply with overflow" (debug builds; wraps in release).
/// Dims `[2^62]` overflow the byte count next (`elems / block_size * type_size`,
/// gguf_file.rs:101).
/// `loader::load` reads `token_embd.weight` before checking its shape, so a GGUF of the
/// right metadata reaches it too (second half).
#[test]
pub(crate) fn a_gguf_tensor_of_more_elements_than_usize_holds_is_refused() {
    let path = temp_path("huge-dims", "gguf");
    std::fs::write(&path, gguf_with_one_tensor(Vec::new(), "t", vec![1 << 32, 1 << 32], 0)).unwrap();
    let e = GgufSource::open(&path, false, DType::F32, Device::Cpu).err().unwrap().to_string();
    assert!(e.contains("tensor `t`") && e.contains("overflow"), "{e}");
    std::fs::write(&path, tiny_gguf(vec![1 << 32, 1 << 32]).encode()).unwrap();
    let w = WeightsSource::Gguf { path: path.clone(), dequantize: false };
    assert!(goodput_engine::loader::load(&tiny(), &w, &Device::Cpu, DType::F32, 64).is_err());
    let _ = std::fs::remove_file(&path);
}

/// A tensor of dims `[0]` (f32): `ggml_file::from_raw_data` makes a `&[f32]` from the
/// dangling pointer of an empty `Vec<u8>` (address 1): `slice::from_raw_parts`' alignment
/// precondition fails, a non-unwinding panic that aborts the process (debug builds;
/// undefined behaviour in release). Through `loader::load` as well (second half).
#[test]
pub(crate) fn a_gguf_tensor_with_no_elements_is_refused() {
    let path = temp_path("empty-tensor", "gguf");
    std::fs::write(&path, gguf_with_one_tensor(Vec::new(), "t", vec![0], 0)).unwrap();
    let e = GgufSource::open(&path, false, DType::F32, Device::Cpu).err().unwrap().to_string();
    assert!(e.contains("tensor `t`: has no elements"), "{e}");
    std::fs::write(&path, tiny_gguf(vec![256, 0]).encode()).unwrap();
    let w = WeightsSource::Gguf { path: path.clone(), dequantize: false };
    assert!(goodput_engine::loader::load(&tiny(), &w, &Device::Cpu, DType::F32, 64).is_err());
    let _ = std::fs::remove_file(&path);
}

#[test]
pub(crate) fn a_built_tiny_gguf_opens_and_its_tokenizer_builds() {
    let spec = tiny();
    let path = temp_path("pristine", "gguf");
    std::fs::write(&path, tiny_gguf(vec![spec.hidden_size as u64, spec.vocab_size as u64]).encode()).unwrap();
    let src = GgufSource::open(&path, false, DType::F32, Device::Cpu).unwrap();
    assert_eq!(src.arch(), "llama");
    assert_eq!(src.md_u32("embedding_length"), Some(256));
    assert!(src.contains("model.embed_tokens.weight"));
    let tok = Tokenizer::from_gguf(src.metadata()).unwrap();
    let ids = tok.encode("Hello").unwrap();
    assert_eq!(tok.decode(&ids).unwrap(), "Hello");
    // The loader gets past the shape and tokenizer checks, to the tensor reads.
    let w = WeightsSource::Gguf { path: path.clone(), dequantize: false };
    let e = goodput_engine::loader::load(&spec, &w, &Device::Cpu, DType::F32, 64).err().unwrap().to_string();
    assert!(e.contains("token_embd.weight"), "{e}");
    let _ = std::fs::remove_file(&path);
}

proptest! {
    #![proptest_config(config())]

    #[test]
    fn any_bytes_are_a_gguf_file_or_refused(bytes in small_bytes(4096)) {
        exercise_gguf(&bytes, "any-bytes")?;
    }

    #[test]
    fn a_gguf_magic_and_version_followed_by_any_bytes_are_read_or_refused(
        version in prop_oneof![4 => 1u32..=3, 1 => any::<u32>()],
        rest in small_bytes(4096),
    ) {
        let mut bytes = b"GGUF".to_vec();
        bytes.extend(version.to_le_bytes());
        bytes.extend(rest);
        exercise_gguf(&bytes, "magic-then-any")?;
    }

    #[test]
    fn a_gguf_file_of_any_structure_is_read_or_refused(bytes in encoded(any_gguf())) {
        exercise_gguf(&bytes, "any-structure")?;
    }

    #[test]
    fn a_tiny_like_gguf_of_any_metadata_and_tensors_loads_or_is_refused(bytes in encoded(tiny_like_gguf())) {
        exercise_gguf(&bytes, "tiny-like")?;
    }
}
