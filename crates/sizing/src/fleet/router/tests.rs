use super::*;

fn prompt(prefix: u32, len: usize, tail: u32) -> Vec<u32> {
    (0..len).map(|i| if i < 64 { prefix * 1000 + i as u32 } else { tail * 7 + i as u32 }).collect()
}

#[test]
fn round_robin_cycles_and_random_stays_in_range() {
    let mut r = Router::new(Policy::RoundRobin, 3, 0);
    let order: Vec<usize> = (0..7).map(|_| r.route(&[1, 2, 3]).0).collect();
    assert_eq!(order, [0, 1, 2, 0, 1, 2, 0]);
    let mut r = Router::new(Policy::Random, 4, 7);
    let mut seen = [0usize; 4];
    for _ in 0..400 {
        seen[r.route(&[1]).0] += 1;
    }
    assert!(seen.iter().all(|&c| c > 60), "{seen:?}");
}

#[test]
fn least_loaded_reads_the_last_scrape_not_the_present() {
    let mut r = Router::new(Policy::LeastLoaded, 3, 0);
    // Scores 4·waiting + running: 2·4 + 1 = 9, 0 + 5 = 5, 1·4 + 2 = 6.
    r.scrape(&[Load { running: 1, waiting: 2 }, Load { running: 5, waiting: 0 }, Load { running: 2, waiting: 1 }]);
    // Until the next scrape every request goes to replica 1, as a real router's would.
    assert_eq!((0..5).map(|_| r.route(&[1]).0).collect::<Vec<_>>(), [1; 5]);
    r.scrape(&[Load::default(), Load { running: 9, waiting: 0 }, Load::default()]);
    assert_eq!(r.route(&[1]).0, 0);
}

#[test]
fn power_of_two_takes_the_less_loaded_of_its_pair() {
    let mut r = Router::new(Policy::PowerOfTwo, 2, 3);
    r.scrape(&[Load { running: 50, waiting: 10 }, Load::default()]);
    // Each draw of two replicas of two is {0,1} (to 1), {1,1} (to 1) or {0,0} (to 0): a
    // quarter at most to the loaded one.
    let to_loaded = (0..400).filter(|_| r.route(&[1]).0 == 0).count();
    assert!((60..=140).contains(&to_loaded), "{to_loaded}");
}

#[test]
fn cache_aware_keeps_a_prefix_on_its_replica_until_the_queues_tip() {
    let mut r = Router::new(Policy::cache_aware(), 2, 0);
    // Two system prompts of 64 tokens, answers of 16 more: the first of each goes to the
    // shortest queue, every later one follows its prefix (64 of 80 tokens = 0.8 > 0.3).
    let (a, _) = r.route(&prompt(1, 80, 0));
    let (b, _) = r.route(&prompt(2, 80, 0));
    assert_ne!(a, b);
    for i in 1..10 {
        let (x, hit) = r.route(&prompt(1, 80, i));
        assert_eq!(x, a);
        assert!((hit - 0.8).abs() < 1e-12, "{hit}");
        assert_eq!(r.route(&prompt(2, 80, i)).0, b);
    }
    // b's ten requests end; a keeps its ten. Prompts of a's prefix go on to a until it has
    // 65 in flight to b's 0 (65 − 0 > 64 and 65 > 1.5 × 0: imbalanced), and the next goes
    // to the shortest queue, b, whatever its prefix.
    for _ in 0..10 {
        r.finished(b);
    }
    let followed = (0..100).take_while(|&i| r.route(&prompt(1, 80, 100 + i)).0 == a).count();
    assert_eq!(followed, 55);
    // Requests ending bring the prefix rule back: both replicas now hold a's prefix (b took
    // one of its prompts), so the next one matches 0.8 wherever it goes, not by the queues.
    for _ in 0..60 {
        r.finished(a);
    }
    let (_, hit) = r.route(&prompt(1, 80, 1000));
    assert!((hit - 0.8).abs() < 1e-12, "{hit}");
}

#[test]
fn a_tree_keeps_its_most_recent_blocks() {
    let mut t = Tree::default();
    let mut clock = 0;
    t.insert(&[1, 2, 3], &mut clock, 4);
    t.insert(&[4, 5], &mut clock, 4);
    // Five blocks in a tree of four: the oldest (1) goes, so the chain 1-2-3 matches nothing.
    assert_eq!(t.used.len(), 4);
    assert_eq!(t.matched(&[1, 2, 3]), 0);
    assert_eq!(t.matched(&[4, 5, 6]), 2);
    assert_eq!(block_hashes(&[7; 40]).len(), 2, "whole blocks only");
    assert_ne!(block_hashes(&[7; 32])[1], block_hashes(&[7; 16])[0], "a block's hash carries its prefix");
}
