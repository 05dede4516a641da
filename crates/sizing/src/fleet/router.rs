//! The routers production fleets put in front of replicas, as plain state machines: given a
//! request's prompt and what the router knows of the replicas, which replica takes it.
//!
//! - **round-robin** and **random** (seeded): no load signal.
//! - **power-of-two**: two replicas drawn at random, the less loaded of them.
//! - **least-loaded**: the replica of the lowest vLLM data-parallel score, `waiting × 4 +
//!   running`.
//!
//!   Both take the replicas' engine load as last *scraped*. A real router polls `/metrics` or
//!   a load endpoint every few seconds; [`Router::scrape`] is that poll.
//! - **cache-aware** (`sglang-router`'s and `vllm-router`'s `cache_aware`): the router keeps
//!   an approximate tree of what it sent where. A prompt goes to the replica holding the
//!   longest prefix of it when the match is above `threshold` of the prompt; else to the
//!   replica with the fewest requests in flight (the router's own count, always current;
//!   the first on a tie). When those counts are imbalanced — `max − min > balance_abs` and
//!   `max > balance_rel × min` — it goes to the one with the fewest in flight whatever the
//!   match. (sglang-router's documentation says "smallest tree" for the fallback; 0.3.2
//!   takes the shortest queue, as a probe of it in front of goodput serve showed: distinct
//!   prompts sent one at a time all went to the first worker.)
//!
//!   The tree here is of block hashes (16 tokens, chained like the engines' prefix cache)
//!   rather than characters. It is bounded by `max_blocks` per replica, least recently used
//!   evicted first: the role of sglang-router's periodic LRU eviction.

use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};
use serde::{Deserialize, Serialize};
use std::collections::{BTreeMap, HashMap};

/// Tokens per hashed block of the cache-aware tree.
pub const TREE_BLOCK: usize = 16;

/// A routing policy and its settings.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case", tag = "policy")]
pub enum Policy {
    RoundRobin,
    Random,
    PowerOfTwo,
    LeastLoaded,
    CacheAware {
        /// Prefix match share of the prompt above which the best match wins (0.3).
        threshold: f64,
        /// Imbalance: in-flight max − min above this (64) …
        balance_abs: usize,
        /// … and max above this × min (1.5).
        balance_rel: f64,
        /// Blocks each replica's tree keeps.
        max_blocks: usize,
    },
}

impl Policy {
    /// The defaults of `cache_aware` in sglang-router 0.3.2 and vllm-router 0.1.17
    /// (`--cache-threshold 0.3 --balance-abs-threshold 64 --balance-rel-threshold 1.5`).
    pub fn cache_aware() -> Self {
        Policy::CacheAware { threshold: 0.3, balance_abs: 64, balance_rel: 1.5, max_blocks: 1 << 20 }
    }

    /// The policy's name as the routers spell it.
    pub fn name(&self) -> &'static str {
        match self {
            Policy::RoundRobin => "round-robin",
            Policy::Random => "random",
            Policy::PowerOfTwo => "power-of-two",
            Policy::LeastLoaded => "least-loaded",
            Policy::CacheAware { .. } => "cache-aware",
        }
    }
}

/// A replica's engine load as a scrape reports it.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
pub struct Load {
    pub running: usize,
    pub waiting: usize,
}

impl Load {
    /// vLLM's data-parallel load score.
    pub fn score(&self) -> usize {
        self.waiting * 4 + self.running
    }
}

/// One replica's approximate tree: chained block hashes, with the time each was last used.
#[derive(Debug, Default)]
struct Tree {
    used: HashMap<u64, u64>,
    by_age: BTreeMap<u64, u64>,
}

impl Tree {
    /// Blocks of `hashes` from the first held before the first missing.
    fn matched(&self, hashes: &[u64]) -> usize {
        hashes.iter().take_while(|h| self.used.contains_key(h)).count()
    }

    fn insert(&mut self, hashes: &[u64], clock: &mut u64, max: usize) {
        for h in hashes {
            *clock += 1;
            if let Some(old) = self.used.insert(*h, *clock) {
                self.by_age.remove(&old);
            }
            self.by_age.insert(*clock, *h);
        }
        while self.used.len() > max {
            let Some((_, h)) = self.by_age.pop_first() else { break };
            self.used.remove(&h);
        }
    }
}

/// The chained hashes of a prompt's whole blocks.
pub fn block_hashes(prompt: &[u32]) -> Vec<u64> {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    prompt
        .chunks_exact(TREE_BLOCK)
        .map(|block| {
            for &t in block {
                h = (h ^ u64::from(t)).wrapping_mul(0x0100_0000_01b3);
            }
            h = h.rotate_left(17) ^ 0x9e37_79b9_7f4a_7c15;
            h
        })
        .collect()
}

/// A router over `n` replicas.
#[derive(Debug)]
pub struct Router {
    policy: Policy,
    next: usize,
    rng: SmallRng,
    /// Requests sent and not yet ended, per replica (the router's own count).
    in_flight: Vec<usize>,
    /// The engine loads of the last scrape.
    scraped: Vec<Load>,
    trees: Vec<Tree>,
    clock: u64,
    /// Replicas that take new requests.
    active: Vec<bool>,
}

impl Router {
    pub fn new(policy: Policy, n: usize, seed: u64) -> Self {
        let n = n.max(1);
        Self {
            policy,
            next: 0,
            rng: SmallRng::seed_from_u64(seed),
            in_flight: vec![0; n],
            scraped: vec![Load::default(); n],
            trees: (0..n).map(|_| Tree::default()).collect(),
            clock: 0,
            active: vec![true; n],
        }
    }

    pub fn replicas(&self) -> usize {
        self.in_flight.len()
    }

    /// Requests sent to each replica and not yet ended.
    pub fn in_flight(&self) -> &[usize] {
        &self.in_flight
    }

    /// The replicas' engine loads, as a poll of them reads them now.
    pub fn scrape(&mut self, loads: &[Load]) {
        for (s, l) in self.scraped.iter_mut().zip(loads) {
            *s = *l;
        }
    }

    /// A request of `prompt` ended on `replica`.
    pub fn finished(&mut self, replica: usize) {
        if let Some(n) = self.in_flight.get_mut(replica) {
            *n = n.saturating_sub(1);
        }
    }

    /// Whether replica `r` takes new requests (an autoscaler starting or draining it).
    pub fn set_active(&mut self, r: usize, active: bool) {
        if let Some(a) = self.active.get_mut(r) {
            *a = active;
        }
    }

    /// The replicas that take new requests (all, if none is marked active).
    fn candidates(&self) -> Vec<usize> {
        let ids: Vec<usize> = (0..self.replicas()).filter(|&i| self.active[i]).collect();
        if ids.is_empty() {
            (0..self.replicas()).collect()
        } else {
            ids
        }
    }

    /// The replica that takes a request of `prompt`, and the share of its prompt the
    /// router's tree held there (cache-aware only; 0 otherwise).
    pub fn route(&mut self, prompt: &[u32]) -> (usize, f64) {
        let ids = self.candidates();
        let n = ids.len();
        let (r, matched) = match self.policy.clone() {
            Policy::RoundRobin => {
                self.next = self.next.wrapping_add(1);
                (ids[(self.next - 1) % n], 0.0)
            }
            Policy::Random => (ids[self.rng.random_range(0..n)], 0.0),
            Policy::PowerOfTwo => {
                let (a, b) = (ids[self.rng.random_range(0..n)], ids[self.rng.random_range(0..n)]);
                (if self.scraped[b].score() < self.scraped[a].score() { b } else { a }, 0.0)
            }
            Policy::LeastLoaded => {
                (ids.iter().copied().min_by_key(|&i| (self.scraped[i].score(), i)).unwrap_or(0), 0.0)
            }
            Policy::CacheAware { threshold, balance_abs, balance_rel, max_blocks } => {
                let hashes = block_hashes(prompt);
                let r = self.cache_aware(&ids, prompt.len(), &hashes, (threshold, balance_abs, balance_rel));
                let matched = self.trees[r].matched(&hashes) as f64 * TREE_BLOCK as f64 / prompt.len().max(1) as f64;
                self.trees[r].insert(&hashes, &mut self.clock, max_blocks);
                (r, matched.min(1.0))
            }
        };
        self.in_flight[r] += 1;
        (r, matched)
    }

    /// sglang-router's choice among `ids`: shortest queue when imbalanced, else the best
    /// match above the threshold, else the shortest queue (the first on a tie).
    fn cache_aware(
        &self,
        ids: &[usize],
        len: usize,
        hashes: &[u64],
        (threshold, abs, rel): (f64, usize, f64),
    ) -> usize {
        let load = |i: &usize| self.in_flight[*i];
        let (min, max) = (ids.iter().map(load).min().unwrap_or(0), ids.iter().map(load).max().unwrap_or(0));
        if max - min > abs && max as f64 > rel * min as f64 {
            return ids.iter().copied().min_by_key(|&i| (self.in_flight[i], i)).unwrap_or(0);
        }
        let best =
            ids.iter().copied().max_by_key(|&i| (self.trees[i].matched(hashes), std::cmp::Reverse(i))).unwrap_or(0);
        let rate = self.trees[best].matched(hashes) as f64 * TREE_BLOCK as f64 / len.max(1) as f64;
        if rate > threshold {
            best
        } else {
            ids.iter().copied().min_by_key(|&i| (self.in_flight[i], i)).unwrap_or(0)
        }
    }
}

#[cfg(test)]
#[path = "router/tests.rs"]
mod tests;
