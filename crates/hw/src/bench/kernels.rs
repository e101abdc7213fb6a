//! The CUDA C++ sources, embedded in the binary. Each file is compiled as
//! one NVRTC program with `kernels/common.cuh` prepended.

/// Helpers every kernel file uses (random numbers, thread indices).
pub const PRELUDE: &str = include_str!("../../../../kernels/common.cuh");

/// One `.cu` file and the kernels aisp launches from it.
#[derive(Debug, Clone, Copy)]
pub struct KernelFile {
    /// File stem, e.g. `memory` for `kernels/memory.cu`.
    pub name: &'static str,
    pub source: &'static str,
    /// Uses sm_90a-only instructions (wgmma, setmaxnreg): compiled for
    /// `sm_90a` on compute capability 9.0 and only runs there.
    pub needs_sm90a: bool,
    /// The `extern "C"` kernels in the file (checked against the compiled PTX
    /// by crates/hw/tests/it/kernels_compile.rs).
    pub functions: &'static [&'static str],
}

pub const FILES: &[KernelFile] = &[
    KernelFile {
        name: "util",
        source: include_str!("../../../../kernels/util.cu"),
        needs_sm90a: false,
        functions: &[
            "fill_uniform_f32",
            "l2_flush_read",
            "f32_to_bf16",
            "f32_to_f16",
            "f32_to_e4m3",
        ],
    },
    KernelFile {
        name: "memory",
        source: include_str!("../../../../kernels/memory.cu"),
        needs_sm90a: false,
        functions: &[
            "copy_f32_strided",
            "copy_f32",
            "copy_f32x4",
            "copy_f32x4_unroll4",
            "copy_f32x4_stream",
            "read_sweep_global",
            "read_sweep_block",
        ],
    },
    KernelFile {
        name: "transpose",
        source: include_str!("../../../../kernels/transpose.cu"),
        needs_sm90a: false,
        functions: &[
            "transpose_naive",
            "transpose_tiled",
            "transpose_tiled_padded",
        ],
    },
    KernelFile {
        name: "compute",
        source: include_str!("../../../../kernels/compute.cu"),
        needs_sm90a: false,
        functions: &[
            "divergent_branch",
            "predicated_select",
            "ilp_chain1",
            "ilp_chain4",
            "fma_peak_f32",
            "fma_peak_f64",
        ],
    },
    KernelFile {
        name: "occupancy",
        source: include_str!("../../../../kernels/occupancy.cu"),
        needs_sm90a: false,
        functions: &["occupancy_default", "occupancy_bounded"],
    },
    KernelFile {
        name: "fusion",
        source: include_str!("../../../../kernels/fusion.cu"),
        needs_sm90a: false,
        functions: &[
            "fuse_step1_affine",
            "fuse_step2_square",
            "fuse_step3_add",
            "fused_affine_square_add",
        ],
    },
    KernelFile {
        name: "reduction",
        source: include_str!("../../../../kernels/reduction.cu"),
        needs_sm90a: false,
        functions: &[
            "reduce_atomic_global",
            "reduce_shared_tree",
            "reduce_warp_shuffle",
        ],
    },
    KernelFile {
        name: "launch",
        source: include_str!("../../../../kernels/launch.cu"),
        needs_sm90a: false,
        functions: &[
            "empty_kernel",
            "tiny_step",
            "persistent_steps",
            "chunk_compute",
        ],
    },
    KernelFile {
        name: "gemm",
        source: include_str!("../../../../kernels/gemm.cu"),
        needs_sm90a: false,
        functions: &["sgemm_naive", "sgemm_smem_tiled", "sgemm_reg_tiled"],
    },
];

pub fn file(name: &str) -> Option<&'static KernelFile> {
    FILES.iter().find(|f| f.name == name)
}

/// The program NVRTC compiles: the prelude, then the file with its own line
/// numbering so compiler messages point into the `.cu` file.
pub fn program_source(file: &KernelFile) -> String {
    format!("{PRELUDE}\n#line 1 \"{}.cu\"\n{}", file.name, file.source)
}

/// The architecture to compile `file` for on a GPU of compute capability
/// `major.minor`: the exact `sm_XY`, or `sm_90a` for sm_90a-only code on 9.0.
/// `None` when the file cannot run on that GPU.
pub fn arch_for(file: &KernelFile, major: u32, minor: u32) -> Option<String> {
    if file.needs_sm90a {
        return (major == 9 && minor == 0).then(|| "sm_90a".to_string());
    }
    Some(format!("sm_{major}{minor}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_listed_function_is_defined_in_its_file() {
        for f in FILES {
            for func in f.functions {
                let decl = format!(" {func}(");
                assert!(
                    f.source.contains(&decl) || f.source.contains(&format!("\n{func}(")),
                    "{func} is listed for {}.cu but not defined there",
                    f.name
                );
            }
        }
    }

    #[test]
    fn architecture_choice() {
        let plain = file("memory").unwrap();
        assert_eq!(arch_for(plain, 9, 0).as_deref(), Some("sm_90"));
        assert_eq!(arch_for(plain, 8, 9).as_deref(), Some("sm_89"));
        assert_eq!(arch_for(plain, 10, 0).as_deref(), Some("sm_100"));
        let wgmma = KernelFile {
            needs_sm90a: true,
            ..*plain
        };
        assert_eq!(arch_for(&wgmma, 9, 0).as_deref(), Some("sm_90a"));
        assert_eq!(arch_for(&wgmma, 10, 0), None);
    }

    /// Kernel names used by the Rust code (`gpu.function(FILE, NAME)`) exist,
    /// so a typo fails here rather than on a GPU.
    #[test]
    fn kernels_named_by_the_harness_exist() {
        let re = regex::Regex::new(r#"\.function\(\s*"(\w+)",\s*"(\w+)"\s*\)"#).unwrap();
        let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
        let mut seen = 0;
        let mut stack = vec![dir];
        while let Some(d) = stack.pop() {
            for entry in std::fs::read_dir(&d).unwrap() {
                let p = entry.unwrap().path();
                if p.is_dir() {
                    stack.push(p);
                } else if p.extension().is_some_and(|e| e == "rs") {
                    let text = std::fs::read_to_string(&p).unwrap();
                    for cap in re.captures_iter(&text) {
                        let (f, k) = (&cap[1], &cap[2]);
                        let kf = file(f)
                            .unwrap_or_else(|| panic!("{}: no kernel file {f}", p.display()));
                        assert!(
                            kf.functions.contains(&k),
                            "{}: {f}.cu has no kernel {k}",
                            p.display()
                        );
                        seen += 1;
                    }
                }
            }
        }
        assert!(
            seen >= 20,
            "expected the harness to name at least 20 kernels, found {seen}"
        );
    }
}
