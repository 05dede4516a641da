//! One sequence's KV blocks over the model's KV-cache groups, after vLLM's hybrid KV-cache
//! manager: a block table per group (layers of one kind: full attention, or one sliding
//! window), every table indexed by position, every group's blocks from the one shared pool.
//! A full group keeps every block; a sliding group hands back the blocks no later query sees
//! (the null block takes their place); a prefix-cache hit is a prefix every group can serve.

use crate::block_pool::{BlockHash, BlockId, BlockPool};
use crate::block_table::{BlockTable, SharedPool};

/// The first position a query at `pos` sees under a window of `window` positions.
pub fn first_seen(pos: usize, window: usize) -> usize {
    (pos + 1).saturating_sub(window)
}

/// A block table per KV-cache group, all of the same length.
#[derive(Debug)]
pub struct SeqBlocks {
    tables: Vec<BlockTable>,
}

impl SeqBlocks {
    pub fn new(pool: &SharedPool, groups: usize) -> Self {
        Self { tables: (0..groups.max(1)).map(|_| BlockTable::new(pool.clone())).collect() }
    }

    pub fn tables(&self) -> &[BlockTable] {
        &self.tables
    }

    /// Entries of each table (position `p` is in entry `p / block_size`).
    pub fn len(&self) -> usize {
        self.tables[0].len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Blocks to allocate for every table to cover `tokens` positions.
    pub fn needed(&self, tokens: usize, block_size: usize) -> usize {
        tokens.div_ceil(block_size).saturating_sub(self.len()) * self.tables.len()
    }

    /// Grows every table to cover `tokens` positions; false, and nothing changes, when the
    /// pool has fewer free blocks than all of them need.
    pub fn grow_to(&mut self, tokens: usize, block_size: usize, pool: &SharedPool) -> bool {
        let per_table = tokens.div_ceil(block_size).saturating_sub(self.len());
        if per_table == 0 {
            return true;
        }
        if pool.borrow().num_free_blocks() < per_table * self.tables.len() {
            return false;
        }
        self.tables.iter_mut().all(|t| t.grow(per_table))
    }

    /// Takes each group's prefix-cache hits ([`lookup`]).
    pub fn push_cached(&mut self, hits: &[Vec<BlockId>]) {
        for (t, h) in self.tables.iter_mut().zip(hits) {
            t.push_cached(h);
        }
    }

    /// In each sliding group, returns the blocks that no query at position `next` or later
    /// sees to the pool.
    pub fn free_out_of_window(&mut self, next: usize, windows: &[Option<usize>], block_size: usize) {
        for (t, w) in self.tables.iter_mut().zip(windows) {
            if let Some(w) = *w {
                t.free_before(first_seen(next, w) / block_size);
            }
        }
    }

    /// Every block back to the pool.
    pub fn release(&mut self) {
        self.tables.iter_mut().for_each(BlockTable::release);
    }

    /// Each table's block ids, group 0 first.
    pub fn ids(&self) -> Vec<Vec<u32>> {
        self.tables.iter().map(|t| t.ids().to_vec()).collect()
    }
}

/// The longest prefix of `hashes` (the chained hashes of a prompt's full blocks), in blocks,
/// that the cache holds for every group, and each group's table entries for it: a full group
/// needs every block of the prefix, a sliding group only the blocks the next query (at the
/// prefix's end) sees, with the null block before them. Nothing is touched yet.
pub fn lookup(
    pool: &BlockPool,
    hashes: &[BlockHash],
    windows: &[Option<usize>],
    block_size: usize,
) -> (usize, Vec<Vec<BlockId>>) {
    let in_group = |g: usize| -> Vec<BlockHash> { hashes.iter().map(|h| h.in_group(g)).collect() };
    let grouped: Vec<Vec<BlockHash>> = (0..windows.len()).map(in_group).collect();
    let mut k = hashes.len();
    for (g, w) in windows.iter().enumerate() {
        if w.is_none() {
            k = k.min(pool.lookup(&grouped[g]).len());
        }
    }
    // The sliding groups: shrink k to the first block a window misses, until none misses.
    'shrink: while k > 0 {
        for (g, w) in windows.iter().enumerate() {
            let Some(w) = *w else { continue };
            let from = first_seen(k * block_size, w) / block_size;
            let found = pool.lookup(&grouped[g][from..k]).len();
            if found < k - from {
                k = from + found;
                continue 'shrink;
            }
        }
        break;
    }
    let hits = windows
        .iter()
        .enumerate()
        .map(|(g, w)| {
            let from = w.map_or(0, |w| if k == 0 { 0 } else { first_seen(k * block_size, w) / block_size });
            let mut ids = vec![BlockPool::NULL_BLOCK; from];
            ids.extend(pool.lookup(&grouped[g][from..k]));
            ids
        })
        .collect();
    (k, hits)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::block_pool::hash_full_blocks;
    use std::cell::RefCell;
    use std::rc::Rc;

    fn pool(n: usize) -> SharedPool {
        Rc::new(RefCell::new(BlockPool::new(n, 4, true).unwrap()))
    }

    /// A full and a sliding group (window 6, blocks of 4): the sliding table hands back the
    /// blocks below the window and keeps its length; every block returns at the end.
    #[test]
    fn a_sliding_group_frees_what_no_later_query_sees() {
        let p = pool(32);
        let windows = [None, Some(6)];
        let mut b = SeqBlocks::new(&p, 2);
        assert_eq!(b.needed(17, 4), 10);
        assert!(b.grow_to(17, 4, &p));
        assert_eq!(p.borrow().num_free_blocks(), 31 - 10);
        // The next query is at 17: it sees 12..=17, so blocks 0..3 (positions 0..12) go.
        b.free_out_of_window(17, &windows, 4);
        let ids = b.ids();
        assert_eq!(ids[0].len(), 5);
        assert!(!ids[0].contains(&BlockPool::NULL_BLOCK));
        assert_eq!(&ids[1][..3], &[BlockPool::NULL_BLOCK; 3]);
        assert!(!ids[1][3..].contains(&BlockPool::NULL_BLOCK));
        assert_eq!(p.borrow().num_free_blocks(), 31 - 7);
        // Too few free blocks: nothing changes.
        assert!(!b.grow_to(17 + 4 * 13, 4, &p));
        assert_eq!(b.len(), 5);
        b.release();
        assert_eq!(p.borrow().num_free_blocks(), 31);
        p.borrow().check_invariants().unwrap();
    }

    /// A hit is a prefix the full group holds in full and the sliding group holds within the
    /// window of the query after it; a sliding block missing inside that window shortens it.
    #[test]
    fn a_prefix_hit_needs_every_full_block_and_the_sliding_window() {
        let windows = [None, Some(6)];
        let tokens: Vec<u32> = (0..24).collect();
        let hashes = hash_full_blocks(&tokens, 4);
        // The sliding group's block `missing` was never cached (or was evicted).
        let cached = |missing: Option<usize>| {
            let p = pool(64);
            let mut b = SeqBlocks::new(&p, 2);
            assert!(b.grow_to(24, 4, &p));
            for (j, h) in hashes.iter().enumerate() {
                for (g, t) in b.tables().iter().enumerate() {
                    if !(g == 1 && Some(j) == missing) {
                        p.borrow_mut().cache_block(t.ids()[j], h.in_group(g));
                    }
                }
            }
            (p, b)
        };
        let (p, b) = cached(None);
        let (k, hits) = lookup(&p.borrow(), &hashes[..5], &windows, 4);
        assert_eq!(k, 5);
        assert_eq!(hits[0], b.ids()[0][..5].to_vec());
        // The query at 20 sees 15..=20: the sliding group serves blocks 3 and 4 only.
        assert_eq!(hits[1][..3], [BlockPool::NULL_BLOCK; 3]);
        assert_eq!(hits[1][3..], b.ids()[1][3..5]);
        // Without the sliding group's block 3, a hit of 5 blocks is impossible; one of 3 blocks
        // (the query at 12 sees 7..=12: blocks 1 and 2) is served.
        let (p, b) = cached(Some(3));
        let (k, hits) = lookup(&p.borrow(), &hashes[..5], &windows, 4);
        assert_eq!(k, 3);
        assert_eq!(hits[0], b.ids()[0][..3].to_vec());
        assert_eq!(hits[1], vec![BlockPool::NULL_BLOCK, b.ids()[1][1], b.ids()[1][2]]);
        // A full group alone is a plain prefix match.
        assert_eq!(lookup(&p.borrow(), &hashes[..5], &[None], 4).0, 5);
        // The same tokens in group 1 are other blocks than in group 0.
        assert_ne!(hashes[0].in_group(1), hashes[0]);
    }
}
