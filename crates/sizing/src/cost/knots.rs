//! The knots of the cost model's tables and their hat functions (see [`super::Term`]).

use super::Term;

/// Knots 1–5, then every power of two and the next count, and last the first power of two at
/// or above `max`.
pub(super) fn knots(max: usize) -> Vec<u32> {
    let top = max.max(1).next_power_of_two() as u32;
    let mut out: Vec<u32> = (1..=5).filter(|&k| k <= top.max(1)).collect();
    let mut p = 8;
    while p < top {
        out.extend([p, p + 1]);
        p *= 2;
    }
    if top > 5 {
        out.push(top);
    }
    out.sort_unstable();
    out.dedup();
    out
}

/// The first context knot: below it a step's K/V is small against any cache.
const FIRST_CONTEXT_KNOT: u32 = 512;

/// Every power of two from [`FIRST_CONTEXT_KNOT`] to the first at or above `max`.
pub(super) fn context_knots(max: usize) -> Vec<u32> {
    let top = (max.max(1).next_power_of_two() as u64).clamp(FIRST_CONTEXT_KNOT as u64, 1 << 31) as u32;
    std::iter::successors(Some(FIRST_CONTEXT_KNOT), |k| (*k < top).then(|| k * 2)).collect()
}

/// The hat function of knot `k` among the sorted `knots` at `x`: 1 at `k`, falling linearly
/// to 0 at its neighbouring knots (to 0 at `x = 0` below the first); the last knot keeps
/// rising beyond itself (`x / k`).
pub(super) fn hat(k: u32, knots: &[u32], x: f64) -> f64 {
    if x <= 0.0 {
        return 0.0;
    }
    let i = knots.iter().position(|&n| n == k).unwrap_or(0);
    let kf = k as f64;
    if x <= kf {
        let lo = if i == 0 { 0.0 } else { knots[i - 1] as f64 };
        return ((x - lo) / (kf - lo)).max(0.0);
    }
    match knots.get(i + 1) {
        Some(&hi) => ((hi as f64 - x) / (hi as f64 - kf)).max(0.0),
        None => x / kf,
    }
}

/// Batches 1, 2, 3, 4, then every power of two to the first at or above `max` (the CPU engine
/// changes how it splits a decode's attention at 4 rows per thread).
pub(super) fn batch_knots(max: usize) -> Vec<u32> {
    let top = max.max(1).next_power_of_two().max(4) as u32;
    let mut out = vec![1, 2, 3, 4];
    out.extend(std::iter::successors(Some(8u32), |k| (*k < top).then(|| k * 2)).take_while(|k| *k <= top));
    out
}

/// The context-per-sequence knots of the decode-attention table: every power of 4 from 256
/// below `max`, then `max` itself (the longest measured: a knot beyond it would be priced by
/// one length's steps split between two knots). The rate is flat below 256: a table cell per
/// batch and length beside the tokens table's cost per batch leaves one of them free at each
/// batch unless the shortest lengths share a rate (the grid measures 64 and 256 for that).
pub(super) fn seq_context_knots(max: usize) -> Vec<u32> {
    let max = u32::try_from(max).unwrap_or(u32::MAX);
    let mut out: Vec<u32> =
        std::iter::successors(Some(256u32), |k| k.checked_mul(4)).take_while(|&k| k < max).collect();
    if max > 256 || out.is_empty() {
        out.push(max.max(256));
    }
    out
}

/// The hat of knot `k` among the sorted `knots` at `x`, flat beyond the outer knots: 1 at
/// `k` and at every `x` beyond `k` when `k` is the first or the last, falling linearly to 0 at
/// its neighbouring knots. Over all knots the hats add to 1 (an interpolated rate).
pub(super) fn clamped_hat(k: u32, knots: &[u32], x: f64) -> f64 {
    let Some(i) = knots.iter().position(|&n| n == k) else { return 0.0 };
    let kf = k as f64;
    if x <= kf {
        return match i.checked_sub(1).map(|j| knots[j] as f64) {
            None => 1.0,
            Some(lo) => ((x - lo) / (kf - lo)).max(0.0),
        };
    }
    match knots.get(i + 1) {
        Some(&hi) => ((hi as f64 - x) / (hi as f64 - kf)).max(0.0),
        None => 1.0,
    }
}

/// The knots of [`Term::AfterPrefill`]'s table: steps since the last prefill.
pub const AFTER_PREFILL_KNOTS: [u32; 8] = [1, 2, 3, 4, 6, 8, 12, 16];

/// The weight of after-prefill knot `j` at `since` steps after a prefill: 1 at the knot,
/// falling linearly to 0 at its neighbouring knots (at 0 below the first, at twice the last).
pub(super) fn after_prefill_weight(j: u32, since: u32) -> f64 {
    let Some(i) = AFTER_PREFILL_KNOTS.iter().position(|&k| k == j) else { return 0.0 };
    let (s, k) = (f64::from(since), f64::from(j));
    if s <= k {
        let lo = if i == 0 { 0.0 } else { f64::from(AFTER_PREFILL_KNOTS[i - 1]) };
        return ((s - lo) / (k - lo)).max(0.0);
    }
    let hi = AFTER_PREFILL_KNOTS.get(i + 1).map_or(2.0 * k, |&h| f64::from(h));
    ((hi - s) / (hi - k)).max(0.0)
}

/// The knots of [`Term::AfterIdle`]'s table: milliseconds the engine sat idle before a step.
/// Two: with five (1, 4, 16, 64, 256) a short grid of a slow model (smollm2, two rounds)
/// left neighbouring knots unidentified (26.6 ms at 64 ms, 0 at 256), and on tiny the
/// excess was 0 up to 4 ms, then 0.6, 0.8 and 1.3 ms at 16, 64 and 256 ms.
pub const AFTER_IDLE_MS: [u32; 2] = [16, 256];

/// Idle below this many milliseconds is the engine's own gap between busy steps (50–300 µs
/// measured), not idleness: no after-idle weight.
const IDLE_FLOOR_MS: f64 = 0.25;

/// The weight of after-idle knot `k` (ms) after `idle_s` seconds idle: rising from 0 at
/// [`IDLE_FLOOR_MS`] to 1 at the first knot, a hat between the knots, flat beyond the last
/// (a longer idle has left nothing more to lose).
pub(super) fn after_idle_weight(k: u32, idle_s: f64) -> f64 {
    let Some(i) = AFTER_IDLE_MS.iter().position(|&n| n == k) else { return 0.0 };
    let (ms, kf) = (idle_s * 1e3, f64::from(k));
    if ms <= kf {
        let lo = i.checked_sub(1).map_or(IDLE_FLOOR_MS, |j| f64::from(AFTER_IDLE_MS[j]));
        return ((ms - lo) / (kf - lo)).max(0.0);
    }
    match AFTER_IDLE_MS.get(i + 1) {
        Some(&hi) => ((f64::from(hi) - ms) / (f64::from(hi) - kf)).max(0.0),
        None => 1.0,
    }
}

/// The sorted knots of the tokens, rows and context tables among some terms, and the batch
/// and per-sequence context knots of the decode-attention table.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Tables {
    pub tokens: Vec<u32>,
    pub rows: Vec<u32>,
    pub context: Vec<u32>,
    pub batch: Vec<u32>,
    pub seq_context: Vec<u32>,
    /// Whether the terms price repeated decode positions apart ([`Term::RepeatedContext`]).
    pub repeats: bool,
}

impl Tables {
    pub fn of(terms: &[Term]) -> Self {
        let pick = |f: fn(&Term) -> Option<u32>| {
            let mut v: Vec<u32> = terms.iter().filter_map(f).collect();
            v.sort_unstable();
            v.dedup();
            v
        };
        Self {
            tokens: pick(|t| if let Term::Tokens(k) = t { Some(*k) } else { None }),
            rows: pick(|t| if let Term::Rows(k) = t { Some(*k) } else { None }),
            context: pick(|t| if let Term::Context(k) = t { Some(*k) } else { None }),
            batch: pick(|t| match t {
                Term::SeqContext(b, _) | Term::BatchContext(b) => Some(*b),
                _ => None,
            }),
            seq_context: pick(|t| match t {
                Term::SeqContext(_, c) | Term::LengthContext(c) => Some(*c),
                _ => None,
            }),
            repeats: terms.contains(&Term::RepeatedContext),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn clamped_hats_interpolate_and_add_to_one() {
        let k = [64, 256, 1024];
        assert_eq!(clamped_hat(64, &k, 10.0), 1.0, "flat below the first knot");
        assert_eq!(clamped_hat(1024, &k, 5000.0), 1.0, "flat beyond the last");
        // 640 is halfway from 256 to 1024.
        assert!(
            (clamped_hat(256, &k, 640.0) - 0.5).abs() < 1e-12 && (clamped_hat(1024, &k, 640.0) - 0.5).abs() < 1e-12
        );
        assert_eq!(clamped_hat(64, &k, 640.0), 0.0);
        for x in [1.0, 64.0, 100.0, 700.0, 1024.0, 9e9] {
            let sum: f64 = k.iter().map(|&n| clamped_hat(n, &k, x)).sum();
            assert!((sum - 1.0).abs() < 1e-12, "{x}: {sum}");
        }
        assert_eq!(batch_knots(1), [1, 2, 3, 4]);
        assert_eq!(batch_knots(33), [1, 2, 3, 4, 8, 16, 32, 64]);
        assert_eq!(seq_context_knots(1552), [256, 1024, 1552]);
        assert_eq!(seq_context_knots(6160), [256, 1024, 4096, 6160]);
        assert_eq!(seq_context_knots(1024), [256, 1024]);
        assert_eq!(seq_context_knots(0), [256]);
    }

    #[test]
    fn after_idle_weights_rise_from_the_busy_gap_and_stay_flat_past_the_last_knot() {
        // The busy gap weighs nothing; 8.125 ms is halfway from the floor (0.25) to 16 ms.
        assert_eq!(after_idle_weight(16, 0.000_1), 0.0);
        assert!((after_idle_weight(16, 0.008_125) - 0.5).abs() < 1e-12);
        // 136 ms is halfway from 16 to 256; 5 s is past the last knot.
        assert!(
            (after_idle_weight(16, 0.136) - 0.5).abs() < 1e-12 && (after_idle_weight(256, 0.136) - 0.5).abs() < 1e-12
        );
        assert_eq!(after_idle_weight(256, 5.0), 1.0);
        assert_eq!(after_idle_weight(16, 5.0), 0.0);
        assert_eq!(after_idle_weight(3, 0.003), 0.0, "not a knot");
        // From the first knot on the knots' weights add to 1.
        for s in [0.016, 0.05, 0.2, 0.256, 3.0] {
            let sum: f64 = AFTER_IDLE_MS.iter().map(|&k| after_idle_weight(k, s)).sum();
            assert!((sum - 1.0).abs() < 1e-12, "{s}: {sum}");
        }
    }
}
