//! A chosen set of latency columns for the sweep's table (vLLM `bench serve`'s
//! `--percentile-metrics ttft,tpot,itl,e2el` and `--metric-percentiles 50,90,99`): in place of
//! the table's own TTFT, TPOT and E2E percentile columns, one column per chosen metric and
//! percentile, in the order given. The other columns stay as [`crate::columns`] defines them.
//! Percentiles are those every level summary holds (50, 90, 95, 99); no other can be shown
//! without the raw samples.

use super::new;
use crate::columns::{self, Output};
use crate::text::{ms, num};
use goodput_metrics::Summary;
use goodput_results::{LevelReport, LoadUnit};
use std::str::FromStr;

/// A latency the sweep's table can show percentiles of, by vLLM's names (`e2el` is goodput's
/// `e2e`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Latency {
    Ttft,
    Tpot,
    Itl,
    E2e,
}

impl Latency {
    /// The column's name on the console.
    pub fn label(self) -> &'static str {
        match self {
            Latency::Ttft => "TTFT",
            Latency::Tpot => "TPOT",
            Latency::Itl => "ITL",
            Latency::E2e => "E2E",
        }
    }

    /// The level's distribution of it.
    fn of(self, l: &LevelReport) -> &Option<Summary> {
        let s = &l.summary;
        match self {
            Latency::Ttft => &s.ttft,
            Latency::Tpot => &s.tpot,
            Latency::Itl => &s.itl,
            Latency::E2e => &s.e2e,
        }
    }

    /// Decimals of its milliseconds, as the three-layer table writes them.
    fn decimals(self) -> usize {
        match self {
            Latency::Ttft => 1,
            Latency::Tpot | Latency::Itl => 2,
            Latency::E2e => 0,
        }
    }
}

impl FromStr for Latency {
    type Err = goodput_core::ValueError;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s.trim() {
            "ttft" => Ok(Latency::Ttft),
            "tpot" => Ok(Latency::Tpot),
            "itl" => Ok(Latency::Itl),
            "e2el" | "e2e" => Ok(Latency::E2e),
            other => Err(goodput_core::ValueError::new(
                other,
                "not a latency goodput shows percentiles of; choose from ttft, tpot, itl, e2el",
            )),
        }
    }
}

/// The percentiles every level summary holds.
pub const PERCENTILES: [u32; 4] = [50, 90, 95, 99];

/// A percentile of [`PERCENTILES`], from `99` or `99.0`; any other is refused, naming them.
pub fn parse_percentile(s: &str) -> Result<u32, goodput_core::ValueError> {
    let p: f64 = s.trim().parse().map_err(|_| goodput_core::ValueError::new(s, "not a percentile (e.g. 99)"))?;
    PERCENTILES.iter().copied().find(|&q| f64::from(q) == p).ok_or_else(|| {
        goodput_core::ValueError::new(
            s,
            "goodput keeps the 50th, 90th, 95th and 99th percentiles of every latency; choose among 50,90,95,99",
        )
    })
}

/// The latency columns to show: each metric at each percentile.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LatencyColumns {
    pub metrics: Vec<Latency>,
    pub percentiles: Vec<u32>,
}

impl LatencyColumns {
    /// vLLM's defaults for the one not given: `ttft,tpot,itl` and `99`.
    pub fn new(metrics: Option<Vec<Latency>>, percentiles: Option<Vec<u32>>) -> Self {
        LatencyColumns {
            metrics: metrics.unwrap_or_else(|| vec![Latency::Ttft, Latency::Tpot, Latency::Itl]),
            percentiles: percentiles.unwrap_or_else(|| vec![99]),
        }
    }

    /// The headers and, per level, the cells of the chosen columns.
    fn header(&self) -> Vec<String> {
        self.pairs().map(|(m, p)| format!("{} p{p}", m.label())).collect()
    }

    fn cells(&self, l: &LevelReport) -> Vec<String> {
        self.pairs()
            .map(|(m, p)| {
                let stat: fn(&Summary) -> f64 = match p {
                    50 => |s| s.p50,
                    90 => |s| s.p90,
                    95 => |s| s.p95,
                    _ => |s| s.p99,
                };
                num(ms(m.of(l), stat), m.decimals())
            })
            .collect()
    }

    fn pairs(&self) -> impl Iterator<Item = (Latency, u32)> + '_ {
        self.metrics.iter().flat_map(|&m| self.percentiles.iter().map(move |&p| (m, p)))
    }
}

/// Whether a column of the level table is one of the latency percentiles the chosen columns
/// replace (`ttft_p95_ms`, `e2e_p95_ms`, …).
fn replaced(key: &str) -> bool {
    let Some(rest) = ["ttft_p", "tpot_p", "itl_p", "e2e_p"].iter().find_map(|m| key.strip_prefix(m)) else {
        return false;
    };
    rest.strip_suffix("_ms").is_some_and(|p| !p.is_empty() && p.bytes().all(|b| b.is_ascii_digit()))
}

/// [`super::levels`] with `cols` in place of its latency percentile columns (where the first
/// of them stood).
pub fn levels_with(
    levels: &[LevelReport],
    unit: LoadUnit,
    model: &str,
    scenario: &str,
    out: Output,
    cols: &LatencyColumns,
) -> String {
    let shown = columns::shown(out, levels);
    let at = shown.iter().position(|c| replaced(c.key)).unwrap_or(shown.len());
    let kept: Vec<_> = shown.iter().filter(|c| !replaced(c.key)).collect();
    let head = |cs: &[&&columns::Column]| cs.iter().map(|c| c.header(out, unit)).collect::<Vec<_>>();
    let header = [head(&kept[..at]), cols.header(), head(&kept[at..])].concat();
    let mut t = new(&header.iter().map(String::as_str).collect::<Vec<_>>());
    for l in levels {
        let cells = |cs: &[&&columns::Column]| cs.iter().map(|c| super::cell(c, l)).collect::<Vec<_>>();
        let chosen = cols.cells(l).into_iter().map(comfy_table::Cell::new).collect();
        t.add_row([cells(&kept[..at]), chosen, cells(&kept[at..])].concat());
    }
    format!("{}\n{t}", super::caption(levels, model, scenario, out))
}

#[cfg(test)]
mod tests {
    use super::*;
    use goodput_results::testing::two_levels;

    #[test]
    fn chosen_latencies_replace_the_table_s_own_percentile_columns() {
        let (s, _) = two_levels();
        let cols = LatencyColumns::new(Some(vec![Latency::Ttft, Latency::E2e]), Some(vec![50, 99]));
        let t = levels_with(&s.levels, s.load_unit, "m", "w", Output::Console, &cols);
        let header = t.lines().nth(2).unwrap();
        for h in ["TTFT p50", "TTFT p99", "E2E p50", "E2E p99", "out tok/s", "wait p95"] {
            assert!(header.contains(h), "{h} in {header}");
        }
        for h in ["TTFT p95", "TPOT", "E2E p95", "ITL"] {
            assert!(!header.contains(h), "{h} not in {header}");
        }
        // In order: the chosen columns where TTFT p50 stood, before the engine's columns.
        let (a, b, c) =
            (header.find("goodput").unwrap(), header.find("TTFT p50").unwrap(), header.find("E2E p99").unwrap());
        assert!(a < b && b < c && c < header.find("wait p95").unwrap());
        // The level's own P99 TTFT, in ms with one decimal.
        let p99 = s.levels[0].summary.ttft.as_ref().unwrap().p99 * 1e3;
        assert!(t.contains(&format!("{p99:.1}")), "{t}");
        // vLLM's defaults for the flag not given.
        assert_eq!(LatencyColumns::new(None, None).header(), ["TTFT p99", "TPOT p99", "ITL p99"]);
    }

    #[test]
    fn names_and_percentiles_are_checked() {
        assert_eq!("e2el".parse::<Latency>(), Ok(Latency::E2e));
        assert_eq!("e2e".parse::<Latency>(), Ok(Latency::E2e));
        assert!("ttfo".parse::<Latency>().unwrap_err().expected.contains("ttft, tpot, itl, e2el"));
        assert_eq!(parse_percentile("99"), Ok(99));
        assert_eq!(parse_percentile("90.0"), Ok(90));
        let e = parse_percentile("75").unwrap_err();
        assert!(e.expected.contains("50,90,95,99") && e.value == "75", "{e}");
        assert!(parse_percentile("high").is_err());
        assert!(replaced("ttft_p95_ms") && replaced("e2e_p95_ms") && !replaced("ttfo_p95_ms"));
        assert!(!replaced("engine_wait_p95_ms") && !replaced("tpot_p_ms"));
    }
}
