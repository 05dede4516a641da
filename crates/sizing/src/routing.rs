//! Where a step's tokens go in a mixture of experts, in expectation: the distinct experts they
//! touch (whose weights the step must read), the token-expert assignments (the expert FLOPs),
//! both on the busiest expert-parallel rank, and the ranks a token is dispatched to (the
//! all-to-all bytes).
//!
//! Tokens route independently. Under uniform routing each token picks `k` distinct experts of
//! `N` at random, so an expert is missed by one token with probability 1 − k/N and by `B`
//! tokens with (1 − k/N)^B: the step touches N·(1 − (1 − k/N)^B) experts (BLIS,
//! `sim/latency/roofline.go`), `k` at B = 1 and all `N` as B grows. Skewed routing gives
//! expert `i` (by popularity) a share ∝ (i + 1)^−s, a power law as AIConfigurator's skewed
//! workloads do; its per-token hit probability is k × that share, capped at 1. Experts are
//! placed on ranks round-robin by popularity (what a balancer such as DeepSeek's EPLB aims
//! at); the busiest rank sets the step, as every rank waits for the others in the combine.

use serde::{Deserialize, Serialize};

/// How tokens choose experts.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
pub struct Routing {
    /// Routed experts of a sparse layer (N).
    pub experts: usize,
    /// Experts per token (k).
    pub top_k: usize,
    /// Power-law exponent of expert popularity; 0 is uniform.
    pub skew: f64,
    /// DeepSeek's group-limited routing: a token keeps `groups_kept` of `groups` groups of
    /// experts and picks its `k` among theirs (1 and 1: no groups).
    pub groups: usize,
    pub groups_kept: usize,
}

/// Expected load of one expert-parallel rank in one sparse layer of one step.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct RankLoad {
    /// Distinct experts of the rank the step's tokens reach (their weights are read).
    pub touched: f64,
    /// Token-expert assignments the rank computes.
    pub assignments: f64,
}

impl Routing {
    /// Uniform, ungrouped routing of `top_k` among `experts`.
    pub fn uniform(experts: usize, top_k: usize) -> Self {
        Self { experts, top_k, skew: 0.0, groups: 1, groups_kept: 1 }
    }

    /// Per-token probability of reaching each expert, most popular first, summing to k: the
    /// power-law shares scaled to k, any above 1 capped there and their excess handed to the
    /// others in proportion to their shares (a token reaches k distinct experts).
    pub fn hit_probabilities(&self) -> Vec<f64> {
        let n = self.experts.max(1);
        let k = self.top_k.min(n) as f64;
        let weights: Vec<f64> = (0..n).map(|i| ((i + 1) as f64).powf(-self.skew)).collect();
        let mut q = vec![0.0; n];
        let mut capped = vec![false; n];
        // Each round caps at least one more expert or ends: at most n rounds.
        for _ in 0..n {
            let left = k - capped.iter().filter(|&&c| c).count() as f64;
            let free: f64 = weights.iter().zip(&capped).filter(|(_, &c)| !c).map(|(w, _)| w).sum();
            let mut again = false;
            for i in 0..n {
                q[i] = if capped[i] { 1.0 } else { left * weights[i] / free };
                if q[i] > 1.0 {
                    capped[i] = true;
                    again = true;
                }
            }
            if !again {
                break;
            }
        }
        q.iter().map(|&x| x.min(1.0)).collect()
    }

    /// The busiest of `ranks` ranks (experts `i ≡ r mod ranks` on rank `r`) when `tokens`
    /// tokens route. Fractional token counts (an average batch) are allowed.
    pub fn busiest_rank(&self, tokens: f64, ranks: usize) -> RankLoad {
        let q = if self.skew == 0.0 { Vec::new() } else { self.hit_probabilities() };
        self.busiest_rank_of(&q, tokens, ranks)
    }

    /// [`Routing::busiest_rank`] with the skewed routing's [`Routing::hit_probabilities`]
    /// computed once by the caller (they do not change from step to step); `q` is unread
    /// under uniform routing.
    pub fn busiest_rank_of(&self, q: &[f64], tokens: f64, ranks: usize) -> RankLoad {
        let ranks = ranks.max(1);
        let tokens = tokens.max(0.0);
        if self.skew == 0.0 {
            let (n, k) = (self.experts.max(1) as f64, self.top_k.min(self.experts.max(1)) as f64);
            let per_rank = n / ranks as f64;
            return RankLoad {
                touched: per_rank * (1.0 - (1.0 - k / n).powf(tokens)),
                assignments: tokens * k / ranks as f64,
            };
        }
        let rank = |r: usize| {
            let mine = q.iter().skip(r).step_by(ranks);
            mine.fold(RankLoad { touched: 0.0, assignments: 0.0 }, |acc, &p| RankLoad {
                touched: acc.touched + 1.0 - (1.0 - p).powf(tokens),
                assignments: acc.assignments + tokens * p,
            })
        };
        // Round-robin by popularity puts the most popular expert of every round on rank 0.
        rank(0)
    }

    /// Expected distinct experts all ranks together touch for `tokens` tokens.
    pub fn touched(&self, tokens: f64) -> f64 {
        if self.skew == 0.0 {
            return self.busiest_rank(tokens, 1).touched;
        }
        self.hit_probabilities().iter().map(|p| 1.0 - (1.0 - p).powf(tokens.max(0.0))).sum()
    }

    /// Expected ranks other than its own that one token is dispatched to, of `ranks` ranks
    /// holding `experts / ranks` experts each (routing taken as uniform). With groups that
    /// line up with the ranks (DeepSeek-V3's 8 groups, kept 4, on EP8 or EP16: the node-limited
    /// routing of its paper) a token reaches at most the kept groups' ranks.
    pub fn remote_ranks_per_token(&self, ranks: usize) -> f64 {
        if ranks <= 1 {
            return 0.0;
        }
        let (n, k) = (self.experts, self.top_k.min(self.experts));
        let (g, kept) = (self.groups.max(1), self.groups_kept.max(1).min(self.groups.max(1)));
        let per_rank = n / ranks;
        let hit = if g > 1 && kept < g && n.is_multiple_of(g) {
            let per_group = n / g;
            let pool = kept * per_group;
            if g.is_multiple_of(ranks) {
                // The rank holds g / ranks whole groups; h of them among the kept ones.
                let mine = g / ranks;
                let miss: f64 = (0..=mine.min(kept))
                    .map(|h| hypergeometric(g, mine, kept, h) * choose_ratio(pool - h * per_group, pool, k))
                    .sum();
                1.0 - miss
            } else if ranks.is_multiple_of(g) {
                // A group spans ranks / g ranks: the rank's group must be kept, and one of the
                // token's experts among the kept groups' must be the rank's.
                kept as f64 / g as f64 * (1.0 - choose_ratio(pool - per_rank, pool, k))
            } else {
                1.0 - choose_ratio(n - per_rank, n, k)
            }
        } else {
            1.0 - choose_ratio(n - per_rank, n, k)
        };
        (ranks - 1) as f64 * hit
    }
}

/// C(a, k) / C(b, k) for a ≤ b: the chance that k distinct picks among b all fall in a.
fn choose_ratio(a: usize, b: usize, k: usize) -> f64 {
    if k > a {
        return 0.0;
    }
    (0..k).map(|j| (a - j) as f64 / (b - j) as f64).product()
}

/// P(h of `draws` picks without replacement among `total` land among `marked`).
fn hypergeometric(total: usize, marked: usize, draws: usize, h: usize) -> f64 {
    let ln_choose = |n: usize, r: usize| -> f64 {
        if r > n {
            return f64::NEG_INFINITY;
        }
        (0..r).map(|j| ((n - j) as f64).ln() - ((j + 1) as f64).ln()).sum()
    };
    let ln = ln_choose(marked, h) + ln_choose(total - marked, draws - h) - ln_choose(total, draws);
    ln.exp()
}

#[cfg(test)]
#[path = "routing/tests.rs"]
mod tests;
