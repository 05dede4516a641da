//! Text ⇄ token ids for the engine.
//!
//! Three sources of a tokenizer:
//!
//! * **`tokenizer.json`** (HuggingFace format) — [`Tokenizer::from_file`].
//! * **A GGUF file's metadata** (llama.cpp's `tokenizer.ggml.*` keys) — [`Tokenizer::from_gguf`].
//!   Only `tokenizer.ggml.model = "gpt2"` (byte-level BPE: SmolLM2, Qwen2, Llama 3, …) is
//!   supported; it is rebuilt as a HuggingFace BPE tokenizer:
//!   - vocabulary = `tokenizer.ggml.tokens` (id = index), merges = `tokenizer.ggml.merges`
//!     (`"a b"` strings, rank = index);
//!   - pre-tokenizer chosen from `tokenizer.ggml.pre` the way llama.cpp does (see
//!     [`gguf_pre_tokenizer`]): `Digits` + `ByteLevel` for the StarCoder/SmolLM family, an explicit
//!     regex `Split` + `ByteLevel` for the Llama 3 and Qwen2 families, and plain GPT-2
//!     `ByteLevel(add_prefix_space = false, use_regex = true)` otherwise (also for unknown values,
//!     which may then split digit/whitespace runs slightly differently from the original);
//!   - `ByteLevel` decoder and post-processor (the post-processor adds no BOS/EOS);
//!   - `tokenizer.ggml.token_type`: CONTROL (3) and UNKNOWN (2) tokens become *special* added
//!     tokens, USER_DEFINED (4) tokens plain added tokens (as transformers and llama.cpp do).
//!     Both are matched whole in input text (so `<|im_start|>` encodes to one id); only the
//!     special ones are dropped by [`Tokenizer::decode`].
//! * **Nothing** (dummy models with random weights) — [`Tokenizer::byte_level`], the byte scheme:
//!   - ids `0`, `1`, `2` are the specials `<unk>`, `<s>`, `</s>`;
//!   - byte `b` is id `3 + b`, so ids `3..259` cover all 256 byte values and the vocabulary must
//!     have at least 259 entries;
//!   - encode = the UTF-8 bytes of the text, each mapped to `3 + b` (no BOS/EOS added);
//!   - decode skips ids `0..3`, maps every other id to the byte `(id - 3) % 256` — ids `≥ 259`,
//!     which a dummy model's logits do produce, wrap around onto the byte range — and turns the
//!     bytes into text with [`String::from_utf8_lossy`] (invalid UTF-8 becomes U+FFFD).
//!
//! [`DecodeStream`] turns a stream of generated ids into text pieces for either kind.

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use candle_core::quantized::gguf_file::Value;
use tokenizers::decoders::byte_level::ByteLevel;
use tokenizers::models::bpe::{Vocab, BPE};
use tokenizers::pre_tokenizers::digits::Digits;
use tokenizers::pre_tokenizers::sequence::Sequence;
use tokenizers::pre_tokenizers::split::{Split, SplitPattern};
use tokenizers::pre_tokenizers::PreTokenizerWrapper;
use tokenizers::{AddedToken, SplitDelimiterBehavior};

/// Number of special ids (`<unk>`, `<s>`, `</s>`) before the byte ids in the byte scheme.
pub const BYTE_OFFSET: u32 = 3;
/// Smallest vocabulary the byte scheme fits in: 3 specials + 256 bytes.
pub const BYTE_LEVEL_MIN_VOCAB: usize = BYTE_OFFSET as usize + 256;
const BYTE_SPECIALS: [&str; 3] = ["<unk>", "<s>", "</s>"];

/// GGUF metadata keys read here.
pub mod keys {
    pub const MODEL: &str = "tokenizer.ggml.model";
    pub const PRE: &str = "tokenizer.ggml.pre";
    pub const TOKENS: &str = "tokenizer.ggml.tokens";
    pub const TOKEN_TYPE: &str = "tokenizer.ggml.token_type";
    pub const MERGES: &str = "tokenizer.ggml.merges";
    pub const BOS_ID: &str = "tokenizer.ggml.bos_token_id";
    pub const EOS_ID: &str = "tokenizer.ggml.eos_token_id";
    pub const CHAT_TEMPLATE: &str = "tokenizer.chat_template";
}

/// llama.cpp's `tokenizer.ggml.token_type` values.
const TOKEN_TYPE_UNKNOWN: i64 = 2;
const TOKEN_TYPE_CONTROL: i64 = 3;
const TOKEN_TYPE_USER_DEFINED: i64 = 4;

#[derive(Debug, thiserror::Error)]
pub enum TokenizerError {
    #[error(
        "byte-level tokenizer needs vocab_size >= {BYTE_LEVEL_MIN_VOCAB} \
         (3 specials + 256 bytes), got {0}"
    )]
    VocabTooSmall(usize),
    #[error("cannot read tokenizer file {}: {source}", path.display())]
    Io {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("cannot parse tokenizer file {} as a HuggingFace tokenizer.json: {message}", path.display())]
    Parse { path: PathBuf, message: String },
    #[error("GGUF metadata has no `{key}` (the file carries no tokenizer?)")]
    MissingKey { key: &'static str },
    #[error("GGUF metadata `{key}`: {problem}")]
    BadMetadata { key: &'static str, problem: String },
    #[error(
        "unsupported GGUF tokenizer `{}` = {model:?}: only \"gpt2\" (byte-level BPE) is supported; \
         use a tokenizer.json instead",
        keys::MODEL
    )]
    UnsupportedGgufModel { model: String },
    #[error("cannot build the tokenizer from GGUF metadata: {0}")]
    Build(String),
    #[error("encoding failed: {0}")]
    Encode(String),
    #[error("decoding failed: {0}")]
    Decode(String),
}

/// Text ⇄ token ids for the engine.
pub enum Tokenizer {
    /// For dummy models without a tokenizer: the byte scheme of the module documentation.
    Bytes { vocab_size: usize },
    /// A HuggingFace tokenizer (from a `tokenizer.json` or rebuilt from GGUF metadata).
    Hf(Box<tokenizers::Tokenizer>),
}

impl std::fmt::Debug for Tokenizer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Bytes { vocab_size } => f.debug_struct("Tokenizer::Bytes").field("vocab_size", vocab_size).finish(),
            Self::Hf(_) => f.debug_struct("Tokenizer::Hf").field("vocab_size", &self.vocab_size()).finish(),
        }
    }
}

impl Tokenizer {
    /// The byte scheme (module docs) for a model with `vocab_size` ids.
    ///
    /// Panics if `vocab_size < 259`; use [`Tokenizer::try_byte_level`] to get an error instead.
    pub fn byte_level(vocab_size: usize) -> Self {
        match Self::try_byte_level(vocab_size) {
            Ok(t) => t,
            Err(e) => panic!("{e}"),
        }
    }

    /// The byte scheme (module docs); errors if `vocab_size < 259`.
    pub fn try_byte_level(vocab_size: usize) -> Result<Self, TokenizerError> {
        if vocab_size < BYTE_LEVEL_MIN_VOCAB {
            return Err(TokenizerError::VocabTooSmall(vocab_size));
        }
        Ok(Self::Bytes { vocab_size })
    }

    /// Loads a HuggingFace `tokenizer.json`.
    pub fn from_file(path: &Path) -> Result<Self, TokenizerError> {
        let bytes = goodput_core::input::read_bytes(path)
            .map_err(|source| TokenizerError::Io { path: path.to_path_buf(), source })?;
        let tok = tokenizers::Tokenizer::from_bytes(&bytes)
            .map_err(|e| TokenizerError::Parse { path: path.to_path_buf(), message: e.to_string() })?;
        Ok(Self::Hf(Box::new(tok)))
    }

    /// Builds the tokenizer stored in a GGUF file's metadata (llama.cpp's `tokenizer.ggml.*`
    /// keys). Supports `tokenizer.ggml.model = "gpt2"` (byte-level BPE); see the module docs.
    pub fn from_gguf(md: &HashMap<String, Value>) -> Result<Self, TokenizerError> {
        let model = md_str(md, keys::MODEL)?.ok_or(TokenizerError::MissingKey { key: keys::MODEL })?;
        if model != "gpt2" {
            return Err(TokenizerError::UnsupportedGgufModel { model: model.to_string() });
        }
        let tokens = md_str_array(md, keys::TOKENS)?;
        let merges = md_str_array(md, keys::MERGES)?;
        let types = match md.get(keys::TOKEN_TYPE) {
            Some(v) => md_int_array(v, keys::TOKEN_TYPE)?,
            None => Vec::new(),
        };
        if !types.is_empty() && types.len() != tokens.len() {
            return Err(TokenizerError::BadMetadata {
                key: keys::TOKEN_TYPE,
                problem: format!("has {} entries for {} tokens", types.len(), tokens.len()),
            });
        }
        let pre = md_str(md, keys::PRE)?.unwrap_or("default");
        let family = PreFamily::of(pre);

        let mut vocab = Vocab::default();
        vocab.reserve(tokens.len());
        for (id, tok) in tokens.iter().enumerate() {
            // On a duplicated spelling the first id wins, as in llama.cpp's token_to_id.
            vocab.entry(tok.to_string()).or_insert(id as u32);
        }
        let merges = merges
            .iter()
            .enumerate()
            .map(|(i, m)| {
                m.split_once(' ').map(|(a, b)| (a.to_string(), b.to_string())).ok_or_else(|| {
                    TokenizerError::BadMetadata {
                        key: keys::MERGES,
                        problem: format!("entry {i} ({m:?}) is not of the form \"a b\""),
                    }
                })
            })
            .collect::<Result<Vec<_>, _>>()?;
        let bpe = BPE::builder()
            .vocab_and_merges(vocab, merges)
            .ignore_merges(family.ignore_merges())
            .build()
            .map_err(|e| TokenizerError::Build(format!("BPE from `{}`/`{}`: {e}", keys::TOKENS, keys::MERGES)))?;

        let mut tok = tokenizers::Tokenizer::new(bpe);
        tok.with_pre_tokenizer(Some(gguf_pre_tokenizer(family)?));
        tok.with_decoder(Some(ByteLevel::default()));
        tok.with_post_processor(Some(ByteLevel::default().add_prefix_space(false)));

        let added = |want: fn(i64) -> bool, special: bool| -> Vec<AddedToken> {
            tokens
                .iter()
                .zip(&types)
                .filter(|(_, &ty)| want(ty))
                .map(|(t, _)| AddedToken::from(t.to_string(), special).normalized(false))
                .collect()
        };
        let special = added(|ty| ty == TOKEN_TYPE_CONTROL || ty == TOKEN_TYPE_UNKNOWN, true);
        let user = added(|ty| ty == TOKEN_TYPE_USER_DEFINED, false);
        tok.add_special_tokens(special).map_err(|e| TokenizerError::Build(format!("adding control tokens: {e}")))?;
        tok.add_tokens(user).map_err(|e| TokenizerError::Build(format!("adding user-defined tokens: {e}")))?;
        Ok(Self::Hf(Box::new(tok)))
    }

    /// Token ids of `text`. No BOS/EOS is added; special tokens written in the text (e.g.
    /// `<|im_start|>`) are recognised as single tokens.
    pub fn encode(&self, text: &str) -> Result<Vec<u32>, TokenizerError> {
        match self {
            Self::Bytes { .. } => Ok(text.bytes().map(|b| BYTE_OFFSET + u32::from(b)).collect()),
            Self::Hf(t) => t
                .encode_fast(text, false)
                .map(|e| e.get_ids().to_vec())
                .map_err(|e| TokenizerError::Encode(e.to_string())),
        }
    }

    /// Text of `ids`, special tokens skipped.
    pub fn decode(&self, ids: &[u32]) -> Result<String, TokenizerError> {
        match self {
            Self::Bytes { .. } => {
                let bytes: Vec<u8> =
                    ids.iter().filter(|&&id| id >= BYTE_OFFSET).map(|&id| ((id - BYTE_OFFSET) % 256) as u8).collect();
                Ok(String::from_utf8_lossy(&bytes).into_owned())
            }
            Self::Hf(t) => t.decode(ids, true).map_err(|e| TokenizerError::Decode(e.to_string())),
        }
    }

    /// A decoder for a stream of generated ids (see [`DecodeStream`]).
    pub fn decode_stream(&self) -> DecodeStream<&Tokenizer> {
        DecodeStream::new(self)
    }

    /// Size of the id space (for the HF kind: model vocabulary plus added tokens).
    pub fn vocab_size(&self) -> usize {
        match self {
            Self::Bytes { vocab_size } => *vocab_size,
            Self::Hf(t) => t.get_vocab_size(true),
        }
    }

    /// Id of a token given by its vocabulary spelling. The byte kind knows `<unk>`, `<s>`, `</s>`,
    /// `<0xHH>` and single ASCII characters.
    pub fn token_to_id(&self, token: &str) -> Option<u32> {
        match self {
            Self::Bytes { .. } => {
                if let Some(i) = BYTE_SPECIALS.iter().position(|s| *s == token) {
                    return Some(i as u32);
                }
                let byte = match token.as_bytes() {
                    [b] if b.is_ascii() => Some(*b),
                    _ => token
                        .strip_prefix("<0x")
                        .and_then(|s| s.strip_suffix('>'))
                        .filter(|h| h.len() == 2)
                        .and_then(|h| u8::from_str_radix(h, 16).ok()),
                };
                byte.map(|b| BYTE_OFFSET + u32::from(b))
            }
            Self::Hf(t) => t.token_to_id(token),
        }
    }

    /// The vocabulary spelling of `id` (the byte kind: its specials, `<0xHH>`).
    pub fn id_to_token(&self, id: u32) -> Option<String> {
        match self {
            Self::Bytes { vocab_size } => match id {
                i if (i as usize) < BYTE_SPECIALS.len() => Some(BYTE_SPECIALS[i as usize].to_string()),
                i if (BYTE_OFFSET..BYTE_OFFSET + 256).contains(&i) && (i as usize) < *vocab_size => {
                    Some(format!("<0x{:02X}>", i - BYTE_OFFSET))
                }
                _ => None,
            },
            Self::Hf(t) => t.id_to_token(id),
        }
    }

    /// `"bytes"` or `"hf"`.
    pub fn kind(&self) -> &'static str {
        match self {
            Self::Bytes { .. } => "bytes",
            Self::Hf(_) => "hf",
        }
    }
}

/// Incremental detokenizer: feed generated ids one at a time, get the text each completes.
///
/// Works like HuggingFace's `DecodeStream`: it decodes a short window of recent ids and returns
/// only the new suffix, and holds text back while it ends in an incomplete UTF-8 sequence
/// (U+FFFD), so multi-byte characters split over several tokens come out whole.
/// `T` is anything that derefs to the tokenizer: `&Tokenizer`, or `Arc<Tokenizer>` for a
/// stream that outlives its borrower (a server's response body).
pub struct DecodeStream<T: std::ops::Deref<Target = Tokenizer>> {
    tok: T,
    ids: Vec<u32>,
    /// Start of the window decoded for context.
    prefix: usize,
    /// Ids before this index have been returned as text.
    read: usize,
}

impl<T: std::ops::Deref<Target = Tokenizer>> DecodeStream<T> {
    pub fn new(tok: T) -> Self {
        DecodeStream { tok, ids: Vec::new(), prefix: 0, read: 0 }
    }

    /// Adds `id`; returns the text it completes, or `None` if there is none yet.
    pub fn step(&mut self, id: u32) -> Result<Option<String>, TokenizerError> {
        self.ids.push(id);
        let before = self.tok.decode(&self.ids[self.prefix..self.read])?;
        let now = self.tok.decode(&self.ids[self.prefix..])?;
        if now.len() > before.len() && !now.ends_with('\u{FFFD}') {
            let new = match now.strip_prefix(before.as_str()) {
                Some(s) => s.to_string(),
                None => now.get(before.len()..).unwrap_or_default().to_string(),
            };
            self.prefix = self.read;
            self.read = self.ids.len();
            Ok(Some(new))
        } else {
            Ok(None)
        }
    }
}

/// Chat template text from GGUF metadata (`tokenizer.chat_template`), if any.
pub fn gguf_chat_template(md: &HashMap<String, Value>) -> Option<String> {
    md.get(keys::CHAT_TEMPLATE).and_then(|v| v.to_string().ok()).cloned()
}

/// `(eos, bos)` ids from GGUF metadata (`tokenizer.ggml.eos_token_id`,
/// `tokenizer.ggml.bos_token_id`); `None` where absent or not a valid id.
pub fn gguf_special_ids(md: &HashMap<String, Value>) -> (Option<u32>, Option<u32>) {
    let id = |key: &str| md.get(key).and_then(value_as_i64).and_then(|v| u32::try_from(v).ok());
    (id(keys::EOS_ID), id(keys::BOS_ID))
}

/// How llama.cpp pre-tokenizes for a `tokenizer.ggml.pre` value, reduced to the families with a
/// HuggingFace equivalent used here.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum PreFamily {
    /// GPT-2's regex inside `ByteLevel(use_regex = true)`.
    Gpt2,
    /// Every digit on its own, then GPT-2's regex (StarCoder, SmolLM, Command-R, …).
    DigitsGpt2,
    /// Llama 3's regex (`\p{N}{1,3}`); BPE with `ignore_merges`.
    Llama3,
    /// Qwen2's regex (`\p{N}` single digits).
    Qwen2,
}

const LLAMA3_SPLIT: &str = r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+";
const QWEN2_SPLIT: &str =
    r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+";

impl PreFamily {
    fn of(pre: &str) -> Self {
        match pre {
            "smollm" | "starcoder" | "refact" | "command-r" | "codeshell" | "exaone" | "minerva-7b" => Self::DigitsGpt2,
            "llama3" | "llama-v3" | "llama-bpe" | "falcon3" | "falcon-h1" | "pixtral" => Self::Llama3,
            "qwen2" | "deepseek-r1-qwen" | "stablelm2" | "megrez" | "hunyuan" => Self::Qwen2,
            _ => Self::Gpt2,
        }
    }

    fn ignore_merges(self) -> bool {
        self == Self::Llama3
    }
}

fn gguf_pre_tokenizer(family: PreFamily) -> Result<PreTokenizerWrapper, TokenizerError> {
    let byte_level = |use_regex: bool| ByteLevel::new(false, true, use_regex).into();
    let split = |re: &str| -> Result<PreTokenizerWrapper, TokenizerError> {
        Split::new(SplitPattern::Regex(re.to_string()), SplitDelimiterBehavior::Isolated, false)
            .map(Into::into)
            .map_err(|e| TokenizerError::Build(format!("pre-tokenizer regex: {e}")))
    };
    Ok(match family {
        PreFamily::Gpt2 => byte_level(true),
        PreFamily::DigitsGpt2 => Sequence::new(vec![Digits::new(true).into(), byte_level(true)]).into(),
        PreFamily::Llama3 => Sequence::new(vec![split(LLAMA3_SPLIT)?, byte_level(false)]).into(),
        PreFamily::Qwen2 => Sequence::new(vec![split(QWEN2_SPLIT)?, byte_level(false)]).into(),
    })
}

fn md_str<'a>(md: &'a HashMap<String, Value>, key: &'static str) -> Result<Option<&'a str>, TokenizerError> {
    match md.get(key) {
        None => Ok(None),
        Some(Value::String(s)) => Ok(Some(s)),
        Some(v) => {
            Err(TokenizerError::BadMetadata { key, problem: format!("expected a string, found {:?}", v.value_type()) })
        }
    }
}

fn md_str_array<'a>(md: &'a HashMap<String, Value>, key: &'static str) -> Result<Vec<&'a str>, TokenizerError> {
    let v = md.get(key).ok_or(TokenizerError::MissingKey { key })?;
    let Value::Array(items) = v else {
        return Err(TokenizerError::BadMetadata {
            key,
            problem: format!("expected an array of strings, found {:?}", v.value_type()),
        });
    };
    items
        .iter()
        .enumerate()
        .map(|(i, item)| match item {
            Value::String(s) => Ok(s.as_str()),
            other => Err(TokenizerError::BadMetadata {
                key,
                problem: format!("entry {i} is {:?}, expected a string", other.value_type()),
            }),
        })
        .collect()
}

fn md_int_array(v: &Value, key: &'static str) -> Result<Vec<i64>, TokenizerError> {
    let Value::Array(items) = v else {
        return Err(TokenizerError::BadMetadata {
            key,
            problem: format!("expected an array of integers, found {:?}", v.value_type()),
        });
    };
    items
        .iter()
        .enumerate()
        .map(|(i, item)| {
            value_as_i64(item).ok_or_else(|| TokenizerError::BadMetadata {
                key,
                problem: format!("entry {i} is {:?}, expected an integer", item.value_type()),
            })
        })
        .collect()
}

fn value_as_i64(v: &Value) -> Option<i64> {
    Some(match *v {
        Value::U8(x) => x.into(),
        Value::I8(x) => x.into(),
        Value::U16(x) => x.into(),
        Value::I16(x) => x.into(),
        Value::U32(x) => x.into(),
        Value::I32(x) => x.into(),
        Value::U64(x) => i64::try_from(x).ok()?,
        Value::I64(x) => x,
        _ => return None,
    })
}

#[cfg(test)]
mod tests;
