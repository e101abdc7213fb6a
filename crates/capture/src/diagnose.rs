//! Recognising the profiler failures that have a known fix, from their output.

/// `nsys profile` wrote only the raw `.qdstrm` because its `QdstrmImporter`
/// could not start (some CUDA images ship the CLI without elfutils).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ImporterFailure {
    /// The shared libraries the importer could not load, when the output names them.
    pub missing_libraries: Vec<String>,
}

impl ImporterFailure {
    /// What to do, naming the libraries.
    pub fn fix(&self) -> String {
        let libs = if self.missing_libraries.is_empty() {
            "libdw.so.1 and libelf.so.1".to_string()
        } else {
            self.missing_libraries.join(" and ")
        };
        format!(
            "Nsight Systems' QdstrmImporter (which turns the capture into a .nsys-rep) needs {libs} (elfutils; \
             Debian/Ubuntu packages libdw1 and libelf1). Install them (`apt-get install libdw1 libelf1`), or put a \
             folder holding libdw.so.1 and libelf.so.1 on LD_LIBRARY_PATH for aisp (or pass it in `env`, e.g. \
             {{\"LD_LIBRARY_PATH\": \"/path/to/lib\"}}), then capture again. `nsys profile` exits 0 in this case and \
             leaves only the .qdstrm."
        )
    }
}

/// Look for the importer failure in a profiler's output.
pub fn importer_failure(output: &str) -> Option<ImporterFailure> {
    let importer = output.contains("Unable to retrieve the importer version")
        || (output.contains("QdstrmImporter")
            && output.contains("error while loading shared libraries"));
    if !importer {
        return None;
    }
    let mut missing: Vec<String> = Vec::new();
    for line in output.lines() {
        if let Some(rest) = line.split("error while loading shared libraries: ").nth(1) {
            let lib = rest.split([':', ' ']).next().unwrap_or("").trim();
            if !lib.is_empty() && !missing.iter().any(|m| m == lib) {
                missing.push(lib.to_string());
            }
        }
    }
    Some(ImporterFailure {
        missing_libraries: missing,
    })
}

/// `ncu` was refused access to the GPU performance counters.
pub fn counter_permission_denied(output: &str) -> bool {
    output.contains("ERR_NVGPUCTRPERM")
}

/// `ncu` could not start its profiler at all (seen in sandboxed kernels such
/// as gVisor: "Failed to initialize the profiler: LibraryNotLoaded").
pub fn profiler_init_failure(output: &str) -> Option<String> {
    output
        .lines()
        .find(|l| l.contains("Failed to initialize the profiler"))
        .map(|l| l.trim().to_string())
}

/// What to do when ncu cannot initialise.
pub const PROFILER_INIT_FIX: &str = "Nsight Compute could not load or start its profiling library on this machine. \
This happens in sandboxed runtimes (gVisor) that do not expose the GPU's profiling interface, and when ncu's own \
libraries do not match the driver. Run on a host or VM with the NVIDIA driver exposed directly, or use an ncu that \
matches the driver; Nsight Systems (aisp_profile_nsys) and the PyTorch profiler (aisp_profile_torch) need no counters.";

/// What to do about `ERR_NVGPUCTRPERM`.
pub const COUNTER_PERMISSION_FIX: &str = "The NVIDIA driver lets only administrators read GPU performance counters \
on this machine (ERR_NVGPUCTRPERM). Either run aisp (and so ncu) as root, or allow all users: create \
/etc/modprobe.d/nvidia-profiling.conf with `options nvidia NVreg_RestrictProfilingToAdminUsers=0`, then reload the \
driver or reboot (https://developer.nvidia.com/ERR_NVGPUCTRPERM). In a container, the host must allow it and the \
container needs --cap-add=SYS_ADMIN. Nsight Systems timelines (aisp_profile_nsys) and the PyTorch profiler \
(aisp_profile_torch) do not need counters and work without this.";

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_importer_failure_is_recognised_with_its_libraries() {
        // As nsys 2025.3 prints it on a CUDA 13 image without elfutils.
        let out = "Collecting data...\nGenerating '/tmp/nsys-report-1.qdstrm'\n\
/opt/nvidia/nsight-compute/2025.3.1/host/linux-desktop-glibc_2_11_3-x64/QdstrmImporter: error while loading shared libraries: libdw.so.1: cannot open shared object file: No such file or directory\n\
Unable to retrieve the importer version.\n";
        let f = importer_failure(out).unwrap();
        assert_eq!(f.missing_libraries, vec!["libdw.so.1"]);
        assert!(f.fix().contains("needs libdw.so.1 (elfutils"));
        assert!(f.fix().contains("LD_LIBRARY_PATH"));

        let f = importer_failure("Unable to retrieve the importer version.").unwrap();
        assert!(f.missing_libraries.is_empty());
        assert!(f.fix().contains("libdw.so.1 and libelf.so.1"));

        assert_eq!(importer_failure("Generated:\n    /tmp/run.nsys-rep"), None);
    }

    #[test]
    fn counter_permission_errors_are_recognised() {
        assert!(counter_permission_denied(
            "==ERROR== ERR_NVGPUCTRPERM - The user does not have permission to access NVIDIA GPU Performance Counters"
        ));
        assert!(!counter_permission_denied(
            "==PROF== Disconnected from process 1"
        ));
        assert!(COUNTER_PERMISSION_FIX.contains("NVreg_RestrictProfilingToAdminUsers=0"));
    }

    #[test]
    fn profiler_initialisation_failures_are_recognised() {
        // The message recorded for ncu 2025.3 on a gVisor machine, with ncu's error prefix.
        let out = "==PROF== Connected to process 88 (/usr/bin/python3.12)\n==ERROR== Failed to initialize the profiler: LibraryNotLoaded\n";
        assert_eq!(
            profiler_init_failure(out).as_deref(),
            Some("==ERROR== Failed to initialize the profiler: LibraryNotLoaded")
        );
        assert_eq!(profiler_init_failure("==PROF== Disconnected"), None);
    }
}
