//! A sweep on the console: the line on stderr as each level ends, each level's three layers,
//! and the table of every level ([`crate::columns`] as the console shows them).

use super::{cell, new};
use crate::columns::{self, stat_cells, Output, LAYERS, STAT_HEADER};
use crate::text::{graph_text, ms, num, occupancy_text, prefix_text};
use goodput_results::{LevelReport, LoadUnit};

/// One line per finished level, for progress on stderr.
pub fn level_line(l: &LevelReport, unit: LoadUnit) -> String {
    let s = &l.summary;
    let p95 = |x| num(ms(x, |x| x.p95), 1);
    let ttfo = s.ttfo.as_ref().map_or(String::new(), |_| format!(" (TTFO p95 {} ms)", p95(&s.ttfo)));
    // Each headline figure with its 95 % interval, where the level has one.
    let within = |i: Option<goodput_metrics::interval::Interval>, scale: f64, d: usize| {
        i.map_or(String::new(), |i| format!(" [{}]", i.text(scale, d)))
    };
    let iv = s.intervals.clone().unwrap_or_default();
    let steady = l.steady.as_ref().map_or(String::new(), |w| {
        let over = w.oversaturated.map_or(String::new(), |(a, b)| {
            format!(", OVER-SATURATED: in flight {a:.1} → {b:.1}, the queue grows without bound")
        });
        format!(
            "\n    steady {:.2}–{:.2} s of {:.2} s (ramp and drain left out): {:.0} out tok/s, {:.2} req/s, {:.1} in flight{over}",
            w.start_s, w.end_s, w.window_s, w.output_throughput, w.request_throughput, w.in_flight_mean
        )
    });
    format!(
        "  {} {unit}: {} requests, {:.0} out tok/s{}, TTFT p95 {} ms{}{ttfo}, TPOT p95 {} ms{}, engine wait p95 {} ms (queue {} ms), SLOs {}{steady}",
        s.load,
        s.requests,
        s.output_throughput,
        within(iv.output_throughput, 1.0, 0),
        p95(&s.ttft),
        within(iv.ttft_p95, 1e3, 1),
        p95(&s.tpot),
        within(iv.tpot_p95, 1e3, 1),
        p95(&s.engine_wait),
        p95(&s.queue_time),
        crate::columns::slos_word(s.confidence())
    )
}

/// The table of a sweep: service layer (TTFT, TPOT, E2E, throughput, goodput) and engine
/// layer (queue, prefill, KV occupancy, running/waiting, preemptions) side by side.
pub fn levels(levels: &[LevelReport], unit: LoadUnit, model: &str, scenario: &str) -> String {
    let cols = columns::shown(Output::Console, levels);
    let header: Vec<String> = cols.iter().map(|c| c.header(Output::Console, unit)).collect();
    let mut t = new(&header.iter().map(String::as_str).collect::<Vec<_>>());
    for l in levels {
        t.add_row(cols.iter().map(|c| cell(c, l)).collect::<Vec<_>>());
    }
    format!("{model}, {scenario} (times in ms; wait = engine wait: handoff into the engine + queue; percentiles over all measured requests, n per level; SLOs: hold = every SLO holds, its percentiles and means with 95 % confidence, n.s. = not significant: a value's 95 % interval reaches past its bound)\n{t}")
}

/// One level's three layers as rows of a table: what users see (TTFT, TPOT, ITL, E2E,
/// per-user tok/s), what the engine did (queue, prefill, decode, inference, step time) and
/// what the system delivered (throughput, goodput, occupancy, failures), with n, mean,
/// P50/P90/P95/P99 and max.
pub fn layers(l: &LevelReport, unit: LoadUnit) -> String {
    let s = &l.summary;
    let mut t = new(&STAT_HEADER);
    for row in LAYERS.iter().filter(|r| r.shown(l)) {
        let mut cells = vec![row.layer.to_string(), row.name.to_string()];
        cells.extend(stat_cells((row.get)(l), row.scale, row.decimals));
        t.add_row(cells);
    }
    let occupancy = occupancy_text(l.occupancy.as_ref())
        + &prefix_text(l.prefix_cache.as_ref())
        + &graph_text(l.engine.graph_step_share);
    let system = format!(
        "system: {:.2} req/s, {:.0} in + {:.0} out tok/s, goodput {:.2} req/s; {occupancy}; {} ok ({} short), {} errors, {} timeouts, {} retries ({:.1} % of attempts); {} warm-up and {} cool-down requests left out",
        s.request_throughput,
        s.input_throughput,
        s.output_throughput,
        s.goodput,
        s.completed,
        s.short_outputs,
        s.errors,
        s.timeouts,
        s.retries,
        s.retry_share * 100.0,
        l.warmup_requests,
        l.cooldown_requests,
    );
    format!("Level {} {unit} ({} measured requests over {:.1} s)\n{t}\n{system}", s.load, s.requests, s.window_s)
}
