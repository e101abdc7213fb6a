#!/usr/bin/env python3
"""A stand-in for `aisp __kernel-lab-worker` that needs no GPU (set
AISP_KERNEL_LAB_WORKER to this file). It speaks the worker's protocol (a job
on stdin, one JSON event per line on stdout) and makes up its measurements
from markers in each kernel's source:

    // fake: ms=0.5        median time of the kernel (default 1.0)
    // fake: wrong         its output differs from the reference's (element 3)
    // fake: compile_error it does not compile (error on line 2)
    // fake: hang          never reports (the parent must kill it)
    // fake: crash         dies of SIGSEGV while running

With "profile" in the job (the kernel lab's ncu section) it only reports the
kernel and exits.

What it proves: the parent side (the loop, the rows, the store) handles what
a worker reports. What it does not: anything about compiling, checking or
timing on a GPU (tests on a GPU host do that; see examples/kernel-lab).
"""
import json
import os
import re
import signal
import sys
import time

# Under ncu the job comes in a file (AISP_KERNEL_LAB_JOB), as for the real worker.
if os.environ.get("AISP_KERNEL_LAB_JOB"):
    with open(os.environ["AISP_KERNEL_LAB_JOB"]) as f:
        job = json.loads(f.read())
else:
    job = json.loads(sys.stdin.readline())
spec = job["spec"]


def emit(ev):
    sys.stdout.write(json.dumps(ev) + "\n")
    sys.stdout.flush()


emit({"event": "device", "info": {
    "ordinal": 0, "name": "Fake GPU", "uuid": "GPU-fake-0000", "compute_capability": "9.0",
    "cc_major": 9, "cc_minor": 0, "sm_count": 132, "l2_bytes": 52428800,
    "total_memory_bytes": 85899345920, "memory_bus_width_bits": 5120, "memory_clock_mhz": 2619,
    "max_threads_per_sm": 2048, "async_engines": 3, "arch": "sm_90"},
    "nvrtc": "13.0", "cublas": None, "cuda_driver": "13.0"})
if job.get("measure_roofs"):
    emit({"event": "roofs", "roofs": {"memory": {"value": 3000.0, "how": "fake"}, "fp32": None,
                                      "tensor": {}, "pcie_h2d": None}})

if job.get("profile"):
    # Profile mode: "launch" the one kernel; the fake ncu around it writes the report.
    emit({"event": "item", "item": 0, "result": {"size": 0, "kernel": job["profile"], "reference": False,
          "compile": None, "resources": None, "launch": None, "checks": [], "samples_ms": [],
          "failure": None, "cuda_error": False}})
    sys.exit(0)

ops = {"copy", "transpose", "reduce_sum", "softmax", "layernorm", "gemm"}
labels = [k.get("name") or k["entry"] for k in spec["kernels"]]
ref = spec["reference"]
cands = [k for k in spec["kernels"] if (k.get("name") or k["entry"]) != ref]
ref_kernel = next((k for k in spec["kernels"] if (k.get("name") or k["entry"]) == ref), None)
sizes = spec.get("sizes") or [{}]
out_name = next(a["name"] for a in spec["args"] if a.get("role") in ("out", "inout"))


def ms_of(src):
    m = re.search(r"fake: ms=([0-9.]+)", src or "")
    return float(m.group(1)) if m else 1.0


def samples(ms):
    return [ms * (1 + 0.001 * ((i * 7) % 5 - 2)) for i in range(30)]


def item(no, size, label, is_ref, src):
    emit({"event": "start", "item": no})
    base = {"size": size, "kernel": label, "reference": is_ref, "compile": None, "resources": None,
            "launch": None, "checks": [], "samples_ms": [], "failure": None, "cuda_error": False}
    if src and "fake: hang" in src:
        time.sleep(3600)
    if src and "fake: crash" in src:
        os.kill(os.getpid(), signal.SIGSEGV)
    if src and "fake: compile_error" in src:
        base["compile"] = {"ok": False, "arch": "sm_90", "lowered_name": None, "errors": [
            {"line": 2, "severity": "error", "message": "expected a \";\"", "code": None}],
            "warnings": [], "log": label + ".cu(2): error: expected a \";\"", "from_cache": False}
        base["failure"] = "compile error: line 2: expected a \";\""
    elif src and "fake: wrong" in src:
        base["checks"] = [{"buffer": out_name, "passed": False, "checked": 1024, "mismatches": 1,
                           "max_abs_err": 1.0, "max_rel_err": 0.5, "atol": 1e-4, "rtol": 1e-4,
                           "first_mismatch": {"index": 3, "at": [3], "got": 3.0, "expected": 2.0}}]
        base["failure"] = "incorrect: %s has 1 of 1024 elements outside atol 1e-4 + rtol 1e-4; first at index 3 [3]: got 3, expected 2" % out_name
    else:
        base["checks"] = [{"buffer": out_name, "passed": True, "checked": 1024, "mismatches": 0,
                           "max_abs_err": 0.0, "max_rel_err": 0.0, "atol": 1e-4, "rtol": 1e-4,
                           "first_mismatch": None}]
        base["samples_ms"] = samples(ms_of(src))
        base["resources"] = {"registers_per_thread": 32, "static_shared_bytes": 0, "dynamic_shared_bytes": 0,
                             "local_bytes_per_thread": 0, "max_threads_per_block": 1024, "blocks_per_sm": 8,
                             "theoretical_occupancy_pct": 100.0}
    emit({"event": "item", "item": no, "result": base})


per = 1 + len(cands)
for s, _ in enumerate(sizes):
    no = s * per
    if no >= job["start_at"]:
        item(no, s, ref if ref_kernel else "ref_" + ref, True, ref_kernel["source"] if ref_kernel else None)
    for j, c in enumerate(cands):
        if s * per + 1 + j >= job["start_at"]:
            item(s * per + 1 + j, s, c.get("name") or c["entry"], False, c["source"])
