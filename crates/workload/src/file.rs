//! Scenario files: any scenario in TOML, with the same fields as the built-in ones. `kind`
//! chooses the shape (default `single`):
//!
//! ```toml
//! kind = "single"            # or "multi-turn", "agent", "rag"
//! name = "support-qa"
//! input = { kind = "lognormal", median = 300, sigma = 0.6, min = 50, max = 2000 }
//! output = { kind = "uniform", min = 100, max = 300 }
//! shared_prefix = 0
//! ```
//!
//! An agent's steps are an array of tables:
//!
//! ```toml
//! kind = "agent"
//! system = 128
//! question = { kind = "uniform", min = 30, max = 80 }
//! [[steps]]
//! kind = "llm"
//! output = { kind = "uniform", min = 20, max = 40 }
//! [[steps]]
//! kind = "tool"
//! latency_ms = { kind = "lognormal", median = 150, sigma = 0.5, min = 20, max = 1000 }
//! result_tokens = { kind = "fixed", n = 100 }
//! ```

use crate::agent::Agent;
use crate::multiturn::MultiTurn;
use crate::rag::Rag;
use crate::scenario::Scenario;
use serde::Deserialize;
use std::path::Path;

/// A scenario read from a file.
#[derive(Clone, Debug, PartialEq, Deserialize)]
#[serde(tag = "kind", rename_all = "kebab-case", deny_unknown_fields)]
pub enum ScenarioFile {
    Single(Scenario),
    MultiTurn(MultiTurn),
    Agent(Agent),
    Rag(Rag),
}

impl ScenarioFile {
    /// The scenario's name, as [`crate::Workload::name`] gives it once built: its own for
    /// single requests, else `multi-turn`, `agent`, `rag`.
    pub fn name(&self) -> String {
        match self {
            ScenarioFile::Single(s) => s.name.clone(),
            ScenarioFile::MultiTurn(_) => "multi-turn".into(),
            ScenarioFile::Agent(_) => "agent".into(),
            ScenarioFile::Rag(_) => "rag".into(),
        }
    }
}

/// Reads a scenario file; the error names the file and, from the TOML parser, the field.
pub fn load_scenario(path: &Path) -> Result<ScenarioFile, crate::WorkloadError> {
    let fail = |reason: String| crate::WorkloadError::File { path: path.to_path_buf(), reason };
    let text = goodput_core::input::read_to_string(path, "scenario file", goodput_core::input::MAX_WHOLE_FILE)
        .map_err(|e| fail(e.to_string()))?;
    let stem = path.file_stem().and_then(|s| s.to_str()).unwrap_or("scenario");
    parse_scenario(&text, stem).map_err(|e| fail(e.to_string()))
}

/// A scenario's TOML that does not parse, or names no scenario: the parser's error, shown by
/// its message alone (the field it names; not the source excerpt, which is the user's own).
#[derive(Debug, thiserror::Error)]
#[error("{}", .0.message())]
pub struct ScenarioTomlError(pub toml::de::Error);

/// A scenario from TOML text (a file's, or a config file's inline `[scenario]`): `kind`
/// defaults to `single`, and a single scenario without `name` takes `default_name`. The
/// error is the TOML parser's, naming the field.
pub fn parse_scenario(text: &str, default_name: &str) -> Result<ScenarioFile, ScenarioTomlError> {
    let mut table: toml::Table = toml::from_str(text).map_err(ScenarioTomlError)?;
    table.entry("kind").or_insert_with(|| toml::Value::String("single".into()));
    if !table.contains_key("name") && table.get("kind").and_then(|k| k.as_str()) == Some("single") {
        table.insert("name".into(), toml::Value::String(default_name.into()));
    }
    toml::Value::Table(table).try_into().map_err(ScenarioTomlError)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::scenario::LengthDist;

    fn write(name: &str, text: &str) -> std::path::PathBuf {
        let p = std::env::temp_dir().join(format!("goodput-scn-{}-{name}.toml", std::process::id()));
        std::fs::write(&p, text).unwrap();
        p
    }

    #[test]
    fn every_kind_parses_and_errors_name_the_field() {
        let p =
            write("qa", "input = { kind = \"uniform\", min = 10, max = 50 }\noutput = { kind = \"fixed\", n = 20 }\n");
        let ScenarioFile::Single(s) = load_scenario(&p).unwrap() else { panic!() };
        assert!(s.name.starts_with("goodput-scn-"));
        assert_eq!(s.output, LengthDist::Fixed { n: 20 });
        let p = write("mt", "kind = \"multi-turn\"\nturns = 3\nsystem = 32\nuser = { kind = \"fixed\", n = 10 }\noutput = { kind = \"fixed\", n = 5 }\n");
        assert!(matches!(load_scenario(&p).unwrap(), ScenarioFile::MultiTurn(m) if m.turns == 3));
        let p = write(
            "ag",
            "kind = \"agent\"\nsystem = 16\nquestion = { kind = \"fixed\", n = 8 }\n[[steps]]\nkind = \"llm\"\noutput = { kind = \"fixed\", n = 4 }\n[[steps]]\nkind = \"tool\"\nlatency_ms = { kind = \"fixed\", n = 5 }\nresult_tokens = { kind = \"fixed\", n = 6 }\n",
        );
        assert!(
            matches!(load_scenario(&p).unwrap(), ScenarioFile::Agent(a) if a.steps.len() == 2 && a.model_calls() == 1)
        );
        // A graph: two tools after the first call, the last call after both.
        let p = write(
            "graph",
            "kind = \"agent\"\nsystem = 16\nquestion = { kind = \"fixed\", n = 8 }\n\
             [[steps]]\nkind = \"llm\"\noutput = { kind = \"fixed\", n = 4 }\n\
             [[steps]]\nkind = \"tool\"\nafter = [1]\nlatency_ms = { kind = \"fixed\", n = 5 }\nresult_tokens = { kind = \"fixed\", n = 6 }\n\
             [[steps]]\nkind = \"retrieve\"\nafter = [1]\nlatency_ms = { kind = \"fixed\", n = 5 }\ntokens = { kind = \"fixed\", n = 6 }\n\
             [[steps]]\nkind = \"llm\"\nafter = [2, 3]\noutput = { kind = \"fixed\", n = 4 }\n",
        );
        let ScenarioFile::Agent(g) = load_scenario(&p).unwrap() else { panic!() };
        assert_eq!(g.deps(3), vec![1, 2]);
        assert_eq!(g.deps(2), vec![0]);
        g.validate(100).unwrap();
        let p = write("rag", "kind = \"rag\"\ncorpus_chunks = 20\nchunk_words = 10\nquery_words = 4\ntop_k = 4\nkeep = 2\noutput = { kind = \"fixed\", n = 8 }\n");
        assert!(matches!(load_scenario(&p).unwrap(), ScenarioFile::Rag(r) if r.keep == 2));
        let e = load_scenario(&write(
            "bad",
            "input = { kind = \"uniform\", min = 10 }\noutput = { kind = \"fixed\", n = 20 }\n",
        ))
        .unwrap_err()
        .to_string();
        assert!(e.contains("max"), "{e}");
        let e = load_scenario(&write("bad2", "kind = \"chat\"\n")).unwrap_err().to_string();
        assert!(e.contains("chat"), "{e}");
        // Unknown keys are refused by name, at every level of every kind.
        let unknown = [
            ("u-top", "bogus = 1\ninput = { kind = \"fixed\", n = 10 }\noutput = { kind = \"fixed\", n = 20 }\n"),
            ("u-dist", "input = { kind = \"fixed\", n = 10, bogus = 1 }\noutput = { kind = \"fixed\", n = 20 }\n"),
            ("u-mt", "kind = \"multi-turn\"\nbogus = 1\nturns = 3\nsystem = 32\nuser = { kind = \"fixed\", n = 10 }\noutput = { kind = \"fixed\", n = 5 }\n"),
            ("u-agent", "kind = \"agent\"\nsystem = 16\nquestion = { kind = \"fixed\", n = 8 }\n[[steps]]\nkind = \"llm\"\nbogus = 1\noutput = { kind = \"fixed\", n = 4 }\n"),
            ("u-rag", "kind = \"rag\"\nbogus = 1\ncorpus_chunks = 20\nchunk_words = 10\nquery_words = 4\ntop_k = 4\nkeep = 2\noutput = { kind = \"fixed\", n = 8 }\n"),
        ];
        for (name, text) in unknown {
            let e = load_scenario(&write(name, text)).unwrap_err().to_string();
            assert!(e.contains("bogus") && e.contains(name), "{name}: {e}");
        }
        let e = load_scenario(&write("bad3", "input = [\n")).unwrap_err().to_string();
        assert!(e.contains("bad3"), "{e}");
        let e = load_scenario(Path::new("/nonexistent/s.toml")).unwrap_err().to_string();
        assert!(e.contains("/nonexistent/s.toml"), "{e}");
    }
}
