//! tool-schemas/ must match the code: regenerate with
//! `cargo run -- schemas --write tool-schemas/` after changing an operation.

use std::path::Path;

#[test]
fn tool_schemas_match_the_code() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("tool-schemas");
    let problems = aisp::registry::documents::check(&dir);
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
    let docs = aisp::registry::documents::render_all();
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

/// The README's first steps are what a newcomer runs: install from the
/// lockfile, then the main job on a bundled profile with that same binary (no
/// second build), then the tests.
#[test]
fn the_readme_first_commands_install_from_the_lockfile_and_work() {
    let readme =
        std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("README.md")).unwrap();
    let blocks: Vec<&str> = readme
        .split("```bash\n")
        .skip(1)
        .map(|b| b.split("```").next().unwrap_or(""))
        .collect();
    let first = blocks[0].lines().next().unwrap_or("");
    assert!(
        first.starts_with("cargo install --locked --path ."),
        "the README's first command must install from Cargo.lock: {first}"
    );
    let section = readme
        .split("## The two commands")
        .nth(1)
        .and_then(|s| s.split("\n## ").next())
        .expect("README has a `The two commands` section");
    let commands: Vec<&str> = section
        .split("```bash\n")
        .skip(1)
        .filter_map(|b| b.split("```").next())
        .map(str::trim)
        .collect();
    assert_eq!(commands.len(), 2, "{commands:?}");
    assert_eq!(commands[1], "cargo test");
    let main_job: Vec<&str> = commands[0].split_whitespace().collect();
    assert_eq!(
        main_job.first(),
        Some(&"aisp"),
        "the main-job command reuses the installed binary (no `cargo run --release` rebuild)"
    );
    // It works as written, from the repository root, without a GPU.
    let home = tempfile::tempdir().unwrap();
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_aisp"))
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .env("AISP_HOME", home.path())
        .env("AISP_CONFIG", home.path().join("none.toml"))
        .args(&main_job[1..])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    // What the README says to expect.
    assert_eq!(v["findings"][0]["severity"], "critical");
    assert!(
        v["findings"]
            .as_array()
            .unwrap()
            .iter()
            .any(|f| f["id"] == "host_os_wait"),
        "{v}"
    );
}

#[test]
fn the_python_stubs_match_the_code() {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("python/aisp/__init__.pyi");
    let on_disk = std::fs::read_to_string(&path).unwrap_or_default();
    assert!(
        on_disk == aisp::registry::python::stubs(),
        "python/aisp/__init__.pyi is stale; run \
         `cargo run -- schemas --write tool-schemas/ --python-stubs python/aisp/__init__.pyi`"
    );
}
