//! Run one profile analysis and print its JSON (a harness for timing and
//! exploration until the CLI lands: `cargo run --release --example
//! profile_dump -- summary FILE`).

use aisp_profile::{self as profile, Scope};

fn main() {
    let args: Vec<String> = std::env::args().collect();
    if args.len() < 3 {
        eprintln!(
            "usage: profile_dump <info|summary|kernels|utilization|gaps|memory|nvtx|iterations|nccl|overlap|rules> FILE [device]"
        );
        std::process::exit(2);
    }
    let op = args[1].as_str();
    let p = match profile::open(args[2].as_ref()) {
        Ok(p) => p,
        Err(e) => {
            eprintln!("error: {e}");
            std::process::exit(1);
        }
    };
    let scope = Scope {
        device: args.get(3).and_then(|d| d.parse().ok()),
        ..Scope::default()
    };
    let r = p.resolve(&scope).expect("scope");
    let v = match op {
        "info" => serde_json::to_value(profile::info::info(&p).unwrap()),
        "summary" => {
            serde_json::to_value(profile::summary::summary(&p, &r, &Default::default()).unwrap())
        }
        "kernels" => serde_json::to_value(
            profile::kernels::kernels(&p, &r, profile::kernels::KernelNames::default(), 10)
                .unwrap(),
        ),
        "utilization" => {
            serde_json::to_value(profile::utilization::utilization(&p, &r, 30, 50.0).unwrap())
        }
        "gaps" => serde_json::to_value(profile::gaps::gaps(&p, &r, 1_000_000, 10).unwrap()),
        "memory" => serde_json::to_value(profile::memory::memory(&p, &r, 5).unwrap()),
        "nvtx" => serde_json::to_value(profile::nvtx::nvtx(&p, &r, &Default::default()).unwrap()),
        "iterations" => {
            serde_json::to_value(profile::iterations::iterations(&p, &r, None, 5).unwrap())
        }
        "nccl" => serde_json::to_value(profile::nccl::nccl(&p, &r).unwrap()),
        "overlap" => serde_json::to_value(profile::overlap::overlap(&p, &r).unwrap()),
        "rules" => serde_json::to_value(profile::rules::run(&p, &r).unwrap()),
        other => {
            eprintln!("unknown op {other}");
            std::process::exit(2);
        }
    }
    .unwrap();
    println!("{}", serde_json::to_string_pretty(&v).unwrap());
}
