//! Model-based property test of the block pool: random operations on a `BlockPool` and on a
//! naive reference model side by side, the invariants checked after every step.

use super::tests::{free_list, ok, pool};
use super::*;
use proptest::prelude::*;
use std::collections::VecDeque;

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
                // LRU with a prefix cache; a stack (the last freed allocated first) without one.
                if self.pool.prefix_caching() {
                    self.free_q.push_back(b);
                } else {
                    self.free_q.push_front(b);
                }
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
        assert_eq!(p.cached.clone().into_iter().collect::<HashMap<_, _>>(), self.cache, "cache map");
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
