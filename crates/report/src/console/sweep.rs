//! A sweep on the console: the line on stderr as each level ends, each level's three layers,
//! and the table of every level ([`crate::columns`] as the console shows them).

use super::{cell, new};
use crate::columns::{self, stat_cells, Output, LAYERS, STAT_HEADER};
use crate::text::{graph_text, ms, num, occupancy_text, prefix_text};
use goodput_metrics::interval::Confidence;
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
            "\n    throughput over the steady {:.2}–{:.2} s of {:.2} s (ramp and drain left out): {:.2} req/s, {:.1} in flight{over}",
            w.start_s, w.end_s, w.window_s, s.request_throughput, w.in_flight_mean
        )
    });
    // The prompt lengths the target counted, where they are not the scenario's own.
    let input = s.input_check.filter(|c| (c.counted_mean - c.drawn_mean).abs() >= 0.05).map_or(String::new(), |c| {
        format!(", input {:.1} tok (drawn {:.1}, {:+.1} %)", c.counted_mean, c.drawn_mean, c.off() * 100.0)
    });
    format!(
        "  {} {unit}: {} requests{input}, {:.0} out tok/s{}, TTFT p95 {} ms{}{ttfo}, TPOT p95 {} ms{}, engine wait p95 {} ms (queue {} ms), SLOs {}{steady}",
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

/// One level in a line of at most [`crate::text::WIDTH`] characters, for progress on stderr:
/// its requests, output throughput, the P95 TTFT and TPOT with their 95 % intervals, and the
/// SLOs (the table at the end has the rest).
pub fn level_brief(l: &LevelReport, unit: LoadUnit) -> String {
    let s = &l.summary;
    let iv = s.intervals.clone().unwrap_or_default();
    let p95 = |x, i: Option<goodput_metrics::interval::Interval>| {
        let within = i.map_or(String::new(), |i| format!(" [{}]", i.text(1e3, 1)));
        format!("{} ms{within}", num(ms(x, |x| x.p95), 1))
    };
    format!(
        "  {} {unit}: {} req, {:.0} out tok/s, TTFT p95 {}, TPOT p95 {}, SLOs {}",
        s.load,
        s.requests,
        s.output_throughput,
        p95(&s.ttft, iv.ttft_p95),
        p95(&s.tpot, iv.tpot_p95),
        crate::columns::slos_word(s.confidence())
    )
}

/// The table of a sweep: service layer (TTFT, TPOT, E2E, throughput, goodput) and engine
/// layer (queue, prefill, KV occupancy, running/waiting, preemptions) side by side; the
/// compact table ([`Output::Compact`]) the service layer's P95s, the queue's and the SLOs.
pub fn levels(levels: &[LevelReport], unit: LoadUnit, model: &str, scenario: &str, out: Output) -> String {
    let cols = columns::shown(out, levels);
    let header: Vec<String> = cols.iter().map(|c| c.header(out, unit)).collect();
    let mut t = new(&header.iter().map(String::as_str).collect::<Vec<_>>());
    for l in levels {
        t.add_row(cols.iter().map(|c| cell(c, l)).collect::<Vec<_>>());
    }
    format!("{}\n{t}", caption(levels, model, scenario, out))
}

/// The line above a sweep's table: what was run and how to read the table.
pub fn caption(levels: &[LevelReport], model: &str, scenario: &str, out: Output) -> String {
    let ns = levels.iter().any(|l| {
        let c = l.summary.confidence();
        matches!(c, Confidence::HoldsNotSignificant | Confidence::BreaksNotSignificant)
    });
    let ns = if ns { "; n.s. = not significant: a value's 95 % interval reaches past its bound" } else { "" };
    if out == Output::Compact {
        return format!("{model}, {scenario}\n(times in ms; percentiles over each level's n measured requests, throughputs over its steady window; SLOs hold with 95 % confidence{ns}; --wide: every column)");
    }
    format!("{model}, {scenario} (times in ms; wait = engine wait: handoff into the engine + queue; percentiles over all measured requests, n per level, throughputs over each level's steady window; SLOs: hold = every SLO holds, its percentiles and means with 95 % confidence{ns})")
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

/// What a reader of a finished level must be warned of, each as one sentence: short outputs,
/// server figures that contradict the stream, a busy machine (what it means and what to do
/// said once: `busy_told` where an earlier level said it), and prompts the target counted off
/// the scenario's lengths.
pub fn level_warnings(r: &LevelReport, busy_told: bool) -> Vec<String> {
    let s = &r.summary;
    let mut out = Vec::new();
    if s.short_outputs > 0 {
        out.push(format!(
            "{} of {} completed requests returned fewer output tokens than the scenario requires (the server ignores ignore_eos/min_tokens, or cut them short): output lengths, TPOT and throughput are not the scenario's",
            s.short_outputs, s.completed
        ));
    }
    if !s.server_anomalies.is_empty() {
        let example = |a: &goodput_metrics::http::AnomalyCount| a.example.chars().take(160).collect::<String>();
        let what: Vec<String> =
            s.server_anomalies.iter().map(|a| format!("{} {} (\"{}\")", a.count, a.kind, example(a))).collect();
        out.push(format!(
            "the server's own figures contradict what was sent or streamed: {}, of {} measured requests; refused figures are not used (the client's own counts stand in)",
            what.join(", "),
            s.requests
        ));
    }
    if let Some(m) = &r.machine {
        let busy: Vec<String> = m.busy().iter().map(ToString::to_string).collect();
        if !busy.is_empty() && busy_told {
            out.push(format!("the machine was busy: {}", busy.join("; ")));
        } else if !busy.is_empty() {
            out.push(format!(
                "the machine was busy during the level: {}; its numbers may not reproduce (--repeats measures the spread; pin the engine with --engine-cpus, or use a quiet machine)",
                busy.join("; ")
            ));
        }
    }
    if let Some(x) = &r.saturated {
        out.push(format!(
            "over-saturated: stopped {:.1} s in: requests ended at {:.2}/s of the {:.2}/s offered and their E2E grew from {:.2} s (first third by send time) to {:.2} s (last third), so the queue grows without bound; about {:.0} requests in flight were abandoned, and the level counts as broken",
            x.at_s,
            x.completion_rate,
            x.offered_rate,
            x.early_e2e_s,
            x.late_e2e_s,
            (x.sent_about - x.ended as f64).max(0.0)
        ));
    }
    if let Some(c) = s.input_check.filter(|c| c.strays()) {
        out.push(format!(
            "the target counted a mean prompt of {:.1} tokens where the scenario drew {:.1} ({:+.1} %, over {} requests): a chat template or another tokenizer counts differently, so the load is not the scenario's (give --tokenizer the server's, or send token ids)",
            c.counted_mean,
            c.drawn_mean,
            c.off() * 100.0,
            c.requests
        ));
    }
    out
}
