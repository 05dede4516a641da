//! The distinct KV positions a decode batch reads: sequences that share a prefix (the prefix
//! cache hands them the same blocks) attend to the same K/V, which the engine reads from
//! memory once and then finds in the caches. A block whose pool reference count is 1 is one
//! sequence's own; only blocks held several times are compared.

use crate::block_pool::BlockPool;

/// Σ over the distinct blocks of `seqs` (each a block table and the positions it attends)
/// of the positions any of them covers, plus positions beyond a table's blocks.
pub(super) fn distinct_positions<'a>(
    seqs: impl Iterator<Item = (&'a [u32], usize)>,
    block_size: usize,
    pool: &BlockPool,
) -> u64 {
    let bs = block_size.max(1);
    let mut own = 0u64;
    let mut shared: Vec<(u32, usize)> = Vec::new();
    for (table, len) in seqs {
        for (i, &id) in table.iter().enumerate().take(len.div_ceil(bs)) {
            let covered = bs.min(len - i * bs);
            if pool.ref_count(id) > 1 {
                shared.push((id, covered));
            } else {
                own += covered as u64;
            }
        }
        own += len.saturating_sub(table.len() * bs) as u64;
    }
    // Sorted by block, then by positions covered: the last of each block's run is its widest.
    shared.sort_unstable();
    let widest = shared.iter().enumerate().filter(|(i, (id, _))| shared.get(i + 1).is_none_or(|n| n.0 != *id));
    own + widest.map(|(_, (_, covered))| *covered as u64).sum::<u64>()
}
