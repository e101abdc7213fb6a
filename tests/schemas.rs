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

#[test]
fn the_readme_tool_table_matches_the_code() {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("README.md");
    let readme = std::fs::read_to_string(&path).unwrap();
    let expected =
        aisp::cli::readme::with_tool_table(&readme).expect("README has the tool markers");
    assert!(
        readme == expected,
        "README.md's tool table is stale; run `cargo run -- schemas --write tool-schemas/ --readme README.md`"
    );
}

#[test]
fn every_reference_mapping_names_a_real_tool_or_says_none() {
    let mut seen = std::collections::HashSet::new();
    for (reference, ours) in aisp::cli::readme::REFERENCE_NAMES {
        assert!(seen.insert(*reference), "{reference} mapped twice");
        if let Some(ours) = ours {
            assert!(ours.starts_with("aisp_"), "{reference} -> {ours}");
        }
    }
}
