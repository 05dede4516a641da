//! One level of a merged run, rebuilt from its shards' raw records: every stamp moved onto
//! one time line (the earliest shard's clock origin, on the reference's clock where the
//! shards measured one), then every metric computed from the samples as for one process —
//! never averaged from the shards' summaries. Only what the records do not hold comes from
//! the shards' reports: the load generator's CPU (summed), the server's own /metrics view
//! (the first shard's scrape: every shard's sees the whole server) and how the level was
//! loaded.

use super::check::{Group, Loaded};
use super::verify::Lost;
use goodput_core::{ClientRecord, Phase};
use goodput_metrics::cache::PrefixHits;
use goodput_metrics::occupancy::{EngineLevel, Occupancy};
use goodput_metrics::slo::Slo;
use goodput_metrics::windowed::{self, Sending};
use goodput_results::clock::MergedShard;
use goodput_results::{vllm_keys, CpuUse, Harness, LevelReport, OpenLoop, RecordRow, VllmLoad};

/// A level merged: its records on the common time line, its report, its shards.
pub struct LevelMerge {
    pub rows: Vec<RecordRow>,
    pub report: LevelReport,
    pub shards: Vec<MergedShard>,
    /// What a reader must know: shards that started late or lost requests, partial shards.
    pub warnings: Vec<String>,
}

/// A shard started late when its schedule began this long after the level's first shard's,
/// or this share of the level's window if that is longer.
const LATE_S: f64 = 0.05;
const LATE_SHARE: f64 = 0.01;

/// Merges the shards of `g` onto the time line whose 0 is `origin` (ns since the epoch, at or
/// before every shard's clock origin); `lost`: each shard's requests no shard recorded.
pub fn merge(g: &Group, lost: &[Lost], origin: i128, slos: &[Slo], unit: &str) -> LevelMerge {
    let shift = |s: &Loaded| u64::try_from(s.origin_ns() - origin).unwrap_or(0);
    let mut rows: Vec<RecordRow> = Vec::with_capacity(g.shards.iter().map(|s| s.records.len()).sum());
    for s in &g.shards {
        let ns = shift(s);
        rows.extend(s.records.iter().filter(|r| r.level == g.load).map(|r| {
            let mut r = r.clone();
            r.record.shift(ns);
            r
        }));
    }
    rows.sort_by_key(|r| (r.record.intended, r.record.id));
    let measured: Vec<&ClientRecord> = rows.iter().filter(|r| r.phase == Phase::Measured).map(|r| &r.record).collect();
    let lead = g.shards[0].level();
    // The merged level over its steady window, as one run's (a closed loop's shards each ran users).
    let every: Vec<&ClientRecord> = rows.iter().map(|r| &r.record).collect();
    let sending = if lead.harness.users.is_some() { Sending::Closed } else { Sending::Open { until: None } };
    let (summary, steady) = windowed::summarize(g.load, &every, &measured, slos, sending);
    let server = lead.server.clone();
    let engine = EngineLevel::of(&[]);
    let load = VllmLoad {
        request_rate: lead.vllm.request_rate,
        max_concurrency: g.shards.iter().map(|s| s.level().vllm.max_concurrency).sum(),
        burstiness: lead.vllm.burstiness,
        max_output_tokens_per_s: goodput_metrics::peaks::max_output_tokens_per_s(&measured),
        max_concurrent_requests: goodput_metrics::peaks::max_concurrent_requests(&measured),
    };
    let starts: Vec<f64> = g.shards.iter().map(|s| schedule_start(s, shift(s))).collect();
    let earliest = starts.iter().copied().fold(f64::INFINITY, f64::min);
    let late_after = LATE_S.max(LATE_SHARE * summary.window_s);
    let (shards, warnings) = shards(g, lost, &starts, earliest, late_after, unit);
    let harness = harness(g, &rows, &measured, summary.send_lag.as_ref().map_or(0.0, |x| x.p99));
    let count = |p: Phase| rows.iter().filter(|r| r.phase == p).count();
    let report = LevelReport {
        schedule: g.shards.iter().filter_map(|s| s.level().schedule).max(),
        machine: None,
        steady,
        saturated: None,
        prefix_cache: PrefixHits::of_level(&measured, server.as_ref().and_then(|s| s.prefix_cache.as_ref())),
        vllm: vllm_keys(&summary, load),
        aiperf: goodput_results::aiperf_keys(&summary),
        turns: goodput_metrics::turns::by_turn(&measured),
        sessions: goodput_metrics::sessions::summarize(&measured),
        start_s: Some(earliest),
        warmup_requests: count(Phase::Warmup),
        cooldown_requests: count(Phase::Cooldown),
        occupancy: Occupancy::of(&engine, server.as_ref()),
        engine,
        server,
        harness,
        agent: None,
        rag: None,
        partial: g.shards.iter().any(|s| s.level().partial),
        summary,
    };
    LevelMerge { rows, report, shards, warnings }
}

/// Each shard as the merged run keeps it, and what a reader must know of it: a start more than
/// `late_after` seconds after the level's first shard, lost requests, an interruption.
/// `starts`: each shard's schedule start on the common time line, the first of them `earliest`.
fn shards(
    g: &Group,
    lost: &[Lost],
    starts: &[f64],
    earliest: f64,
    late_after: f64,
    unit: &str,
) -> (Vec<MergedShard>, Vec<String>) {
    let (mut shards, mut warnings) = (Vec::new(), Vec::new());
    for ((s, start), lost) in g.shards.iter().zip(starts).zip(lost) {
        let (start_s, late_s) = (start - earliest, s.summary.start_at.as_ref().map(|a| a.late_s));
        if start_s > late_after {
            let why = late_s
                .filter(|l| *l > LATE_S)
                .map_or(String::new(), |l| format!(" (it reached its --start-at {l:.2} s late)"));
            warnings.push(format!(
                "level {} {unit}: {} started its schedule {:.0} ms after the level's first shard{why}: until then the server saw {} of {} shards' load",
                g.load,
                s.name(),
                start_s * 1e3,
                g.shards.len() - 1,
                g.shards.len()
            ));
        }
        if lost.count > 0 {
            let mut ids: Vec<String> = lost.first.iter().map(u64::to_string).collect();
            if lost.count > ids.len() as u64 {
                ids.push("…".into());
            }
            warnings.push(format!(
                "level {} {unit}: {} lost {} requests of its slice (no shard recorded id{} {}); they are not in the merged run",
                g.load,
                s.name(),
                lost.count,
                if lost.count > 1 { "s" } else { "" },
                ids.join(", ")
            ));
        }
        if s.level().partial || !s.summary.complete {
            warnings.push(format!("level {} {unit}: {} was interrupted: its slice is partial", g.load, s.name()));
        }
        shards.push(MergedShard {
            dir: s.dir.clone(),
            shard: s.shard,
            load: g.load,
            records: s.records.iter().filter(|r| r.level == g.load).count(),
            lost: usize::try_from(lost.count).unwrap_or(usize::MAX),
            start_s,
            late_s,
            clock: s.summary.clock.clone(),
        });
    }
    (shards, warnings)
}

/// When the shard's schedule started on the common time line, seconds: its level's start, or
/// (results that predate it) its first intended send.
fn schedule_start(s: &Loaded, shift_ns: u64) -> f64 {
    let own = s
        .level()
        .start_s
        .unwrap_or_else(|| s.records.iter().map(|r| r.record.intended.as_secs()).fold(f64::INFINITY, f64::min));
    own + shift_ns as f64 * 1e-9
}

/// The load generators of the level together: their CPU summed (their threads counted, the
/// longest wall time, the busiest thread of any), the send lag and achieved rate from the merged sends, the target rate
/// and the cap on requests in flight the shards' summed.
fn harness(g: &Group, rows: &[RecordRow], measured: &[&ClientRecord], send_lag_p99_s: f64) -> Harness {
    let hs: Vec<&Harness> = g.shards.iter().map(|s| &s.level().harness).collect();
    let cpu = CpuUse {
        harness_s: hs.iter().map(|h| h.cpu.harness_s).sum(),
        process_s: hs.iter().map(|h| h.cpu.process_s).sum(),
        wall_s: hs.iter().map(|h| h.cpu.wall_s).fold(0.0, f64::max),
        threads: hs.iter().map(|h| h.cpu.threads).sum(),
        busiest_s: hs.iter().map(|h| h.cpu.busiest_s).fold(f64::NAN, f64::max),
    };
    let target: Option<f64> = hs.iter().map(|h| h.target_rate).sum();
    let sent: Vec<f64> = measured.iter().map(|r| r.sent.as_secs()).collect();
    let intended: Vec<f64> = measured.iter().map(|r| r.intended.as_secs()).collect();
    let open_loop = target.map(|rate| OpenLoop { sent: &sent, intended: &intended, rate });
    let mut h = Harness::new(cpu, rows.len(), send_lag_p99_s, open_loop, false);
    h.max_concurrency = hs.iter().map(|h| h.max_concurrency).sum();
    h
}
