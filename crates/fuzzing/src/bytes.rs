//! Byte-level edits of a serialised input.

use proptest::prelude::*;
use proptest::sample::Index;

/// A byte-level edit of the serialised document.
#[derive(Clone, Debug)]
pub enum ByteEdit {
    Flip(Index, u8),
    Insert(Index, u8),
    Remove(Index),
    Truncate(Index),
}

/// `b` with `edits` applied in order.
pub fn mutate_bytes(mut b: Vec<u8>, edits: &[ByteEdit]) -> Vec<u8> {
    for e in edits {
        match e {
            ByteEdit::Flip(at, x) if !b.is_empty() => {
                let i = at.index(b.len());
                b[i] ^= x | 1;
            }
            ByteEdit::Insert(at, x) => b.insert(at.index(b.len() + 1), *x),
            ByteEdit::Remove(at) if !b.is_empty() => {
                b.remove(at.index(b.len()));
            }
            ByteEdit::Truncate(at) => b.truncate(at.index(b.len() + 1)),
            _ => {}
        }
    }
    b
}

/// No edit three times in four; otherwise one to three edits.
pub fn byte_edits() -> impl Strategy<Value = Vec<ByteEdit>> {
    let one = prop_oneof![
        (any::<Index>(), any::<u8>()).prop_map(|(i, x)| ByteEdit::Flip(i, x)),
        (any::<Index>(), any::<u8>()).prop_map(|(i, x)| ByteEdit::Insert(i, x)),
        any::<Index>().prop_map(ByteEdit::Remove),
        any::<Index>().prop_map(ByteEdit::Truncate),
    ];
    prop_oneof![3 => Just(Vec::new()), 1 => prop::collection::vec(one, 1..4)]
}

/// Any bytes, fewer than `max`.
pub fn small_bytes(max: usize) -> impl Strategy<Value = Vec<u8>> {
    prop::collection::vec(any::<u8>(), 0..max)
}
