//! The GPU verification scripts call the CLI with subcommands and flags that
//! exist: a typo there would only show on a (scarce) GPU machine.

use std::path::Path;

#[test]
fn verification_scripts_use_real_subcommands_and_flags() {
    let re = regex::Regex::new(
        r"\b(benchmark|hw|gpu) ([a-z][a-z0-9-]*)((?: +--?[a-z][a-z0-9-]*(?: +[^\s-][^\s]*)*)*)",
    )
    .unwrap();
    let flag = regex::Regex::new(r"--([a-z][a-z0-9-]*)").unwrap();
    let mut seen = 0;
    for script in ["scripts/bench-verify.sh", "scripts/bench-verify-2gpu.sh"] {
        let text =
            std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join(script)).unwrap();
        for line in text
            .lines()
            .filter(|l| l.contains("$AISP") || l.trim_start().starts_with("step "))
        {
            for cap in re.captures_iter(line) {
                let (domain, op) = (&cap[1], cap[2].replace('-', "_"));
                let tool = aisp::registry::find_op(domain, &op).unwrap_or_else(|| {
                    panic!("{script}: `{domain} {}` is not an aisp command", &cap[2])
                });
                let props = tool
                    .input_schema
                    .get("properties")
                    .and_then(|p| p.as_object())
                    .cloned()
                    .unwrap_or_default();
                for f in flag.captures_iter(&cap[3]) {
                    let name = f[1].replace('-', "_");
                    if ["format", "json", "home", "log_level"].contains(&name.as_str()) {
                        continue;
                    }
                    assert!(
                        props.contains_key(&name),
                        "{script}: {} has no --{}",
                        tool.name,
                        &f[1]
                    );
                }
                seen += 1;
            }
        }
    }
    assert!(
        seen >= 12,
        "expected the scripts to call at least 12 aisp commands, found {seen}"
    );
}
