# Type stubs of the `aisp` Python package, generated from the operation registry.
# Do not edit: run `aisp schemas --python-stubs python/aisp/__init__.pyi`
# (tests/schemas.rs fails when this file and the code disagree).
from typing import Any, Callable, Dict, Iterator, List, Literal, Optional, Union

__version__: str

class AispError(Exception):
    kind: str
    message: str
    hint: str
    tool: Optional[str]
    def __init__(self, message: str, hint: str = ..., kind: str = ..., tool: Optional[str] = ...) -> None: ...

class Result(Dict[str, Any]):
    tool: str
    def tables(self) -> Dict[str, List[Dict[str, Any]]]: ...
    def to_pandas(self, table: Optional[str] = ...) -> Any: ...
    def _repr_html_(self) -> str: ...

class Job:
    id: str
    tool: str
    def status(self) -> Result: ...
    def done(self) -> bool: ...
    def result(self, timeout_s: Optional[float] = ..., poll_s: float = ...) -> Result: ...
    def cancel(self) -> Result: ...
    async def wait(self, poll_s: float = ...) -> Result: ...

def to_pandas(value: Any, table: Optional[str] = ...) -> Any: ...
def tools() -> List[Dict[str, Any]]: ...

class InvalidInputError(AispError):
    """Error kind `invalid_input`."""

class NotFoundError(AispError):
    """Error kind `not_found`."""

class GpuUnavailableError(AispError):
    """Error kind `gpu_unavailable`."""

class UnsupportedError(AispError):
    """Error kind `unsupported`."""

class ExecNotAllowedError(AispError):
    """Error kind `exec_not_allowed`."""

class AispTimeoutError(AispError):
    """Error kind `timeout`."""

class AispCancelledError(AispError):
    """Error kind `cancelled`."""

class BusyError(AispError):
    """Error kind `busy`."""

class InternalError(AispError):
    """Error kind `internal`."""

class CoreDomain:
    """aisp itself: status of this server and machine, and the map of domains and tools."""
    def status(self, *, progress: Optional[Callable[[Dict[str, Any]], Any]] = ...) -> Result:
        """Version, GPUs found (or why none), driver and CUDA versions, store path, LLM and execution settings."""
        ...
    def list_domains(self, *, domain: Optional[str] = ..., enable: Optional[List[str]] = ..., progress: Optional[Callable[[Dict[str, Any]], Any]] = ...) -> Result:
        """The map of every domain and its tools; one domain's tools with their input schemas; enable a domain's tools in this session."""
        ...

class JobDomain:
    """Background jobs started by long-running operations with async: true."""
    def status(self, *, job_id: str, progress: Optional[Callable[[Dict[str, Any]], Any]] = ...) -> Result:
        """State, progress, result or error of a background job."""
        ...
    def list(self, *, limit: Optional[int] = ..., state: Optional[Literal['queued', 'running', 'succeeded', 'failed', 'cancelled']] = ..., progress: Optional[Callable[[Dict[str, Any]], Any]] = ...) -> Result:
        """Recent background jobs, newest first, optionally filtered by state."""
        ...
    def cancel(self, *, job_id: str, progress: Optional[Callable[[Dict[str, Any]], Any]] = ...) -> Result:
        """Stop a queued or running background job; its GPU memory and child processes are released."""
        ...

class GpuDomain:
    """NVIDIA GPU probes through NVML and CUDA: inventory, clocks, power, topology, NVLink, memory bandwidth."""
    def info(self, *, device: Optional[int] = ..., progress: Optional[Callable[[Dict[str, Any]], Any]] = ...) -> Result:
        """Per GPU: name, UUID, PCI bus, architecture and compute capability, SMs, memory, clocks vs max, theoretical bandwidth, temperatures, power, utilization, ECC, modes, PCIe link, processes."""
        ...
    def topology(self, *, device: Optional[int] = ..., progress: Optional[Callable[[Dict[str, Any]], Any]] = ...) -> Result:
        """The GPU/NIC link matrix as nvidia-smi topo -m draws it (X, NV#, PIX, PXB, PHB, NODE, SYS), P2P read/write/atomics per pair, CPU and NUMA affinity, and a one-line summary."""
        ...
    def power(self, *, device: Optional[int] = ..., progress: Optional[Callable[[Dict[str, Any]], Any]] = ...) -> Result:
        """Power draw vs limits (default, enforced, min/max), energy, temperatures, fans, clocks vs max, and the active throttle reasons in words."""
        ...
    def nvlink(self, *, device: Optional[int] = ..., sample_ms: Optional[int] = ..., progress: Optional[Callable[[Dict[str, Any]], Any]] = ...) -> Result:
        """Per NVLink: active, version, speed, remote device (GPU or NVSwitch) and PCI bus, error counters, and data counters or throughput where supported."""
        ...
    def bandwidth(self, *, device: Optional[int] = ..., sizes_mib: Optional[List[int]] = ..., time_budget_s: Optional[float] = ..., timeout_s: Optional[float] = ..., async_: Optional[bool] = False, progress: Optional[Callable[[Dict[str, Any]], Any]] = ...) -> Union[Result, Job]:
        """Device-memory bandwidth: copy kernels and cuMemcpyDtoD at several sizes, against the theoretical figure."""
        ...
    def clocks(self, *, device: Optional[int] = ..., load_s: Optional[float] = ..., lock_sm_mhz: Optional[int] = ..., lock_memory_mhz: Optional[int] = ..., keep_locked: Optional[bool] = ..., reset: Optional[bool] = ..., timeout_s: Optional[float] = ..., async_: Optional[bool] = False, progress: Optional[Callable[[Dict[str, Any]], Any]] = ...) -> Union[Result, Job]:
        """Current, application and max SM/memory clocks, whether a setting holds them, whether they stay stable under a short load; locks and restores clocks for benchmarks."""
        ...

class SystemDomain:
    """The host around the GPUs: software stack, dependencies, capabilities, kernel parameters, containers, CPU/NUMA, network, environment, triage."""
    def monitor(self, *, duration_s: Optional[float] = ..., interval_ms: Optional[int] = ..., timeout_s: Optional[float] = ..., async_: Optional[bool] = False, progress: Optional[Callable[[Dict[str, Any]], Any]] = ...) -> Union[Result, Job]:
        """Samples host CPU %, memory and load, and per-GPU utilization, memory, power and SM clock, over a period."""
        ...
    def software(self, *, python: Optional[bool] = ..., progress: Optional[Callable[[Dict[str, Any]], Any]] = ...) -> Result:
        """OS and kernel, NVIDIA driver and CUDA version, NVRTC/cuBLAS found, nvcc/nsys/ncu with versions, Python with torch (and its CUDA), triton, transformers, vllm, flash-attn, deepspeed, jax."""
        ...
    def dependencies(self, *, progress: Optional[Callable[[Dict[str, Any]], Any]] = ...) -> Result:
        """Judges the GPU software stack: torch/nvcc/NVRTC/jax built for a CUDA the driver supports, NCCL present, package pins satisfied, profilers found — each problem with a fix."""
        ...
    def capabilities(self, *, device: Optional[int] = ..., compute_capability: Optional[str] = ..., progress: Optional[Callable[[Dict[str, Any]], Any]] = ...) -> Result:
        """From compute capability and device attributes: tensor core generation and precisions (TF32, BF16, FP16, FP8, FP6/FP4), TMA, clusters/DSMEM, wgmma/tcgen05, async copy, shared memory, L2, registers — and what each enables."""
        ...
    def parameters(self, *, progress: Optional[Callable[[Dict[str, Any]], Any]] = ...) -> Result:
        """NUMA balancing, transparent huge pages, swappiness, dirty ratios, zone reclaim, perf_event_paranoid, CPU governor, IOMMU, TCP buffers, somaxconn: value, recommended value for GPU hosts, why, and the fix."""
        ...
    def container(self, *, progress: Optional[Callable[[Dict[str, Any]], Any]] = ...) -> Result:
        """Whether aisp runs in a container, cgroup version, CPU quota, cpuset and affinity, memory and pids limits, /dev/shm size, memlock and open-files limits, and the mismatches that hurt GPU jobs."""
        ...
    def cpu_memory(self, *, progress: Optional[Callable[[Dict[str, Any]], Any]] = ...) -> Result:
        """CPU model, sockets, cores, threads, caches, memory, NUMA nodes with their CPUs and memory, huge pages, and each GPU's NUMA node and local CPUs."""
        ...
    def network(self, *, progress: Optional[Callable[[Dict[str, Any]], Any]] = ...) -> Result:
        """Interfaces with state, speed and MTU; InfiniBand/RoCE adapters with port states and rates; GPUDirect RDMA modules (nvidia_peermem, gdrdrv, nvidia_fs); NCCL variables set."""
        ...
    def env(self, *, progress: Optional[Callable[[Dict[str, Any]], Any]] = ...) -> Result:
        """The environment variables that change GPU jobs (CUDA_VISIBLE_DEVICES, NCCL_*, TORCH_*, PYTORCH_CUDA_ALLOC_CONF, OMP_NUM_THREADS, ...), explained, with secrets redacted and risky settings flagged."""
        ...
    def context(self, *, detail: Optional[Literal['summary', 'full']] = ..., progress: Optional[Callable[[Dict[str, Any]], Any]] = ...) -> Result:
        """Everything about this machine in one call: host, GPUs (state, power, topology), software stack, and what is wrong (dependency problems, kernel parameters, container limits, environment, network)."""
        ...
    def triage(self, *, progress: Optional[Callable[[Dict[str, Any]], Any]] = ...) -> Result:
        """Status, a compact system context, and the three most useful next steps for this machine, each naming the tool to call and why."""
        ...

class ProfileDomain:
    """Nsight Systems, Nsight Compute and PyTorch profiles: read them exactly, find what costs time, compare captures, and capture new ones."""
    def info(self, *, path: str, raw: Optional[bool] = ..., progress: Optional[Callable[[Dict[str, Any]], Any]] = ...) -> Result:
        """What an Nsight Systems export holds: versions, capture settings, GPUs, processes/threads, streams, event counts."""
        ...
    def summary(self, *, path: str, device: Optional[int] = ..., process: Optional[int] = ..., start_ns: Optional[int] = ..., end_ns: Optional[int] = ..., nvtx_range: Optional[str] = ..., reports: Optional[List[str]] = ..., names: Optional[Literal['short', 'demangled']] = ..., limit: Optional[int] = ..., progress: Optional[Callable[[Dict[str, Any]], Any]] = ...) -> Result:
        """The nsys stats reports: kernels, CUDA API, memcpy time/size, NVTX and OS runtime, with exact nsys semantics."""
        ...
    def kernels(self, *, path: str, device: Optional[int] = ..., process: Optional[int] = ..., start_ns: Optional[int] = ..., end_ns: Optional[int] = ..., nvtx_range: Optional[str] = ..., names: Optional[Literal['operation', 'short', 'demangled']] = ..., limit: Optional[int] = ..., detail: Optional[bool] = ..., progress: Optional[Callable[[Dict[str, Any]], Any]] = ...) -> Result:
        """Top kernels with the step ledger's class (tensor-core GEMM, fp32 SIMT GEMM, attention, optimizer, ...), share, calls, mean and grid × block; detail: p50/p90/p99, per-device split, full launch configuration."""
        ...
    def utilization(self, *, path: str, device: Optional[int] = ..., process: Optional[int] = ..., start_ns: Optional[int] = ..., end_ns: Optional[int] = ..., nvtx_range: Optional[str] = ..., chunks: Optional[int] = ..., threshold_pct: Optional[float] = ..., progress: Optional[Callable[[Dict[str, Any]], Any]] = ...) -> Result:
        """Per-device busy time as the union of kernel intervals over the span, steps and steady windows, plus time-utilization chunks."""
        ...
    def gaps(self, *, path: str, device: Optional[int] = ..., process: Optional[int] = ..., start_ns: Optional[int] = ..., end_ns: Optional[int] = ..., nvtx_range: Optional[str] = ..., min_gap_ms: Optional[float] = ..., limit: Optional[int] = ..., detail: Optional[bool] = ..., progress: Optional[Callable[[Dict[str, Any]], Any]] = ...) -> Result:
        """Idle gaps per device, steady state first, each with what the launching CPU thread was doing (sync, module loading, sleep, NVTX range)."""
        ...
    def memory(self, *, path: str, device: Optional[int] = ..., process: Optional[int] = ..., start_ns: Optional[int] = ..., end_ns: Optional[int] = ..., nvtx_range: Optional[str] = ..., limit: Optional[int] = ..., detail: Optional[bool] = ..., progress: Optional[Callable[[Dict[str, Any]], Any]] = ...) -> Result:
        """Memcpy/memset by direction and memory kind, achieved bandwidth, pageable async copies, blocking copy APIs, GPU memory over time."""
        ...
    def nvtx(self, *, path: str, device: Optional[int] = ..., process: Optional[int] = ..., start_ns: Optional[int] = ..., end_ns: Optional[int] = ..., nvtx_range: Optional[str] = ..., limit: Optional[int] = ..., max_depth: Optional[int] = ..., max_children: Optional[int] = ..., group_numbered: Optional[bool] = ..., detail: Optional[bool] = ..., progress: Optional[Callable[[Dict[str, Any]], Any]] = ...) -> Result:
        """NVTX range tree per thread and GPU time projected onto each range name (process-wide attribution, same-thread beside it)."""
        ...
    def iterations(self, *, path: str, device: Optional[int] = ..., process: Optional[int] = ..., start_ns: Optional[int] = ..., end_ns: Optional[int] = ..., nvtx_range: Optional[str] = ..., marker: Optional[str] = ..., limit: Optional[int] = ..., detail: Optional[bool] = ..., progress: Optional[Callable[[Dict[str, Any]], Any]] = ...) -> Result:
        """Detects steps (NVTX step_N, numbered ranges or a repeating kernel) and reports per-step CPU time, GPU-projected time, kernels, variance, slowest steps."""
        ...
    def nccl(self, *, path: str, device: Optional[int] = ..., process: Optional[int] = ..., start_ns: Optional[int] = ..., end_ns: Optional[int] = ..., nvtx_range: Optional[str] = ..., progress: Optional[Callable[[Dict[str, Any]], Any]] = ...) -> Result:
        """Communication kernels per device and stream by collective: counts, time, share, bandwidth when sizes are known, rank imbalance."""
        ...
    def overlap(self, *, path: str, device: Optional[int] = ..., process: Optional[int] = ..., start_ns: Optional[int] = ..., end_ns: Optional[int] = ..., nvtx_range: Optional[str] = ..., progress: Optional[Callable[[Dict[str, Any]], Any]] = ...) -> Result:
        """Per device: compute only, communication only, both, idle; overlap_pct = communication hidden behind compute."""
        ...
    def search(self, *, path: str, pattern: str, device: Optional[int] = ..., process: Optional[int] = ..., start_ns: Optional[int] = ..., end_ns: Optional[int] = ..., nvtx_range: Optional[str] = ..., kinds: Optional[List[Literal['kernel', 'nvtx', 'api']]] = ..., limit: Optional[int] = ..., progress: Optional[Callable[[Dict[str, Any]], Any]] = ...) -> Result:
        """Finds kernels, NVTX ranges and CUDA API calls by name (substring or glob), with timestamps, counts and totals."""
        ...
    def timeline(self, *, path: str, device: Optional[int] = ..., process: Optional[int] = ..., start_ns: Optional[int] = ..., end_ns: Optional[int] = ..., nvtx_range: Optional[str] = ..., limit: Optional[int] = ..., merge_gap_ns: Optional[int] = ..., progress: Optional[Callable[[Dict[str, Any]], Any]] = ...) -> Result:
        """Events of a window per device/stream and per CPU thread, with runs of identical kernels merged, compact enough to read."""
        ...
    def events(self, *, path: str, device: Optional[int] = ..., process: Optional[int] = ..., start_ns: Optional[int] = ..., end_ns: Optional[int] = ..., nvtx_range: Optional[str] = ..., buckets: Optional[int] = ..., progress: Optional[Callable[[Dict[str, Any]], Any]] = ...) -> Result:
        """Every event of a window per GPU stream and CPU thread (NVTX lanes, CUDA API), clustered to the drawing's resolution."""
        ...
    def rules(self, *, path: str, device: Optional[int] = ..., process: Optional[int] = ..., start_ns: Optional[int] = ..., end_ns: Optional[int] = ..., nvtx_range: Optional[str] = ..., detail: Optional[bool] = ..., finding: Optional[str] = ..., progress: Optional[Callable[[Dict[str, Any]], Any]] = ...) -> Result:
        """Findings in the style of nsys analyze, each rated by the GPU time per device a fix would save: starvation, host-bound steps, syncs, copies, launch storms, allocator churn, fp32 GEMMs, exposed NCCL, variance."""
        ...
    def ledger(self, *, path: str, device: Optional[int] = ..., process: Optional[int] = ..., start_ns: Optional[int] = ..., end_ns: Optional[int] = ..., nvtx_range: Optional[str] = ..., steps: Optional[int] = ..., progress: Optional[Callable[[Dict[str, Any]], Any]] = ...) -> Result:
        """Where each nanosecond of each step goes, per device or rank: compute by kernel class, communication (transfer vs waiting for ranks), copies, idle by cause; sums to the step exactly."""
        ...
    def compare(self, *, before: str, after: str, limit: Optional[int] = ..., detail: Optional[bool] = ..., progress: Optional[Callable[[Dict[str, Any]], Any]] = ...) -> Result:
        """Did the fix work: the step change with a 95% interval on the step ledger, comparability fact by fact, predicted vs measured step per finding, and what moved."""
        ...
    def export(self, *, path: str, kind: Literal['perfetto', 'csv'], device: Optional[int] = ..., process: Optional[int] = ..., start_ns: Optional[int] = ..., end_ns: Optional[int] = ..., nvtx_range: Optional[str] = ..., output: Optional[str] = ..., report: Optional[str] = ..., names: Optional[Literal['short', 'demangled']] = ..., overwrite: Optional[bool] = ..., progress: Optional[Callable[[Dict[str, Any]], Any]] = ...) -> Result:
        """Writes a Perfetto/Chrome trace JSON or a CSV of any report of a profile."""
        ...
    def ranks(self, *, path: Optional[str] = '', paths: Optional[List[str]] = ..., write_digests: Optional[str] = ..., overwrite: Optional[bool] = False, digest_only: Optional[bool] = False, threads: Optional[int] = ..., each: Optional[str] = ..., each_args: Optional[Dict[str, Any]] = ..., detail: Optional[bool] = False, timeout_s: Optional[float] = ..., async_: Optional[bool] = False, progress: Optional[Callable[[Dict[str, Any]], Any]] = ...) -> Union[Result, Job]:
        """Many ranks as one run: per-rank identity, clock alignment, step time, busy, exposed communication, stragglers, arrival skew vs transfer, imbalance, rank x step heat map."""
        ...
    def nsys(self, *, command: List[str], cwd: Optional[str] = ..., env: Optional[Dict[str, Any]] = ..., preset: Optional[Literal['light', 'full']] = ..., trace: Optional[List[str]] = ..., capture_range: Optional[Literal['none', 'nvtx', 'cuda_profiler_api']] = ..., nvtx_range: Optional[str] = ..., duration_s: Optional[int] = ..., delay_s: Optional[int] = ..., force_overwrite: Optional[bool] = ..., analyze: Optional[bool] = ..., launcher: Optional[List[str]] = ..., timeout_s: Optional[float] = ..., async_: Optional[bool] = False, progress: Optional[Callable[[Dict[str, Any]], Any]] = ...) -> Union[Result, Job]:
        """Runs a command under nsys profile, exports the report to SQLite and returns the paths with the profile's info and top findings."""
        ...
    def ncu(self, *, command: List[str], cwd: Optional[str] = ..., env: Optional[Dict[str, Any]] = ..., set: Optional[Literal['basic', 'detailed', 'full', 'roofline']] = ..., sections: Optional[List[str]] = ..., metrics: Optional[List[str]] = ..., kernel_regex: Optional[str] = ..., launch_skip: Optional[int] = ..., launch_count: Optional[int] = ..., nvtx_include: Optional[List[str]] = ..., replay_mode: Optional[Literal['kernel', 'application', 'range', 'app_range']] = ..., clock_control: Optional[Literal['none', 'base']] = ..., limit: Optional[int] = ..., timeout_s: Optional[float] = ..., async_: Optional[bool] = False, progress: Optional[Callable[[Dict[str, Any]], Any]] = ...) -> Union[Result, Job]:
        """Runs a command under ncu (section set, kernel filter, launch skip/count, NVTX filter) and returns per-kernel speed of light, occupancy, memory and rule findings."""
        ...
    def ncu_summary(self, *, path: str, details_path: Optional[str] = ..., limit: Optional[int] = ..., progress: Optional[Callable[[Dict[str, Any]], Any]] = ...) -> Result:
        """Per-kernel speed of light, occupancy and limiter, DRAM bandwidth, cache hit rates, roofline, warp stalls and rule messages from an existing .ncu-rep or ncu CSV."""
        ...
    def ncu_compare(self, *, before: str, after: str, before_details: Optional[str] = ..., after_details: Optional[str] = ..., progress: Optional[Callable[[Dict[str, Any]], Any]] = ...) -> Result:
        """Per-kernel deltas between two ncu reports or runs of the same kernels (duration, SOL %, occupancy, DRAM traffic, top stall) with a faster/slower/unchanged verdict."""
        ...
    def flame(self, *, path: str, output_dir: Optional[str] = ..., overwrite: Optional[bool] = ..., top: Optional[int] = ..., operators: Optional[bool] = ..., progress: Optional[Callable[[Dict[str, Any]], Any]] = ...) -> Result:
        """Aggregated call stacks as folded text and an SVG flame graph, plus the frames with the most self time, from a PyTorch trace recorded with stacks or an Nsight Systems export with CPU samples."""
        ...
    def compile(self, *, log: Optional[str] = ..., trace: Optional[str] = ..., run_id: Optional[str] = ..., progress: Optional[Callable[[Dict[str, Any]], Any]] = ...) -> Result:
        """Graph breaks and recompilations with their reasons and fixes from TORCH_LOGS output, and compile time vs run time from a trace of a torch.compile run."""
        ...
    def torch(self, *, command: List[str], cwd: Optional[str] = ..., env: Optional[Dict[str, Any]] = ..., wait: Optional[int] = ..., warmup: Optional[int] = ..., active: Optional[int] = ..., step_on: Optional[Literal['optimizer', 'none']] = ..., record_shapes: Optional[bool] = ..., profile_memory: Optional[bool] = ..., with_stack: Optional[bool] = ..., with_flops: Optional[bool] = ..., top: Optional[int] = ..., compile_logs: Optional[bool] = ..., timeout_s: Optional[float] = ..., async_: Optional[bool] = False, progress: Optional[Callable[[Dict[str, Any]], Any]] = ...) -> Union[Result, Job]:
        """Runs a Python script under torch.profiler (schedule, shapes, memory, stack, FLOPs), writes the Kineto trace and analyses it."""
        ...
    def trace(self, *, paths: List[str], top: Optional[int] = ..., steps: Optional[int] = ..., findings: Optional[int] = ..., detail: Optional[bool] = ..., progress: Optional[Callable[[Dict[str, Any]], Any]] = ...) -> Result:
        """HTA-style analysis of Kineto traces (one per rank): temporal and idle breakdown, top kernels and operators, launch statistics, overlap, per-step GPU time, findings."""
        ...
    def list(self, *, kind: Optional[Literal['nsys', 'ncu', 'torch']] = ..., state: Optional[Literal['running', 'succeeded', 'failed', 'cancelled', 'timed_out']] = ..., limit: Optional[int] = ..., progress: Optional[Callable[[Dict[str, Any]], Any]] = ...) -> Result:
        """Captures recorded by aisp_profile_nsys/ncu/torch: run ids, commands, times, state, artifacts and top findings."""
        ...

class BenchmarkDomain:
    """CUDA microbenchmarks as baseline-vs-optimized lessons, with verified, repeatable timings and history."""
    def targets(self, *, target: Optional[str] = ..., progress: Optional[Callable[[Dict[str, Any]], Any]] = ...) -> Result:
        """Lists the CUDA microbenchmark lessons: id, the lesson in one sentence, baseline and optimized variants, metric, requirements."""
        ...
    def run(self, *, targets: Optional[List[str]] = ..., variants: Optional[List[str]] = ..., size: Optional[Literal['small', 'medium', 'large']] = ..., time_budget_s: Optional[float] = ..., device: Optional[int] = ..., timeout_s: Optional[float] = ..., async_: Optional[bool] = False, progress: Optional[Callable[[Dict[str, Any]], Any]] = ...) -> Union[Result, Job]:
        """Runs baseline-vs-optimized CUDA lessons on the GPU: each variant checked against a CPU reference, then timed with CUDA events."""
        ...
    def compare(self, *, target: str, baseline_variant: Optional[str] = ..., candidate_variant: Optional[str] = ..., run_id: Optional[str] = ..., variant: Optional[str] = ..., baseline_run_id: Optional[str] = ..., candidate_run_id: Optional[str] = ..., progress: Optional[Callable[[Dict[str, Any]], Any]] = ...) -> Result:
        """Compares two variants of one run, or one variant across two runs, with a bootstrap interval and a Mann-Whitney test."""
        ...
    def history(self, *, target: Optional[str] = ..., variant: Optional[str] = ..., run_id: Optional[str] = ..., device: Optional[str] = ..., limit: Optional[int] = ..., include_samples: Optional[bool] = ..., progress: Optional[Callable[[Dict[str, Any]], Any]] = ...) -> Result:
        """Stored benchmark and hardware-roof results, newest first, filtered by target, variant, run or GPU."""
        ...
    def import_(self, *, path: str, progress: Optional[Callable[[Dict[str, Any]], Any]] = ...) -> Result:
        """Loads saved aisp_benchmark_run answers (run.json) into the store, so history, analyses and reports use those measurements."""
        ...
    def speed_test(self, *, device: Optional[int] = ..., timeout_s: Optional[float] = ..., async_: Optional[bool] = False, progress: Optional[Callable[[Dict[str, Any]], Any]] = ...) -> Union[Result, Job]:
        """Measures HBM copy bandwidth, BF16 GEMM TFLOP/s, launch latency and pinned H2D bandwidth, each against what this GPU should reach."""
        ...
    def kernel(self, *, kernels: List[Dict[str, Any]], reference: str, args: List[Dict[str, Any]], name: Optional[str] = ..., launch: Optional[Dict[str, Any]] = ..., sizes: Optional[List[Dict[str, Any]]] = ..., bytes: Optional[Union[float, str]] = ..., flops: Optional[Union[float, str]] = ..., roof: Optional[Literal['memory', 'fp32', 'tf32', 'bf16', 'fp16']] = ..., tolerance: Optional[Dict[str, Any]] = ..., time_budget_s: Optional[float] = ..., time_limit_s: Optional[float] = ..., compile_only: Optional[bool] = False, arch: Optional[str] = ..., device: Optional[int] = ..., ncu: Optional[Union[bool, List[str]]] = ..., timeout_s: Optional[float] = ..., async_: Optional[bool] = False, progress: Optional[Callable[[Dict[str, Any]], Any]] = ...) -> Union[Result, Job]:
        """Compiles CUDA C++ kernels with NVRTC, checks their outputs against a reference, times them and reports speedup, GB/s or TFLOP/s, % of roof, registers and occupancy."""
        ...
    def kernel_improve(self, *, lab: Dict[str, Any], rounds: Optional[int] = ..., goal: Optional[str] = ..., timeout_s: Optional[float] = ..., async_: Optional[bool] = False, progress: Optional[Callable[[Dict[str, Any]], Any]] = ...) -> Union[Result, Job]:
        """Asks the configured LLM for faster variants of a kernel for N rounds, checking and timing each with aisp_benchmark_kernel; keeps the best correct one."""
        ...

class HwDomain:
    """Measured hardware roofs: memory bandwidth, compute peaks per precision, PCIe, caches, tensor cores, peer-to-peer and NCCL; the host's disk and network throughput."""
    def roofline(self, *, device: Optional[int] = ..., copy_mib: Optional[int] = ..., gemm_size: Optional[int] = ..., tensor: Optional[bool] = ..., timeout_s: Optional[float] = ..., async_: Optional[bool] = False, progress: Optional[Callable[[Dict[str, Any]], Any]] = ...) -> Union[Result, Job]:
        """Measures device-memory bandwidth and compute peaks per precision on this GPU, and the ridge points between them."""
        ...
    def pcie(self, *, device: Optional[int] = ..., size_mib: Optional[int] = ..., timeout_s: Optional[float] = ..., async_: Optional[bool] = False, progress: Optional[Callable[[Dict[str, Any]], Any]] = ...) -> Union[Result, Job]:
        """Host-to-device and device-to-host bandwidth from pinned and pageable memory, one way and both ways at once."""
        ...
    def cache(self, *, device: Optional[int] = ..., max_mib: Optional[int] = ..., timeout_s: Optional[float] = ..., async_: Optional[bool] = False, progress: Optional[Callable[[Dict[str, Any]], Any]] = ...) -> Union[Result, Job]:
        """Read bandwidth against working-set size: L1 per SM, L2, then device memory."""
        ...
    def tensor_cores(self, *, device: Optional[int] = ..., sizes: Optional[List[int]] = ..., precisions: Optional[List[str]] = ..., time_budget_s: Optional[float] = ..., timeout_s: Optional[float] = ..., async_: Optional[bool] = False, progress: Optional[Callable[[Dict[str, Any]], Any]] = ...) -> Union[Result, Job]:
        """cuBLAS/cuBLASLt GEMM TFLOP/s per precision (FP32, TF32, BF16, FP16, FP8) and size."""
        ...
    def p2p(self, *, devices: Optional[List[int]] = ..., size_mib: Optional[int] = ..., timeout_s: Optional[float] = ..., async_: Optional[bool] = False, progress: Optional[Callable[[Dict[str, Any]], Any]] = ...) -> Union[Result, Job]:
        """For every pair of GPUs: peer access, copy bandwidth one way and both ways, and small-copy latency."""
        ...
    def nccl(self, *, devices: Optional[List[int]] = ..., min_bytes: Optional[int] = ..., max_bytes: Optional[int] = ..., step_factor: Optional[int] = ..., time_budget_s: Optional[float] = ..., timeout_s: Optional[float] = ..., async_: Optional[bool] = False, progress: Optional[Callable[[Dict[str, Any]], Any]] = ...) -> Union[Result, Job]:
        """NCCL all-reduce (sum, float32) over the GPUs of this host, one thread per GPU: time, algbw and busbw per message size."""
        ...
    def disk(self, *, path: Optional[str] = ..., file_mib: Optional[int] = ..., block_kib: Optional[int] = ..., random_block_kib: Optional[int] = ..., queue_depth: Optional[int] = ..., timeout_s: Optional[float] = ..., async_: Optional[bool] = False, progress: Optional[Callable[[Dict[str, Any]], Any]] = ...) -> Union[Result, Job]:
        """Sequential and random read/write MB/s, IOPS and latency of a directory's filesystem (page cache excluded), and whether GPUDirect Storage is usable there."""
        ...
    def network(self, *, peer: Optional[str] = ..., seconds: Optional[int] = ..., streams: Optional[int] = ..., ib: Optional[bool] = ..., ib_peer: Optional[str] = ..., timeout_s: Optional[float] = ..., async_: Optional[bool] = False, progress: Optional[Callable[[Dict[str, Any]], Any]] = ...) -> Union[Result, Job]:
        """Measured TCP throughput and round-trip latency (loopback or to an aisp peer) and ib_write_bw RDMA bandwidth, each against the link's rated speed."""
        ...
    def network_listen(self, *, duration_s: int, bind: Optional[str] = ..., max_sessions: Optional[int] = ..., timeout_s: Optional[float] = ..., async_: Optional[bool] = False, progress: Optional[Callable[[Dict[str, Any]], Any]] = ...) -> Union[Result, Job]:
        """Listens for aisp_hw_network from another host for a limited time: sinks its throughput streams and echoes its latency pings."""
        ...

class AnalyzeDomain:
    """Bottleneck classification, what-if analysis, scaling, pareto fronts and retargeting a profile to another GPU."""
    def bottlenecks(self, *, path: Optional[str] = ..., device: Optional[int] = ..., process: Optional[int] = ..., nvtx_range: Optional[str] = ..., progress: Optional[Callable[[Dict[str, Any]], Any]] = ...) -> Result:
        """Host-, launch-, compute-, memory- or communication-bound, per GPU, from a profile's time accounting with evidence (busy %, kernel classes, short kernels, rule findings) plus measured roofs from benchmark history."""
        ...
    def retarget(self, *, path: str, target_gpu: str, source_gpu: Optional[str] = ..., device: Optional[int] = ..., nvtx_range: Optional[str] = ..., limit: Optional[int] = ..., progress: Optional[Callable[[Dict[str, Any]], Any]] = ...) -> Result:
        """Estimates a real profile's kernel time on another GPU: each kernel classified compute-, memory-, interconnect- or launch-bound from its class and measured time, rescaled by the matching datasheet peak ratio."""
        ...
    def pareto(self, *, target: Optional[str] = ..., device: Optional[str] = ..., run_id: Optional[str] = ..., objectives: Optional[List[Literal['time', 'memory', 'energy']]] = ..., progress: Optional[Callable[[Dict[str, Any]], Any]] = ...) -> Result:
        """Variants on the time / memory / energy Pareto front for each benchmark target, size and GPU, with which variant dominates each of the rest."""
        ...
    def leaderboards(self, *, target: Optional[str] = ..., device: Optional[str] = ..., run_id: Optional[str] = ..., progress: Optional[Callable[[Dict[str, Any]], Any]] = ...) -> Result:
        """Variants of each benchmark target ranked by median time per size and GPU, with speedup over the baseline, CV and percent of roof."""
        ...
    def scaling(self, *, target: Optional[str] = ..., device: Optional[str] = ..., model: Optional[str] = ..., architecture: Optional[Dict[str, Any]] = ..., gpu: Optional[str] = ..., gpu_counts: Optional[List[int]] = ..., gpus_per_node: Optional[int] = ..., seq_len: Optional[int] = ..., global_batch: Optional[int] = ..., progress: Optional[Callable[[Dict[str, Any]], Any]] = ...) -> Result:
        """How time scales with problem size (fit over benchmark history) or how training throughput scales with GPU count (the planner's best layout at each count)."""
        ...
    def whatif(self, *, model: Optional[str] = ..., architecture: Optional[Dict[str, Any]] = ..., max_vram_gb: Optional[float] = ..., max_latency_ms: Optional[float] = ..., min_tokens_per_s: Optional[float] = ..., max_gpus: Optional[int] = ..., gpu_types: Optional[List[str]] = ..., context_tokens: Optional[int] = ..., progress: Optional[Callable[[Dict[str, Any]], Any]] = ...) -> Result:
        """Given limits on VRAM per GPU, per-token latency and required throughput, lists the GPU × count × weight format × KV format configurations that satisfy them (roofline), plus benchmark results that do."""
        ...
    def stacking(self, *, techniques: Optional[List[str]] = ..., progress: Optional[Callable[[Dict[str, Any]], Any]] = ...) -> Result:
        """Pairwise conflicts and synergies among techniques (given ids or the whole catalog), with reasons, and which ones act on the same component."""
        ...
    def power(self, *, target: Optional[str] = ..., device: Optional[str] = ..., run_id: Optional[str] = ..., progress: Optional[Callable[[Dict[str, Any]], Any]] = ...) -> Result:
        """Energy per run, mean power and performance per watt (GB/s/W, TFLOP/s/W) for benchmark results, and energy relative to each target's baseline."""
        ...
    def memory_patterns(self, *, path: Optional[str] = ..., details_path: Optional[str] = ..., command: Optional[List[str]] = ..., cwd: Optional[str] = ..., env: Optional[Dict[str, Any]] = ..., kernel_regex: Optional[str] = ..., launch_skip: Optional[int] = ..., launch_count: Optional[int] = ..., limit: Optional[int] = ..., timeout_s: Optional[float] = ..., async_: Optional[bool] = False, progress: Optional[Callable[[Dict[str, Any]], Any]] = ...) -> Union[Result, Job]:
        """Per kernel: uncoalesced global loads/stores (sectors per request, bytes used), branch efficiency (active threads per instruction) and shared-memory wavefronts per request, each with a verdict and the fix, from ncu counters."""
        ...
    def dataloader(self, *, path: str, limit: Optional[int] = ..., wait_source: Optional[Literal['auto', 'osrt']] = ..., progress: Optional[Callable[[Dict[str, Any]], Any]] = ...) -> Result:
        """Time the training loop loses waiting on its DataLoader, whether the loader workers keep up (prefetch, worker utilisation) and the fix, from a PyTorch profiler trace or an Nsight Systems export."""
        ...

class OptimizeDomain:
    """Optimization techniques: recommendations ranked for a goal, details, ROI, compatibility of combinations, playbooks."""
    def recommend(self, *, model: Optional[str] = ..., architecture: Optional[Dict[str, Any]] = ..., params_b: Optional[float] = ..., gpu: Optional[str] = ..., gpus: Optional[int] = ..., nodes: Optional[int] = ..., goal: Optional[Literal['throughput', 'latency', 'memory', 'cost']] = ..., workload: Optional[Literal['training', 'inference', 'both']] = ..., seq_len: Optional[int] = ..., dtype: Optional[Literal['fp32', 'bf16', 'fp16', 'fp8', 'int8', 'int4']] = ..., findings: Optional[List[str]] = ..., profile: Optional[str] = ..., draft_model: Optional[bool] = ..., shared_prefixes: Optional[bool] = ..., can_change_model: Optional[bool] = ..., limit: Optional[int] = ..., progress: Optional[Callable[[Dict[str, Any]], Any]] = ...) -> Result:
        """Ranks optimization techniques for your model, GPUs and goal (throughput, latency, memory, cost) by measured effect, with why, preconditions met/unmet and conflicts resolved."""
        ...
    def techniques(self, *, category: Optional[str] = ..., workload: Optional[Literal['training', 'inference', 'both']] = ..., goal: Optional[Literal['throughput', 'latency', 'memory', 'cost']] = ..., progress: Optional[Callable[[Dict[str, Any]], Any]] = ...) -> Result:
        """Lists the optimization techniques (attention, compilation, precision, quantization, memory, parallelism, serving, ...) with effect ranges and sources, filterable by category, workload and goal."""
        ...
    def details(self, *, id: str, progress: Optional[Callable[[Dict[str, Any]], Any]] = ...) -> Result:
        """The full catalog record for a technique (effect, scope, source, preconditions, conflicts, synergies, how-to), a GPU (every datasheet figure with its source) or a model (shape and source)."""
        ...
    def roi(self, *, goal: Optional[Literal['throughput', 'latency', 'memory', 'cost']] = ..., workload: Optional[Literal['training', 'inference', 'both']] = ..., progress: Optional[Callable[[Dict[str, Any]], Any]] = ...) -> Result:
        """Expected gain versus implementation effort for every technique serving a goal: (conservative measured gain − 1) / effort, with the basis of each gain."""
        ...
    def compound(self, *, techniques: List[str], progress: Optional[Callable[[Dict[str, Any]], Any]] = ...) -> Result:
        """Checks a set of techniques for conflicts and synergies and computes their combined speedup range with diminishing returns (same-component techniques do not multiply)."""
        ...
    def playbooks(self, *, goal: Optional[Literal['throughput', 'latency', 'memory', 'cost']] = ..., workload: Optional[Literal['training', 'inference', 'both']] = ..., progress: Optional[Callable[[Dict[str, Any]], Any]] = ...) -> Result:
        """Ordered technique recipes for training throughput, training memory, scale-out, inference latency, throughput and cost, with their combined effect computed, not asserted."""
        ...

class DistributedDomain:
    """Distributed training plans: parallelism layouts with memory and step-time estimates, NCCL settings, FSDP/TP/PP configs, Slurm scripts, cost."""
    def plan(self, *, model: Optional[str] = ..., architecture: Optional[Dict[str, Any]] = ..., params_b: Optional[float] = ..., gpu: Optional[str] = ..., gpus: Optional[int] = ..., nodes: Optional[int] = ..., gpus_per_node: Optional[int] = ..., seq_len: Optional[int] = ..., global_batch: Optional[int] = ..., dtype: Optional[Literal['fp32', 'bf16', 'fp16', 'fp8', 'int8', 'int4']] = ..., compute_efficiency: Optional[float] = ..., usable_memory_fraction: Optional[float] = ..., intra_node_gb_per_s: Optional[float] = ..., inter_node_gb_per_s: Optional[float] = ..., tp: Optional[int] = ..., pp: Optional[int] = ..., cp: Optional[int] = ..., ep: Optional[int] = ..., zero_stage: Optional[int] = ..., recompute: Optional[Literal['none', 'selective', 'full']] = ..., micro_batch: Optional[int] = ..., flash_attention: Optional[bool] = ..., top: Optional[int] = ..., use_measured_roofs: Optional[bool] = ..., progress: Optional[Callable[[Dict[str, Any]], Any]] = ...) -> Result:
        """Ranks TP×PP×DP(×CP/EP) layouts with ZeRO stage, recompute and micro-batching by estimated step time; per-GPU memory, MFU, and why others were rejected."""
        ...
    def nccl(self, *, gpu: Optional[str] = ..., nodes: Optional[int] = ..., gpus_per_node: Optional[int] = ..., network: Optional[Literal['infiniband', 'roce', 'ethernet']] = ..., inter_node_gb_per_s: Optional[float] = ..., tensor_parallel: Optional[bool] = ..., progress: Optional[Callable[[Dict[str, Any]], Any]] = ...) -> Result:
        """NCCL environment variables for your GPUs, nodes and network, each with why and its doc link, the bus bandwidth to expect, and how to verify."""
        ...
    def fsdp(self, *, model: Optional[str] = ..., architecture: Optional[Dict[str, Any]] = ..., params_b: Optional[float] = ..., gpu: Optional[str] = ..., gpus: Optional[int] = ..., nodes: Optional[int] = ..., gpus_per_node: Optional[int] = ..., seq_len: Optional[int] = ..., micro_batch: Optional[int] = ..., dtype: Optional[Literal['fp32', 'bf16', 'fp16', 'fp8', 'int8', 'int4']] = ..., usable_memory_fraction: Optional[float] = ..., progress: Optional[Callable[[Dict[str, Any]], Any]] = ...) -> Result:
        """Chooses PyTorch FSDP2 sharding (HSDP vs full shard, reshard_after_forward, activation checkpointing) from per-GPU memory, and writes the code."""
        ...
    def tensor_parallel(self, *, model: Optional[str] = ..., architecture: Optional[Dict[str, Any]] = ..., params_b: Optional[float] = ..., gpu: Optional[str] = ..., tp: Optional[int] = ..., gpus_per_node: Optional[int] = ..., tokens: Optional[int] = ..., dtype: Optional[Literal['fp32', 'bf16', 'fp16', 'fp8', 'int8', 'int4']] = ..., progress: Optional[Callable[[Dict[str, Any]], Any]] = ...) -> Result:
        """Checks a TP degree against the model (heads, KV heads) and links, estimates per-layer all-reduce vs compute time, and writes the DTensor plan."""
        ...
    def pipeline(self, *, pp: int, model: Optional[str] = ..., architecture: Optional[Dict[str, Any]] = ..., params_b: Optional[float] = ..., microbatches: Optional[int] = ..., virtual_stages: Optional[int] = ..., progress: Optional[Callable[[Dict[str, Any]], Any]] = ...) -> Result:
        """Splits a model's layers over pipeline stages balanced by compute, gives the 1F1B and interleaved bubble, and writes torch.distributed.pipelining code."""
        ...
    def slurm(self, *, script: Optional[str] = ..., script_args: Optional[List[str]] = ..., nodes: Optional[int] = ..., gpus_per_node: Optional[int] = ..., cpus_per_gpu: Optional[int] = ..., job_name: Optional[str] = ..., time_limit: Optional[str] = ..., partition: Optional[str] = ..., account: Optional[str] = ..., launcher: Optional[Literal['torchrun', 'srun']] = ..., gpu: Optional[str] = ..., network: Optional[Literal['infiniband', 'roce', 'ethernet']] = ..., profile_dir: Optional[str] = ..., progress: Optional[Callable[[Dict[str, Any]], Any]] = ...) -> Result:
        """Writes an sbatch script that launches your training script with torchrun (or one srun task per GPU with NUMA binding) and the NCCL settings for the topology."""
        ...
    def cost_estimate(self, *, model: Optional[str] = ..., architecture: Optional[Dict[str, Any]] = ..., params_b: Optional[float] = ..., tokens: Optional[float] = ..., gpus: Optional[int] = ..., mfu: Optional[float] = ..., gpu_types: Optional[List[str]] = ..., price_usd_per_gpu_hour: Optional[float] = ..., progress: Optional[Callable[[Dict[str, Any]], Any]] = ...) -> Result:
        """GPU-hours, wall-clock days and cost for a training run (6·N·D at a stated MFU) on every cataloged GPU, with the price sources."""
        ...

class InferenceDomain:
    """Inference planning: KV cache sizing, latency and throughput estimates, vLLM configs, quantization, deployment sizing and cost per token."""
    def kv_cache(self, *, model: Optional[str] = ..., architecture: Optional[Dict[str, Any]] = ..., params_b: Optional[float] = ..., seq_len: Optional[int] = ..., batch: Optional[int] = ..., dtype: Optional[Literal['fp32', 'bf16', 'fp16', 'fp8', 'int8', 'int4']] = ..., gpu: Optional[str] = ..., tp: Optional[int] = ..., progress: Optional[Callable[[Dict[str, Any]], Any]] = ...) -> Result:
        """KV-cache bytes per token and for batch × seq_len, GQA/MQA/MLA-aware, per dtype; optionally how many sequences fit on a GPU."""
        ...
    def estimate(self, *, model: Optional[str] = ..., architecture: Optional[Dict[str, Any]] = ..., params_b: Optional[float] = ..., gpu: Optional[str] = ..., gpus: Optional[int] = ..., weights: Optional[Literal['bf16', 'fp8', 'int8', 'awq', 'gptq']] = ..., kv_dtype: Optional[Literal['fp32', 'bf16', 'fp16', 'fp8', 'int8', 'int4']] = ..., prompt_tokens: Optional[int] = ..., output_tokens: Optional[int] = ..., batch: Optional[int] = ..., compute_efficiency: Optional[float] = ..., memory_efficiency: Optional[float] = ..., use_measured_roofs: Optional[bool] = ..., progress: Optional[Callable[[Dict[str, Any]], Any]] = ...) -> Result:
        """Prefill and decode time, tokens/s and a batch sweep showing where decode turns compute-bound, from weights/KV bytes over HBM bandwidth and FLOPs over the tensor peak."""
        ...
    def vllm(self, *, model: Optional[str] = ..., architecture: Optional[Dict[str, Any]] = ..., params_b: Optional[float] = ..., hf_model: Optional[str] = ..., gpu: Optional[str] = ..., gpus: Optional[int] = ..., gpus_per_node: Optional[int] = ..., max_model_len: Optional[int] = ..., avg_request_tokens: Optional[int] = ..., goal: Optional[Literal['throughput', 'latency', 'memory', 'cost']] = ..., weights: Optional[Literal['bf16', 'fp8', 'int8', 'awq', 'gptq']] = ..., kv_dtype: Optional[Literal['fp32', 'bf16', 'fp16', 'fp8', 'int8', 'int4']] = ..., gpu_memory_utilization: Optional[float] = ..., draft_model: Optional[str] = ..., progress: Optional[Callable[[Dict[str, Any]], Any]] = ...) -> Result:
        """A vLLM launch command and engine arguments for a model, GPU and goal: TP/PP, gpu_memory_utilization, max_model_len and max_num_seqs from the KV budget, KV dtype, chunked prefill, prefix caching, speculative decoding — each explained."""
        ...
    def quantization(self, *, model: Optional[str] = ..., architecture: Optional[Dict[str, Any]] = ..., params_b: Optional[float] = ..., gpu: Optional[str] = ..., gpus: Optional[int] = ..., seq_len: Optional[int] = ..., progress: Optional[Callable[[Dict[str, Any]], Any]] = ...) -> Result:
        """BF16 vs FP8 vs INT8 vs AWQ/GPTQ 4-bit, with and without FP8 KV: memory, GPUs needed, batch that fits, decode speed from the roofline, hardware support and quality risk with sources."""
        ...
    def deploy(self, *, requests_per_s: float, model: Optional[str] = ..., architecture: Optional[Dict[str, Any]] = ..., params_b: Optional[float] = ..., gpu: Optional[str] = ..., prompt_tokens: Optional[int] = ..., output_tokens: Optional[int] = ..., itl_ms: Optional[float] = ..., ttft_ms: Optional[float] = ..., weights: Optional[Literal['bf16', 'fp8', 'int8', 'awq', 'gptq']] = ..., kv_dtype: Optional[Literal['fp32', 'bf16', 'fp16', 'fp8', 'int8', 'int4']] = ..., max_gpus_per_replica: Optional[int] = ..., price_usd_per_gpu_hour: Optional[float] = ..., progress: Optional[Callable[[Dict[str, Any]], Any]] = ...) -> Result:
        """Replicas and GPUs to serve a request rate within inter-token and first-token latency targets, with hourly cost and cost per million tokens."""
        ...
    def cost_per_token(self, *, tokens_per_s: Optional[float] = ..., gpus: Optional[int] = ..., gpu: Optional[str] = ..., model: Optional[str] = ..., architecture: Optional[Dict[str, Any]] = ..., params_b: Optional[float] = ..., batch: Optional[int] = ..., context_tokens: Optional[int] = ..., weights: Optional[Literal['bf16', 'fp8', 'int8', 'awq', 'gptq']] = ..., price_usd_per_gpu_hour: Optional[float] = ..., electricity_usd_per_kwh: Optional[float] = ..., progress: Optional[Callable[[Dict[str, Any]], Any]] = ...) -> Result:
        """Dollars per million tokens from a measured or roofline-estimated throughput and a dated GPU price (or yours), optionally with energy."""
        ...

class HfDomain:
    """Hugging Face models: search the Hub and read a model's config.json (Hub, local cache or folder) for the planners."""
    def model(self, *, model: Optional[str] = ..., search: Optional[str] = ..., limit: Optional[int] = ..., progress: Optional[Callable[[Dict[str, Any]], Any]] = ...) -> Result:
        """Search Hugging Face models, or read a model's config.json (Hub, local HF cache or folder) into the shape and parameter count the planners use."""
        ...

class ExportDomain:
    """Reports with charts for people: HTML and PDF of a profile, of two profiles before/after, or of benchmark history; benchmark history as CSV."""
    def csv(self, *, target: Optional[str] = ..., variant: Optional[str] = ..., run_id: Optional[str] = ..., device: Optional[str] = ..., limit: Optional[int] = ..., detailed: Optional[bool] = ..., output: Optional[str] = ..., overwrite: Optional[bool] = ..., progress: Optional[Callable[[Dict[str, Any]], Any]] = ...) -> Result:
        """Writes benchmark history as RFC 4180 CSV: one row per result with units in the column names; detailed adds every repetition."""
        ...
    def html(self, *, profile: Optional[str] = ..., compare_to: Optional[str] = ..., device: Optional[str] = ..., process: Optional[int] = ..., start_ns: Optional[int] = ..., end_ns: Optional[int] = ..., nvtx_range: Optional[str] = ..., target: Optional[str] = ..., variant: Optional[str] = ..., run_id: Optional[str] = ..., limit: Optional[int] = ..., output: Optional[str] = ..., overwrite: Optional[bool] = ..., progress: Optional[Callable[[Dict[str, Any]], Any]] = ...) -> Result:
        """Writes a self-contained HTML report with SVG charts: of a profile, of two profiles before/after, or of benchmark history."""
        ...
    def pdf(self, *, profile: Optional[str] = ..., compare_to: Optional[str] = ..., device: Optional[str] = ..., process: Optional[int] = ..., start_ns: Optional[int] = ..., end_ns: Optional[int] = ..., nvtx_range: Optional[str] = ..., target: Optional[str] = ..., variant: Optional[str] = ..., run_id: Optional[str] = ..., limit: Optional[int] = ..., output: Optional[str] = ..., overwrite: Optional[bool] = ..., progress: Optional[Callable[[Dict[str, Any]], Any]] = ...) -> Result:
        """Writes a PDF report with vector charts and searchable text: of a profile, of two profiles before/after, or of benchmark history."""
        ...

class AiDomain:
    """Questions and answers backed by evidence from aisp's own tools, concept explanations, troubleshooting, and tool suggestions."""
    def ask(self, *, question: str, path: Optional[str] = ..., context: Optional[str] = ..., conversation_id: Optional[str] = ..., max_steps: Optional[int] = ..., timeout_s: Optional[float] = ..., async_: Optional[bool] = False, progress: Optional[Callable[[Dict[str, Any]], Any]] = ...) -> Union[Result, Job]:
        """Answers a GPU/AI performance question by investigating with aisp's own tools, citing the evidence; works with or without an LLM."""
        ...
    def explain(self, *, concept: str, expand: Optional[bool] = ..., progress: Optional[Callable[[Dict[str, Any]], Any]] = ...) -> Result:
        """Explains a GPU/AI performance concept from aisp's knowledge base: definition, why it matters, how to detect it with aisp, how to fix it, sources."""
        ...
    def suggest_tools(self, *, task: str, limit: Optional[int] = ..., llm: Optional[bool] = ..., progress: Optional[Callable[[Dict[str, Any]], Any]] = ...) -> Result:
        """Ranks aisp's tools for a task described in plain words, with reasons and suggested arguments."""
        ...
    def troubleshoot(self, *, symptom: str, limit: Optional[int] = ..., progress: Optional[Callable[[Dict[str, Any]], Any]] = ...) -> Result:
        """Matches an error message or symptom (CUDA OOM, NCCL timeout, illegal memory access, cuDNN errors, slow data loading, ...) to likely causes, ranked, with aisp checks to run."""
        ...
    def status(self, *, probe: Optional[bool] = ..., progress: Optional[Callable[[Dict[str, Any]], Any]] = ...) -> Result:
        """Whether an LLM endpoint is configured and reachable, which model, and the latency of a tiny request."""
        ...

class Engine:
    """The aisp engine in this process: `engine.<domain>.<op>(**kwargs)`."""
    core: CoreDomain
    job: JobDomain
    gpu: GpuDomain
    system: SystemDomain
    profile: ProfileDomain
    benchmark: BenchmarkDomain
    hw: HwDomain
    analyze: AnalyzeDomain
    optimize: OptimizeDomain
    distributed: DistributedDomain
    inference: InferenceDomain
    hf: HfDomain
    export: ExportDomain
    ai: AiDomain
    home: str
    allow_exec: bool
    def __init__(self, home: Optional[str] = ..., allow_exec: Optional[bool] = ...) -> None: ...
    def domains(self) -> List[str]: ...
    def ask(self, *, question: str, path: Optional[str] = ..., context: Optional[str] = ..., conversation_id: Optional[str] = ..., max_steps: Optional[int] = ..., timeout_s: Optional[float] = ..., async_: Optional[bool] = False, progress: Optional[Callable[[Dict[str, Any]], Any]] = ...) -> Union[Result, Job]:
        """Answers a GPU/AI performance question by investigating with aisp's own tools, citing the evidence; works with or without an LLM."""
        ...
    def explain(self, *, concept: str, expand: Optional[bool] = ..., progress: Optional[Callable[[Dict[str, Any]], Any]] = ...) -> Result:
        """Explains a GPU/AI performance concept from aisp's knowledge base: definition, why it matters, how to detect it with aisp, how to fix it, sources."""
        ...
    def list_domains(self, *, domain: Optional[str] = ..., enable: Optional[List[str]] = ..., progress: Optional[Callable[[Dict[str, Any]], Any]] = ...) -> Result:
        """The map of every domain and its tools; one domain's tools with their input schemas; enable a domain's tools in this session."""
        ...
    def recommend(self, *, model: Optional[str] = ..., architecture: Optional[Dict[str, Any]] = ..., params_b: Optional[float] = ..., gpu: Optional[str] = ..., gpus: Optional[int] = ..., nodes: Optional[int] = ..., goal: Optional[Literal['throughput', 'latency', 'memory', 'cost']] = ..., workload: Optional[Literal['training', 'inference', 'both']] = ..., seq_len: Optional[int] = ..., dtype: Optional[Literal['fp32', 'bf16', 'fp16', 'fp8', 'int8', 'int4']] = ..., findings: Optional[List[str]] = ..., profile: Optional[str] = ..., draft_model: Optional[bool] = ..., shared_prefixes: Optional[bool] = ..., can_change_model: Optional[bool] = ..., limit: Optional[int] = ..., progress: Optional[Callable[[Dict[str, Any]], Any]] = ...) -> Result:
        """Ranks optimization techniques for your model, GPUs and goal (throughput, latency, memory, cost) by measured effect, with why, preconditions met/unmet and conflicts resolved."""
        ...
    def status(self, *, progress: Optional[Callable[[Dict[str, Any]], Any]] = ...) -> Result:
        """Version, GPUs found (or why none), driver and CUDA versions, store path, LLM and execution settings."""
        ...
    def suggest_tools(self, *, task: str, limit: Optional[int] = ..., llm: Optional[bool] = ..., progress: Optional[Callable[[Dict[str, Any]], Any]] = ...) -> Result:
        """Ranks aisp's tools for a task described in plain words, with reasons and suggested arguments."""
        ...
    def triage(self, *, progress: Optional[Callable[[Dict[str, Any]], Any]] = ...) -> Result:
        """Status, a compact system context, and the three most useful next steps for this machine, each naming the tool to call and why."""
        ...
