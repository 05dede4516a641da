//! RAII ownership of KV blocks: a [`BlockTable`] returns its blocks to the pool when dropped,
//! so finishing, aborting or preempting a sequence cannot leak blocks.

use crate::block_pool::{BlockId, BlockPool};
use std::cell::RefCell;
use std::rc::Rc;

/// The pool shared by the scheduler and every block table. Single-threaded by design: the
/// scheduler lives on the engine thread.
pub type SharedPool = Rc<RefCell<BlockPool>>;

/// The blocks holding one sequence's K/V, in position order (block `i` holds positions
/// `i*block_size .. (i+1)*block_size`). A sliding-window group's table holds the null block
/// in place of the blocks no query sees any more ([`BlockTable::free_before`]).
#[derive(Debug)]
pub struct BlockTable {
    ids: Vec<BlockId>,
    pool: SharedPool,
}

impl BlockTable {
    pub fn new(pool: SharedPool) -> Self {
        Self { ids: Vec::new(), pool }
    }

    pub fn ids(&self) -> &[BlockId] {
        &self.ids
    }

    pub fn len(&self) -> usize {
        self.ids.len()
    }

    pub fn is_empty(&self) -> bool {
        self.ids.is_empty()
    }

    /// Takes references on blocks found in the prefix cache (they must come first; null
    /// blocks stand for positions a sliding window no longer needs).
    pub fn push_cached(&mut self, hits: &[BlockId]) {
        debug_assert!(self.ids.is_empty());
        self.pool.borrow_mut().touch(hits);
        self.ids.extend_from_slice(hits);
    }

    /// Returns the first `n` blocks to the pool, keeping the null block in their place (the
    /// table still maps position `p` to entry `p / block_size`). Newest first, so the older
    /// blocks stay longer in the prefix cache's LRU order.
    pub fn free_before(&mut self, n: usize) {
        let n = n.min(self.ids.len());
        let mut gone: Vec<BlockId> = Vec::new();
        for id in self.ids[..n].iter_mut().rev() {
            if *id != BlockPool::NULL_BLOCK {
                gone.push(std::mem::replace(id, BlockPool::NULL_BLOCK));
            }
        }
        if !gone.is_empty() {
            self.pool.borrow_mut().free(&gone);
        }
    }

    /// Blocks of the table other than the null block.
    pub fn held(&self) -> impl Iterator<Item = BlockId> + '_ {
        self.ids.iter().copied().filter(|&b| b != BlockPool::NULL_BLOCK)
    }

    /// Grows the table by `n` fresh blocks; false (and nothing changes) if the pool is short.
    pub fn grow(&mut self, n: usize) -> bool {
        if n == 0 {
            return true;
        }
        match self.pool.borrow_mut().allocate(n) {
            Some(b) => {
                self.ids.extend(b);
                true
            }
            None => false,
        }
    }

    /// Returns every block to the pool, tail first (so a sequence's last blocks are evicted
    /// from the prefix cache before its first ones).
    pub fn release(&mut self) {
        if self.ids.is_empty() {
            return;
        }
        let held: Vec<BlockId> = self.held().collect();
        self.pool.borrow_mut().free(&reversed(held));
        self.ids.clear();
    }
}

impl Drop for BlockTable {
    fn drop(&mut self) {
        // A drop during a pool borrow would be a bug of ours; never panic while unwinding.
        if let Ok(mut pool) = self.pool.try_borrow_mut() {
            let held: Vec<BlockId> = self.held().collect();
            pool.free(&reversed(held));
            self.ids.clear();
        }
    }
}

fn reversed(mut ids: Vec<BlockId>) -> Vec<BlockId> {
    ids.reverse();
    ids
}
