//! One load level's statistics, from the raw records of its steady window.

use crate::engine as em;
use crate::interval::{block_bootstrap, block_for, Confidence, Interval};
use crate::request as rm;
use crate::slo::{Metric, Slo, Stat};
use crate::stats::Summary;
use goodput_core::{ClientRecord, FailureKind, Outcome, Stamp};
use serde::{Deserialize, Serialize};

pub use crate::interval::SloResult;

pub use crate::input::InputCheck;

/// How many measured requests failed one way, with the first one's message as an example.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct FailureCount {
    pub kind: FailureKind,
    pub count: usize,
    pub example: String,
}

/// `failures`: the records that did not complete, counted by [`FailureKind`] (timeouts
/// included), most frequent first, ties by kind.
pub fn failures(records: &[&ClientRecord]) -> Vec<FailureCount> {
    let failed = records.iter().filter_map(|r| {
        let kind = r.outcome.failure_kind()?;
        Some((kind, 1, r.outcome.message().unwrap_or_default().to_string()))
    });
    crate::stats::tally(failed)
        .into_iter()
        .map(|(kind, count, example)| FailureCount { kind, count, example })
        .collect()
}

/// Everything measured at one load level. Times in seconds, throughputs per second. Fields
/// added since the first results format read as their defaults from older files.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(default)]
pub struct LevelSummary {
    #[serde(with = "crate::nan::Nullable")]
    #[schemars(extend("exclusiveMinimum" = 0))]
    pub load: f64,
    /// Measured requests (warm-up excluded), and how they ended.
    pub requests: usize,
    pub completed: usize,
    pub errors: usize,
    pub timeouts: usize,
    /// The window the throughputs are counted over: the level's steady window where it has
    /// one (counted by `metrics::windowed`), else from the first measured request's intended send to the
    /// last one's end.
    #[serde(with = "crate::nan::Nullable")]
    #[schemars(range(min = 0.0))]
    pub window_s: f64,
    #[serde(with = "crate::nan::Nullable")]
    #[schemars(range(min = 0.0))]
    pub request_throughput: f64,
    /// Prompt tokens of completed requests per second of the window.
    #[serde(with = "crate::nan::Nullable")]
    #[schemars(range(min = 0.0))]
    pub input_throughput: f64,
    /// Output tokens of completed requests per second of the window: a failed request's
    /// tokens are not throughput (they are counted in `failed_output_tokens`).
    #[serde(with = "crate::nan::Nullable")]
    #[schemars(range(min = 0.0))]
    pub output_throughput: f64,
    /// Output tokens received by requests that did not complete.
    pub failed_output_tokens: usize,
    /// Prompt and output tokens of the completed measured requests.
    pub total_input_tokens: usize,
    pub total_output_tokens: usize,
    /// The requests that did not complete, by kind of failure, most frequent first.
    pub failures: Vec<FailureCount>,
    #[serde(with = "crate::nan::Nullable")]
    pub mean_input_tokens: f64,
    /// The prompt lengths the target counted against those the scenario drew; absent where
    /// the records do not carry the drawn length (results written before it).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub input_check: Option<InputCheck>,
    #[serde(with = "crate::nan::Nullable")]
    pub mean_output_tokens: f64,
    #[serde(with = "crate::nan::Nullable")]
    #[schemars(range(min = 0.0, max = 1.0))]
    pub error_rate: f64,
    #[serde(with = "crate::nan::Nullable")]
    #[schemars(range(min = 0.0, max = 1.0))]
    pub timeout_rate: f64,
    /// Retries made by the retry policy (not counted in `requests`), the requests that needed
    /// any, and `retry_share` = retries / (requests + retries): the share of attempts that
    /// were retries.
    pub retries: usize,
    pub retried_requests: usize,
    #[serde(with = "crate::nan::Nullable")]
    #[schemars(range(min = 0.0, max = 1.0))]
    pub retry_share: f64,
    /// `short_outputs`: completed requests that returned fewer output tokens than their
    /// workload required (`ClientRecord::required_output_tokens`: a server that ignores
    /// `ignore_eos`/`min_tokens`, or cuts requests short). `short_output_rate` = short outputs
    /// / completed. Non-zero means the lengths, TPOT and throughput are not the scenario's.
    pub short_outputs: usize,
    #[serde(with = "crate::nan::Nullable")]
    #[schemars(range(min = 0.0, max = 1.0))]
    pub short_output_rate: f64,
    /// `server_anomalies`: measured requests whose server-reported figures the client refused
    /// (counts beyond the stream, the prompt or `max_tokens`, cached tokens above the prompt,
    /// engine stamps out of order), by kind, most frequent first ([`crate::http::anomalies`]).
    /// Their counts are the client's own; non-empty means the server's numbers are not to be
    /// trusted.
    pub server_anomalies: Vec<crate::http::AnomalyCount>,
    /// Requests meeting every SLO, per second of the window (errors are not good).
    #[serde(with = "crate::nan::Nullable")]
    #[schemars(range(min = 0.0))]
    pub goodput: f64,
    pub ttft: Option<Summary>,
    /// Reasoning models: time to the first answer token, over the requests that reasoned and
    /// those that did not alike; absent when no request of the level reasoned (it is `ttft`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ttfo: Option<Summary>,
    /// Reasoning models: the reasoning phase of the requests that reasoned and answered.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reasoning_time: Option<Summary>,
    /// Reasoning models: reasoning tokens per request that reasoned.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reasoning_tokens: Option<Summary>,
    /// Reasoning models: reasoning tokens ÷ output tokens over the completed requests.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 0.0, max = 1.0))]
    pub reasoning_share: Option<f64>,
    pub tpot: Option<Summary>,
    /// Over every inter-chunk gap of every request.
    pub itl: Option<Summary>,
    pub e2e: Option<Summary>,
    pub ntpot: Option<Summary>,
    pub per_user_tps: Option<Summary>,
    pub queue_time: Option<Summary>,
    /// `engine_wait` (handoff into the engine thread + queue); absent in results written
    /// before it was measured.
    #[serde(default)]
    pub engine_wait: Option<Summary>,
    pub prefill_time: Option<Summary>,
    pub decode_time: Option<Summary>,
    pub inference_time: Option<Summary>,
    pub send_lag: Option<Summary>,
    /// HTTP targets: TTFT and E2E decomposed by the server's engine stamps.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub http: Option<crate::http::Breakdown>,
    pub slos: Vec<SloResult>,
    /// 95 % intervals of the throughputs and headline percentiles; absent in results written
    /// before intervals.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub intervals: Option<LevelIntervals>,
}

impl LevelSummary {
    pub fn slos_hold(&self) -> bool {
        self.slos.iter().all(|s| s.holds)
    }

    /// The most any SLO uses of its bound ([`SloResult::used`]); 0 without SLOs.
    pub fn most_used(&self) -> f64 {
        self.slos.iter().filter_map(SloResult::used).fold(0.0, f64::max)
    }

    /// Every SLO holds with 95 % confidence (its whole interval within the bound).
    pub fn slos_surely_hold(&self) -> bool {
        self.slos.iter().all(|s| s.confidence().surely_holds())
    }

    /// The level's verdict over its SLOs: the least confident of them (a break before an
    /// uncertain break before an uncertain hold before a hold).
    pub fn confidence(&self) -> Confidence {
        let rank = |c: Confidence| match c {
            Confidence::NoData => 0,
            Confidence::Breaks => 1,
            Confidence::BreaksNotSignificant => 2,
            Confidence::HoldsNotSignificant => 3,
            Confidence::Holds => 4,
        };
        self.slos.iter().map(SloResult::confidence).min_by_key(|&c| rank(c)).unwrap_or(Confidence::Holds)
    }

    /// The summary of a metric (None for rates).
    pub fn metric(&self, m: Metric) -> Option<&Summary> {
        match m {
            Metric::Ttft => self.ttft.as_ref(),
            Metric::Ttfo => self.ttfo.as_ref().or(self.ttft.as_ref()),
            Metric::ReasoningTime => self.reasoning_time.as_ref(),
            Metric::Tpot => self.tpot.as_ref(),
            Metric::Itl => self.itl.as_ref(),
            Metric::E2e => self.e2e.as_ref(),
            Metric::Ntpot => self.ntpot.as_ref(),
            Metric::PerUserTps => self.per_user_tps.as_ref(),
            Metric::QueueTime => self.queue_time.as_ref(),
            Metric::EngineWait => self.engine_wait.as_ref(),
            Metric::PrefillTime => self.prefill_time.as_ref(),
            Metric::DecodeTime => self.decode_time.as_ref(),
            Metric::InferenceTime => self.inference_time.as_ref(),
            Metric::ErrorRate | Metric::TimeoutRate => None,
        }
    }
}

/// The reasoning figures of a level, set only when some completed request reasoned.
fn reasoning(s: &mut LevelSummary, ok: &[&&ClientRecord], ttfo: Option<Summary>, time: Option<Summary>) {
    let counts: Vec<f64> = ok.iter().filter_map(|r| rm::reasoning_tokens(r)).map(|n| n as f64).collect();
    if counts.is_empty() {
        return;
    }
    let output: usize = ok.iter().map(|r| r.output_tokens).sum();
    s.reasoning_share = (output > 0).then(|| (counts.iter().sum::<f64>() / output as f64).min(1.0));
    s.reasoning_tokens = Summary::of(&counts);
    (s.ttfo, s.reasoning_time) = (ttfo, time);
}

fn per_request(m: Metric, r: &ClientRecord) -> Vec<f64> {
    let eng = r.engine.as_ref();
    let one = |x: Option<f64>| x.into_iter().collect();
    match m {
        Metric::Ttft => one(rm::ttft(r)),
        Metric::Ttfo => one(rm::ttfo(r)),
        Metric::ReasoningTime => one(rm::reasoning_time(r)),
        Metric::Tpot => one(rm::tpot(r)),
        Metric::Itl => rm::itl(r).into_iter().map(|(g, _)| g).collect(),
        Metric::E2e => one(rm::e2e(r)),
        Metric::Ntpot => one(rm::ntpot(r)),
        Metric::PerUserTps => one(rm::per_user_tps(r)),
        Metric::QueueTime => one(eng.and_then(em::queue_time)),
        Metric::EngineWait => one(eng.and_then(em::engine_wait)),
        Metric::PrefillTime => one(eng.and_then(em::prefill_time)),
        Metric::DecodeTime => one(eng.and_then(em::decode_time)),
        Metric::InferenceTime => one(eng.and_then(em::inference_time)),
        Metric::ErrorRate | Metric::TimeoutRate => Vec::new(),
    }
}

/// Whether one request meets every SLO on its own values (for goodput): it completed, and
/// each per-request metric holds its bound (rates ask only that it completed; ITL asks that
/// every gap does).
pub fn request_is_good(r: &ClientRecord, slos: &[Slo]) -> bool {
    r.is_ok()
        && slos.iter().filter(|s| !s.metric.is_rate()).all(|s| {
            let v = per_request(s.metric, r);
            match s.metric {
                Metric::Itl => v.iter().all(|&g| s.holds(g)),
                // Undefined for this request (e.g. TPOT of one token): nothing to violate.
                _ => v.first().is_none_or(|&x| s.holds(x)),
            }
        })
}

/// `stat` of `metric` over `records` (what an SLO is checked against, and what
/// `compare` compares): a percentile, mean or max of every per-request sample of the
/// completed requests, or the share of requests for the rate metrics. `None` without samples.
pub fn stat_value(records: &[&ClientRecord], metric: Metric, stat: Stat) -> Option<f64> {
    let n = records.len();
    match metric {
        Metric::ErrorRate => (n > 0).then(|| records.iter().filter(|r| !r.is_ok()).count() as f64 / n as f64),
        Metric::TimeoutRate => {
            (n > 0).then(|| records.iter().filter(|r| r.outcome == Outcome::Timeout).count() as f64 / n as f64)
        }
        m => {
            let v: Vec<f64> = records.iter().filter(|r| r.is_ok()).flat_map(|r| per_request(m, r)).collect();
            match stat {
                Stat::P(p) => crate::stats::percentile(&v, p),
                Stat::Mean => Summary::of(&v).map(|x| x.mean),
                Stat::Max => Summary::of(&v).map(|x| x.max),
                Stat::Rate => None,
            }
        }
    }
}

/// Summarises the measured records of a level at `load`, checking `slos`. Percentiles are
/// taken over all raw samples of the window (never averaged across sub-windows).
pub fn summarize(load: f64, records: &[&ClientRecord], slos: &[Slo]) -> LevelSummary {
    let mut s = summary_of(load, records, slos);
    if let (Some(start), Some(end)) = (records.iter().map(|r| r.intended).min(), records.iter().map(|r| r.end).max()) {
        s.intervals = Some(intervals(records, records, start, end));
    }
    s
}

/// [`summarize`] without its intervals: for a caller that counts its throughputs (and so
/// their intervals) over a window of its own, so the bootstraps are not run twice.
pub(crate) fn summary_of(load: f64, records: &[&ClientRecord], slos: &[Slo]) -> LevelSummary {
    let n = records.len();
    let mut s = LevelSummary { load, requests: n, ..Default::default() };
    if n == 0 {
        s.slos = slos.iter().map(|&slo| SloResult::judge(slo, None, &[])).collect();
        return s;
    }
    let start = records.iter().map(|r| r.intended).min().unwrap_or_default();
    let end = records.iter().map(|r| r.end).max().unwrap_or_default();
    s.window_s = end.secs_since(start).max(1e-9);
    s.completed = records.iter().filter(|r| r.is_ok()).count();
    s.timeouts = records.iter().filter(|r| r.outcome == Outcome::Timeout).count();
    s.errors = n - s.completed - s.timeouts;
    s.error_rate = (n - s.completed) as f64 / n as f64;
    s.timeout_rate = s.timeouts as f64 / n as f64;
    s.retries = records.iter().map(|r| r.retries as usize).sum();
    s.retried_requests = records.iter().filter(|r| r.retries > 0).count();
    s.retry_share = s.retries as f64 / (n + s.retries) as f64;
    let ok: Vec<&&ClientRecord> = records.iter().filter(|r| r.is_ok()).collect();
    s.request_throughput = ok.len() as f64 / s.window_s;
    s.total_input_tokens = ok.iter().map(|r| r.input_tokens).sum::<usize>();
    s.total_output_tokens = ok.iter().map(|r| r.output_tokens).sum::<usize>();
    s.input_throughput = s.total_input_tokens as f64 / s.window_s;
    s.output_throughput = s.total_output_tokens as f64 / s.window_s;
    s.failed_output_tokens = records.iter().filter(|r| !r.is_ok()).map(|r| r.output_tokens).sum();
    s.failures = failures(records);
    s.mean_input_tokens = records.iter().map(|r| r.input_tokens).sum::<usize>() as f64 / n as f64;
    s.input_check = InputCheck::of(records);
    s.mean_output_tokens = ok.iter().map(|r| r.output_tokens).sum::<usize>() as f64 / ok.len().max(1) as f64;
    s.short_outputs = ok.iter().filter(|r| r.required_output_tokens.is_some_and(|n| r.output_tokens < n)).count();
    s.short_output_rate = s.short_outputs as f64 / ok.len().max(1) as f64;
    s.server_anomalies = crate::http::anomalies(records);
    // Latencies and per-user figures of completed requests only.
    let collect = |m: Metric| -> Option<Summary> {
        let v: Vec<f64> = ok.iter().flat_map(|r| per_request(m, r)).collect();
        Summary::of(&v)
    };
    s.ttft = collect(Metric::Ttft);
    reasoning(&mut s, &ok, collect(Metric::Ttfo), collect(Metric::ReasoningTime));
    s.tpot = collect(Metric::Tpot);
    s.itl = collect(Metric::Itl);
    s.e2e = collect(Metric::E2e);
    s.ntpot = collect(Metric::Ntpot);
    s.per_user_tps = collect(Metric::PerUserTps);
    s.queue_time = collect(Metric::QueueTime);
    s.engine_wait = collect(Metric::EngineWait);
    s.prefill_time = collect(Metric::PrefillTime);
    s.decode_time = collect(Metric::DecodeTime);
    s.inference_time = collect(Metric::InferenceTime);
    s.send_lag = Summary::of(&records.iter().map(|r| rm::send_lag(r)).collect::<Vec<_>>());
    s.http = crate::http::breakdown(records);
    s.goodput = records.iter().filter(|r| request_is_good(r, slos)).count() as f64 / s.window_s;
    s.slos = slos
        .iter()
        .map(|&slo| SloResult::judge(slo, stat_value(records, slo.metric, slo.stat), &samples(records, slo.metric)))
        .collect();
    s
}

/// The per-request samples of `metric` over the completed requests (none for rates).
pub fn samples(records: &[&ClientRecord], metric: Metric) -> Vec<f64> {
    records.iter().filter(|r| r.is_ok()).flat_map(|r| per_request(metric, r)).collect()
}

/// 95 % intervals of a level's throughputs ([`crate::interval::block_bootstrap`] over time
/// blocks of its window, blocks as long as the median E2E) and of its headline percentiles.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct LevelIntervals {
    /// The throughputs' block length, seconds: the median E2E, at least one of the window's
    /// [`crate::interval::BINS`] bins and at most an eighth of the window
    /// ([`crate::interval::block_for`]).
    pub block_s: f64,
    pub request_throughput: Option<Interval>,
    pub output_throughput: Option<Interval>,
    pub ttft_p95: Option<Interval>,
    pub tpot_p95: Option<Interval>,
    pub e2e_p95: Option<Interval>,
}

/// Which count per second a throughput interval is of.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Counted {
    /// Completed requests, at their ends.
    Requests,
    /// Completed requests' output tokens, as they arrived (the chunks' stamps carry their
    /// token counts).
    OutputTokens,
}

/// A 95 % interval of a throughput over `records` (the level's measured requests): a
/// moving-block bootstrap ([`crate::interval::block_bootstrap`], `rounds` resamples, seeded)
/// over the level's window, from the first intended send to the last end, in blocks as long
/// as the median E2E. What both a level's summary and `compare` give a throughput.
pub fn throughput_interval(records: &[&ClientRecord], what: Counted, rounds: usize, seed: u64) -> Option<Interval> {
    let from = records.iter().map(|r| r.intended).min()?;
    let to = records.iter().map(|r| r.end).max()?;
    throughput_interval_in(records, from, to, what, rounds, seed)
}

/// [`throughput_interval`] over the window `[from, to]`: the events of `records` within it.
pub fn throughput_interval_in(
    records: &[&ClientRecord],
    from: Stamp,
    to: Stamp,
    what: Counted,
    rounds: usize,
    seed: u64,
) -> Option<Interval> {
    let window = to.secs_since(from).max(1e-9);
    let ok = || records.iter().filter(|r| r.is_ok());
    let block = block_for(window, median_e2e(records));
    let within = |t: Stamp| (t >= from && t <= to).then(|| t.secs_since(from));
    let events: Vec<(f64, f64)> = match what {
        Counted::Requests => ok().filter_map(|r| Some((within(r.end)?, 1.0))).collect(),
        Counted::OutputTokens => {
            ok().flat_map(|r| rm::token_arrivals(r)).filter_map(|(t, n)| Some((within(t)?, n))).collect()
        }
    };
    block_bootstrap(events, window, block, rounds, seed)
}

/// The median E2E of the completed requests among `records` (0 without one).
fn median_e2e(records: &[&ClientRecord]) -> f64 {
    let e2e: Vec<f64> = records.iter().filter(|r| r.is_ok()).filter_map(|r| rm::e2e(r)).collect();
    crate::percentile(&e2e, 50.0).unwrap_or(0.0)
}

/// The intervals of a level's throughputs over `[from, to]` (`all`: every record the target
/// served then) and of its headline percentiles (over `measured`).
pub fn intervals(all: &[&ClientRecord], measured: &[&ClientRecord], from: Stamp, to: Stamp) -> LevelIntervals {
    let window = to.secs_since(from).max(1e-9);
    let seed = measured.len() as u64;
    let rate = |what, seed| throughput_interval_in(all, from, to, what, crate::interval::ROUNDS, seed);
    let p95 = |m: Metric| crate::interval::percentile_interval(&samples(measured, m), 95.0);
    LevelIntervals {
        block_s: block_for(window, median_e2e(all)) as f64 * window / crate::interval::BINS as f64,
        request_throughput: rate(Counted::Requests, seed),
        output_throughput: rate(Counted::OutputTokens, seed + 1),
        ttft_p95: p95(Metric::Ttft),
        tpot_p95: p95(Metric::Tpot),
        e2e_p95: p95(Metric::E2e),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::slo::parse_slos;
    use goodput_core::{Reasoning, RecordBuilder, Stamp};

    fn ms(x: u64) -> Stamp {
        Stamp(x * 1_000_000)
    }

    fn rec(id: u64, start: u64, first: u64, end: u64, out: usize, outcome: Outcome) -> ClientRecord {
        let chunks = if out == 0 {
            vec![]
        } else {
            let step = if out > 1 { (end - first) / (out as u64 - 1) } else { 0 };
            (0..out as u64).map(|i| ms(first + i * step)).collect()
        };
        RecordBuilder::new(id).intended(ms(start)).tokens_at(chunks).end(ms(end)).input(100).outcome(outcome).build()
    }

    #[test]
    fn hand_computed_level() {
        // Window 0..2000 ms. TTFTs 100, 200, 900 ms; TPOTs (e2e − ttft)/(n − 1):
        // a: (1100−100)/10 = 100 ms, b: (1200−200)/20 = 50 ms, c: (2000−900)/10 = 110 ms.
        let a = rec(1, 0, 100, 1100, 11, Outcome::Ok);
        let b = rec(2, 0, 200, 1200, 21, Outcome::Ok);
        let c = rec(3, 0, 900, 2000, 11, Outcome::Ok);
        let mut d = rec(4, 500, 0, 1500, 0, Outcome::error(goodput_core::FailureKind::Http(429), "overloaded"));
        d.retries = 2;
        let mut b = b;
        b.retries = 1;
        let recs = [&a, &b, &c, &d];
        let slos = parse_slos("ttft_p50=250ms,tpot_max=120ms,error_rate=30%").unwrap();
        let s = summarize(4.0, &recs, &slos);
        assert_eq!((s.requests, s.completed, s.errors, s.timeouts), (4, 3, 1, 0));
        assert!((s.window_s - 2.0).abs() < 1e-12);
        assert!((s.request_throughput - 1.5).abs() < 1e-12);
        assert!((s.output_throughput - 21.5).abs() < 1e-12); // 43 tokens / 2 s
        assert!((s.input_throughput - 150.0).abs() < 1e-12); // 300 tokens of completed requests / 2 s
        assert_eq!((s.total_input_tokens, s.total_output_tokens), (300, 43));
        assert_eq!(s.error_rate, 0.25);
        // 3 retries over 4 requests: 3 of 7 attempts were retries.
        assert_eq!((s.retries, s.retried_requests), (3, 2));
        assert!((s.retry_share - 3.0 / 7.0).abs() < 1e-12);
        let ttft = s.ttft.as_ref().unwrap();
        assert_eq!(ttft.n, 3);
        assert!((ttft.p50 - 0.2).abs() < 1e-12);
        assert!((s.tpot.as_ref().unwrap().max - 0.110).abs() < 1e-12);
        // ttft_p50 0.2 ≤ 0.25 holds; tpot_max 0.110 ≤ 0.120 holds; error rate 25 % ≤ 30 % holds.
        assert!(s.slos_hold(), "{:?}", s.slos);
        // Goodput: a, b, c each meet ttft ≤ 250 ms? c does not (900 ms). 2 good / 2 s.
        assert!((s.goodput - 1.0).abs() < 1e-12);
        let strict = parse_slos("error_rate=10%").unwrap();
        assert!(!summarize(4.0, &recs, &strict).slos_hold());
    }

    #[test]
    fn short_outputs_are_completed_requests_below_their_required_length() {
        // Required 11, 21, 30 and 5 tokens; returned 11, 21, 11 and none (failed).
        let mut recs = [
            rec(1, 0, 100, 1100, 11, Outcome::Ok),
            rec(2, 0, 200, 1200, 21, Outcome::Ok),
            rec(3, 0, 900, 2000, 11, Outcome::Ok),
            rec(4, 500, 0, 1500, 0, Outcome::error(goodput_core::FailureKind::Http(429), "overloaded")),
        ];
        for (r, n) in recs.iter_mut().zip([11, 21, 30, 5]) {
            r.required_output_tokens = Some(n);
        }
        let s = summarize(4.0, &recs.iter().collect::<Vec<_>>(), &[]);
        // Only the third: the failed one is an error, not a short output. 1 of 3 completed.
        assert_eq!(s.short_outputs, 1);
        assert!((s.short_output_rate - 1.0 / 3.0).abs() < 1e-12);
        // Nothing required: nothing is short.
        recs[2].required_output_tokens = None;
        assert_eq!(summarize(4.0, &recs.iter().collect::<Vec<_>>(), &[]).short_outputs, 0);
    }

    #[test]
    fn failed_streams_are_not_throughput_and_are_counted_by_kind() {
        use goodput_core::FailureKind as K;
        // Window 0..2000 ms. One completed request of 11 tokens; three streams that broke after
        // 30, 40 and 0 tokens; one timeout with 7 tokens.
        let ok = rec(1, 0, 100, 1100, 11, Outcome::Ok);
        let broken = |id, out| rec(id, 0, 100, 2000, out, Outcome::error(K::StreamBroken, format!("broke {id}")));
        let (b1, b2) = (broken(2, 30), broken(3, 40));
        let refused = rec(4, 0, 0, 10, 0, Outcome::refused(K::Http(400), "bad"));
        let late = rec(5, 0, 100, 1900, 7, Outcome::Timeout);
        let s = summarize(5.0, &[&ok, &b1, &b2, &refused, &late], &parse_slos("ttft_p95=1s").unwrap());
        assert!((s.output_throughput - 5.5).abs() < 1e-12, "{}", s.output_throughput); // 11 tokens / 2 s
        assert_eq!(s.failed_output_tokens, 77); // 30 + 40 + 7
        let counts: Vec<(K, usize, &str)> = s.failures.iter().map(|f| (f.kind, f.count, f.example.as_str())).collect();
        assert_eq!(
            counts,
            vec![
                (K::StreamBroken, 2, "broke 2"),
                (K::Timeout, 1, "no end marker within the request timeout"),
                (K::Http(400), 1, "bad")
            ]
        );
        // Latencies of the completed request only.
        assert_eq!(s.ttft.as_ref().unwrap().n, 1);
        // Nothing completed: no throughput and no latency, whatever the failed streams carried.
        let s = summarize(5.0, &[&b1, &b2], &[]);
        assert_eq!((s.output_throughput, s.request_throughput), (0.0, 0.0));
        assert!(s.ttft.is_none() && s.per_user_tps.is_none());
        assert_eq!(s.failed_output_tokens, 70);
    }

    #[test]
    fn an_empty_level_fails_its_slos() {
        let s = summarize(1.0, &[], &parse_slos("ttft_p95=1s").unwrap());
        assert!(!s.slos_hold());
        assert_eq!(s.requests, 0);
    }

    /// A reasoning request (reasoning tokens at 100 and 200 ms, the answer at 300 and 400 ms,
    /// usage: 2 reasoning tokens) and a plain one (tokens at 50 and 150 ms), both due at 0:
    /// ttft 100 / 50 ms, ttfo 300 / 50 ms (the plain request's is its ttft), reasoning time
    /// 200 ms for the first only, 2 reasoning tokens of the 6 output tokens (share 1/3).
    #[test]
    fn hand_computed_reasoning_figures() {
        let reasoning = Reasoning { first_answer: Some(ms(300)), chunks: 2, after_answer: 0, tokens: Some(2) };
        let thinking = RecordBuilder::new(1)
            .tokens_at([ms(100), ms(200), ms(300), ms(400)])
            .end(ms(400))
            .reasoning(reasoning)
            .build();
        let plain = RecordBuilder::new(2).tokens_at([ms(50), ms(150)]).end(ms(150)).build();
        let close = |a: Option<f64>, b: f64| a.is_some_and(|a| (a - b).abs() < 1e-12);
        assert!(close(rm::ttfo(&thinking), 0.3) && close(rm::ttft(&thinking), 0.1));
        assert_eq!(rm::reasoning_time(&thinking).map(|t| (t * 1e3).round()), Some(200.0));
        assert!(close(rm::ttfo(&plain), 0.05) && rm::reasoning_time(&plain).is_none());
        assert_eq!((rm::reasoning_tokens(&thinking), rm::reasoning_tokens(&plain)), (Some(2), None));
        let slos = parse_slos("ttfo_p95=1s").unwrap();
        let s = summarize(2.0, &[&thinking, &plain], &slos);
        let ttfo = s.ttfo.as_ref().unwrap();
        assert_eq!(ttfo.n, 2);
        assert!((ttfo.mean - 0.175).abs() < 1e-12 && (ttfo.max - 0.3).abs() < 1e-12);
        let time = s.reasoning_time.as_ref().unwrap();
        assert!(time.n == 1 && (time.mean - 0.2).abs() < 1e-12);
        assert_eq!(s.reasoning_tokens.as_ref().map(|t| (t.n, t.mean)), Some((1, 2.0)));
        assert!((s.reasoning_share.unwrap() - 1.0 / 3.0).abs() < 1e-12);
        assert!(s.slos_hold());
        // A level where nobody reasoned: no reasoning figures; an SLO on ttfo reads ttft.
        let s = summarize(1.0, &[&plain], &slos);
        assert!(s.ttfo.is_none() && s.reasoning_time.is_none() && s.reasoning_share.is_none());
        assert_eq!(s.metric(Metric::Ttfo), s.ttft.as_ref());
    }
}
