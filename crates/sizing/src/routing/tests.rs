use super::*;

fn deepseek() -> Routing {
    Routing { experts: 256, top_k: 8, skew: 0.0, groups: 8, groups_kept: 4 }
}

#[test]
fn one_token_touches_k_experts_and_many_touch_them_all() {
    let r = deepseek();
    assert!((r.touched(1.0) - 8.0).abs() < 1e-12);
    // 256 · (1 − (248/256)^256) = 255.924
    assert!((r.touched(256.0) - 255.924_414).abs() < 1e-5, "{}", r.touched(256.0));
    assert!((r.touched(1e6) - 256.0).abs() < 1e-9);
    assert_eq!(r.touched(0.0), 0.0);
    // gpt-oss-120b: 128 experts, top 4, 64 tokens: 128 · (1 − (124/128)^64) = 111.22.
    assert!((Routing::uniform(128, 4).touched(64.0) - 111.221_244).abs() < 1e-5);
}

#[test]
fn a_rank_holds_its_share_of_experts_and_assignments() {
    let r = deepseek();
    let one = r.busiest_rank(1.0, 8);
    // 32 experts per rank, 8/256 of them hit by one token: 1 expert, 1 assignment.
    assert!((one.touched - 1.0).abs() < 1e-12 && (one.assignments - 1.0).abs() < 1e-12);
    let many = r.busiest_rank(1e6, 8);
    assert!((many.touched - 32.0).abs() < 1e-9 && (many.assignments - 1e6).abs() < 1e-3);
}

#[test]
fn skew_loads_the_busiest_rank_more_than_uniform_and_keeps_the_total() {
    let uniform = Routing::uniform(128, 4);
    let skewed = Routing { skew: 0.8, ..uniform };
    let total: f64 = skewed.hit_probabilities().iter().sum();
    assert!((total - 4.0).abs() < 1e-9, "no cap bites at s = 0.8: {total}");
    let (u, s) = (uniform.busiest_rank(64.0, 8), skewed.busiest_rank(64.0, 8));
    assert!(s.assignments > u.assignments * 1.1, "{s:?} vs {u:?}");
    // Popular experts are touched anyway, rare ones less: fewer distinct experts in all.
    assert!(skewed.touched(64.0) < uniform.touched(64.0));
    // Single token: k assignments in all, whatever the skew.
    assert!((skewed.busiest_rank(1.0, 1).assignments - 4.0).abs() < 1e-9);
}

#[test]
fn dispatch_reaches_fewer_ranks_under_group_limited_routing() {
    // Ungrouped, EP8: each other rank is missed by all 8 picks with C(224,8)/C(256,8):
    // 7 · (1 − 0.3382) = 4.633 remote ranks per token.
    let flat = Routing { groups: 1, groups_kept: 1, ..deepseek() };
    assert!((flat.remote_ranks_per_token(8) - 4.632_820).abs() < 1e-5, "{}", flat.remote_ranks_per_token(8));
    // Grouped (one group per rank): the rank's group is kept with 1/2, and then one of the 8
    // picks among the 128 kept experts is its with 1 − C(96,8)/C(128,8) = 0.9073:
    // 7 · 0.5 · 0.9073 = 3.175.
    assert!((deepseek().remote_ranks_per_token(8) - 3.175_385).abs() < 1e-5);
    assert_eq!(deepseek().remote_ranks_per_token(1), 0.0);
    // Never more than k destinations, nor more than the other ranks.
    for ranks in [2, 4, 16, 32, 64] {
        let d = deepseek().remote_ranks_per_token(ranks);
        assert!(d > 0.0 && d <= 8.0 && d <= (ranks - 1) as f64, "EP{ranks}: {d}");
    }
    // Group sums are coherent across layouts: EP16 spreads each group over two ranks.
    assert!(deepseek().remote_ranks_per_token(16) > deepseek().remote_ranks_per_token(8));
}

#[test]
fn a_steep_skew_caps_the_hottest_experts_and_keeps_k_per_token() {
    // DeepSeek-V3 at s = 2: the two hottest experts would take 4.87 and 1.22 of a token's 8;
    // capped at 1 each, their excess goes to the rest, and a token still reaches 8.
    let r = Routing { skew: 2.0, ..deepseek() };
    let q = r.hit_probabilities();
    assert!((q.iter().sum::<f64>() - 8.0).abs() < 1e-9, "{}", q.iter().sum::<f64>());
    assert!(q.iter().all(|&p| p <= 1.0) && q[0] == 1.0 && q[1] == 1.0);
    let (u, s) = (deepseek().busiest_rank(64.0, 8), r.busiest_rank(64.0, 8));
    assert!(s.assignments > u.assignments * 1.2, "{s:?} vs {u:?}");
}
