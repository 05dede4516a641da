//! RAII ownership of KV blocks: a [`BlockTable`] returns its blocks to the pool when dropped,
//! so finishing, aborting or preempting a sequence cannot leak blocks.

use crate::block_pool::{BlockId, BlockPool};
use std::cell::RefCell;
use std::rc::Rc;

/// The pool shared by the scheduler and every block table. Single-threaded by design: the
/// scheduler lives on the engine thread.
pub type SharedPool = Rc<RefCell<BlockPool>>;

/// The blocks holding one sequence's K/V, in position order (block `i` holds positions
/// `i*block_size .. (i+1)*block_size`).
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

    /// Takes references on blocks found in the prefix cache (they must come first).
    pub fn push_cached(&mut self, hits: &[BlockId]) {
        debug_assert!(self.ids.is_empty());
        self.pool.borrow_mut().touch(hits);
        self.ids.extend_from_slice(hits);
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
        self.ids.reverse();
        self.pool.borrow_mut().free(&self.ids);
        self.ids.clear();
    }
}

impl Drop for BlockTable {
    fn drop(&mut self) {
        // A drop during a pool borrow would be a bug of ours; never panic while unwinding.
        if let Ok(mut pool) = self.pool.try_borrow_mut() {
            self.ids.reverse();
            pool.free(&self.ids);
            self.ids.clear();
        }
    }
}
