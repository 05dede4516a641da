//! A single-request scenario given by its lengths on the command line (`--input-len 1500
//! --output-len 300`), as vLLM's random dataset takes them (`--random-input-len`,
//! `--random-output-len`, `--random-range-ratio`, `--random-prefix-len`): no scenario file
//! needed for the common case.

use crate::scenario::{LengthDist, Scenario, MAX_CENTRE};
use goodput_core::ValueError;

/// The longest length a flag may give (a million tokens: beyond any model's context).
pub const MAX_LEN: usize = 1 << 20;

/// A length as a flag gives it: `1500` (fixed), `1500±300` or `1500+-300` (normal, clamped
/// to three deviations and at least 1), `1000..2000` (uniform, both ends included).
pub fn parse_length(s: &str) -> Result<LengthDist, ValueError> {
    let bad = |why: &str| ValueError::new(s, why);
    let count = |x: &str| {
        x.trim().parse::<usize>().ok().filter(|n| (1..=MAX_LEN).contains(n)).ok_or_else(|| {
            bad("a length is a number of tokens from 1 to 1048576: N, MEAN±SD (or MEAN+-SD) or MIN..MAX")
        })
    };
    if let Some((lo, hi)) = s.split_once("..") {
        let (min, max) = (count(lo)?, count(hi)?);
        if min > max {
            return Err(bad("the range ends before it starts"));
        }
        return Ok(if min == max { LengthDist::Fixed { n: min } } else { LengthDist::Uniform { min, max } });
    }
    if let Some((mean, sd)) = s.split_once('±').or_else(|| s.split_once("+-")) {
        let mean = count(mean)?;
        let sd: f64 = sd
            .trim()
            .parse()
            .ok()
            .filter(|x: &f64| x.is_finite() && *x >= 0.0 && *x <= MAX_CENTRE)
            .ok_or_else(|| bad("the spread after ± is a number of tokens, 0 or more"))?;
        return Ok(normal(mean, sd));
    }
    Ok(LengthDist::Fixed { n: count(s)? })
}

/// A normal length of `mean` and `sd`, clamped to three deviations (and at least 1).
fn normal(mean: usize, sd: f64) -> LengthDist {
    if sd < 0.5 {
        return LengthDist::Fixed { n: mean };
    }
    let reach = (3.0 * sd).round() as usize;
    LengthDist::Normal { mean: mean as f64, std: sd, min: mean.saturating_sub(reach).max(1), max: mean + reach }
}

/// `--random-range-ratio R` on a length: uniform in `[n × (1 − R), n × (1 + R)]` as vLLM's
/// random dataset draws it; a distribution that is not a fixed length is kept as given.
pub fn with_range_ratio(d: LengthDist, ratio: f64) -> Result<LengthDist, ValueError> {
    if !(ratio.is_finite() && (0.0..1.0).contains(&ratio)) {
        return Err(ValueError::new(ratio.to_string(), "--random-range-ratio is a fraction from 0 to below 1"));
    }
    Ok(match d {
        LengthDist::Fixed { n } if ratio > 0.0 => {
            let lo = ((n as f64) * (1.0 - ratio)).round().max(1.0) as usize;
            let hi = ((n as f64) * (1.0 + ratio)).round() as usize;
            if lo == hi {
                LengthDist::Fixed { n }
            } else {
                LengthDist::Uniform { min: lo, max: hi }
            }
        }
        other => other,
    })
}

/// The lengths of a scenario given by flags.
#[derive(Clone, Debug, PartialEq)]
pub struct Lengths {
    /// Tokens of each prompt after its shared prefix.
    pub input: LengthDist,
    pub output: LengthDist,
    /// Tokens every prompt starts with (vLLM's `--random-prefix-len`: before the input).
    pub prefix: usize,
}

impl Lengths {
    /// The lengths flags give: none without both lengths; `ratio` spreads a fixed length
    /// ([`with_range_ratio`]); `prefix` at most [`MAX_LEN`].
    pub fn from_flags(
        input: Option<&LengthDist>,
        output: Option<&LengthDist>,
        ratio: Option<f64>,
        prefix: usize,
    ) -> Result<Option<Lengths>, ValueError> {
        let (Some(input), Some(output)) = (input, output) else { return Ok(None) };
        let spread = |d: &LengthDist| ratio.map_or(Ok(d.clone()), |r| with_range_ratio(d.clone(), r));
        if prefix > MAX_LEN {
            return Err(ValueError::new(prefix.to_string(), format!("a prefix of at most {MAX_LEN} tokens")));
        }
        Ok(Some(Lengths { input: spread(input)?, output: spread(output)?, prefix }))
    }

    /// The single-request scenario of these lengths, named `random` as vLLM's dataset is.
    pub fn scenario(&self) -> Scenario {
        let shift = |d: &LengthDist| match *d {
            LengthDist::Fixed { n } => LengthDist::Fixed { n: n + self.prefix },
            LengthDist::Uniform { min, max } => LengthDist::Uniform { min: min + self.prefix, max: max + self.prefix },
            LengthDist::Normal { mean, std, min, max } => LengthDist::Normal {
                mean: mean + self.prefix as f64,
                std,
                min: min + self.prefix,
                max: max + self.prefix,
            },
            LengthDist::LogNormal { median, sigma, min, max } => LengthDist::LogNormal {
                median: median + self.prefix as f64,
                sigma,
                min: min + self.prefix,
                max: max + self.prefix,
            },
        };
        Scenario {
            // vLLM's name for it; every table states the lengths beside the name.
            name: "random".into(),
            input: shift(&self.input),
            output: self.output.clone(),
            shared_prefix: self.prefix,
            reasoning_share: None,
            note: None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lengths_are_fixed_normal_or_a_range() {
        assert_eq!(parse_length("1500"), Ok(LengthDist::Fixed { n: 1500 }));
        assert_eq!(parse_length("1500±300"), Ok(LengthDist::Normal { mean: 1500.0, std: 300.0, min: 600, max: 2400 }));
        assert_eq!(parse_length("100+-50"), Ok(LengthDist::Normal { mean: 100.0, std: 50.0, min: 1, max: 250 }));
        assert_eq!(parse_length("10±0"), Ok(LengthDist::Fixed { n: 10 }));
        assert_eq!(parse_length("1000..2000"), Ok(LengthDist::Uniform { min: 1000, max: 2000 }));
        assert_eq!(parse_length("7..7"), Ok(LengthDist::Fixed { n: 7 }));
        for bad in ["0", "x", "2000..1000", "1e9", "5±-1", "5±nan", "..3"] {
            let e = parse_length(bad).unwrap_err();
            assert_eq!(e.value, bad, "{e}");
        }
    }

    #[test]
    fn a_range_ratio_spreads_a_fixed_length_as_vllm_does() {
        let d = with_range_ratio(LengthDist::Fixed { n: 1000 }, 0.25).unwrap();
        assert_eq!(d, LengthDist::Uniform { min: 750, max: 1250 });
        assert_eq!(with_range_ratio(LengthDist::Fixed { n: 1000 }, 0.0).unwrap(), LengthDist::Fixed { n: 1000 });
        assert!(with_range_ratio(LengthDist::Fixed { n: 1000 }, 1.0).is_err());
    }

    /// vLLM's prefix comes before the random input: the prompt is prefix + input tokens.
    #[test]
    fn a_prefix_is_added_before_the_input() {
        let l = Lengths { input: LengthDist::Fixed { n: 100 }, output: LengthDist::Fixed { n: 20 }, prefix: 50 };
        let s = l.scenario();
        assert_eq!((s.input.clone(), s.shared_prefix), (LengthDist::Fixed { n: 150 }, 50));
        assert_eq!(s.name, "random");
        s.validate(1000).unwrap();
        assert!(s.validate(160).is_err(), "150 in + 20 out exceeds 160");
    }
}
