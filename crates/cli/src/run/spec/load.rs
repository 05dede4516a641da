//! How a run paces its load, from the flags: the cap on requests in flight of an open loop
//! (`--max-concurrency`), a closed loop's ramp and think jitter; the SLOs with vLLM's
//! `--goodput` read into them; the latency columns of the final table
//! (`--percentile-metrics`, `--metric-percentiles`).

use crate::run::args::{RunArgs, DEFAULT_SLOS};
use anyhow::{bail, Context, Result};
use goodput_metrics::slo::{parse_slos, Slo};
use goodput_report::console::latency::LatencyColumns;

/// The SLOs: `--slo` (or the default) with vLLM's `--goodput METRIC:MS` pairs read as
/// `METRIC_max=MS` — with `--goodput` and no `--slo`, the default keeps only its rates.
pub fn slos(a: &RunArgs) -> Result<Vec<Slo>> {
    let mut slos = parse_slos(a.slo.as_deref().unwrap_or(DEFAULT_SLOS)).context("--slo")?;
    let Some(pairs) = &a.goodput else { return Ok(slos) };
    if a.slo.is_none() {
        slos.retain(|s| s.metric.is_rate());
    }
    for pair in pairs.iter().filter(|p| !p.trim().is_empty()) {
        let slo = Slo::from_vllm_goodput(pair)?;
        if slos.iter().any(|s| s.metric == slo.metric && s.stat == slo.stat) {
            bail!("--goodput {pair}: {} is given twice (in --slo or --goodput)", slo);
        }
        slos.push(slo);
    }
    Ok(slos)
}

/// `--percentile-metrics` and `--metric-percentiles`: the final table's latency columns, if
/// either was given.
pub fn latency_columns(a: &RunArgs) -> Option<LatencyColumns> {
    let (m, p) = (a.percentile_metrics.clone(), a.metric_percentiles.clone());
    (m.is_some() || p.is_some()).then(|| LatencyColumns::new(m, p))
}

#[cfg(test)]
mod tests {
    use super::super::run_spec;
    use super::*;
    use clap::Parser;
    use goodput_bench::run::spec::RunSpec;
    use goodput_workload::Ramp;
    use std::time::Duration;

    /// `goodput run`'s arguments as a parser of their own.
    #[derive(Parser)]
    struct Run {
        #[command(flatten)]
        run: RunArgs,
    }

    fn args(argv: &[&str]) -> Result<RunArgs, clap::Error> {
        Ok(Run::try_parse_from(std::iter::once("goodput").chain(argv.iter().copied()))?.run)
    }

    fn spec(argv: &[&str]) -> Result<RunSpec> {
        run_spec(args(argv)?).map(|(s, _)| s)
    }

    fn error(argv: &[&str]) -> String {
        match spec(argv) {
            Ok(_) => panic!("{argv:?} was taken"),
            Err(e) => format!("{e:#}"),
        }
    }

    #[test]
    fn vllm_s_flags_read_as_goodput_s_own() {
        let (vllm, ours) = (spec(&["--request-rate", "2,4"]).unwrap(), spec(&["--rate", "2,4"]).unwrap());
        assert_eq!(vllm.levels, ours.levels);
        let (vllm, ours) = (spec(&["--num-prompts", "12"]).unwrap(), spec(&["--requests", "12"]).unwrap());
        assert_eq!(vllm.per_level.requests, ours.per_level.requests);
        assert_eq!(ours.per_level.requests, Some(12));
        // vLLM's goodput: every request within every bound, i.e. each metric's max; the
        // default's error rate stays.
        let vllm = spec(&["--goodput", "ttft:200", "tpot:50"]).unwrap();
        let ours = spec(&["--slo", "ttft_max=200ms,tpot_max=50ms,error_rate=1%"]).unwrap();
        let set = |s: &RunSpec| {
            let mut v: Vec<String> = s.slos.iter().map(|x| x.to_string()).collect();
            v.sort();
            v
        };
        assert_eq!(set(&vllm), set(&ours));
        assert_eq!(set(&spec(&["--goodput", "ttft:200 e2el:3000"]).unwrap()).len(), 3, "one quoted argument");
        // With --slo, added to it.
        let both = spec(&["--slo", "ttft_p95=1s", "--goodput", "e2el:3000"]).unwrap();
        assert_eq!(both.slos.iter().map(|s| s.to_string()).collect::<Vec<_>>(), ["ttft_p95 <= 1s", "e2e_max <= 3s"]);
        // The latency columns.
        let shown = |argv: &[&str]| run_spec(args(argv).unwrap()).unwrap().1;
        let cols = shown(&["--percentile-metrics", "ttft,e2el", "--metric-percentiles", "50,99"]).latency_columns;
        let want = LatencyColumns::new(
            Some(vec![goodput_report::console::latency::Latency::Ttft, goodput_report::console::latency::Latency::E2e]),
            Some(vec![50, 99]),
        );
        assert_eq!(cols, Some(want));
        assert_eq!(shown(&[]).latency_columns, None, "the table as always");
    }

    #[test]
    fn bad_pacing_and_vllm_flags_are_refused_with_what_to_do() {
        assert!(error(&["--rate", "5", "--max-concurrency", "0"]).contains("--max-concurrency must be at least 1"));
        assert!(error(&["--concurrency", "4", "--max-concurrency", "2"]).contains("caps an open loop"));
        assert_eq!(spec(&["--rate", "5", "--max-concurrency", "2"]).unwrap().pacing.max_in_flight, Some(2));
        assert!(error(&["--think-jitter", "0.5"]).contains("give --think too"));
        assert!(error(&["--think", "1s", "--think-jitter", "2"]).contains("between 0 and 1"));
        assert!(error(&["--goodput", "itl:5"]).contains("ttft, tpot, e2el"));
        assert!(error(&["--goodput", "ttft=200"]).contains("METRIC:MILLISECONDS"));
        assert!(error(&["--goodput", "ttft:soon"]).contains("not a number of milliseconds"));
        assert!(error(&["--slo", "ttft_max=1s", "--goodput", "ttft:200"]).contains("given twice"));
        let e = args(&["--metric-percentiles", "50,75"]).unwrap_err().to_string();
        assert!(e.contains("50,90,95,99") && e.contains("75"), "{e}");
        assert!(args(&["--percentile-metrics", "ttft,latency"])
            .unwrap_err()
            .to_string()
            .contains("ttft, tpot, itl, e2el"));
        assert!(args(&["--rate", "5", "--ramp", "2s"]).is_err(), "a ramp is a closed loop's");
    }

    #[test]
    fn the_help_states_the_default_slos() {
        use clap::CommandFactory;
        let help = Run::command().render_long_help().to_string();
        assert!(help.contains(DEFAULT_SLOS), "--slo's help names the default");
        assert!(help.contains("--request-rate") && help.contains("--num-prompts"), "the aliases are shown");
    }

    #[test]
    fn the_ramp_is_given_or_paced_by_the_target() {
        let paced = spec(&["--concurrency", "4"]).unwrap().pacing;
        assert_eq!((paced.ramp(), paced.ramp_source(false)), (Ramp::Paced, "one user joining per ended request"));
        let given = spec(&["--concurrency", "4", "--ramp", "0"]).unwrap().pacing;
        assert_eq!((given.ramp(), given.ramp_source(true)), (Ramp::Over(Duration::ZERO), "--ramp"));
        assert_eq!(spec(&["--ramp", "3s"]).unwrap().pacing.ramp(), Ramp::Over(Duration::from_secs(3)));
    }
}
