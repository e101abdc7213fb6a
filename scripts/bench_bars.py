#!/usr/bin/env python3
"""Evaluate the benchmark bars from the JSON files scripts/bench-verify.sh
wrote, and print a summary table.

Bars (issue 6 / issue 3), all measured in the same job:
  1. best copy kernel >= 95% of cuMemcpyDtoD (aisp_gpu_bandwidth, each size);
  2. cuBLAS BF16 8192^3 >= 97% of torch.matmul (aisp before and after torch);
  3. medians of five separate runs of one variant within 2% of each other;
  4. every optimized variant's speedup is real, or the lesson says why not.

Usage: bench_bars.py WORK_DIR OUT_DIR: reads WORK_DIR/*.json, writes
OUT_DIR/bars.json and bundles the rest into OUT_DIR/hw.json and
OUT_DIR/side_by_side.json (the device tool brings back at most 8 files), and
prints the summary. The exit code is 0 even when a bar fails, so that every
file still comes back.
"""
import json
import os
import statistics
import sys


def load(path):
    try:
        with open(path) as f:
            return json.load(f)
    except Exception as e:  # noqa: BLE001 - report, never crash
        return {"error": {"kind": "missing", "message": f"{path}: {e}"}}


def main() -> None:
    out, dest = sys.argv[1], sys.argv[2]
    bars = {}
    lines = []

    # 1. Copy vs cuMemcpyDtoD.
    bw = load(os.path.join(out, "bandwidth.json"))
    copy_rows = []
    for dev in bw.get("devices", []):
        for s in dev.get("sizes", []):
            copy_rows.append(
                {
                    "device": dev.get("name"),
                    "buffer_mib": s["buffer_bytes"] >> 20,
                    "dtod_gb_per_s": s.get("dtod_gb_per_s"),
                    "best_kernel": s.get("best_kernel"),
                    "best_kernel_gb_per_s": s.get("best_kernel_gb_per_s"),
                    "pct_of_dtod": s.get("best_kernel_pct_of_dtod"),
                }
            )
    ok1 = bool(copy_rows) and all((r["pct_of_dtod"] or 0) >= 95.0 for r in copy_rows)
    bars["copy_vs_memcpy"] = {"pass": ok1, "threshold_pct": 95.0, "rows": copy_rows,
                              "theoretical_gb_per_s": [d.get("theoretical_gb_per_s") for d in bw.get("devices", [])]}
    for r in copy_rows:
        lines.append(f"copy {r['buffer_mib']:>5} MiB: DtoD {r['dtod_gb_per_s'] or 0:8.1f} GB/s, best {r['best_kernel']} "
                     f"{r['best_kernel_gb_per_s'] or 0:8.1f} GB/s = {r['pct_of_dtod'] or 0:5.1f}% of DtoD")

    # 2. cuBLAS BF16 8192^3 vs torch.matmul (aisp, torch, aisp).
    def best_bf16(run):
        vals = [r["value"] for r in run.get("results", [])
                if r.get("variant") in ("cublas_bf16", "cublaslt_bf16") and r.get("status") == "ok" and r.get("value")]
        return max(vals) if vals else None

    a1 = best_bf16(load(os.path.join(out, "gemm_bf16_a.json")))
    a2 = best_bf16(load(os.path.join(out, "gemm_bf16_b.json")))
    torch_res = load(os.path.join(out, "torch_matmul.json"))
    t = torch_res.get("tflop_per_s")
    aisp_vals = [v for v in (a1, a2) if v]
    aisp_med = statistics.median(aisp_vals) if aisp_vals else None
    ratio = (aisp_med / t * 100.0) if (aisp_med and t) else None
    bars["bf16_gemm_vs_torch"] = {"pass": ratio is not None and ratio >= 97.0, "threshold_pct": 97.0,
                                  "aisp_tflop_per_s": [a1, a2], "torch_tflop_per_s": t, "pct_of_torch": ratio,
                                  "torch": torch_res}
    lines.append(f"bf16 8192^3: aisp {a1 or 0:.1f} / {a2 or 0:.1f} TFLOP/s, torch.matmul {t or 0:.1f} TFLOP/s "
                 f"= {ratio or 0:.1f}% of torch")

    # 3. Repeatability: five separate processes.
    rep = {}
    for name in ("copy", "gemm"):
        meds = []
        for i in range(1, 6):
            run = load(os.path.join(out, f"repeat_{name}_{i}.json"))
            for r in run.get("results", []):
                if r.get("status") == "ok" and r.get("median_ms"):
                    meds.append(r["median_ms"])
        spread = (max(meds) - min(meds)) / min(meds) * 100.0 if len(meds) == 5 else None
        rep[name] = {"medians_ms": meds, "spread_pct": spread}
        lines.append(f"repeatability {name}: medians {', '.join(f'{m:.4f}' for m in meds)} ms, spread "
                     f"{spread if spread is not None else float('nan'):.2f}%")
    bars["repeatability"] = {"pass": rep["copy"]["spread_pct"] is not None and rep["copy"]["spread_pct"] <= 2.0,
                             "threshold_pct": 2.0, "bar_variant": "vectorized_loads/vec4_unroll4_copy",
                             "runs": rep}

    # 4. Speedups of the full run.
    run = load(os.path.join(out, "run.json"))
    sp = run.get("speedups", [])
    failed = [f"{r['target']}/{r['variant']}: {r.get('failure')}" for r in run.get("results", []) if r.get("status") == "failed"]
    no_win = [f"{s['target']}/{s['variant']}: {s.get('note')}" for s in sp if not s.get("wins")]
    bars["speedups"] = {"pass": bool(sp) and not failed, "failed_variants": failed, "not_winning": no_win,
                        "count": len(sp)}
    lines.append("")
    lines.append(f"{'target':<26} {'variant':<26} {'median ms':>10} {'value':>10} {'metric':<12} {'%roof':>6} {'check':<6}")
    for r in run.get("results", []):
        lines.append(f"{r['target']:<26} {r['variant']:<26} {r.get('median_ms') or 0:>10.4f} {r.get('value') or 0:>10.2f} "
                     f"{r['metric']:<12} {r.get('pct_of_roof') or 0:>6.1f} {('ok' if r.get('verified') else r.get('status')):<6}")
    lines.append("")
    for s in sp:
        lines.append(f"speedup {s['target']}/{s['variant']} vs {s['baseline']}: {s['speedup']:.2f}x "
                     f"[{s['ci_low']:.2f}, {s['ci_high']:.2f}] {'wins' if s['wins'] else 'NO WIN: ' + (s.get('note') or '')}")

    lines.insert(0, "BARS: " + ", ".join(f"{k}={'PASS' if v['pass'] else 'FAIL'}" for k, v in bars.items()))
    with open(os.path.join(dest, "bars.json"), "w") as f:
        json.dump(bars, f, indent=2)
    bundles = {
        "hw.json": ["roofline", "pcie", "cache", "tensor_cores", "bandwidth", "speed_test"],
        "side_by_side.json": ["gemm_bf16_a", "torch_matmul", "gemm_bf16_b"]
        + [f"repeat_{k}_{i}" for k in ("copy", "gemm") for i in range(1, 6)],
    }
    for name, parts in bundles.items():
        with open(os.path.join(dest, name), "w") as f:
            json.dump({p: load(os.path.join(out, p + ".json")) for p in parts}, f, indent=1)
    print("\n".join(lines))


if __name__ == "__main__":
    main()
