//! Peaks over a level's completed requests, as vLLM's `bench serve` defines them (its
//! `max_output_tokens_per_s` and `max_concurrent_requests`), so the vLLM keys goodput writes
//! mean what vLLM's mean.

use goodput_core::ClientRecord;

/// `max_output_tokens_per_s`: the output tokens of completed requests, each counted when its
/// chunk arrived, in 1-second buckets from the earliest send among them; the fullest bucket's
/// count. `None` without a completed request.
pub fn max_output_tokens_per_s(records: &[&ClientRecord]) -> Option<f64> {
    let ok: Vec<&&ClientRecord> = records.iter().filter(|r| r.is_ok()).collect();
    let t0 = ok.iter().map(|r| r.sent).min()?;
    let mut buckets: Vec<u64> = Vec::new();
    for c in ok.iter().flat_map(|r| &r.chunks) {
        let i = c.at.secs_since(t0).max(0.0).floor() as usize;
        if buckets.len() <= i {
            buckets.resize(i + 1, 0);
        }
        buckets[i] += u64::from(c.tokens);
    }
    Some(buckets.into_iter().max().unwrap_or(0) as f64)
}

/// `max_concurrent_requests`: the most completed requests in flight at once, each over
/// [sent, end) (one ending as another starts does not overlap it). `None` without one.
pub fn max_concurrent_requests(records: &[&ClientRecord]) -> Option<usize> {
    let mut events: Vec<(goodput_core::Stamp, i64)> =
        records.iter().filter(|r| r.is_ok()).flat_map(|r| [(r.sent, 1), (r.end, -1)]).collect();
    if events.is_empty() {
        return None;
    }
    // Ends before starts at the same moment.
    events.sort();
    let (mut now, mut peak) = (0i64, 0i64);
    for (_, d) in events {
        now += d;
        peak = peak.max(now);
    }
    Some(peak as usize)
}

#[cfg(test)]
mod tests {
    use super::*;
    use goodput_core::{Outcome, RecordBuilder, Stamp};

    const S: u64 = 1_000_000_000;

    fn rec(sent: f64, end: f64, chunks: &[(f64, u32)], ok: bool) -> ClientRecord {
        let at = |s: f64| Stamp((s * S as f64) as u64);
        let outcome = if ok { Outcome::Ok } else { Outcome::Timeout };
        RecordBuilder::new(1)
            .intended(at(sent))
            .input(10)
            .end(at(end))
            .chunks(chunks.iter().map(|&(t, n)| (at(t), n)))
            .output(0)
            .outcome(outcome)
            .build()
    }

    #[test]
    fn hand_computed_peaks() {
        // Sends at 10 s and 10.5 s. Bucket [10, 11): 1 + 2 + 1 = 4 tokens; [11, 12): 3 + 1 = 4;
        // [12, 13): 5. The failed request's 100 tokens and its overlap do not count.
        let rs = [
            rec(10.0, 12.5, &[(10.2, 1), (10.9, 2), (11.5, 3), (12.4, 5)], true),
            rec(10.5, 11.8, &[(10.95, 1), (11.7, 1)], true),
            rec(10.1, 12.0, &[(10.3, 100)], false),
        ];
        let refs: Vec<&ClientRecord> = rs.iter().collect();
        assert_eq!(max_output_tokens_per_s(&refs), Some(5.0));
        assert_eq!(max_concurrent_requests(&refs), Some(2));
        // Back to back: one ends as the next starts.
        let chain = [rec(0.0, 1.0, &[], true), rec(1.0, 2.0, &[], true)];
        assert_eq!(max_concurrent_requests(&chain.iter().collect::<Vec<_>>()), Some(1));
        assert_eq!(max_output_tokens_per_s(&[]), None);
    }
}

/// Events per second over time: `(t, w)` events (seconds, weight) counted in bins of `bin_s`
/// from 0, each bin's total over its width, at the bin's middle; bins up to the last event.
/// With weights 1 it is a rate of requests; with output tokens, a throughput.
pub fn per_second(events: &[(f64, f64)], bin_s: f64) -> Vec<(f64, f64)> {
    if events.is_empty() || bin_s.is_nan() || bin_s <= 0.0 {
        return Vec::new();
    }
    let last = events.iter().map(|e| e.0).fold(0.0, f64::max);
    let n = (last / bin_s).floor() as usize + 1;
    let mut bins = vec![0.0; n];
    for &(t, w) in events.iter().filter(|e| e.0 >= 0.0 && e.0.is_finite()) {
        bins[((t / bin_s).floor() as usize).min(n - 1)] += w;
    }
    bins.into_iter().enumerate().map(|(i, total)| ((i as f64 + 0.5) * bin_s, total / bin_s)).collect()
}

#[cfg(test)]
mod per_second_tests {
    use super::per_second;

    #[test]
    fn hand_computed_bins() {
        // Bins of 2 s: [0, 2) holds 3 events, [2, 4) none, [4, 6) one of weight 10.
        let ev = [(0.1, 1.0), (1.0, 1.0), (1.9, 1.0), (4.5, 10.0)];
        assert_eq!(per_second(&ev, 2.0), [(1.0, 1.5), (3.0, 0.0), (5.0, 5.0)]);
        assert!(per_second(&[], 1.0).is_empty());
    }
}
