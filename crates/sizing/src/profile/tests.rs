use super::*;
use crate::fit::{Residuals, TermFit};

/// A profile of a decode-only machine: 1 ms per step, 20 µs per sequence.
pub(crate) fn fixture() -> Profile {
    let term = |term, coefficient: f64, measured| TermFit {
        term,
        coefficient,
        lo: coefficient * 0.95,
        hi: coefficient * 1.05,
        measured,
    };
    Profile {
        kind: PROFILE_KIND.into(),
        format: PROFILE_FORMAT,
        goodput_version: "0.1.0".into(),
        created_unix_s: 1,
        model: "tiny".into(),
        dtype: "f32".into(),
        weights: "dummy".into(),
        engine: ProfileEngine {
            block_size: 16,
            num_blocks: 1024,
            max_num_batched_tokens: 2048,
            max_prefill_tokens: None,
            max_num_seqs: 256,
            max_model_len: 2048,
            prefix_caching: true,
        },
        fingerprint: Fingerprint { cpu: "x".into(), logical_cpus: 2, device: "cpu".into(), ..Default::default() },
        source: "fixture".into(),
        fit: Fit {
            terms: vec![
                term(Term::Fixed, 1e-3, true),
                term(Term::PrefillTokens, 1e-5, true),
                term(Term::PrefillAttention, 0.0, false),
                term(Term::DecodeSeqs, 2e-5, true),
                term(Term::DecodeContext, 0.0, false),
                term(Term::SampledRows, 0.0, false),
            ],
            r2: 0.99,
            residuals: Residuals::default(),
            samples: 100,
        },
        gap_s: 5e-5,
        roofline: None,
        projection: None,
        experts: None,
        selection: Vec::new(),
    }
}

#[test]
fn a_profile_round_trips_through_its_file() {
    let dir = std::env::temp_dir().join(format!("goodput-profile-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("profile.json");
    let p = fixture();
    p.write(&path).unwrap();
    let back = Profile::read(&path).unwrap();
    assert_eq!(back, p);
    assert_eq!(back.cost().coefficients, vec![1e-3, 1e-5, 0.0, 2e-5, 0.0, 0.0]);
    std::fs::remove_dir_all(dir).unwrap();
}

#[test]
fn empty_foreign_and_broken_profiles_are_refused_by_name() {
    let err = |text: &str| Profile::parse(text, "p.json").unwrap_err().to_string();
    assert!(err("  \n").contains("p.json is empty"));
    assert!(err("[1, 2]").contains("not a goodput profile"));
    assert!(err(r#"{"levels": []}"#).contains("it has no `kind`"), "{}", err(r#"{"levels": []}"#));
    assert!(err(r#"{"kind": "goodput-run"}"#).contains("its kind is `goodput-run`"));
    assert!(err(r#"{"kind": "goodput-profile", "format": 9}"#).contains("format 9"));
    let mut v = serde_json::to_value(fixture()).unwrap();
    v["fit"]["terms"][0]["coefficient"] = serde_json::json!(-1.0);
    assert!(err(&v.to_string()).contains("coefficient of `fixed` is -1"), "{}", err(&v.to_string()));
    let mut v = serde_json::to_value(fixture()).unwrap();
    v["surprise"] = serde_json::json!(1);
    assert!(err(&v.to_string()).contains("unknown field `surprise`"));
    let mut v = serde_json::to_value(fixture()).unwrap();
    v["fit"]["terms"][1]["term"] = serde_json::json!({"tokens": 0});
    assert!(err(&v.to_string()).contains("knots start at 1"), "{}", err(&v.to_string()));
    let mut v = serde_json::to_value(fixture()).unwrap();
    v["fit"]["terms"][1]["term"] = serde_json::json!("fixed");
    assert!(err(&v.to_string()).contains("`fixed` appears twice"));
    let mut p = fixture();
    for t in &mut p.fit.terms {
        t.measured = false;
    }
    let text = serde_json::to_string(&p).unwrap();
    assert!(err(&text).contains("no measured term"));
}

#[test]
fn drift_names_the_terms_that_left_their_interval() {
    let old = fixture();
    let mut new = fixture();
    assert!(new.drift(&old).is_empty());
    // Fixed cost 20 % higher, intervals ±5 %: drifted. Prefill 2 % higher: within.
    new.fit.terms[0] = TermFit { coefficient: 1.2e-3, lo: 1.14e-3, hi: 1.26e-3, ..new.fit.terms[0].clone() };
    new.fit.terms[1].coefficient = 1.02e-5;
    let d = new.drift(&old);
    assert_eq!(d.len(), 1, "{d:?}");
    assert!(d[0].starts_with("fixed:") && d[0].contains("+20.0 %"), "{}", d[0]);
    // Another machine is not compared.
    new.fingerprint.cpu = "y".into();
    assert!(new.drift(&old).is_empty());
}
