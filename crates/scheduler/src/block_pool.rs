//! Paged KV-cache block allocator, after vLLM v1's `BlockPool` and `FreeKVCacheBlockQueue`.
//!
//! The KV cache is split into `num_blocks` fixed-size blocks of `block_size` token slots each.
//! Block [`BlockPool::NULL_BLOCK`] (id 0) is reserved as a placeholder and is never handed out.
//! Every other block is either *referenced* (`ref_cnt > 0`, owned by one or more sequences) or
//! *free* (`ref_cnt == 0`, on an intrusive doubly-linked free list kept in LRU order: blocks are
//! allocated from the head and freed blocks are appended at the tail).
//!
//! Without prefix caching, eviction order means nothing (a free block holds nothing anyone can
//! hit), so freed blocks go back at the head instead: the list is a stack, and the blocks handed
//! out are the ones just freed, still in the CPU's caches. A fleet of large simulated pools
//! spent a third of its time in cache misses walking the LRU order through every block.
//!
//! With prefix caching enabled, a full block can be registered under the chained hash of its tokens
//! ([`BlockHash::chain`]). A cached block keeps its hash after it is freed, so a later request with
//! the same prefix can still hit it ([`BlockPool::lookup`] + [`BlockPool::touch`]) until it reaches
//! the head of the free list and is reallocated, at which point its hash is evicted.
//!
//! Every operation is O(1) per block involved. The pool is a plain synchronous state machine.

use std::collections::hash_map::Entry;
use std::collections::HashMap;
use std::hash::{BuildHasherDefault, Hasher};
use xxhash_rust::xxh3::{xxh3_128_with_seed, Xxh3};

/// Index of a KV-cache block in `0..num_blocks`; 0 is the reserved null block.
pub type BlockId = u32;

/// "No block" marker in the intrusive free-list links (never a valid id: `num_blocks <= u32::MAX`).
const NONE: u32 = u32::MAX;

/// Chained hash of one full block of token ids: hash(parent block's hash, this block's tokens).
///
/// XXH3's 128-bit hash, seeded by a domain, over an unambiguous little-endian encoding of
/// (parent, tokens): deterministic across runs, processes and platforms (XXH3's output is
/// specified). It was two SipHash-1-3 passes until a simulated fleet spent a third of its time
/// in them; a block is 64 bytes, where XXH3 is several times faster. Not cryptographic: as
/// vLLM's default (`builtin`) hash, it trusts that prompts are not crafted to collide.
#[derive(Clone, Copy, PartialEq, Eq, Hash, Debug)]
pub struct BlockHash(pub u128);

impl BlockHash {
    /// Hash of a block holding `tokens`, chained to the hash of the previous block of the same
    /// sequence (`None` for the first block). Equal hashes therefore mean equal whole prefixes.
    pub fn chain(parent: Option<BlockHash>, tokens: &[u32]) -> BlockHash {
        BlockHash(xxh128(DOMAIN_BLOCK, parent, tokens))
    }

    /// The hash this block is cached under in KV-cache group `group`: the same tokens in
    /// another group's layers are another block. Group 0 keeps the plain hash.
    pub fn in_group(self, group: usize) -> BlockHash {
        if group == 0 {
            return self;
        }
        BlockHash(xxh128(DOMAIN_GROUP, Some(self), &[group as u32]))
    }
}

/// The seeds that keep a block's hash and a group's apart.
const DOMAIN_BLOCK: u64 = 0x676f_6f64_7075_7401; // "goodput\x01"
const DOMAIN_GROUP: u64 = 0x676f_6f64_7075_7402;

/// The prefix cache's map hasher. Its keys are already hashes, uniformly spread, so folding
/// their two halves is as good a map hash as hashing them again and costs nothing (SipHash
/// over the keys was 9 % of a simulated fleet's time). Written here because no crate does
/// this for 128-bit keys without pulling in a general-purpose hasher.
#[derive(Default)]
struct PreHashed(u64);

impl Hasher for PreHashed {
    fn finish(&self) -> u64 {
        self.0
    }
    fn write(&mut self, bytes: &[u8]) {
        for chunk in bytes.chunks(8) {
            let mut b = [0u8; 8];
            b[..chunk.len()].copy_from_slice(chunk);
            self.0 = self.0.rotate_left(29) ^ u64::from_le_bytes(b);
        }
    }
    fn write_u128(&mut self, v: u128) {
        self.0 ^= (v as u64) ^ ((v >> 64) as u64);
    }
}

/// XXH3-128 seeded with `domain` over (a tag and the parent's 16 bytes, the token count, the
/// tokens), all little-endian so the value is platform independent.
fn xxh128(domain: u64, parent: Option<BlockHash>, tokens: &[u32]) -> u128 {
    let mut head = [0u8; 25];
    if let Some(p) = parent {
        head[0] = 1;
        head[1..17].copy_from_slice(&p.0.to_le_bytes());
    }
    head[17..25].copy_from_slice(&(tokens.len() as u64).to_le_bytes());
    // A block of up to 64 tokens in one buffer, hashed at once; longer ones streamed.
    let mut buf = [0u8; 25 + 256];
    if tokens.len() <= 64 {
        buf[..25].copy_from_slice(&head);
        for (dst, t) in buf[25..].chunks_exact_mut(4).zip(tokens) {
            dst.copy_from_slice(&t.to_le_bytes());
        }
        return xxh3_128_with_seed(&buf[..25 + tokens.len() * 4], domain);
    }
    let mut h = Xxh3::with_seed(domain);
    h.update(&head);
    for chunk in tokens.chunks(64) {
        for (dst, t) in buf.chunks_exact_mut(4).zip(chunk) {
            dst.copy_from_slice(&t.to_le_bytes());
        }
        h.update(&buf[..chunk.len() * 4]);
    }
    h.digest128()
}

/// Hashes of the full blocks of `tokens` (`tokens.len() / block_size` of them), each chained from
/// the previous one. A trailing partial block is not hashed. Returns an empty vector when
/// `block_size == 0`.
pub fn hash_full_blocks(tokens: &[u32], block_size: usize) -> Vec<BlockHash> {
    if block_size == 0 {
        return Vec::new();
    }
    let mut out = Vec::with_capacity(tokens.len() / block_size);
    let mut parent = None;
    for block in tokens.chunks_exact(block_size) {
        let h = BlockHash::chain(parent, block);
        out.push(h);
        parent = Some(h);
    }
    out
}

/// A broken invariant of the pool, said by [`BlockPool::check_invariants`].
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct BrokenInvariant(pub String);

fn broken(what: impl Into<String>) -> BrokenInvariant {
    BrokenInvariant(what.into())
}

/// Invalid [`BlockPool`] configuration.
#[derive(Clone, Debug, thiserror::Error, PartialEq, Eq)]
pub enum PoolError {
    /// The pool needs the reserved null block plus at least one usable block.
    #[error("KV block pool needs at least 2 blocks (1 reserved null block + 1 usable), got {num_blocks}")]
    TooFewBlocks {
        /// The requested total number of blocks.
        num_blocks: usize,
    },
    /// Block ids are `u32` and `u32::MAX` is reserved as the free-list "none" marker.
    #[error("KV block pool supports at most {max} blocks, got {num_blocks}")]
    TooManyBlocks {
        /// The requested total number of blocks.
        num_blocks: usize,
        /// The largest supported total number of blocks.
        max: usize,
    },
    /// A block must hold at least one token.
    #[error("KV block size must be at least 1 token, got 0")]
    ZeroBlockSize,
}

/// Reference-counted pool of KV-cache blocks with an LRU free list and an optional prefix cache.
#[derive(Debug, Clone)]
pub struct BlockPool {
    /// Token slots per block.
    block_size: usize,
    /// Whether `cache_block` / `lookup` are active.
    enable_prefix_caching: bool,
    /// Number of holders of each block; 0 means the block is on the free list (except the null block).
    ref_cnt: Vec<u32>,
    /// Hash registered for each block, mirrored by `cached`.
    hash: Vec<Option<BlockHash>>,
    /// Free-list links (`NONE` when absent or off the list).
    prev: Vec<u32>,
    next: Vec<u32>,
    /// Least recently freed block (next to allocate), or `NONE`.
    head: u32,
    /// Most recently freed block, or `NONE`.
    tail: u32,
    /// Length of the free list.
    free_count: usize,
    /// Prefix cache: hash of a full block -> the block holding those tokens.
    cached: HashMap<BlockHash, BlockId, BuildHasherDefault<PreHashed>>,
}

impl BlockPool {
    /// The reserved placeholder block: never allocated, never on the free list, never freed.
    pub const NULL_BLOCK: BlockId = 0;

    /// A pool of `num_blocks` blocks of `block_size` tokens each. `num_blocks` includes the null
    /// block, so it must be >= 2; `block_size` must be >= 1. All usable blocks `1..num_blocks` start
    /// free, in ascending order (block 1 is allocated first).
    pub fn new(num_blocks: usize, block_size: usize, enable_prefix_caching: bool) -> Result<Self, PoolError> {
        if block_size == 0 {
            return Err(PoolError::ZeroBlockSize);
        }
        if num_blocks < 2 {
            return Err(PoolError::TooFewBlocks { num_blocks });
        }
        let max = NONE as usize;
        if num_blocks > max {
            return Err(PoolError::TooManyBlocks { num_blocks, max });
        }
        let last = (num_blocks - 1) as u32;
        let mut prev = vec![NONE; num_blocks];
        let mut next = vec![NONE; num_blocks];
        for b in 1..=last {
            prev[b as usize] = if b == 1 { NONE } else { b - 1 };
            next[b as usize] = if b == last { NONE } else { b + 1 };
        }
        Ok(Self {
            block_size,
            enable_prefix_caching,
            ref_cnt: vec![0; num_blocks],
            hash: vec![None; num_blocks],
            prev,
            next,
            head: 1,
            tail: last,
            free_count: num_blocks - 1,
            cached: HashMap::default(),
        })
    }

    /// Token slots per block.
    pub fn block_size(&self) -> usize {
        self.block_size
    }

    /// Total number of blocks, including the null block.
    pub fn num_blocks(&self) -> usize {
        self.ref_cnt.len()
    }

    /// Blocks that can be handed out: `num_blocks - 1` (everything but the null block).
    pub fn usable_blocks(&self) -> usize {
        self.ref_cnt.len() - 1
    }

    /// Blocks with `ref_cnt == 0`, i.e. on the free list. Cached-but-free blocks count as free.
    pub fn num_free_blocks(&self) -> usize {
        self.free_count
    }

    /// Blocks currently registered in the prefix-cache map (referenced or free).
    pub fn num_cached_blocks(&self) -> usize {
        self.cached.len()
    }

    /// Whether prefix caching is enabled.
    pub fn prefix_caching(&self) -> bool {
        self.enable_prefix_caching
    }

    /// Fraction of usable blocks in use, in `[0, 1]`: `1 - free / usable` (vLLM's
    /// `kv_cache_usage_perc`, as a fraction). Cached-but-free blocks count as unused.
    pub fn usage(&self) -> f64 {
        1.0 - self.free_count as f64 / self.usable_blocks() as f64
    }

    /// Pops `n` blocks from the head of the free list (least recently freed first). A popped block
    /// that holds a cached hash is evicted from the cache map. Each returned block has `ref_cnt` 1.
    /// All-or-nothing: returns `None`, changing nothing, when fewer than `n` blocks are free.
    #[must_use = "allocated blocks leak unless they are recorded and later freed"]
    pub fn allocate(&mut self, n: usize) -> Option<Vec<BlockId>> {
        if n > self.free_count {
            return None;
        }
        let mut out = Vec::with_capacity(n);
        for _ in 0..n {
            let Some(b) = self.pop_head() else {
                // Unreachable while the invariants hold (free_count is the list length); undo.
                debug_assert!(false, "free list shorter than free_count");
                self.free(&out);
                return None;
            };
            // Without a cache no block has a hash: skip the load (a cache miss on large pools).
            if self.enable_prefix_caching {
                if let Some(h) = self.hash[b as usize].take() {
                    if self.cached.get(&h) == Some(&b) {
                        self.cached.remove(&h);
                    }
                }
            }
            self.ref_cnt[b as usize] = 1;
            out.push(b);
        }
        Some(out)
    }

    /// Decrements the reference count of each block; a block reaching 0 is appended at the tail
    /// of the free list, in the order given (callers pass a sequence's blocks in reverse so that
    /// its tail blocks are evicted first, as vLLM does) — or, without prefix caching, put at its
    /// head, to be allocated next. A cached block keeps its hash while free
    /// and can still be hit until it is reallocated. A block may appear several times, once per
    /// reference dropped.
    ///
    /// Freeing the null block, an out-of-range id, or a block whose `ref_cnt` is already 0 is a
    /// caller bug: it trips a `debug_assert!` and is ignored in release builds.
    pub fn free(&mut self, blocks: &[BlockId]) {
        for &b in blocks {
            debug_assert!(self.is_usable_id(b), "free of invalid block id {b}");
            if !self.is_usable_id(b) {
                continue;
            }
            let rc = &mut self.ref_cnt[b as usize];
            debug_assert!(*rc > 0, "double free of block {b}");
            if *rc == 0 {
                continue;
            }
            *rc -= 1;
            if *rc == 0 {
                if self.enable_prefix_caching {
                    self.push_tail(b);
                } else {
                    self.push_head(b);
                }
            }
        }
    }

    /// Increments the reference count of each block; a block whose count was 0 is first removed
    /// from the free list in O(1) (keeping its cached hash). Used for prefix-cache hits and for
    /// forking a sequence. The null block is ignored; an out-of-range id trips a `debug_assert!`
    /// and is ignored in release builds.
    pub fn touch(&mut self, blocks: &[BlockId]) {
        for &b in blocks {
            if b == Self::NULL_BLOCK {
                continue;
            }
            debug_assert!(self.is_usable_id(b), "touch of invalid block id {b}");
            if !self.is_usable_id(b) {
                continue;
            }
            let rc = self.ref_cnt[b as usize];
            let Some(new_rc) = rc.checked_add(1) else {
                debug_assert!(false, "ref count overflow on block {b}");
                continue;
            };
            if rc == 0 {
                self.unlink(b);
            }
            self.ref_cnt[b as usize] = new_rc;
        }
    }

    /// Block ids of the longest prefix of `hashes` whose blocks are all in the cache map (cached
    /// blocks may be referenced or free). Stops at the first miss. Does not touch the blocks:
    /// call [`BlockPool::touch`] on the result before allocating, or a free hit may be evicted.
    /// Always empty when prefix caching is disabled.
    pub fn lookup(&self, hashes: &[BlockHash]) -> Vec<BlockId> {
        if !self.enable_prefix_caching {
            return Vec::new();
        }
        hashes.iter().map_while(|h| self.cached.get(h).copied()).collect()
    }

    /// Records that `block` (referenced and full) holds the tokens hashed as `hash`. If `hash` is
    /// already mapped to a block, or `block` already has a hash, nothing changes (first mapping
    /// wins). No-op when prefix caching is disabled. Caching the null block, an out-of-range id or
    /// a free block is a caller bug: `debug_assert!`, ignored in release builds.
    pub fn cache_block(&mut self, block: BlockId, hash: BlockHash) {
        if !self.enable_prefix_caching {
            return;
        }
        debug_assert!(self.is_usable_id(block), "cache_block of invalid block id {block}");
        if !self.is_usable_id(block) {
            return;
        }
        debug_assert!(self.ref_cnt[block as usize] > 0, "cache_block of free block {block}");
        if self.ref_cnt[block as usize] == 0 || self.hash[block as usize].is_some() {
            return;
        }
        if let Entry::Vacant(e) = self.cached.entry(hash) {
            e.insert(block);
            self.hash[block as usize] = Some(hash);
        }
    }

    /// Number of holders of `block` (0 when free, for the null block, and for out-of-range ids).
    pub fn ref_count(&self, block: BlockId) -> u32 {
        self.ref_cnt.get(block as usize).copied().unwrap_or(0)
    }

    /// The hash `block` is registered under in the prefix cache, if any.
    pub fn block_hash(&self, block: BlockId) -> Option<BlockHash> {
        self.hash.get(block as usize).copied().flatten()
    }

    /// Checks every invariant, returning a description of the first violation: the null block is
    /// never free, referenced, hashed or linked; every usable block is either on the free list
    /// (`ref_cnt` 0) or referenced (`ref_cnt` > 0), never both; the free-list links are consistent
    /// (the head-to-tail walk ends at `tail`, `prev`/`next` mirror each other, no cycles) and the
    /// walk length equals `num_free_blocks`; the cache map and the per-block hashes mirror each
    /// other exactly (and are empty with prefix caching disabled). O(num_blocks).
    pub fn check_invariants(&self) -> Result<(), BrokenInvariant> {
        let n = self.ref_cnt.len();
        if n < 2 {
            return Err(broken(format!("num_blocks {n} < 2")));
        }
        if self.hash.len() != n || self.prev.len() != n || self.next.len() != n {
            return Err(broken("per-block vectors have different lengths"));
        }
        let null = Self::NULL_BLOCK as usize;
        if self.ref_cnt[null] != 0 {
            return Err(broken(format!("null block has ref_cnt {}", self.ref_cnt[null])));
        }
        if self.hash[null].is_some() {
            return Err(broken("null block has a hash"));
        }
        if self.prev[null] != NONE || self.next[null] != NONE {
            return Err(broken("null block has free-list links"));
        }
        if self.head == Self::NULL_BLOCK || self.tail == Self::NULL_BLOCK {
            return Err(broken("null block is the free-list head or tail"));
        }
        if (self.head == NONE) != (self.tail == NONE) {
            return Err(broken(format!("free-list head {} and tail {} disagree on emptiness", self.head, self.tail)));
        }

        // Walk head -> tail.
        let mut on_list = vec![false; n];
        let mut count = 0usize;
        let mut expected_prev = NONE;
        let mut cur = self.head;
        while cur != NONE {
            let c = cur as usize;
            if c >= n {
                return Err(broken(format!("free list reaches out-of-range block {cur}")));
            }
            if cur == Self::NULL_BLOCK {
                return Err(broken("free list reaches the null block"));
            }
            if on_list[c] {
                return Err(broken(format!("free list has a cycle through block {cur}")));
            }
            if self.prev[c] != expected_prev {
                return Err(broken(format!(
                    "block {cur}: prev is {} but the walk came from {expected_prev}",
                    self.prev[c]
                )));
            }
            if self.ref_cnt[c] != 0 {
                return Err(broken(format!("block {cur} is on the free list with ref_cnt {}", self.ref_cnt[c])));
            }
            on_list[c] = true;
            count += 1;
            expected_prev = cur;
            cur = self.next[c];
        }
        if self.tail != expected_prev {
            return Err(broken(format!("free-list tail is {} but the walk ends at {expected_prev}", self.tail)));
        }
        if count != self.free_count {
            return Err(broken(format!("free_count is {} but the free list holds {count} blocks", self.free_count)));
        }
        for (b, &listed) in on_list.iter().enumerate().skip(1) {
            if !listed {
                if self.ref_cnt[b] == 0 {
                    return Err(broken(format!("block {b} has ref_cnt 0 but is not on the free list")));
                }
                if self.prev[b] != NONE || self.next[b] != NONE {
                    return Err(broken(format!("referenced block {b} has stale free-list links")));
                }
            }
        }

        // Cache map <-> per-block hashes.
        if !self.enable_prefix_caching && !self.cached.is_empty() {
            return Err(broken("cache map is not empty with prefix caching disabled"));
        }
        for (h, &b) in &self.cached {
            if b == Self::NULL_BLOCK || b as usize >= n {
                return Err(broken(format!("cache map points at invalid block {b}")));
            }
            if self.hash[b as usize] != Some(*h) {
                return Err(broken(format!(
                    "cache map has {h:?} -> block {b}, but the block's hash is {:?}",
                    self.hash[b as usize]
                )));
            }
        }
        for (b, h) in self.hash.iter().enumerate() {
            if let Some(h) = h {
                if self.cached.get(h) != Some(&(b as BlockId)) {
                    return Err(broken(format!(
                        "block {b} has hash {h:?} but the cache map has {:?}",
                        self.cached.get(h)
                    )));
                }
            }
        }
        Ok(())
    }

    /// Whether `b` names a block that may be allocated/freed (not null, in range).
    fn is_usable_id(&self, b: BlockId) -> bool {
        b != Self::NULL_BLOCK && (b as usize) < self.ref_cnt.len()
    }

    /// Removes and returns the head of the free list.
    fn pop_head(&mut self) -> Option<BlockId> {
        if self.head == NONE {
            return None;
        }
        let b = self.head;
        self.unlink(b);
        Some(b)
    }

    /// Unlinks free block `b` from wherever it sits in the free list.
    fn unlink(&mut self, b: BlockId) {
        let (p, nx) = (self.prev[b as usize], self.next[b as usize]);
        if p == NONE {
            self.head = nx;
        } else {
            self.next[p as usize] = nx;
        }
        if nx == NONE {
            self.tail = p;
        } else {
            self.prev[nx as usize] = p;
        }
        self.prev[b as usize] = NONE;
        self.next[b as usize] = NONE;
        self.free_count -= 1;
    }

    /// Puts block `b` (not on the list) at the head of the free list, next to be allocated.
    fn push_head(&mut self, b: BlockId) {
        self.prev[b as usize] = NONE;
        self.next[b as usize] = self.head;
        if self.head == NONE {
            self.tail = b;
        } else {
            self.prev[self.head as usize] = b;
        }
        self.head = b;
        self.free_count += 1;
    }

    /// Appends block `b` (not on the list) at the tail of the free list.
    fn push_tail(&mut self, b: BlockId) {
        self.prev[b as usize] = self.tail;
        self.next[b as usize] = NONE;
        if self.tail == NONE {
            self.head = b;
        } else {
            self.next[self.tail as usize] = b;
        }
        self.tail = b;
        self.free_count += 1;
    }
}

#[cfg(test)]
mod model_tests;
#[cfg(test)]
mod tests;
