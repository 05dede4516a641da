//! Service-level objectives: `--slo ttft_p95=2s,tpot_p95=50ms,e2e_p95=30s,error_rate=1%`.
//!
//! An SLO names a metric of the contract, a statistic over the level's raw samples (P50, P90,
//! P95, P99, mean, max; rates for errors and timeouts) and a bound. Latencies and rates must
//! stay at or below the bound; `per_user_tps` must stay at or above it.

use serde::{Deserialize, Serialize};
use std::fmt;
use std::time::Duration;

/// Why a metric key (`ttft_p95`, `error_rate`) is not one.
#[derive(Clone, Debug, PartialEq, thiserror::Error)]
pub enum KeyError {
    #[error("unknown metric `{key}`; known: {known}")]
    UnknownMetric { key: String, known: String },
    #[error("{metric} is a rate and takes no statistic")]
    RateWithStatistic { metric: &'static str },
    #[error("name a statistic, e.g. {metric}_p95 or {metric}_mean")]
    NoStatistic { metric: &'static str },
    #[error("`{stat}` is not a statistic (p50, p95, p99.9, mean, max)")]
    BadStatistic { stat: String },
}

/// Why an SLO list (`--slo`) is not one; each names the part it is about.
#[derive(Clone, Debug, PartialEq, thiserror::Error)]
pub enum SloError {
    #[error("SLO `{part}`: expected NAME=VALUE, e.g. ttft_p95=2s")]
    NotNameValue { part: String },
    #[error("SLO `{part}`: {source}")]
    Key { part: String, source: KeyError },
    #[error("SLO `{part}`: `{value}` is not {expected}")]
    BadBound { part: String, value: String, expected: &'static str },
    #[error("SLO `{part}`: {metric} is given twice")]
    Twice { part: String, metric: &'static str },
    #[error("`{spec}` holds no SLO; expected e.g. ttft_p95=2s,tpot_p95=50ms,error_rate=1%")]
    Empty { spec: String },
    #[error("`{text}` is not one SLO")]
    NotOne { text: String },
    #[error("--goodput `{pair}`: expected METRIC:MILLISECONDS, e.g. ttft:200 tpot:50")]
    GoodputPair { pair: String },
    #[error(
        "--goodput `{pair}`: `{metric}` is not one of vLLM's goodput metrics (ttft, tpot, e2el); use --slo for others"
    )]
    GoodputMetric { pair: String, metric: String },
    #[error("--goodput `{pair}`: `{ms}` is not a number of milliseconds")]
    GoodputBound { pair: String, ms: String },
}

/// Metrics an SLO may name (the contract's names).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum Metric {
    Ttft,
    /// Time to the first answer token (reasoning models; `ttft` otherwise).
    Ttfo,
    /// The reasoning phase: first reasoning token to first answer token.
    ReasoningTime,
    Tpot,
    Itl,
    E2e,
    Ntpot,
    PerUserTps,
    QueueTime,
    EngineWait,
    PrefillTime,
    DecodeTime,
    InferenceTime,
    ErrorRate,
    TimeoutRate,
}

impl Metric {
    pub const ALL: [Metric; 15] = [
        Metric::Ttft,
        Metric::Ttfo,
        Metric::ReasoningTime,
        Metric::Tpot,
        Metric::Itl,
        Metric::E2e,
        Metric::Ntpot,
        Metric::PerUserTps,
        Metric::QueueTime,
        Metric::EngineWait,
        Metric::PrefillTime,
        Metric::DecodeTime,
        Metric::InferenceTime,
        Metric::ErrorRate,
        Metric::TimeoutRate,
    ];

    pub fn name(self) -> &'static str {
        match self {
            Metric::Ttft => "ttft",
            Metric::Ttfo => "ttfo",
            Metric::ReasoningTime => "reasoning_time",
            Metric::Tpot => "tpot",
            Metric::Itl => "itl",
            Metric::E2e => "e2e",
            Metric::Ntpot => "ntpot",
            Metric::PerUserTps => "per_user_tps",
            Metric::QueueTime => "queue_time",
            Metric::EngineWait => "engine_wait",
            Metric::PrefillTime => "prefill_time",
            Metric::DecodeTime => "decode_time",
            Metric::InferenceTime => "inference_time",
            Metric::ErrorRate => "error_rate",
            Metric::TimeoutRate => "timeout_rate",
        }
    }

    /// A share of requests rather than a per-request value.
    pub fn is_rate(self) -> bool {
        matches!(self, Metric::ErrorRate | Metric::TimeoutRate)
    }

    /// Larger values are better (the bound is a minimum).
    pub fn higher_is_better(self) -> bool {
        self == Metric::PerUserTps
    }

    /// Measured in seconds (bounds take `s`, `ms`, `us`).
    pub fn is_time(self) -> bool {
        !self.is_rate() && !self.higher_is_better()
    }
}

/// The statistic of an SLO.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum Stat {
    /// Percentile 0–100 (linear interpolation, see `stats`).
    P(f64),
    Mean,
    Max,
    /// The share of requests (for rate metrics).
    Rate,
}

/// One objective: `stat(metric) ≤ bound` (or `≥` when higher is better). Read back from its
/// fields, or from its display form (`"ttft_p95 <= 1s"`, as results files before the typed
/// summary stored their SLO list).
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(try_from = "SloRepr")]
pub struct Slo {
    pub metric: Metric,
    pub stat: Stat,
    /// Seconds for times, a fraction (0.01 = 1 %) for rates, tokens/s for per_user_tps.
    pub bound: f64,
}

/// An SLO as written: its fields, or its display form.
#[derive(Deserialize, schemars::JsonSchema)]
#[serde(untagged)]
enum SloRepr {
    Fields { metric: Metric, stat: Stat, bound: f64 },
    Text(String),
}

impl TryFrom<SloRepr> for Slo {
    type Error = SloError;
    fn try_from(r: SloRepr) -> Result<Self, SloError> {
        match r {
            SloRepr::Fields { metric, stat, bound } => Ok(Slo { metric, stat, bound }),
            SloRepr::Text(t) => {
                let spec: String = t.replace(">=", "=").replace("<=", "=").split_whitespace().collect();
                match parse_slos(&spec)?.as_slice() {
                    [one] => Ok(*one),
                    _ => Err(SloError::NotOne { text: t }),
                }
            }
        }
    }
}

impl Slo {
    /// The SLO's key as `--slo` writes it, without its bound: `tpot_p95`, `error_rate`.
    pub fn key(&self) -> String {
        let stat = match self.stat {
            Stat::P(p) => format!("_p{p}"),
            Stat::Mean => "_mean".into(),
            Stat::Max => "_max".into(),
            Stat::Rate => String::new(),
        };
        format!("{}{stat}", self.metric.name())
    }
}

impl fmt::Display for Slo {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let key = self.key();
        let op = if self.metric.higher_is_better() { ">=" } else { "<=" };
        let bound = if self.metric.is_time() {
            format_secs(self.bound)
        } else if self.metric.is_rate() {
            format!("{}%", self.bound * 100.0)
        } else {
            format!("{}", self.bound)
        };
        write!(f, "{key} {op} {bound}")
    }
}

fn format_secs(s: f64) -> String {
    if s >= 1.0 {
        format!("{s}s")
    } else {
        format!("{}ms", (s * 1e6).round() / 1e3)
    }
}

impl Slo {
    /// Whether a measured statistic meets the objective.
    pub fn holds(&self, value: f64) -> bool {
        if value.is_nan() {
            return false;
        }
        if self.metric.higher_is_better() {
            value >= self.bound
        } else {
            value <= self.bound
        }
    }

    /// One pair of vLLM's `--goodput` (`ttft:200`, `tpot:50`, `e2el:5000`: a metric and a
    /// bound in milliseconds) as the SLO it means: the metric's value of every good request
    /// at most the bound.
    pub fn from_vllm_goodput(pair: &str) -> Result<Slo, SloError> {
        let Some((key, ms)) = pair.split_once(':') else {
            return Err(SloError::GoodputPair { pair: pair.into() });
        };
        let metric = match key.trim() {
            "ttft" => Metric::Ttft,
            "tpot" => Metric::Tpot,
            "e2el" => Metric::E2e,
            other => return Err(SloError::GoodputMetric { pair: pair.into(), metric: other.into() }),
        };
        let bound = ms.trim().parse::<f64>().ok().filter(|v| v.is_finite() && *v >= 0.0);
        let Some(bound) = bound else { return Err(SloError::GoodputBound { pair: pair.into(), ms: ms.into() }) };
        Ok(Slo { metric, stat: Stat::Max, bound: bound / 1e3 })
    }

    /// Whether one request's own value meets the bound (for goodput: a request is good when
    /// every per-request SLO holds for it; rate SLOs ask that it did not fail/time out).
    pub fn request_holds(&self, value: Option<f64>) -> bool {
        value.is_some_and(|v| self.holds(v))
    }
}

/// Parses `ttft_p95=2s,tpot_p95=50ms,e2e_p95=30s,error_rate=1%`. Errors name the part.
pub fn parse_slos(s: &str) -> Result<Vec<Slo>, SloError> {
    let mut out: Vec<Slo> = Vec::new();
    for part in s.split(',').map(str::trim).filter(|p| !p.is_empty()) {
        let slo = parse_one(part)?;
        if out.iter().any(|o| o.metric == slo.metric && o.stat == slo.stat) {
            return Err(SloError::Twice { part: part.into(), metric: slo.metric.name() });
        }
        out.push(slo);
    }
    if out.is_empty() {
        return Err(SloError::Empty { spec: s.into() });
    }
    Ok(out)
}

/// A metric and its statistic from a key such as `ttft_p95`, `tpot_mean`, `e2e_max` or
/// `error_rate` (what SLOs and comparisons name).
pub fn parse_key(key: &str) -> Result<(Metric, Stat), KeyError> {
    // Longest metric name that prefixes the key.
    let metric = Metric::ALL
        .iter()
        .copied()
        .filter(|m| key == m.name() || key.starts_with(&format!("{}_", m.name())))
        .max_by_key(|m| m.name().len())
        .ok_or_else(|| KeyError::UnknownMetric {
            key: key.into(),
            known: Metric::ALL.iter().map(|m| m.name()).collect::<Vec<_>>().join(", "),
        })?;
    let rest = key[metric.name().len()..].trim_start_matches('_');
    let stat = if metric.is_rate() {
        if !rest.is_empty() {
            return Err(KeyError::RateWithStatistic { metric: metric.name() });
        }
        Stat::Rate
    } else {
        match rest {
            "mean" | "avg" => Stat::Mean,
            "max" => Stat::Max,
            "" => return Err(KeyError::NoStatistic { metric: metric.name() }),
            p => Stat::P(
                p.strip_prefix('p')
                    .and_then(|x| x.parse().ok())
                    .filter(|x: &f64| (0.0..=100.0).contains(x))
                    .ok_or_else(|| KeyError::BadStatistic { stat: p.into() })?,
            ),
        }
    };
    Ok((metric, stat))
}

fn parse_one(part: &str) -> Result<Slo, SloError> {
    let (key, value) = part.split_once('=').ok_or_else(|| SloError::NotNameValue { part: part.into() })?;
    let (metric, stat) = parse_key(key.trim()).map_err(|source| SloError::Key { part: part.into(), source })?;
    let value = value.trim();
    let (bound, expected) = if metric.is_time() {
        (parse_secs(value), "a duration (2s, 50ms, 300us)")
    } else if metric.is_rate() {
        let v = match value.strip_suffix('%') {
            Some(p) => p.trim().parse::<f64>().ok().map(|x| x / 100.0),
            None => value.parse::<f64>().ok(),
        };
        (v.filter(|x| (0.0..=1.0).contains(x)), "a rate (1%, 0.5%, 0.01)")
    } else {
        let v = value.parse::<f64>().ok().filter(|x| x.is_finite() && *x > 0.0);
        (v, "a positive number of tokens per second")
    };
    let bound = bound.ok_or_else(|| SloError::BadBound { part: part.into(), value: value.into(), expected })?;
    Ok(Slo { metric, stat, bound })
}

/// `2s`, `1.5s`, `50ms`, `300us` → seconds.
pub fn parse_secs(s: &str) -> Option<f64> {
    let s = s.trim();
    let (num, scale) = if let Some(n) = s.strip_suffix("ms") {
        (n, 1e-3)
    } else if let Some(n) = s.strip_suffix("us").or_else(|| s.strip_suffix("µs")) {
        (n, 1e-6)
    } else if let Some(n) = s.strip_suffix('s') {
        (n, 1.0)
    } else if let Some(n) = s.strip_suffix('m') {
        (n, 60.0)
    } else {
        return None;
    };
    let v: f64 = num.trim().parse().ok()?;
    let secs = v * scale;
    (secs.is_finite() && secs >= 0.0).then_some(secs)
}

/// The longest duration any flag takes (a year; the run's own bounds are tighter): beyond it
/// a `Duration` cannot even hold some values (`1e300s`).
const MAX_FLAG_SECS: f64 = 366.0 * 86_400.0;

/// A duration flag's value refused.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum DurationError {
    #[error("`{0}` is longer than a year, the longest duration goodput takes")]
    TooLong(String),
    /// Not a number with a unit (or not a positive one, where zero is not taken).
    #[error("`{value}` is not a duration ({example})")]
    NotADuration { value: String, example: &'static str },
}

fn duration_within(s: &str, secs: Option<f64>, example: &'static str) -> Result<Duration, DurationError> {
    let not = || DurationError::NotADuration { value: s.into(), example };
    match secs {
        Some(x) if x > MAX_FLAG_SECS => Err(DurationError::TooLong(s.into())),
        Some(x) => Duration::try_from_secs_f64(x).map_err(|_| not()),
        None => Err(not()),
    }
}

/// A duration or zero; zero needs no unit (`0`, `0s`).
pub fn parse_duration_or_zero(s: &str) -> Result<Duration, DurationError> {
    if s.trim() == "0" {
        return Ok(Duration::ZERO);
    }
    duration_within(s, parse_secs(s).filter(|x| *x >= 0.0), "0s, 500ms")
}

/// A positive duration with its unit (`120s`, `500ms`, `2m`).
pub fn parse_duration(s: &str) -> Result<Duration, DurationError> {
    duration_within(s, parse_secs(s).filter(|x| *x > 0.0), "120s, 500ms")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_the_documented_example() {
        let s = parse_slos("ttft_p95=2s,tpot_p95=50ms,e2e_p95=30s,error_rate=1%").unwrap();
        assert_eq!(s.len(), 4);
        assert_eq!(s[0], Slo { metric: Metric::Ttft, stat: Stat::P(95.0), bound: 2.0 });
        assert_eq!(s[1], Slo { metric: Metric::Tpot, stat: Stat::P(95.0), bound: 0.05 });
        assert_eq!(s[3], Slo { metric: Metric::ErrorRate, stat: Stat::Rate, bound: 0.01 });
        assert_eq!(s[1].to_string(), "tpot_p95 <= 50ms");
        let s = parse_slos("per_user_tps_p10=20, queue_time_mean=300us, itl_p99.9=0.2s").unwrap();
        assert_eq!(s[0].metric, Metric::PerUserTps);
        assert!(s[0].holds(25.0) && !s[0].holds(15.0));
        assert_eq!(s[1], Slo { metric: Metric::QueueTime, stat: Stat::Mean, bound: 300e-6 });
        assert_eq!(s[2].stat, Stat::P(99.9));
    }

    #[test]
    fn bad_slos_name_the_problem() {
        let e = |s: &str| parse_slos(s).unwrap_err().to_string();
        assert!(e("latency_p95=2s").contains("unknown metric"));
        assert!(e("ttft=2s").contains("name a statistic"));
        assert!(e("ttft_p101=2s").contains("not a statistic"));
        assert!(e("ttft_p95=2").contains("not a duration"));
        assert!(e("ttft_p95=-2s").contains("not a duration"));
        assert!(e("error_rate=150%").contains("not a rate"));
        assert!(e("error_rate_p95=1%").contains("takes no statistic"));
        assert!(e("ttft_p95").contains("NAME=VALUE"));
        assert!(e("ttft_p95=1s,ttft_p95=2s").contains("twice"));
        assert!(e("").contains("no SLO"));
    }

    #[test]
    fn slos_read_back_from_their_fields_or_their_display_form() {
        for s in
            parse_slos("ttft_p95=1s,tpot_p95=50ms,error_rate=1%,per_user_tps_p10=20,engine_wait_p99=300us").unwrap()
        {
            let fields: Slo = serde_json::from_str(&serde_json::to_string(&s).unwrap()).unwrap();
            let text: Slo = serde_json::from_value(serde_json::Value::String(s.to_string())).unwrap();
            assert_eq!((fields, text), (s, s), "{s}");
        }
        assert!(serde_json::from_str::<Slo>("\"ttft_p95 <= soon\"").is_err());
    }

    #[test]
    fn bounds_hold_inclusively_and_nan_fails() {
        let s = Slo { metric: Metric::Ttft, stat: Stat::P(95.0), bound: 2.0 };
        assert!(s.holds(2.0) && !s.holds(2.0001) && !s.holds(f64::NAN));
        assert!(s.request_holds(Some(1.0)) && !s.request_holds(None));
        assert_eq!(parse_secs("1.5s"), Some(1.5));
        assert_eq!(parse_secs("2m"), Some(120.0));
    }
}
