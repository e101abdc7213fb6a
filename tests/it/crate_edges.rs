//! The workspace's layering, checked on `cargo metadata`: the library crates
//! under crates/ cannot see the application (`aisp`) or the front-end and
//! async crates, each depends only on crates below it, and the workspace has
//! no cycle. `.ci/run` runs this by name (`cargo test --test it crate_edges`).

use std::collections::{BTreeMap, BTreeSet};
use std::process::Command;

use serde_json::Value;

/// The allowed order, lowest first: a crate may depend only on crates of a
/// lower rank (base < store < knowledge < {profile, hw, planner} <
/// {capture, report} < aisp).
const RANKS: &[(&str, u32)] = &[
    ("aisp-base", 0),
    ("aisp-store", 1),
    ("aisp-knowledge", 2),
    ("aisp-profile", 3),
    ("aisp-hw", 3),
    ("aisp-planner", 3),
    ("aisp-capture", 4),
    ("aisp-report", 4),
    ("aisp", 5),
];

/// What no library crate may depend on, directly or through anything it
/// depends on (normal and build dependencies): the app, and the async, server,
/// CLI and LLM-client crates of the front ends (reqwest brings tokio).
const FORBIDDEN: &[&str] = &[
    "aisp",
    "tokio",
    "tokio-util",
    "rmcp",
    "axum",
    "hyper",
    "hyper-util",
    "clap",
    "async-openai",
    "reqwest",
];

struct Graph {
    /// Package id → name.
    names: BTreeMap<String, String>,
    /// Package id → (dependency id, kinds: "normal", "build", "dev").
    deps: BTreeMap<String, Vec<(String, BTreeSet<String>)>>,
    /// Workspace member names → ids.
    members: BTreeMap<String, String>,
}

/// The host's target triple (`rustc -vV`): metadata for this platform only,
/// whose packages the build has already fetched (`--offline` works).
fn host_triple() -> String {
    let rustc = std::env::var("RUSTC").unwrap_or_else(|_| "rustc".into());
    let out = Command::new(rustc)
        .arg("-vV")
        .output()
        .expect("run rustc -vV");
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .find_map(|l| l.strip_prefix("host: "))
        .expect("rustc -vV names the host")
        .trim()
        .to_string()
}

fn metadata() -> &'static Graph {
    static GRAPH: std::sync::OnceLock<Graph> = std::sync::OnceLock::new();
    GRAPH.get_or_init(read_metadata)
}

fn read_metadata() -> Graph {
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    let host = host_triple();
    let run = |offline: bool| {
        let mut cmd = Command::new(&cargo);
        cmd.args([
            "metadata",
            "--format-version",
            "1",
            "--filter-platform",
            &host,
        ])
        .current_dir(env!("CARGO_MANIFEST_DIR"));
        if offline {
            cmd.arg("--offline");
        }
        cmd.output().expect("run cargo metadata")
    };
    // Offline first; the Python member's packages (pyo3) may not have been
    // fetched yet when only the Rust crates were built, and then cargo fetches them.
    let mut out = run(true);
    if !out.status.success() {
        out = run(false);
    }
    assert!(
        out.status.success(),
        "cargo metadata failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v: Value = serde_json::from_slice(&out.stdout).expect("cargo metadata JSON");
    let names: BTreeMap<String, String> = v["packages"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| {
            (
                p["id"].as_str().unwrap().to_string(),
                p["name"].as_str().unwrap().to_string(),
            )
        })
        .collect();
    let members = v["workspace_members"]
        .as_array()
        .unwrap()
        .iter()
        .map(|id| {
            let id = id.as_str().unwrap().to_string();
            (names[&id].clone(), id)
        })
        .collect();
    let deps = v["resolve"]["nodes"]
        .as_array()
        .expect("a resolved graph")
        .iter()
        .map(|n| {
            let edges = n["deps"]
                .as_array()
                .unwrap()
                .iter()
                .map(|d| {
                    let kinds = d["dep_kinds"]
                        .as_array()
                        .unwrap()
                        .iter()
                        .map(|k| k["kind"].as_str().unwrap_or("normal").to_string())
                        .collect();
                    (d["pkg"].as_str().unwrap().to_string(), kinds)
                })
                .collect();
            (n["id"].as_str().unwrap().to_string(), edges)
        })
        .collect();
    Graph {
        names,
        deps,
        members,
    }
}

impl Graph {
    /// Every package `id` reaches through normal and build dependencies, with
    /// the path that reaches it first.
    fn reach(&self, id: &str) -> BTreeMap<String, Vec<String>> {
        let mut seen: BTreeMap<String, Vec<String>> = BTreeMap::new();
        let mut stack = vec![(id.to_string(), vec![self.names[id].clone()])];
        while let Some((at, path)) = stack.pop() {
            for (dep, kinds) in self.deps.get(&at).into_iter().flatten() {
                if !kinds.iter().any(|k| k == "normal" || k == "build") || seen.contains_key(dep) {
                    continue;
                }
                let mut p = path.clone();
                p.push(self.names[dep].clone());
                seen.insert(dep.clone(), p.clone());
                stack.push((dep.clone(), p));
            }
        }
        seen
    }
}

fn rank(name: &str) -> u32 {
    RANKS
        .iter()
        .find(|(n, _)| *n == name)
        .map(|(_, r)| *r)
        .unwrap_or_else(|| panic!("{name} is a workspace crate without a place in RANKS"))
}

#[test]
fn crate_edges_library_crates_cannot_see_the_app() {
    let g = metadata();
    let libraries: Vec<&str> = RANKS
        .iter()
        .map(|(n, _)| *n)
        .filter(|n| *n != "aisp")
        .collect();
    let mut problems = Vec::new();
    for lib in &libraries {
        let Some(id) = g.members.get(*lib) else {
            problems.push(format!("{lib} is not a workspace member"));
            continue;
        };
        // Nothing forbidden, directly or transitively.
        for (dep, path) in g.reach(id) {
            if FORBIDDEN.contains(&g.names[&dep].as_str()) {
                problems.push(format!(
                    "{lib} depends on {}: {}",
                    g.names[&dep],
                    path.join(" → ")
                ));
            }
        }
        // Workspace crates only from below, dev-dependencies included (a
        // library's tests may not use the app either).
        for (dep, kinds) in &g.deps[id] {
            let name = &g.names[dep];
            if g.members.contains_key(name) && name != "aisp-python" && rank(name) >= rank(lib) {
                problems.push(format!(
                    "{lib} ({}) depends on {name} ({}) [{}]: only crates of a lower rank are allowed",
                    rank(lib),
                    rank(name),
                    kinds.iter().cloned().collect::<Vec<_>>().join(", ")
                ));
            }
        }
    }
    assert!(
        problems.is_empty(),
        "forbidden crate edges:\n{}",
        problems.join("\n")
    );
}

#[test]
fn crate_edges_the_workspace_has_no_cycle() {
    let g = metadata();
    // Edges between workspace members, of every kind (cargo itself allows a
    // cycle through a dev-dependency).
    let member_ids: BTreeSet<&String> = g.members.values().collect();
    fn visit<'a>(
        g: &'a Graph,
        members: &BTreeSet<&'a String>,
        at: &'a String,
        path: &mut Vec<&'a String>,
        done: &mut BTreeSet<&'a String>,
    ) {
        if let Some(i) = path.iter().position(|p| *p == at) {
            let cycle: Vec<&str> = path[i..].iter().map(|p| g.names[*p].as_str()).collect();
            panic!("a cycle: {} → {}", cycle.join(" → "), g.names[at]);
        }
        if done.contains(at) {
            return;
        }
        path.push(at);
        for (dep, _) in g.deps.get(at).into_iter().flatten() {
            if members.contains(dep) {
                visit(g, members, dep, path, done);
            }
        }
        path.pop();
        done.insert(at);
    }
    let mut done = BTreeSet::new();
    for id in &member_ids {
        visit(g, &member_ids, id, &mut Vec::new(), &mut done);
    }
    // Every member has a place in the order (a new crate must be given one).
    for name in g.members.keys().filter(|n| *n != "aisp-python") {
        rank(name);
    }
}
