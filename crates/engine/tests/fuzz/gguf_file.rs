//! GGUF files written field by field, lengths and counts included, so that a file can lie
//! about them: what the properties of `gguf.rs` generate and read back.

/// A GGUF metadata value, as written (it may lie about its lengths).
#[derive(Clone, Debug)]
pub(crate) enum GVal {
    U8(u8),
    I8(i8),
    U16(u16),
    I16(i16),
    U32(u32),
    I32(i32),
    F32(f32),
    /// Any byte where a bool goes (only 0 and 1 are bools).
    Bool(u8),
    Str(Vec<u8>),
    /// An array of element type `.0` (the elements need not be of that type).
    Arr(u32, Vec<GVal>),
    U64(u64),
    I64(i64),
    F64(f64),
    /// A string whose length field claims `.0` bytes, followed by `.1`.
    LyingStr(u64, Vec<u8>),
    /// An array of element type `.0` whose length field claims `.1`, followed by raw `.2`.
    LyingArr(u32, u64, Vec<u8>),
    /// A value of type `.0` (any number) made of the raw bytes `.1`.
    Raw(u32, Vec<u8>),
}

impl GVal {
    pub(crate) fn ty(&self) -> u32 {
        match self {
            GVal::U8(_) => 0,
            GVal::I8(_) => 1,
            GVal::U16(_) => 2,
            GVal::I16(_) => 3,
            GVal::U32(_) => 4,
            GVal::I32(_) => 5,
            GVal::F32(_) => 6,
            GVal::Bool(_) => 7,
            GVal::Str(_) | GVal::LyingStr(..) => 8,
            GVal::Arr(..) | GVal::LyingArr(..) => 9,
            GVal::U64(_) => 10,
            GVal::I64(_) => 11,
            GVal::F64(_) => 12,
            GVal::Raw(ty, _) => *ty,
        }
    }

    pub(crate) fn s(text: &str) -> GVal {
        GVal::Str(text.as_bytes().to_vec())
    }

    pub(crate) fn strs(items: &[&str]) -> GVal {
        GVal::Arr(8, items.iter().map(|s| GVal::s(s)).collect())
    }
}

/// A tensor info, as written.
#[derive(Clone, Debug)]
pub(crate) struct TInfo {
    pub(crate) name: Vec<u8>,
    /// The dimension count written; `None`: the true one.
    pub(crate) n_dims: Option<u32>,
    /// Innermost first, as GGUF stores them.
    pub(crate) dims: Vec<u64>,
    pub(crate) dtype: u32,
    pub(crate) offset: u64,
}

#[derive(Clone, Debug)]
pub(crate) struct GgufFile {
    pub(crate) version: u32,
    /// Counts written in the header; `None`: the true ones.
    pub(crate) tensor_count: Option<u64>,
    pub(crate) kv_count: Option<u64>,
    pub(crate) kvs: Vec<(Vec<u8>, GVal)>,
    pub(crate) tensors: Vec<TInfo>,
    pub(crate) data: Vec<u8>,
}

impl GgufFile {
    pub(crate) fn encode(&self) -> Vec<u8> {
        let v1 = self.version == 1;
        let mut out = b"GGUF".to_vec();
        out.extend(self.version.to_le_bytes());
        put_len(&mut out, v1, self.tensor_count.unwrap_or(self.tensors.len() as u64));
        put_len(&mut out, v1, self.kv_count.unwrap_or(self.kvs.len() as u64));
        for (k, v) in &self.kvs {
            put_len(&mut out, v1, k.len() as u64);
            out.extend(k);
            out.extend(v.ty().to_le_bytes());
            put_val(&mut out, v1, v);
        }
        for t in &self.tensors {
            put_len(&mut out, v1, t.name.len() as u64);
            out.extend(&t.name);
            out.extend(t.n_dims.unwrap_or(t.dims.len() as u32).to_le_bytes());
            for &d in &t.dims {
                if v1 {
                    out.extend((d as u32).to_le_bytes());
                } else {
                    out.extend(d.to_le_bytes());
                }
            }
            out.extend(t.dtype.to_le_bytes());
            out.extend(t.offset.to_le_bytes());
        }
        while !out.len().is_multiple_of(32) {
            out.push(0);
        }
        out.extend(&self.data);
        out
    }
}

pub(crate) fn put_len(out: &mut Vec<u8>, v1: bool, n: u64) {
    if v1 {
        out.extend((n as u32).to_le_bytes());
    } else {
        out.extend(n.to_le_bytes());
    }
}

pub(crate) fn put_val(out: &mut Vec<u8>, v1: bool, v: &GVal) {
    match v {
        GVal::U8(x) | GVal::Bool(x) => out.push(*x),
        GVal::I8(x) => out.extend(x.to_le_bytes()),
        GVal::U16(x) => out.extend(x.to_le_bytes()),
        GVal::I16(x) => out.extend(x.to_le_bytes()),
        GVal::U32(x) => out.extend(x.to_le_bytes()),
        GVal::I32(x) => out.extend(x.to_le_bytes()),
        GVal::F32(x) => out.extend(x.to_le_bytes()),
        GVal::U64(x) => out.extend(x.to_le_bytes()),
        GVal::I64(x) => out.extend(x.to_le_bytes()),
        GVal::F64(x) => out.extend(x.to_le_bytes()),
        GVal::Str(s) => {
            put_len(out, v1, s.len() as u64);
            out.extend(s);
        }
        GVal::Arr(ty, items) => {
            out.extend(ty.to_le_bytes());
            put_len(out, v1, items.len() as u64);
            for it in items {
                put_val(out, v1, it);
            }
        }
        GVal::LyingStr(claim, s) => {
            put_len(out, v1, *claim);
            out.extend(s);
        }
        GVal::LyingArr(ty, claim, raw) => {
            out.extend(ty.to_le_bytes());
            put_len(out, v1, *claim);
            out.extend(raw);
        }
        GVal::Raw(_, raw) => out.extend(raw),
    }
}
