//! `docs/summary.schema.json` is the schema derived from the types (`summary_schema`), byte for
//! byte; `GOODPUT_BLESS=1` rewrites it after a change to the types.

use goodput_results::schema::summary_schema;
use std::path::PathBuf;

#[test]
fn the_checked_in_schema_is_the_one_the_types_derive() {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../docs/summary.schema.json");
    let derived = serde_json::to_string_pretty(&summary_schema()).unwrap() + "\n";
    if std::env::var_os("GOODPUT_BLESS").is_some() {
        std::fs::write(&path, &derived).unwrap();
    }
    let stored = std::fs::read_to_string(&path).unwrap();
    assert!(
        stored == derived,
        "{} is not the schema the types derive: run `GOODPUT_BLESS=1 cargo test -p goodput-results --test schema` \
         and commit it",
        path.display()
    );
}
