//! tool-schemas/ must match the code: regenerate with
//! `cargo run -- schemas --write tool-schemas/` after changing an operation.

use std::path::Path;

#[test]
fn tool_schemas_match_the_code() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("tool-schemas");
    let problems = aisp::cli::schemas::check(&dir);
    assert!(
        problems.is_empty(),
        "tool-schemas/ drifted from the code; run `cargo run -- schemas --write tool-schemas/`:\n{}",
        problems
            .iter()
            .map(|(f, w)| format!("  {f} {w}"))
            .collect::<Vec<_>>()
            .join("\n")
    );
}

#[test]
fn every_schema_file_describes_one_tool_completely() {
    let docs = aisp::cli::schemas::render_all();
    assert_eq!(docs.len(), aisp::registry::tools().len());
    for (file, text) in docs {
        let v: serde_json::Value = serde_json::from_str(&text).unwrap();
        assert_eq!(format!("{}.json", v["name"].as_str().unwrap()), file);
        for key in [
            "description",
            "inputSchema",
            "outputSchema",
            "annotations",
            "cli",
            "http",
        ] {
            assert!(!v[key].is_null(), "{file} lacks {key}");
        }
        for hint in [
            "readOnlyHint",
            "destructiveHint",
            "idempotentHint",
            "openWorldHint",
        ] {
            assert!(v["annotations"][hint].is_boolean(), "{file} lacks {hint}");
        }
    }
}
