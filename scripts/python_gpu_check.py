"""The Python API on a GPU host: status, gpu.info, benchmark.speed_test (with progress) and a DataFrame.

usage: python3 scripts/python_gpu_check.py OUT_DIR   (aisp installed: pip install ./python, or the wheel)
Writes OUT_DIR/h20_gpu.json; examples/python/h100_gpu_info_speed_test.json is its output on the H100.
"""
import json, sys, time, platform
import aisp

out = sys.argv[1]
print("python", platform.python_version(), "aisp", aisp.__version__, aisp.__file__)
engine = aisp.Engine()
t = time.perf_counter()
status = engine.status()
print("status gpu:", json.dumps(status.get("gpu"))[:400])
results = {"status": status}
try:
    t = time.perf_counter()
    info = engine.gpu.info()
    results["gpu_info"] = info
    results["gpu_info_s"] = time.perf_counter() - t
    print(f"gpu.info {results['gpu_info_s']:.3f} s:", json.dumps(info)[:1500])
except aisp.AispError as e:
    print("gpu.info error:", type(e).__name__, e)
    results["gpu_info_error"] = {"class": type(e).__name__, "kind": e.kind, "message": e.message, "hint": e.hint}
reports = []
try:
    t = time.perf_counter()
    speed = engine.benchmark.speed_test(timeout_s=90, progress=lambda p: reports.append(p))
    results["speed_test"] = speed
    results["speed_test_s"] = time.perf_counter() - t
    print(f"benchmark.speed_test {results['speed_test_s']:.1f} s, {len(reports)} progress reports:")
    print(json.dumps(speed, indent=1)[:5000])
except aisp.AispError as e:
    print("speed_test error:", type(e).__name__, e)
    results["speed_test_error"] = {"class": type(e).__name__, "kind": e.kind, "message": e.message, "hint": e.hint}
results["progress_reports"] = reports
try:
    print("to_pandas:\n", engine.gpu.info().to_pandas().iloc[:, :8].to_string())
except Exception as e:
    print("to_pandas:", type(e).__name__, e)
json.dump(results, open(f"{out}/h20_gpu.json", "w"), indent=1, default=str)
