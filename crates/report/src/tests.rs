//! The conclusion's sentences, the exports and the level columns, on a run of two hand-made
//! levels (`goodput_results::testing`) and the checked-in fixtures.

use crate::columns::{self, Output, LEVEL};
use crate::export::{self, LevelRow};
use crate::Conclusion;
use goodput_results::files::read_csv;
use goodput_results::testing::{thinking_levels, two_levels};
use goodput_results::{Results, RunSummary};
use std::path::{Path, PathBuf};

fn temp(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("goodput-report-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    d
}

fn fixture(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../tests/fixtures").join(name)
}

#[test]
fn the_conclusion_says_the_stored_verdict() {
    let (s, _) = two_levels();
    let conclusion = Conclusion::of(&s).render();
    assert!(
        conclusion.contains("the usable capacity is 1 users: every SLO holds there and at every level below (percentiles and means with 95 % confidence, maxima and rates as counted)"),
        "{conclusion}"
    );
    assert!(conclusion.contains("median 41 ms of handoff and queue"), "{conclusion}");
    assert!(
        conclusion.contains("At 2 users the SLOs break: ttft_max <= 100ms (measured 150 ms: breaks)"),
        "{conclusion}"
    );
}

#[test]
fn results_of_the_previous_release_show_their_own_conclusion() {
    for name in ["run-small", "run-v0.1"] {
        let r = Results::read(&fixture(name)).unwrap();
        assert_eq!(crate::conclusion::shown(&r), r.conclusion, "{name}: format 1 keeps its conclusion.txt");
        assert!(r.conclusion.starts_with("In the short-qa scenario"), "{name}");
    }
}

#[test]
fn exports_hold_the_levels() {
    let dir = temp("export");
    std::fs::create_dir_all(&dir).unwrap();
    let (s, _) = two_levels();
    export::csv(&dir.join("l.csv"), &s).unwrap();
    let rows: Vec<LevelRow> = read_csv(&dir.join("l.csv")).unwrap();
    assert_eq!(rows, s.levels.iter().map(LevelRow::of).collect::<Vec<_>>());
    assert!(!rows[1].slos_hold && rows[0].slos_hold);
    // Hand-computed: 5 requests a level, the fifth an error; TTFT 20 ms at 1 user, 150 at 2.
    assert_eq!((rows[0].requests, rows[0].completed, rows[0].load), (5, 4, 1.0));
    assert!((rows[0].ttft_p50_ms.unwrap() - 20.0).abs() < 1e-9, "{:?}", rows[0]);
    assert!((rows[1].ttft_p95_ms.unwrap() - 150.0).abs() < 1e-9, "{:?}", rows[1]);
    assert!((rows[0].error_rate - 0.2).abs() < 1e-12);
    let md = export::markdown_table(&s);
    assert_eq!(md.lines().count(), 4, "{md}");
    assert!(md.lines().nth(3).unwrap().ends_with("| broken |"), "{md}");
    assert!(md.starts_with("| load (users) | requests | req/s |"), "{md}");
    export::json(&dir.join("s.json"), &s).unwrap();
    let back: RunSummary = serde_json::from_slice(&std::fs::read(dir.join("s.json")).unwrap()).unwrap();
    assert_eq!(back, s);
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn the_csv_columns_are_the_level_row_s_fields_in_order() {
    let (s, _) = two_levels();
    let mut w = csv::Writer::from_writer(Vec::new());
    w.serialize(LevelRow::of(&s.levels[0])).unwrap();
    let text = String::from_utf8(w.into_inner().unwrap()).unwrap();
    let keys: Vec<&str> = columns::shown(Output::Csv, &s.levels).iter().map(|c| c.key).collect();
    assert_eq!(text.lines().next().unwrap(), keys.join(","));
    // Every column is named once, and a time's key says its unit.
    for (i, c) in LEVEL.iter().enumerate() {
        assert!(LEVEL[..i].iter().all(|d| d.key != c.key), "{} twice", c.key);
        assert_eq!(c.unit == "ms", c.key.ends_with("_ms"), "{}", c.key);
    }
}

#[test]
fn each_output_shows_its_own_columns() {
    let levels = two_levels().0.levels;
    let headers = |out| {
        let cols = columns::shown(out, &levels);
        cols.iter().map(|c| c.header(out, goodput_results::LoadUnit::Users)).collect::<Vec<_>>().join("|")
    };
    assert_eq!(
        headers(Output::Console),
        "load (users)|n|ok|req/s|out tok/s|goodput|TTFT p50|TTFT p95|TPOT p50|TPOT p95|E2E p95|user tok/s|wait p95|queue p95|prefill p95|KV max|run/wait max|preempt|harness CPU|lag p99|SLOs"
    );
    assert_eq!(
        headers(Output::Html),
        "load (users)|requests|req/s|out tok/s|goodput|TTFT p50|TTFT p95|TPOT p50|TPOT p95|E2E p95|engine wait p95|queue p95|prefill p95|KV max|SLOs"
    );
    assert_eq!(
        headers(Output::Markdown),
        "load (users)|requests|req/s|out tok/s|goodput|TTFT p50|TTFT p95|TPOT p50|TPOT p95|E2E p95|engine wait p95|queue p95|KV max|SLOs"
    );
}

#[test]
fn html_escaping_covers_attributes() {
    assert_eq!(crate::html::escape(r#"<a href="x">&</a>"#), "&lt;a href=&quot;x&quot;&gt;&amp;&lt;/a&gt;");
}

#[test]
fn a_reasoning_run_shows_ttfo_and_thinking_everywhere() {
    let s = thinking_levels();
    // Hand-computed: tokens at ttft + 10 ms·i, the answer from token 6 on, so TTFO = TTFT + 60
    // ms and reasoning time 60 ms; 6 of 8 tokens are reasoning (75 %).
    let l = &s.levels[0];
    assert_eq!(l.summary.load, 1.0);
    let console = crate::console::levels(&s.levels, s.load_unit, "tiny", "reasoning", Output::Console);
    assert!(
        console.contains("TTFO p95") && console.contains("think p50") && console.contains("think share"),
        "{console}"
    );
    assert!(console.contains(" 80.0 ┆") && console.contains(" 60.0 ┆") && console.contains("75 % ┆"), "{console}");
    let layers = crate::console::layers(l, s.load_unit);
    assert!(layers.contains("TTFO (ms)") && layers.contains("reasoning tokens"), "{layers}");
    // The CSV has the columns and reads them back; a run without reasoning has none.
    let row = LevelRow::of(l);
    assert_eq!((row.ttfo_p95_ms, row.reasoning_time_p50_ms, row.reasoning_share), (Some(80.0), Some(60.0), Some(0.75)));
    let plain = two_levels().0;
    assert!(
        !crate::console::levels(&plain.levels, plain.load_unit, "tiny", "short-qa", Output::Console).contains("TTFO")
    );
    assert!(!crate::console::layers(&plain.levels[0], plain.load_unit).contains("TTFO"));
    assert!(export::markdown_table(&s).contains("| TTFO p95 |"));
    // The conclusion: the answer starts after 80 ms (median), 60 ms of it thinking.
    let c = Conclusion::of(&s).body();
    assert!(
        c.contains("Users wait 0.08 s (median; P95 0.08 s) for the answer to start, of which 0.06 s is thinking (median reasoning time, 6 tokens); reasoning is 75 % of the output tokens."),
        "{c}"
    );
    assert!(!Conclusion::of(&plain).body().contains("thinking"));
    // Reasoning cut by max_tokens before any answer (vLLM's deepseek_r1 parser on dummy
    // weights): the columns stay, TTFO shows a dash, the conclusion says no answer started.
    let mut cut = s.clone();
    for l in &mut cut.levels {
        (l.summary.ttfo, l.summary.reasoning_time) = (None, None);
    }
    let c = Conclusion::of(&cut).body();
    assert!(c.contains("No answer started") && c.contains("median 6 reasoning tokens"), "{c}");
    assert!(crate::console::levels(&cut.levels, cut.load_unit, "tiny", "r", Output::Console).contains("TTFO p95"));
    // The page has the TTFT vs TTFO chart; a run without reasoning has not.
    let has_chart = |s: &RunSummary| {
        let r = Results {
            dir: PathBuf::new(),
            summary: s.clone(),
            records: vec![],
            series: vec![],
            conclusion: String::new(),
        };
        crate::html::charts(&r).iter().any(|c| c.id == "ttft-vs-ttfo")
    };
    assert!(has_chart(&s) && !has_chart(&plain));
}

#[test]
fn the_console_colors_its_verdicts_only_when_asked() {
    let (s, _) = two_levels();
    let table = |color| {
        crate::console::set_color(color);
        let t = crate::console::levels(&s.levels, s.load_unit, "m", "w", Output::Console);
        crate::console::set_color(false);
        t
    };
    let plain = table(false);
    assert!(!plain.contains('\u{1b}'), "{plain}");
    assert!(plain.contains("hold") && plain.contains("broken"));
    let colored = table(true);
    // Green (bright, 10) where the SLOs hold, red (9) where broken; the words stay.
    let styled = |code: &str, word: &str| {
        colored.split(&format!("\u{1b}[38;5;{code}m")).skip(1).any(|rest| rest.trim_start().starts_with(word))
    };
    assert!(styled("10", "hold") && styled("9", "broken"), "{colored:?}");
    let strip = |t: &str| {
        let mut out = String::new();
        let mut esc = false;
        for ch in t.chars() {
            match (esc, ch) {
                (false, '\u{1b}') => esc = true,
                (true, 'm') => esc = false,
                (false, c) => out.push(c),
                _ => {}
            }
        }
        out
    };
    assert_eq!(strip(&colored), plain, "color changes no character of the table");
}

/// Property tests of the conclusion (issue 48): over generated sweeps, every sentence agrees
/// with the typed numbers it is written from.
mod conclusion_properties {
    use crate::Conclusion;
    use goodput_core::ClientRecord;
    use goodput_metrics::machine::MachineLoad;
    use goodput_results::testing::{level, record, run_summary};
    use proptest::prelude::*;

    /// One generated level: its TTFT (ms), the engine wait before it (ms), tokens per
    /// request, and whether other processes kept a core busy.
    #[derive(Clone, Debug)]
    struct Gen {
        ttft: u64,
        wait_share: u64,
        tokens: u64,
        busy: bool,
    }

    fn gen() -> impl Strategy<Value = Gen> {
        (5u64..400, 0u64..100, 2u64..20, proptest::bool::weighted(0.2))
            .prop_map(|(ttft, wait_share, tokens, busy)| Gen { ttft, wait_share, tokens, busy })
    }

    fn sweep(levels: &[Gen]) -> goodput_results::RunSummary {
        let mut s = run_summary();
        for (i, g) in levels.iter().enumerate() {
            let load = f64::from(1u32 << i);
            let wait = g.ttft * g.wait_share / 100;
            let records: Vec<ClientRecord> =
                (0..20u64).map(|k| record(1000 * i as u64 + k, g.ttft + k % 7, g.tokens, wait)).collect();
            let mut l = level(load, &records);
            let others = if g.busy { 0.9 } else { 0.05 };
            l.machine = Some(MachineLoad { cpus: 2, other_cores: others, ..Default::default() });
            s.push_level(l);
        }
        s
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(200))]
        #[test]
        fn the_conclusion_agrees_with_its_numbers(levels in proptest::collection::vec(gen(), 1..6)) {
            let s = sweep(&levels);
            let v = s.verdict();
            let text = Conclusion::of(&s).body();
            // Never "hardly queued" where the wait is a material share of TTFT.
            for l in &s.levels {
                let (w, t) = (l.summary.engine_wait.as_ref().unwrap().p95, l.summary.ttft.as_ref().unwrap().p95);
                if w / t >= crate::conclusion::MATERIAL_WAIT_SHARE {
                    let load = l.summary.load;
                    prop_assert!(!text.contains(&format!("Up to {load} users requests are hardly queued")), "{text}");
                    prop_assert!(!text.contains(&format!("Up to {load} users, the highest level run, requests are hardly queued")), "{text}");
                }
            }
            // One capacity figure, the verdict's, "at least" exactly when the limit was not reached.
            prop_assert!(text.matches("usable capacity is").count() <= 1, "{text}");
            let at_least = text.contains("usable capacity is at least");
            prop_assert_eq!(at_least, v.reach == Some(goodput_metrics::capacity::Reach::NotReached), "{}", text);
            if let Some(u) = v.usable {
                prop_assert!(text.contains(&format!("usable capacity is {u} users")) || text.contains(&format!("at least {u} users")), "{text}");
                prop_assert!(s.levels.iter().filter(|l| l.summary.load <= u).all(|l| l.summary.slos_surely_hold()));
            } else {
                prop_assert!(text.contains("No level held the SLOs"), "{text}");
            }
            // The caution about the machine exactly when a level ran on a busy one.
            let busy = levels.iter().filter(|g| g.busy).count();
            prop_assert_eq!(text.contains("the machine was busy"), busy > 0, "{}", text);
            if busy > 0 {
                let needle = format!("busy during {busy} of {} levels", levels.len());
                prop_assert!(text.contains(&needle), "{}", text);
            }
            // A P95 and its interval in the same places ("1.5 ms [1.5–1.6 ms]", never "1 ms
            // [1.5–1.6 ms]").
            for key in ["P95 TTFT ", "P95 TPOT "] {
                let Some(rest) = text.split(key).nth(1) else { continue };
                let Some((value, after)) = rest.split_once(" ms") else { continue };
                let places = |t: &str| t.split_once('.').map_or(0, |(_, f)| f.len());
                if let Some((iv, _)) = after.strip_prefix(" [").and_then(|a| a.split_once(" ms]")) {
                    for end in iv.split('–').filter(|e| *e != "?") {
                        prop_assert_eq!(places(value), places(end), "{}", text);
                    }
                }
            }
            // The headline's throughput is the described level's, in its interval's places
            // (one decimal below 100 tok/s).
            let shown = v.usable.and_then(|u| s.level(u)).unwrap_or(&s.levels[0]);
            if shown.summary.completed > 0 {
                let x = shown.summary.output_throughput;
                let hi = shown.summary.intervals.as_ref().and_then(|i| i.output_throughput).and_then(|i| i.hi).unwrap_or(x);
                let tps = if hi < 100.0 { format!("total output {x:.1} tok/s") } else { format!("total output {x:.0} tok/s") };
                prop_assert!(text.contains(&tps), "{}", text);
            }
        }
    }
}

/// Speculative decoding, where a server's counters show it, is a table of its own beside each
/// level's TPOT: 225 of 300 drafted tokens accepted over 100 drafts is 75.0 % and 3.25 tokens a
/// step; a run without the counters prints no such table.
#[test]
fn speculative_decoding_is_shown_beside_tpot_where_the_server_counts_it() {
    use goodput_metrics::server::{ServerSide, SpecDecode};
    let (mut s, _) = two_levels();
    assert!(crate::console::spec_decode(&s.levels, s.load_unit).is_none());
    let d = SpecDecode {
        drafts: Some(100.0),
        draft_tokens: Some(300.0),
        accepted_tokens: Some(225.0),
        ..Default::default()
    };
    s.levels[1].server = Some(ServerSide { scrapes: 2, spec_decode: Some(d), ..Default::default() });
    let t = crate::console::spec_decode(&s.levels, s.load_unit).unwrap();
    let tpot = s.levels[1].summary.tpot.as_ref().unwrap().p95 * 1e3;
    let row = t.lines().find(|l| l.contains("75.0 %")).expect("the level's row");
    assert!(
        row.contains("300") && row.contains("225") && row.contains("3.25") && row.contains(&format!("{tpot:.1}")),
        "{t}"
    );
    assert_eq!(t.lines().filter(|l| l.contains(" %")).count(), 1, "one level has the counters: {t}");
}
