use super::*;

pub(super) fn pool(num_blocks: usize, block_size: usize, caching: bool) -> BlockPool {
    BlockPool::new(num_blocks, block_size, caching).unwrap()
}

/// The free list, head to tail.
pub(super) fn free_list(p: &BlockPool) -> Vec<BlockId> {
    let mut out = Vec::new();
    let mut cur = p.head;
    while cur != NONE {
        out.push(cur);
        cur = p.next[cur as usize];
    }
    out
}

pub(super) fn ok(p: &BlockPool) {
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
    let mut p = pool(7, 1, true);
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
fn without_a_cache_the_freed_last_is_reused_first() {
    let mut p = pool(7, 1, false);
    let a = p.allocate(3).unwrap(); // 1 2 3
    let b = p.allocate(3).unwrap(); // 4 5 6
    p.free(&b);
    let mut rev = a.clone();
    rev.reverse();
    p.free(&rev); // the stack, top first: 1 2 3 6 5 4
    assert_eq!(free_list(&p), vec![1, 2, 3, 6, 5, 4]);
    assert_eq!(p.allocate(4), Some(vec![1, 2, 3, 6]));
    p.free(&[2]);
    assert_eq!(p.allocate(2), Some(vec![2, 5]));
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
    assert_eq!(free_list(&p), vec![1, 2, 3]); // without a cache, a stack: the last freed on top
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
    assert!(p.check_invariants().unwrap_err().0.contains("free_count"));

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
