#!/usr/bin/env python3
"""Compare aisp's GPU tools with nvidia-smi on the same host (used by gpu-verify.sh).

usage: gpu-verify-compare.py OUT_DIR          compare OUT_DIR/aisp/*.json with OUT_DIR/nvidia-smi/*
       gpu-verify-compare.py --latency AISP   warm per-call latency of each tool through `AISP serve`

Prints PASS/FAIL lines and a summary; exits 1 when anything failed. Standard library only.
"""

import csv
import io
import json
import os
import re
import statistics
import subprocess
import sys
import time

ANSI = re.compile(r"\x1b\[[0-9;]*m")
results = []


def check(name, ours, theirs, ok=None):
    good = (ours == theirs) if ok is None else ok
    results.append(good)
    print(f"{'PASS' if good else 'FAIL'} {name}: aisp={ours!r} nvidia-smi={theirs!r}")


def load(out, name):
    path = os.path.join(out, "aisp", name + ".json")
    try:
        with open(path) as f:
            v = json.load(f)
    except Exception as e:  # noqa: BLE001
        print(f"FAIL {name}: cannot read {path}: {e}")
        results.append(False)
        return None
    if isinstance(v, dict) and "error" in v:
        print(f"FAIL {name}: aisp answered {v['error'].get('kind')}: {v['error'].get('message')}")
        results.append(False)
        return None
    return v


def read(out, name):
    try:
        with open(os.path.join(out, "nvidia-smi", name)) as f:
            return ANSI.sub("", f.read())
    except OSError:
        return ""


def parse_topo(text):
    """nvidia-smi topo -m → (labels, {row: {col: cell}}, {gpu: (cpu_aff, numa_aff, gpu_numa_id)})."""
    lines = [l for l in text.splitlines() if l.strip()]
    header = next((l for l in lines if re.search(r"\bGPU0\b", l) and not l.startswith("GPU")), None)
    if header is None:
        return [], {}, {}
    labels = [t.strip() for t in header.split("\t") if re.fullmatch(r"(GPU|NIC)\d+", t.strip())]
    cells, aff = {}, {}
    for l in lines:
        tokens = [t.strip() for t in l.split("\t")]
        if not tokens or tokens[0] not in labels:
            continue
        row = tokens[0]
        rest = [t for t in tokens[1:] if t != ""]
        cells[row] = dict(zip(labels, rest[: len(labels)]))
        extra = rest[len(labels):]
        if row.startswith("GPU"):
            aff[row] = tuple(extra + ["", "", ""])[:3]
    return labels, cells, aff


def parse_p2p(text):
    """nvidia-smi topo -p2p r|w|a → {row: {col: code}}."""
    rows = {}
    cols = []
    for l in text.splitlines():
        t = l.split()
        if not t:
            continue
        if all(re.fullmatch(r"(GPU|NIC)\d+", x) for x in t):
            cols = t
        elif cols and re.fullmatch(r"GPU\d+", t[0]):
            rows[t[0]] = dict(zip(cols, t[1:]))
    return rows


P2P_CODES = {
    "ok": "OK",
    "chipset not supported": "CNS",
    "GPU not supported": "GNS",
    "topology not supported": "TNS",
    "not supported": "NS",
    "unknown": "U",
}


def compare(out):
    # --- topology ---
    topo = load(out, "gpu_topology")
    labels, cells, aff = parse_topo(read(out, "topo-m.txt"))
    if topo and labels:
        ours_labels = topo["labels"]
        check("topology labels", ours_labels, labels)
        for i, a in enumerate(ours_labels):
            for j, b in enumerate(ours_labels):
                if a in cells and b in cells[a]:
                    check(f"topology {a}/{b}", topo["matrix"][i][j], cells[a][b])
        for g in topo["gpus"]:
            label = f"GPU{g['index']}"
            if label in aff:
                cpu, numa, gnuma = aff[label]
                check(f"topology {label} CPU affinity", g.get("cpu_affinity") or "N/A", cpu or "N/A")
                check(f"topology {label} NUMA affinity", g.get("numa_affinity") or "N/A", numa or "N/A")
                if gnuma:
                    ours = "N/A" if g.get("gpu_numa_id") is None else str(g["gpu_numa_id"])
                    check(f"topology {label} GPU NUMA ID", ours, gnuma)
        for code in "rwa":
            p2p = parse_p2p(read(out, f"topo-p2p-{code}.txt"))
            field = {"r": "p2p_read", "w": "p2p_write", "a": "p2p_atomics"}[code]
            for p in topo["pairs"]:
                a, b = f"GPU{p['gpu_a']}", f"GPU{p['gpu_b']}"
                if a in p2p and b in p2p[a]:
                    ours = P2P_CODES.get(p.get(field) or "", p.get(field))
                    check(f"p2p {field} {a}/{b}", ours, p2p[a][b])
    elif topo:
        print("SKIP topology: nvidia-smi topo -m printed no matrix")

    # --- gpu info vs --query-gpu ---
    info = load(out, "gpu_info")
    power = load(out, "gpu_power")
    q = read(out, "query-gpu.csv")
    fields = ["index", "name", "uuid", "pci.bus_id", "memory.total", "clocks.max.sm", "clocks.max.memory",
              "enforced.power.limit", "power.default_limit", "power.min_limit", "power.max_limit", "compute_cap",
              "pcie.link.gen.max", "pcie.link.width.max", "persistence_mode", "ecc.mode.current",
              "mig.mode.current", "compute_mode", "driver_version", "vbios_version"]
    if info and q.strip():
        by_index = {g["index"]: g for g in info["gpus"]}
        pw = {g["index"]: g for g in (power or {}).get("gpus", [])}
        for row in csv.reader(io.StringIO(q)):
            row = [c.strip() for c in row]
            if len(row) != len(fields):
                print(f"SKIP query-gpu row {row!r}")
                continue
            r = dict(zip(fields, row))
            i = int(r["index"])
            g = by_index.get(i)
            if g is None:
                check(f"GPU {i} present", None, i)
                continue
            p = pw.get(i, {})

            def num(v):
                try:
                    return float(v)
                except ValueError:
                    return None

            def onoff(v):
                return {"Enabled": True, "Disabled": False}.get(v)

            check(f"GPU {i} name", g["name"], r["name"])
            check(f"GPU {i} uuid", g["uuid"], r["uuid"])
            check(f"GPU {i} pci.bus_id", (g["pci_bus_id"] or "").lower(), r["pci.bus_id"].lower())
            check(f"GPU {i} memory.total MiB", g["memory"]["total_mib"], int(num(r["memory.total"]) or -1))
            check(f"GPU {i} clocks.max.sm", g["clocks"]["sm_max_mhz"], int(num(r["clocks.max.sm"]) or -1))
            check(f"GPU {i} clocks.max.memory", g["clocks"]["memory_max_mhz"], int(num(r["clocks.max.memory"]) or -1))
            for ours, theirs in [(g["power_limit_enforced_w"], "enforced.power.limit"),
                                 (p.get("power_limit_default_w"), "power.default_limit"),
                                 (p.get("power_limit_min_w"), "power.min_limit"),
                                 (p.get("power_limit_max_w"), "power.max_limit")]:
                t = num(r[theirs])
                if t is None and ours is None:
                    continue
                check(f"GPU {i} {theirs} W", ours, t, ok=ours is not None and t is not None and abs(ours - t) <= 0.5)
            check(f"GPU {i} compute_cap", g["compute_capability"], r["compute_cap"])
            check(f"GPU {i} pcie.link.gen.max", g["pcie"]["generation_max"], int(num(r["pcie.link.gen.max"]) or -1))
            check(f"GPU {i} pcie.link.width.max", g["pcie"]["width_max"], int(num(r["pcie.link.width.max"]) or -1))
            check(f"GPU {i} persistence_mode", g["persistence_mode"], onoff(r["persistence_mode"]))
            if onoff(r["ecc.mode.current"]) is not None:
                check(f"GPU {i} ecc.mode.current", g["ecc"]["enabled"], onoff(r["ecc.mode.current"]))
            if onoff(r["mig.mode.current"]) is not None:
                check(f"GPU {i} mig.mode.current", g["mig_mode_current"], onoff(r["mig.mode.current"]))
            check(f"GPU {i} compute_mode", g["compute_mode"], r["compute_mode"].lower())
            check(f"GPU {i} driver_version", g["driver_version"], r["driver_version"])
            check(f"GPU {i} vbios_version", g["vbios_version"], r["vbios_version"])

    # --- NVLink ---
    nv = load(out, "gpu_nvlink")
    text = read(out, "nvlink-s.txt")
    if nv and text.strip():
        smi = {}
        cur = None
        for l in text.splitlines():
            m = re.match(r"GPU (\d+):", l)
            if m:
                cur = int(m.group(1))
                smi[cur] = {}
                continue
            m = re.search(r"Link (\d+): ([\d.]+) GB/s", l)
            if m and cur is not None:
                smi[cur][int(m.group(1))] = float(m.group(2))
        for g in nv["gpus"]:
            links = smi.get(g["index"], {})
            check(f"NVLink GPU {g['index']} active links", g["active_links"], len(links))
            ours_active = sorted(l["link"] for l in g["links"] if l["active"])
            check(f"NVLink GPU {g['index']} active link ids", ours_active, sorted(links))
            if links and g.get("link_speed_gb_per_s"):
                s = statistics.median(links.values())
                check(f"NVLink GPU {g['index']} link speed GB/s", g["link_speed_gb_per_s"], s,
                      ok=abs(g["link_speed_gb_per_s"] - s) <= 0.01 * s)
            for l in g["links"]:
                if l.get("speed_gb_per_s") and l["link"] in links:
                    t = links[l["link"]]
                    check(f"NVLink GPU {g['index']} link {l['link']} speed GB/s", l["speed_gb_per_s"], t,
                          ok=abs(l["speed_gb_per_s"] - t) <= 0.01 * t)

    failed = results.count(False)
    print(f"\n{len(results) - failed} passed, {failed} failed")
    return 1 if failed else 0


def latency(aisp):
    """Warm per-call latency through `aisp serve` (stdio MCP), median of 5 calls after one warm-up."""
    tools = {
        "aisp_gpu_info": {}, "aisp_gpu_topology": {}, "aisp_gpu_power": {}, "aisp_gpu_nvlink": {},
        "aisp_system_software": {}, "aisp_system_dependencies": {}, "aisp_system_capabilities": {},
        "aisp_system_parameters": {}, "aisp_system_container": {}, "aisp_system_cpu_memory": {},
        "aisp_system_network": {}, "aisp_system_env": {}, "aisp_system_context": {}, "aisp_triage": {},
    }
    budget = {"aisp_system_software": 1000, "aisp_system_dependencies": 1000, "aisp_system_context": 1500,
              "aisp_triage": 1500}
    p = subprocess.Popen([aisp, "serve"], stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
    n = [0]

    def rpc(method, params=None, notify=False):
        msg = {"jsonrpc": "2.0", "method": method}
        if params is not None:
            msg["params"] = params
        if not notify:
            n[0] += 1
            msg["id"] = n[0]
        p.stdin.write((json.dumps(msg) + "\n").encode())
        p.stdin.flush()
        if notify:
            return None
        while True:
            line = p.stdout.readline()
            if not line:
                raise RuntimeError("server exited")
            r = json.loads(line)
            if r.get("id") == n[0]:
                return r

    rpc("initialize", {"protocolVersion": "2025-06-18", "capabilities": {},
                       "clientInfo": {"name": "gpu-verify", "version": "1"}})
    rpc("notifications/initialized", notify=True)
    time.sleep(2)  # let the background GPU probe and CUDA attribute read finish
    status = 0
    print(f"{'tool':28} {'median_ms':>9} {'max_ms':>8} {'budget_ms':>9}  result")
    for name, args in tools.items():
        times = []
        err = None
        for k in range(6):
            t0 = time.perf_counter()
            r = rpc("tools/call", {"name": name, "arguments": args})
            dt = (time.perf_counter() - t0) * 1000
            if r.get("result", {}).get("isError"):
                err = r["result"].get("structuredContent", {}).get("error", {}).get("kind", "error")
            if k > 0:
                times.append(dt)
        b = budget.get(name, 200)
        med = statistics.median(times)
        ok = err is None and med <= b
        status |= not ok
        print(f"{name:28} {med:9.1f} {max(times):8.1f} {b:9d}  {'PASS' if ok else 'FAIL'}{' ' + err if err else ''}")
    p.stdin.close()
    p.wait(timeout=10)
    return status


if __name__ == "__main__":
    if len(sys.argv) == 3 and sys.argv[1] == "--latency":
        sys.exit(latency(sys.argv[2]))
    if len(sys.argv) != 2:
        print(__doc__)
        sys.exit(2)
    sys.exit(compare(sys.argv[1]))
