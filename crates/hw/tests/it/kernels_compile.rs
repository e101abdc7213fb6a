//! Every embedded kernel compiles with NVRTC for the architectures aisp
//! supports: sm_80 (A100), sm_90 (H100/H200; sm_90a for files that use
//! wgmma) and sm_100 (B200). NVRTC needs no GPU, so CI runs this after
//! `scripts/ci-install-nvrtc.sh`.
//!
//! Without NVRTC the test passes with a note, unless AISP_REQUIRE_NVRTC=1, in
//! which case a missing NVRTC is a failure (CI sets it so the check cannot be
//! skipped silently).

use aisp_hw::bench::{kernels, libs, nvrtc};

fn nvrtc_or_skip() -> bool {
    if libs::nvrtc_available() {
        return true;
    }
    let required = std::env::var("AISP_REQUIRE_NVRTC").is_ok_and(|v| v == "1");
    assert!(
        !required,
        "AISP_REQUIRE_NVRTC=1 but NVRTC cannot be loaded; searched {:?}. \
         Run scripts/ci-install-nvrtc.sh and put the folder it prints on LD_LIBRARY_PATH.",
        libs::preload().searched
    );
    eprintln!(
        "NVRTC not found: kernel compilation not checked (set AISP_REQUIRE_NVRTC=1 to make this fail)"
    );
    false
}

#[test]
fn every_kernel_compiles_for_every_supported_architecture() {
    if !nvrtc_or_skip() {
        return;
    }
    let (major, minor) = nvrtc::version().expect("NVRTC version");
    eprintln!("NVRTC {major}.{minor}");
    let supported = nvrtc::supported_archs().expect("supported architectures");
    for (cc_major, cc_minor) in [(8u32, 0u32), (9, 0), (10, 0)] {
        let n = (cc_major * 10 + cc_minor) as i32;
        assert!(
            supported.contains(&n),
            "this NVRTC cannot target sm_{n} (supports {supported:?})"
        );
        for file in kernels::FILES {
            let Some(arch) = kernels::arch_for(file, cc_major, cc_minor) else {
                continue; // sm_90a-only code has nothing to build for other GPUs
            };
            let built = nvrtc::compile(file, &arch, &["--ptxas-options=-v"])
                .unwrap_or_else(|e| panic!("{}.cu for {arch}: {e}", file.name));
            assert!(
                built.ptx.contains(&format!(".target {arch}")),
                "{}.cu: PTX not for {arch}",
                file.name
            );
            assert!(
                built.cubin.len() > 1000,
                "{}.cu for {arch}: no CUBIN",
                file.name
            );
            let entries = nvrtc::ptx_entries(&built.ptx);
            for f in file.functions {
                assert!(
                    entries.iter().any(|e| e == f),
                    "{}.cu for {arch}: kernel {f} missing from PTX ({entries:?})",
                    file.name
                );
            }
            // ptxas reports spills per kernel; none of the lesson kernels may spill.
            for line in built.log.lines().filter(|l| l.contains("spill")) {
                assert!(
                    line.contains("0 bytes spill stores, 0 bytes spill loads"),
                    "{}.cu for {arch}: {line}",
                    file.name
                );
            }
        }
    }
}

#[test]
fn the_occupancy_lesson_really_differs_in_registers() {
    if !nvrtc_or_skip() {
        return;
    }
    let file = kernels::file("occupancy").unwrap();
    let built = nvrtc::compile(file, "sm_90", &["--ptxas-options=-v"]).unwrap();
    // ptxas prints "Compiling entry function 'NAME'" then "Used N registers".
    let mut regs = std::collections::HashMap::new();
    let mut current = None;
    for line in built.log.lines() {
        if let Some(rest) = line.split("Compiling entry function '").nth(1) {
            current = rest.split('\'').next().map(str::to_string);
        }
        if let (Some(name), Some(rest)) = (&current, line.split("Used ").nth(1)) {
            let n: u32 = rest.split_whitespace().next().unwrap().parse().unwrap();
            regs.insert(name.clone(), n);
        }
    }
    let bounded = regs["occupancy_bounded"];
    let default = regs["occupancy_default"];
    assert!(
        bounded <= 64,
        "launch bounds (256, 4) must cap registers at 64, got {bounded}"
    );
    assert!(
        default > 64,
        "the (256, 1) build should use more than 64 registers, got {default}"
    );
}

#[test]
fn compile_errors_are_reported_with_the_log() {
    if !nvrtc_or_skip() {
        return;
    }
    let broken = kernels::KernelFile {
        name: "broken",
        source: "extern \"C\" __global__ void k() { this_is_not_defined(); }",
        needs_sm90a: false,
        functions: &["k"],
    };
    let err = nvrtc::compile(&broken, "sm_90", &[]).unwrap_err();
    let text = err.to_string();
    assert!(
        text.contains("broken") && text.contains("this_is_not_defined"),
        "{text}"
    );
}

#[test]
fn builds_are_cached_per_architecture_and_nvrtc_version() {
    if !nvrtc_or_skip() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let file = kernels::file("launch").unwrap();
    let first = nvrtc::compile_cached(file, "sm_80", dir.path()).unwrap();
    assert!(!first.from_cache);
    let second = nvrtc::compile_cached(file, "sm_80", dir.path()).unwrap();
    assert!(second.from_cache);
    assert_eq!(first.cubin, second.cubin);
    let (ma, mi) = nvrtc::version().unwrap();
    let cached_dir = dir
        .path()
        .join("ptx")
        .join("sm_80")
        .join(format!("{ma}.{mi}"));
    let names: Vec<String> = std::fs::read_dir(&cached_dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    assert!(
        names
            .iter()
            .any(|n| n.starts_with("launch-") && n.ends_with(".ptx")),
        "{names:?}"
    );
    assert!(
        names
            .iter()
            .any(|n| n.starts_with("launch-") && n.ends_with(".cubin")),
        "{names:?}"
    );
}
