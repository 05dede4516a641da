//! `goodput run --config FILE`: a matrix from one file run end to end, with a flag on the
//! command line overriding the file; the shipped examples expand; bad files refused by name.

use crate::common::{goodput, goodput_code, temp};
use goodput_results::matrix::MatrixIndex;
use goodput_results::read_summary;

#[test]
fn a_config_matrix_runs_each_combination_and_indexes_it() {
    let dir = temp("config-matrix");
    std::fs::create_dir_all(&dir).unwrap();
    let out = dir.join("runs");
    let config = dir.join("bench.toml");
    let text = format!(
        r#"
model = "tiny"
concurrency = [2]
requests = 4
warmup = 1
refine = 0
seed = 5
out = "{}"

[scenario]
input = {{ kind = "fixed", n = 24 }}
output = {{ kind = "fixed", n = 6 }}

[matrix]
max-num-seqs = [1, 8]
"#,
        out.display()
    );
    std::fs::write(&config, text).unwrap();
    let (ok, stdout, err) = goodput(&["run", "--config", config.to_str().unwrap(), "--seed", "9", "-q"]);
    assert!(ok, "{err}");
    assert_eq!(stdout.matches("Conclusion").count(), 2, "{stdout}");
    let index = MatrixIndex::read(&out).unwrap().expect("index.json");
    assert_eq!(index.axes[0].key, "max-num-seqs");
    let names: Vec<&str> = index.runs.iter().map(|r| r.name.as_str()).collect();
    assert_eq!(names, ["01-max-num-seqs=1", "02-max-num-seqs=8"]);
    for (run, seqs) in index.runs.iter().zip([1, 8]) {
        assert_eq!((run.exit, &run.error), (0, &None));
        let d = out.join(&run.dir);
        let s = read_summary(&d).unwrap();
        assert_eq!(s.engine.max_num_seqs, seqs);
        assert_eq!(s.seed, 9, "the command line's --seed overrides the file's");
        assert_eq!(s.workload.name, "bench", "the inline scenario is named after the file");
        assert_eq!(s.levels.len(), 1);
        // The stored command line is the file expanded, the inline scenario a file of the run.
        let scenario = d.join("scenario.toml");
        assert!(s.command.contains(&format!("--scenario={}", scenario.display())), "{:?}", s.command);
        assert!(s.command.contains(&"--max-num-seqs=1".to_string()) == (seqs == 1), "{:?}", s.command);
        assert!(std::fs::read_to_string(&scenario).unwrap().contains("n = 24"));
    }
    // The matrix on one page: a series per run, labeled by its values, and the frontier.
    let (ok, _, err) = goodput(&["report", out.to_str().unwrap(), "--gpus", "2"]);
    assert!(ok, "{err}");
    let page = std::fs::read_to_string(out.join("report.html")).unwrap();
    let charts = crate::common::chart_data(&page);
    let pareto = crate::common::chart(&charts, "overlay-pareto");
    let names: Vec<&str> = pareto["series"].as_array().unwrap().iter().map(|s| s["name"].as_str().unwrap()).collect();
    assert_eq!(names, ["max-num-seqs=1", "max-num-seqs=8", "Pareto frontier"]);
    let capacity = crate::common::chart(&charts, "overlay-capacity");
    let first = read_summary(&out.join(&index.runs[0].dir)).unwrap();
    let y = capacity["series"][0]["points"][0][1].as_f64().unwrap();
    assert_eq!(y, first.levels[0].summary.output_throughput);
    let per_gpu = pareto["series"][0]["points"][0][1].as_f64().unwrap();
    assert_eq!(per_gpu, first.levels[0].summary.output_throughput / 2.0, "--gpus divides");
    // Two run directories by name overlay too; more than one needs -o.
    let dirs: Vec<String> = index.runs.iter().map(|r| out.join(&r.dir).display().to_string()).collect();
    let (ok, _, err) = goodput(&["report", &dirs[0], &dirs[1]]);
    assert!(!ok && err.contains("-o PAGE.html"), "{err}");
    let page_path = dir.join("two.html");
    let (ok, _, err) = goodput(&["report", &dirs[0], &dirs[1], "-o", page_path.to_str().unwrap()]);
    assert!(ok && err.contains("2 runs"), "{err}");
    // The same matrix again into the same directory is refused before any run, its index kept.
    let (code, _, err) = goodput_code(&["run", "--config", config.to_str().unwrap(), "-q"]);
    assert_eq!(code, 1, "{err}");
    assert!(err.contains("holds a matrix's runs") && err.contains("--overwrite"), "{err}");
    assert_eq!(MatrixIndex::read(&out).unwrap().unwrap(), index);
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn the_shipped_examples_expand_and_bad_files_are_refused() {
    // A key the run has no flag for stops before anything runs, naming the nearest flag.
    let dir = temp("config-bad");
    std::fs::create_dir_all(&dir).unwrap();
    let bad = dir.join("bad.toml");
    std::fs::write(&bad, "concurency = [1, 2]\n").unwrap();
    let (code, _, err) = goodput_code(&["run", "--config", bad.to_str().unwrap()]);
    assert_eq!(code, 1);
    assert!(err.contains("unknown key `concurency`") && err.contains("did you mean `concurrency`"), "{err}");
    let (code, _, err) = goodput_code(&["capacity", "--config", bad.to_str().unwrap()]);
    assert!(code == 1 && err.contains("goodput run --config"), "{err}");
    // The examples: each expands and is checked as its runs' flags (--help-free dry check:
    // a bad --model stops every run before it loads anything, after the file was accepted).
    for example in ["bench", "matrix", "servers"] {
        let path = concat!(env!("CARGO_MANIFEST_DIR"), "/examples/configs/").to_string() + example + ".toml";
        let (code, _, err) = goodput_code(&[
            "run",
            "--config",
            &path,
            "--model",
            "no-such-model",
            "--out",
            dir.join(example).to_str().unwrap(),
        ]);
        assert_ne!(code, 0);
        assert!(err.contains("no-such-model") && !err.contains("unknown key"), "{example}: {err}");
    }
    let _ = std::fs::remove_dir_all(&dir);
}
