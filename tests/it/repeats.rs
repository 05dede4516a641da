//! `goodput run --repeats N`: the repeats as runs of their own with one seed, their spread
//! (repeats.json and the table), `compare` taking the directory as a side with the repeats
//! as its noise, `report` overlaying them; a config's matrix repeated per combination; the
//! misuses refused by name.

use crate::common::{goodput, goodput_code, temp};
use goodput_results::matrix::{MatrixIndex, REPEAT};
use goodput_results::read_summary;
use goodput_results::repeats::RepeatsFile;

const SMALL: [&str; 10] =
    ["--concurrency", "1,2", "--requests", "4", "--warmup", "1", "--refine", "0", "--scenario", "short-qa"];

#[test]
fn repeats_run_with_one_seed_and_report_their_spread() {
    let out = temp("repeats-plain");
    let mut args = vec!["run", "--repeats", "3", "--out", out.to_str().unwrap(), "-q"];
    args.extend(SMALL);
    let (ok, stdout, err) = goodput(&args);
    assert!(ok, "{err}");
    assert_eq!(stdout.matches("Conclusion").count(), 3, "{stdout}");
    assert!(stdout.contains("Repeats: 3 runs, seed"), "{stdout}");
    let index = MatrixIndex::read(&out).unwrap().expect("index.json");
    assert!(index.repeated() && index.config.is_none());
    assert_eq!(
        index.runs.iter().map(|r| r.name.as_str()).collect::<Vec<_>>(),
        ["01-repeat=1", "02-repeat=2", "03-repeat=3"]
    );
    let seeds: Vec<u64> = index.runs.iter().map(|r| read_summary(&out.join(&r.dir)).unwrap().seed).collect();
    assert!(seeds.iter().all(|&s| s == seeds[0]), "one seed for every repeat: {seeds:?}");
    // Each repeat stores the command that reruns it alone.
    let command = read_summary(&out.join("02-repeat=2")).unwrap().command;
    assert!(!command.iter().any(|t| t.starts_with("--repeats") || t == "3"), "{command:?}");
    assert!(command.contains(&format!("--out={}", out.join("02-repeat=2").display())), "{command:?}");
    assert!(command.contains(&format!("--seed={}", seeds[0])), "{command:?}");

    let spread = RepeatsFile::read(&out).unwrap().expect("repeats.json");
    let [group] = &spread.groups[..] else { panic!("one combination: {spread:?}") };
    assert_eq!((group.runs.len(), group.seed, group.levels.len()), (3, seeds[0], 2));
    let ttft = group.levels[1].metrics.iter().find(|m| m.key == "ttft_p95").expect("ttft_p95");
    // The spread is of each repeat's own value, which its own summary holds too.
    let own: Vec<f64> = index
        .runs
        .iter()
        .map(|r| read_summary(&out.join(&r.dir)).unwrap().levels[1].summary.ttft.as_ref().unwrap().p95)
        .collect();
    for (v, o) in ttft.values.iter().zip(&own) {
        assert!((v.unwrap() - o).abs() < 1e-9, "{v:?} against {o}");
    }
    let mut sorted = own.clone();
    sorted.sort_by(f64::total_cmp);
    assert_eq!((ttft.spread.min, ttft.spread.median, ttft.spread.max), (sorted[0], sorted[1], sorted[2]));

    // compare takes the directory as a side: its three repeats, gated on nothing.
    let (code, md, err) = goodput_code(&["compare", out.to_str().unwrap(), out.join("01-repeat=1").to_str().unwrap()]);
    assert_eq!(code, 0, "{err}");
    assert!(md.contains("03-repeat=3") && md.contains("| 2 | ttft_p95 |"), "{md}");
    // report overlays the repeats.
    let (ok, _, err) = goodput(&["report", out.to_str().unwrap()]);
    assert!(ok, "{err}");
    assert!(err.contains("3 runs on"), "{err}");
    // Fewer repeats over it with --overwrite: the third repeat goes with the old index, so no
    // run lies beside the new one that it does not list.
    let mut args = vec!["run", "--repeats", "2", "--overwrite", "--out", out.to_str().unwrap(), "-q"];
    args.extend(SMALL);
    let (ok, _, err) = goodput(&args);
    assert!(ok, "{err}");
    assert_eq!(MatrixIndex::read(&out).unwrap().unwrap().runs.len(), 2);
    assert!(!out.join("03-repeat=3").exists(), "the old third repeat is gone");
    let _ = std::fs::remove_dir_all(&out);
}

#[test]
fn a_config_matrix_repeats_each_combination() {
    let dir = temp("repeats-config");
    std::fs::create_dir_all(&dir).unwrap();
    let out = dir.join("runs");
    let config = dir.join("bench.toml");
    let text = format!(
        "model = \"tiny\"\nconcurrency = [2]\nrequests = 3\nwarmup = 0\nrefine = 0\nrepeats = 2\nout = \"{}\"\n\n[matrix]\nmax-num-seqs = [1, 8]\n",
        out.display()
    );
    std::fs::write(&config, text).unwrap();
    let (ok, stdout, err) = goodput(&["run", "--config", config.to_str().unwrap(), "-q"]);
    assert!(ok, "{err}");
    let index = MatrixIndex::read(&out).unwrap().expect("index.json");
    let axes: Vec<&str> = index.axes.iter().map(|a| a.key.as_str()).collect();
    assert_eq!(axes, ["max-num-seqs", REPEAT]);
    assert_eq!(index.runs.len(), 4);
    assert_eq!(index.runs[1].name, "02-max-num-seqs=1,repeat=2");
    let spread = RepeatsFile::read(&out).unwrap().expect("repeats.json");
    let labels: Vec<String> = spread.groups.iter().map(|g| format!("{:?}", g.values)).collect();
    assert_eq!(spread.groups.len(), 2, "{labels:?}");
    assert!(stdout.contains("Repeats of max-num-seqs=8: 2 runs"), "{stdout}");
    // A side of compare is one configuration: the matrix is refused, naming its combinations.
    let (code, _, err) = goodput_code(&["compare", out.to_str().unwrap(), out.to_str().unwrap()]);
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("a matrix of 2 combinations") && err.contains("`max-num-seqs=8`"), "{err}");
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn repeats_misuse_is_refused_by_name() {
    let out = temp("repeats-misuse");
    let o = out.to_str().unwrap();
    let cases: [(&[&str], &str); 5] = [
        (&["run", "--repeats", "2"], "give --out"),
        (&["run", "--repeats", "0", "--out", o], "--repeats"),
        (&["capacity", "--repeats", "2"], "--repeats N"),
        (&["run", "--repeats", "2", "--out", o, "--export-json", "x.json"], "--export-json"),
        (&["run", "--repeats", "2", "--out", o], "not a matrix's directory"),
    ];
    std::fs::create_dir_all(&out).unwrap();
    std::fs::write(out.join("notes.txt"), "mine").unwrap();
    for (args, says) in cases {
        let (code, _, err) = goodput_code(args);
        assert_ne!(code, 0, "{args:?} was taken");
        assert!(err.contains(says), "{args:?}: {err}");
        assert!(!err.contains("panicked"), "{err}");
    }
    assert_eq!(std::fs::read_to_string(out.join("notes.txt")).unwrap(), "mine", "nothing of the user's is touched");
    let _ = std::fs::remove_dir_all(&out);
}
