use super::*;
use proptest::prelude::*;
use std::collections::VecDeque;

fn pool(num_blocks: usize, block_size: usize, caching: bool) -> BlockPool {
    BlockPool::new(num_blocks, block_size, caching).unwrap()
}

/// The free list, head to tail.
fn free_list(p: &BlockPool) -> Vec<BlockId> {
    let mut out = Vec::new();
    let mut cur = p.head;
    while cur != NONE {
        out.push(cur);
        cur = p.next[cur as usize];
    }
    out
}

fn ok(p: &BlockPool) {
    if let Err(e) = p.check_invariants() {
        panic!("invariant violated: {e}");
    }
}

#[test]
fn new_rejects_bad_sizes() {
    assert_eq!(BlockPool::new(1, 16, true).unwrap_err(), PoolError::TooFewBlocks { num_blocks: 1 });
    assert_eq!(BlockPool::new(0, 16, false).unwrap_err(), PoolError::TooFewBlocks { num_blocks: 0 });
    assert_eq!(BlockPool::new(8, 0, true).unwrap_err(), PoolError::ZeroBlockSize);
    let p = pool(2, 1, false);
    assert_eq!((p.num_blocks(), p.usable_blocks(), p.num_free_blocks()), (2, 1, 1));
    assert_eq!(p.block_size(), 1);
    assert!(!p.prefix_caching());
    ok(&p);
    assert!(PoolError::TooFewBlocks { num_blocks: 1 }.to_string().contains("at least 2 blocks"));
}

#[test]
fn allocation_order_is_ascending_and_skips_null() {
    let mut p = pool(6, 4, false);
    assert_eq!(free_list(&p), vec![1, 2, 3, 4, 5]);
    assert_eq!(p.allocate(2), Some(vec![1, 2]));
    assert_eq!(p.allocate(3), Some(vec![3, 4, 5]));
    assert_eq!(p.num_free_blocks(), 0);
    for b in 1..6 {
        assert_eq!(p.ref_count(b), 1);
    }
    assert_eq!(p.ref_count(BlockPool::NULL_BLOCK), 0);
    assert_eq!(p.ref_count(99), 0);
    ok(&p);
}

#[test]
fn allocate_is_all_or_nothing() {
    let mut p = pool(5, 2, true);
    let a = p.allocate(3).unwrap();
    assert_eq!(a, vec![1, 2, 3]);
    let before = free_list(&p);
    assert_eq!(p.allocate(2), None);
    assert_eq!(free_list(&p), before);
    assert_eq!(p.num_free_blocks(), 1);
    assert_eq!(p.allocate(0), Some(vec![]));
    assert_eq!(p.allocate(1), Some(vec![4]));
    assert_eq!(p.allocate(1), None);
    ok(&p);
}

#[test]
fn freed_last_is_reused_last() {
    let mut p = pool(7, 1, false);
    let a = p.allocate(3).unwrap(); // 1 2 3
    let b = p.allocate(3).unwrap(); // 4 5 6
                                    // Free b first, then a in reverse (tail first): LRU order is 4 5 6 3 2 1.
    p.free(&b);
    let mut rev = a.clone();
    rev.reverse();
    p.free(&rev);
    assert_eq!(free_list(&p), vec![4, 5, 6, 3, 2, 1]);
    assert_eq!(p.allocate(4), Some(vec![4, 5, 6, 3]));
    assert_eq!(p.allocate(2), Some(vec![2, 1]));
    ok(&p);
}

#[test]
fn shared_block_is_freed_only_with_its_last_reference() {
    let mut p = pool(4, 2, false);
    let a = p.allocate(2).unwrap();
    p.touch(&a); // fork
    assert_eq!(p.ref_count(a[0]), 2);
    p.free(&[a[1], a[0]]);
    assert_eq!(p.num_free_blocks(), 1);
    assert_eq!(p.ref_count(a[0]), 1);
    p.free(&[a[1], a[0]]);
    assert_eq!(free_list(&p), vec![3, 2, 1]);
    ok(&p);
}

#[test]
fn eviction_of_cached_block_removes_its_hash() {
    let mut p = pool(3, 2, true); // usable: 1, 2
    let h = hash_full_blocks(&[7, 8], 2)[0];
    let a = p.allocate(1).unwrap();
    p.cache_block(a[0], h);
    assert_eq!(p.block_hash(a[0]), Some(h));
    p.free(&a);
    // Free but still cached: can be hit.
    assert_eq!(p.num_cached_blocks(), 1);
    assert_eq!(p.lookup(&[h]), a);
    ok(&p);
    // Block 2 is at the head; allocating it leaves the cached block alone.
    assert_eq!(p.allocate(1), Some(vec![2]));
    assert_eq!(p.lookup(&[h]), a);
    // Now the cached block is reallocated and loses its hash.
    assert_eq!(p.allocate(1), Some(a.clone()));
    assert_eq!(p.block_hash(a[0]), None);
    assert_eq!(p.num_cached_blocks(), 0);
    assert!(p.lookup(&[h]).is_empty());
    ok(&p);
}

#[test]
fn lookup_returns_longest_cached_prefix() {
    let mut p = pool(10, 2, true);
    let toks = [1, 2, 3, 4, 5, 6, 7, 8];
    let hs = hash_full_blocks(&toks, 2);
    assert_eq!(hs.len(), 4);
    let blocks = p.allocate(4).unwrap();
    // Cache blocks 0, 1 and 3 of the sequence, not block 2.
    p.cache_block(blocks[0], hs[0]);
    p.cache_block(blocks[1], hs[1]);
    p.cache_block(blocks[3], hs[3]);
    assert_eq!(p.num_cached_blocks(), 3);
    assert_eq!(p.lookup(&hs), blocks[..2].to_vec());
    assert_eq!(p.lookup(&hs[..1]), blocks[..1].to_vec());
    assert!(p.lookup(&[]).is_empty());
    // A first-block miss finds nothing even though later blocks are cached.
    let other = hash_full_blocks(&[9, 9, 3, 4], 2);
    assert!(p.lookup(&other).is_empty());
    // Lookup does not touch.
    assert_eq!(p.ref_count(blocks[0]), 1);
    ok(&p);
}

#[test]
fn touch_of_cached_free_block_takes_it_off_the_free_list() {
    let mut p = pool(5, 1, true);
    let hs = hash_full_blocks(&[4, 2], 1);
    let a = p.allocate(2).unwrap(); // 1 2
    p.cache_block(a[0], hs[0]);
    p.cache_block(a[1], hs[1]);
    p.free(&[a[1], a[0]]);
    assert_eq!(free_list(&p), vec![3, 4, 2, 1]);
    let hits = p.lookup(&hs);
    assert_eq!(hits, a);
    p.touch(&hits);
    assert_eq!(free_list(&p), vec![3, 4]);
    assert_eq!(p.num_free_blocks(), 2);
    assert_eq!(p.ref_count(a[0]), 1);
    // Still cached, and a second lookup still finds it.
    assert_eq!(p.lookup(&hs), a);
    // Allocation cannot evict the touched blocks.
    assert_eq!(p.allocate(2), Some(vec![3, 4]));
    assert_eq!(p.allocate(1), None);
    assert_eq!(p.lookup(&hs), a);
    ok(&p);
    // Touching the middle of the free list unlinks in place.
    p.free(&[3, 4, a[0]]);
    assert_eq!(free_list(&p), vec![3, 4, 1]);
    p.touch(&[4]);
    assert_eq!(free_list(&p), vec![3, 1]);
    ok(&p);
}

#[test]
fn cache_block_is_a_no_op_when_disabled() {
    let mut p = pool(4, 2, false);
    let h = hash_full_blocks(&[1, 2], 2)[0];
    let a = p.allocate(1).unwrap();
    p.cache_block(a[0], h);
    assert_eq!(p.num_cached_blocks(), 0);
    assert_eq!(p.block_hash(a[0]), None);
    assert!(p.lookup(&[h]).is_empty());
    ok(&p);
}

#[test]
fn cache_block_first_mapping_wins() {
    let mut p = pool(4, 2, true);
    let hs = hash_full_blocks(&[1, 2, 3, 4], 2);
    let a = p.allocate(2).unwrap();
    p.cache_block(a[0], hs[0]);
    // Same hash, other block: ignored.
    p.cache_block(a[1], hs[0]);
    assert_eq!(p.block_hash(a[1]), None);
    assert_eq!(p.lookup(&hs[..1]), vec![a[0]]);
    // Same block, other hash: ignored.
    p.cache_block(a[0], hs[1]);
    assert_eq!(p.block_hash(a[0]), Some(hs[0]));
    assert!(p.lookup(&hs[1..]).is_empty());
    assert_eq!(p.num_cached_blocks(), 1);
    ok(&p);
}

#[test]
fn usage_hand_computed() {
    let mut p = pool(10, 16, true); // 9 usable
    assert_eq!(p.usage(), 0.0);
    let a = p.allocate(3).unwrap();
    assert!((p.usage() - 1.0 / 3.0).abs() < 1e-12);
    let b = p.allocate(6).unwrap();
    assert_eq!(p.usage(), 1.0);
    p.free(&b);
    p.free(&a[..1]);
    // 2 of 9 in use.
    assert!((p.usage() - 2.0 / 9.0).abs() < 1e-12);
    ok(&p);
}

#[test]
fn hash_full_blocks_chains() {
    let toks: Vec<u32> = (0..10).collect();
    let hs = hash_full_blocks(&toks, 4);
    assert_eq!(hs.len(), 2);
    assert_eq!(hs[0], BlockHash::chain(None, &toks[0..4]));
    assert_eq!(hs[1], BlockHash::chain(Some(hs[0]), &toks[4..8]));
    // The chained hash differs from hashing the second block alone.
    assert_ne!(hs[1], BlockHash::chain(None, &toks[4..8]));
    assert_ne!(hs[0], hs[1]);
    // The trailing partial block is ignored; block_size 0 yields nothing.
    assert_eq!(hash_full_blocks(&toks[..8], 4), hs);
    assert!(hash_full_blocks(&toks[..3], 4).is_empty());
    assert!(hash_full_blocks(&toks, 0).is_empty());
    // Same tokens after a different prefix hash differently.
    let mut other = toks.clone();
    other[0] = 99;
    assert_ne!(hash_full_blocks(&other, 4)[1], hs[1]);
}

#[test]
fn block_hash_is_deterministic() {
    let toks = [151_643u32, 9_707, 11, 1_879, 374, 498, 30, 0];
    let a = BlockHash::chain(None, &toks);
    let b = BlockHash::chain(None, &toks);
    assert_eq!(a, b);
    assert_eq!(BlockHash::chain(Some(a), &toks[..3]), BlockHash::chain(Some(b), &toks[..3]));
    // Both 64-bit halves are populated and differ (independent prefixes).
    assert_ne!(a.0 >> 64, a.0 & u128::from(u64::MAX));
    // Tokens past the internal batch size (64) are all hashed.
    let long: Vec<u32> = (0..200).collect();
    let mut long2 = long.clone();
    long2[199] = 7;
    assert_ne!(BlockHash::chain(None, &long), BlockHash::chain(None, &long2));
    // Length framing: [] vs [0].
    assert_ne!(BlockHash::chain(None, &[]), BlockHash::chain(None, &[0]));
}

#[test]
fn check_invariants_detects_corruption() {
    let base = {
        let mut p = pool(6, 1, true);
        let a = p.allocate(2).unwrap();
        p.cache_block(a[0], BlockHash(1));
        p.free(&[a[0]]);
        p
    };
    ok(&base);

    let mut p = base.clone();
    p.ref_cnt[1] = 1; // cached free block now also referenced
    assert!(p.check_invariants().is_err());

    let mut p = base.clone();
    p.free_count += 1;
    assert!(p.check_invariants().unwrap_err().contains("free_count"));

    let mut p = base.clone();
    let t = p.tail as usize;
    p.next[t] = p.head; // cycle
    assert!(p.check_invariants().is_err());

    let mut p = base.clone();
    p.ref_cnt[2] = 0; // referenced block dropped without being listed
    assert!(p.check_invariants().is_err());

    let mut p = base.clone();
    p.hash[3] = Some(BlockHash(2)); // hash without map entry
    assert!(p.check_invariants().is_err());

    let mut p = base.clone();
    p.cached.insert(BlockHash(3), 4); // map entry without hash
    assert!(p.check_invariants().is_err());

    let mut p = base.clone();
    p.next[0] = 1; // null block linked
    assert!(p.check_invariants().is_err());

    let mut p = base;
    let h = p.head as usize;
    p.prev[h] = 5; // prev/next no longer mirror
    assert!(p.check_invariants().is_err());
}

/// Misuse is ignored in release builds (it trips a debug_assert in debug builds).
#[cfg(not(debug_assertions))]
#[test]
fn misuse_is_ignored_in_release() {
    let mut p = pool(4, 2, true);
    let a = p.allocate(1).unwrap();
    p.free(&[BlockPool::NULL_BLOCK, 99]);
    p.free(&a);
    p.free(&a); // double free
    p.touch(&[BlockPool::NULL_BLOCK, 99]);
    p.cache_block(BlockPool::NULL_BLOCK, BlockHash(1));
    p.cache_block(99, BlockHash(1));
    p.cache_block(a[0], BlockHash(1)); // free block
    assert_eq!(p.num_free_blocks(), 3);
    assert_eq!(p.num_cached_blocks(), 0);
    assert_eq!(p.ref_count(BlockPool::NULL_BLOCK), 0);
    ok(&p);
}

#[cfg(debug_assertions)]
#[test]
#[should_panic(expected = "double free")]
fn double_free_panics_in_debug() {
    let mut p = pool(4, 2, true);
    let a = p.allocate(1).unwrap();
    p.free(&a);
    p.free(&a);
}

// ---------------------------------------------------------------------------------------
// Model-based property test.
// ---------------------------------------------------------------------------------------

#[derive(Debug, Clone)]
enum Op {
    /// Start a sequence whose prompt is a prefix (`cut`) of a past prompt (`base`) plus
    /// `suffix`; with `use_cache`, look the prompt's full blocks up and touch the hits.
    Start { base: Option<usize>, cut: usize, suffix: Vec<u32>, use_cache: bool },
    /// Append tokens to a sequence, allocating (and copy-on-writing shared partial blocks).
    Append { seq: usize, tokens: Vec<u32> },
    /// Fork a sequence: the new one shares all its blocks.
    Fork { seq: usize },
    /// Finish a sequence: free its blocks in reverse.
    Free { seq: usize },
    /// Preempt the newest sequence.
    Preempt,
}

struct Seq {
    tokens: Vec<u32>,
    blocks: Vec<BlockId>,
    hashes: Vec<BlockHash>,
}

/// Drives a `BlockPool` and a naive reference model side by side.
struct Model {
    pool: BlockPool,
    seqs: Vec<Seq>,
    /// Past prompts / sequences, used to build prompts that share prefixes.
    history: Vec<Vec<u32>>,
    /// Expected ref counts.
    rc: Vec<u32>,
    /// Expected free list, head first.
    free_q: VecDeque<BlockId>,
    /// Expected cache map.
    cache: HashMap<BlockHash, BlockId>,
    /// Tokens written into each block since it was last allocated.
    content: Vec<Vec<u32>>,
    /// Prefix-cache hit blocks seen so far.
    hits: usize,
}

impl Model {
    fn new(num_blocks: usize, block_size: usize, caching: bool) -> Self {
        Self {
            pool: pool(num_blocks, block_size, caching),
            seqs: Vec::new(),
            history: Vec::new(),
            rc: vec![0; num_blocks],
            free_q: (1..num_blocks as BlockId).collect(),
            cache: HashMap::new(),
            content: vec![Vec::new(); num_blocks],
            hits: 0,
        }
    }

    fn bs(&self) -> usize {
        self.pool.block_size()
    }

    fn allocate(&mut self, n: usize) -> Option<Vec<BlockId>> {
        let got = self.pool.allocate(n);
        if n > self.free_q.len() {
            assert_eq!(got, None, "allocate({n}) with {} free", self.free_q.len());
            return None;
        }
        let want: Vec<BlockId> = self.free_q.drain(..n).collect();
        assert_eq!(got.as_ref(), Some(&want), "allocate({n}) order");
        for &b in &want {
            self.cache.retain(|_, v| *v != b);
            self.content[b as usize].clear();
            self.rc[b as usize] = 1;
        }
        got
    }

    fn free(&mut self, blocks: &[BlockId]) {
        self.pool.free(blocks);
        for &b in blocks {
            self.rc[b as usize] -= 1;
            if self.rc[b as usize] == 0 {
                self.free_q.push_back(b);
            }
        }
    }

    fn touch(&mut self, blocks: &[BlockId]) {
        self.pool.touch(blocks);
        for &b in blocks {
            if self.rc[b as usize] == 0 {
                self.free_q.retain(|&x| x != b);
            }
            self.rc[b as usize] += 1;
        }
    }

    fn cache_block(&mut self, b: BlockId, h: BlockHash) {
        assert_eq!(self.content[b as usize].len(), self.bs(), "caching a non-full block");
        self.pool.cache_block(b, h);
        if self.pool.prefix_caching() && !self.cache.contains_key(&h) && !self.cache.values().any(|&v| v == b) {
            self.cache.insert(h, b);
        }
    }

    fn lookup(&self, hashes: &[BlockHash]) -> Vec<BlockId> {
        let got = self.pool.lookup(hashes);
        let want: Vec<BlockId> = if self.pool.prefix_caching() {
            hashes.iter().map_while(|h| self.cache.get(h).copied()).collect()
        } else {
            Vec::new()
        };
        assert_eq!(got, want, "lookup");
        got
    }

    fn apply(&mut self, op: &Op) {
        match op {
            Op::Start { base, cut, suffix, use_cache } => self.start(*base, *cut, suffix, *use_cache),
            Op::Append { seq, tokens } => {
                if !self.seqs.is_empty() {
                    let i = seq % self.seqs.len();
                    self.append(i, tokens);
                }
            }
            Op::Fork { seq } => {
                if !self.seqs.is_empty() {
                    let i = seq % self.seqs.len();
                    let blocks = self.seqs[i].blocks.clone();
                    self.touch(&blocks);
                    let s = &self.seqs[i];
                    let forked = Seq { tokens: s.tokens.clone(), blocks, hashes: s.hashes.clone() };
                    self.seqs.push(forked);
                }
            }
            Op::Free { seq } => {
                if !self.seqs.is_empty() {
                    let i = seq % self.seqs.len();
                    self.finish(i);
                }
            }
            Op::Preempt => {
                if !self.seqs.is_empty() {
                    self.finish(self.seqs.len() - 1);
                }
            }
        }
    }

    fn finish(&mut self, i: usize) {
        let s = self.seqs.remove(i);
        let rev: Vec<BlockId> = s.blocks.iter().rev().copied().collect();
        self.free(&rev);
        self.history.push(s.tokens);
    }

    fn start(&mut self, base: Option<usize>, cut: usize, suffix: &[u32], use_cache: bool) {
        let bs = self.bs();
        let mut prompt = match base {
            Some(k) if !self.history.is_empty() => {
                let h = &self.history[k % self.history.len()];
                h[..cut % (h.len() + 1)].to_vec()
            }
            _ => Vec::new(),
        };
        prompt.extend_from_slice(suffix);
        self.history.push(prompt.clone());
        let hashes = hash_full_blocks(&prompt, bs);
        let hits = if use_cache { self.lookup(&hashes) } else { Vec::new() };
        for (i, &b) in hits.iter().enumerate() {
            assert_eq!(
                self.content[b as usize],
                prompt[i * bs..(i + 1) * bs],
                "prefix-cache hit on block {b} with different tokens"
            );
            assert_eq!(self.pool.block_hash(b), Some(hashes[i]));
        }
        self.touch(&hits);
        let need = prompt.len().div_ceil(bs) - hits.len();
        let Some(new) = self.allocate(need) else {
            let rev: Vec<BlockId> = hits.iter().rev().copied().collect();
            self.free(&rev);
            return;
        };
        let nhits = hits.len();
        self.hits += nhits;
        let mut blocks = hits;
        blocks.extend(new);
        for (pos, &t) in prompt.iter().enumerate().skip(nhits * bs) {
            self.content[blocks[pos / bs] as usize].push(t);
        }
        for (i, &h) in hashes.iter().enumerate().skip(nhits) {
            self.cache_block(blocks[i], h);
        }
        self.seqs.push(Seq { tokens: prompt, blocks, hashes });
    }

    fn append(&mut self, i: usize, tokens: &[u32]) {
        let bs = self.bs();
        for &t in tokens {
            let len = self.seqs[i].tokens.len();
            let nblocks = self.seqs[i].blocks.len();
            if len == nblocks * bs {
                let Some(new) = self.allocate(1) else { return };
                self.seqs[i].blocks.extend(new);
            } else {
                let last = self.seqs[i].blocks[nblocks - 1];
                if self.rc[last as usize] > 1 {
                    // Copy-on-write of a shared partial block.
                    let Some(new) = self.allocate(1) else { return };
                    let copy = self.content[last as usize].clone();
                    self.content[new[0] as usize] = copy;
                    self.free(&[last]);
                    self.seqs[i].blocks[nblocks - 1] = new[0];
                }
            }
            let last = *self.seqs[i].blocks.last().unwrap();
            self.content[last as usize].push(t);
            self.seqs[i].tokens.push(t);
            if (len + 1).is_multiple_of(bs) {
                let parent = self.seqs[i].hashes.last().copied();
                let h = BlockHash::chain(parent, &self.seqs[i].tokens[len + 1 - bs..]);
                self.seqs[i].hashes.push(h);
                self.cache_block(last, h);
            }
        }
    }

    fn check(&self) {
        let p = &self.pool;
        ok(p);
        assert_eq!(free_list(p), Vec::from(self.free_q.clone()), "free-list order");
        assert_eq!(p.num_free_blocks(), self.free_q.len());
        assert_eq!(p.cached, self.cache, "cache map");
        assert_eq!(p.num_cached_blocks(), self.cache.len());
        let mut holders = vec![0u32; p.num_blocks()];
        for s in &self.seqs {
            for &b in &s.blocks {
                holders[b as usize] += 1;
            }
        }
        let distinct = holders.iter().filter(|&&c| c > 0).count();
        assert_eq!(p.num_free_blocks() + distinct, p.usable_blocks());
        for (b, &held) in holders.iter().enumerate() {
            assert_eq!(p.ref_count(b as BlockId), held, "ref_cnt of block {b}");
            assert_eq!(self.rc[b], held, "model ref_cnt of block {b}");
        }
        let bs = self.bs();
        for s in &self.seqs {
            assert_eq!(s.blocks.len(), s.tokens.len().div_ceil(bs));
            assert_eq!(s.hashes, hash_full_blocks(&s.tokens, bs));
            for (j, &b) in s.blocks.iter().enumerate() {
                let end = ((j + 1) * bs).min(s.tokens.len());
                assert_eq!(self.content[b as usize], s.tokens[j * bs..end], "block {b} data");
            }
        }
        for (&h, &b) in &self.cache {
            assert_eq!(self.content[b as usize].len(), bs, "cached block {b} not full");
            assert_eq!(p.block_hash(b), Some(h));
        }
        let want_usage = 1.0 - p.num_free_blocks() as f64 / p.usable_blocks() as f64;
        assert!((p.usage() - want_usage).abs() < 1e-12);
    }

    fn finish_all(&mut self) {
        while !self.seqs.is_empty() {
            self.finish(0);
            self.check();
        }
        assert_eq!(self.pool.num_free_blocks(), self.pool.usable_blocks());
        assert_eq!(self.pool.usage(), 0.0);
    }
}

fn op_strategy() -> impl Strategy<Value = Op> {
    let tokens = |max| proptest::collection::vec(0u32..2, 0..=max);
    prop_oneof![
        4 => (proptest::option::weighted(0.7, any::<usize>()), any::<usize>(), tokens(6), any::<bool>())
            .prop_map(|(base, cut, suffix, use_cache)| Op::Start { base, cut, suffix, use_cache }),
        4 => (any::<usize>(), proptest::collection::vec(0u32..2, 1..=6))
            .prop_map(|(seq, tokens)| Op::Append { seq, tokens }),
        1 => any::<usize>().prop_map(|seq| Op::Fork { seq }),
        2 => any::<usize>().prop_map(|seq| Op::Free { seq }),
        1 => Just(Op::Preempt),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(1000))]

    #[test]
    fn prop_random_ops_match_model_and_keep_invariants(
        num_blocks in 2usize..=24,
        block_size in 1usize..=4,
        caching in any::<bool>(),
        ops in proptest::collection::vec(op_strategy(), 1..400),
    ) {
        let mut m = Model::new(num_blocks, block_size, caching);
        m.check();
        for op in &ops {
            m.apply(op);
            m.check();
        }
        m.finish_all();
        if !caching {
            prop_assert_eq!(m.hits, 0);
        }
    }
}

#[test]
fn model_scenario_hits_the_prefix_cache() {
    let mut m = Model::new(12, 2, true);
    let ops = [
        Op::Start { base: None, cut: 0, suffix: vec![1, 0, 1, 1, 0], use_cache: true },
        Op::Append { seq: 0, tokens: vec![1, 1, 0] },
        Op::Free { seq: 0 },
        // Same prompt again: its 2 full blocks are free but still cached.
        Op::Start { base: Some(0), cut: 5, suffix: vec![], use_cache: true },
        Op::Fork { seq: 0 },
        Op::Append { seq: 1, tokens: vec![0] }, // copy-on-write of the shared partial block
        // [1,0][1,1][0,0]: all three hit, the last one being the fork's copy-on-write block.
        Op::Start { base: Some(0), cut: 4, suffix: vec![0, 0], use_cache: true },
        Op::Preempt,
        Op::Free { seq: 0 },
    ];
    for op in &ops {
        m.apply(op);
        m.check();
    }
    assert_eq!(m.hits, 2 + 3, "prefix-cache hit blocks");
    m.finish_all();
}
