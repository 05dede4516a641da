//! The JSON Schema of `summary.json`, derived from [`RunSummary`] and the types it holds
//! (schemars, in its serialize contract: what goodput writes, each field's doc comment as its
//! description). `docs/summary.schema.json` is this function's output, kept current by a test
//! (`GOODPUT_BLESS=1 cargo test -p goodput-results --test schema` rewrites it).

use crate::summary::RunSummary;
use schemars::generate::SchemaSettings;
use serde_json::Value;

/// Where the schema is published.
pub const SCHEMA_ID: &str = "https://github.com/goodput/goodput/docs/summary.schema.json";

/// `summary.json`'s schema as JSON, with its `$id`, title and description.
pub fn summary_schema() -> Value {
    let schema = SchemaSettings::draft2020_12().for_serialize().into_generator().into_root_schema_for::<RunSummary>();
    let mut v = schema.to_value();
    if let Value::Object(m) = &mut v {
        m.insert("$id".into(), SCHEMA_ID.into());
        m.insert("title".into(), "goodput run: summary.json".into());
        m.insert(
            "description".into(),
            "The summary of a `goodput run --out DIR`: the run's setup, then one entry per load level with the \
             metric contract's names (seconds, per second) and vLLM `bench serve` keys for the same quantities \
             (milliseconds)."
                .into(),
        );
    }
    v
}
