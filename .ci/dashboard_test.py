#!/usr/bin/env python3
"""Browser tests of the dashboard: headless Chromium driven by Selenium against
a real `aisp serve --transport http`.

Usage: dashboard_test.py AISP_BINARY [--screenshots DIR]

Asserts: each page loads without console errors; the profile page of
tests/data/train_good.sqlite shows its steady busy % (8.83 %, over the step
ledger's steady window, as tests/it/dashboard_http.rs checks) and its top finding
(host_os_wait: the host sleeps while the device idles); the timeline
draws and zoom changes the visible window; a finding's link moves the
timeline to its place; a tool form call returns the right answer, an error
shows kind/message/hint, and a long-running tool shows progress and can be
cancelled; the token gate refuses without the token and admits with it.

Part 2 (a real number on every page): the overview's no-GPU state with the
probe's reason (or live GPU cards where NVML finds GPUs) and the triage's next
steps; the compare verdict of two fixtures (no change, +2.68 % per step with its interval, ground
truth in tests/data/README.md) and a cancelled comparison; a leaderboard row
and the roofline of history imported from examples/benchmark (values from its
run.json); the memory per GPU of a plan (equal to the CLI's answer); a cited
finding in an offline ask that opens the profile page at that finding; a folder of exports (a rank set)
opening the cross-rank view whose rank x step heat-map cells equal the CLI's step times.
"""

import json
import lzma
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request

from selenium import webdriver
from selenium.webdriver.chrome.options import Options
from selenium.webdriver.chrome.service import Service
from selenium.webdriver.common.by import By
from selenium.webdriver.support.ui import WebDriverWait

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TRAIN_GOOD = os.path.join(ROOT, "tests", "data", "train_good.sqlite")
TOKEN = "s3cret-dashboard-token"
EXAMPLES_RUN = os.path.join(ROOT, "examples", "benchmark", "h100", "run.json")


def fixture_xz(name, into):
    """A tests/data .xz fixture decompressed into `into`."""
    out = os.path.join(into, os.path.basename(name))
    with lzma.open(os.path.join(ROOT, "tests", "data", name + ".xz")) as src, open(out, "wb") as dst:
        shutil.copyfileobj(src, dst)
    return out


def cli(args, home):
    """The same question asked through the CLI (the reference for what the page shows)."""
    out = subprocess.run(
        [sys.argv[1], *args, "--format", "json"],
        capture_output=True, check=True, cwd=ROOT, env=dict(os.environ, AISP_HOME=home),
    )
    return json.loads(out.stdout)


def start_server(binary, home, token=None):
    env = dict(os.environ, AISP_HOME=home)
    env.pop("AISP_TOKEN", None)
    if token:
        env["AISP_TOKEN"] = token
    log = open(os.path.join(home, "serve.log"), "w+")
    proc = subprocess.Popen(
        [binary, "serve", "--transport", "http", "--bind", "127.0.0.1:0"],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=log,
        cwd=ROOT,
    )
    for _ in range(200):
        log.seek(0)
        m = re.search(r"listening on (http://[0-9.:]+)", log.read())
        if m:
            return proc, m.group(1)
        if proc.poll() is not None:
            break
        time.sleep(0.1)
    log.seek(0)
    raise SystemExit("aisp serve did not start:\n" + log.read())


def browser():
    opts = Options()
    for flag in (
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-quic",
        "--no-first-run",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-sync",
        "--disable-dev-shm-usage",
        "--window-size=1400,1000",
        "--user-data-dir=" + tempfile.mkdtemp(prefix="aisp-chrome-"),
    ):
        opts.add_argument(flag)
    opts.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    for candidate in ("/usr/bin/chromium", "/usr/bin/chromium-browser", "/usr/bin/google-chrome"):
        if os.path.exists(candidate):
            opts.binary_location = candidate
            break
    driver_path = shutil.which("chromedriver") or "/usr/bin/chromedriver"
    return webdriver.Chrome(service=Service(driver_path), options=opts)


def console_errors(d):
    return [e for e in d.get_log("browser") if e["level"] == "SEVERE"]


def wait(d, cond, what, timeout=60):
    try:
        return WebDriverWait(d, timeout, poll_frequency=0.1).until(lambda _: cond())
    except Exception:
        raise AssertionError(f"timed out waiting for {what}")


def ready(d):
    return d.execute_script("return document.body && document.body.dataset.ready === '1'")


def shot(d, shots, name):
    if shots:
        d.save_screenshot(os.path.join(shots, name))


def full_page_shot(d, shots, name, max_height=6000):
    if not shots:
        return
    height = d.execute_script("return document.documentElement.scrollHeight")
    d.set_window_size(1400, min(max(height + 40, 1000), max_height))
    time.sleep(0.3)
    d.save_screenshot(os.path.join(shots, name))
    d.set_window_size(1400, 1000)


def check(cond, msg):
    if not cond:
        raise AssertionError(msg)
    print("ok -", msg)


def test_pages(d, base, shots):
    d.get(base + "/")
    wait(d, lambda: "operations" in d.find_element(By.ID, "tool-count").text, "tool count on home")
    wait(d, lambda: "Loading" not in d.find_element(By.ID, "captures").text, "captures on home")
    shot(d, shots, "home.png")
    check(not console_errors(d), "home page: no console errors")

    d.get(base + "/tools")
    wait(d, lambda: len(d.find_elements(By.CSS_SELECTOR, ".tool-row")) > 50, "tool list")
    tools = json.load(urllib.request.urlopen(base + "/api/tools"))["tools"]
    rows = d.find_elements(By.CSS_SELECTOR, ".tool-row")
    check(len(rows) == len(tools), f"tools page lists every operation ({len(rows)} of {len(tools)})")
    shot(d, shots, "tools.png")
    check(not console_errors(d), "tools page: no console errors")


def test_profile(d, base, shots):
    d.get(base + "/profiles")
    wait(d, lambda: d.find_element(By.ID, "captures-select").text.strip() != "captures…", "captures list")
    check(not console_errors(d), "profiles page without a profile: no console errors")

    d.get(base + "/profiles?path=" + urllib.request.quote(TRAIN_GOOD))
    wait(d, lambda: ready(d), "profile page ready")
    busy = d.find_element(By.CSS_SELECTOR, '[data-metric="steady-busy"] .value').text
    check(busy == "8.83 %", f"steady busy % is shown: {busy}")
    top = d.find_element(By.CSS_SELECTOR, 'article.finding[data-rank="0"]')
    check(top.get_attribute("data-rule") == "host_os_wait", "the top finding is the host's sleeps (host_os_wait)")
    check(
        "sleeps or waits on a lock" in top.text and "critical" in top.text.lower(),
        "the top finding shows its title and severity",
    )
    for sec in ("utilization", "iterations"):
        check(
            d.find_elements(By.CSS_SELECTOR, f'#{sec} svg.chart'),
            f"{sec} chart is drawn (SVG from the server)",
        )
    nv = d.find_element(By.ID, "nvtx").text
    check("step_*" in nv and "forward" in nv, "NVTX tree lists the step family and its phases")
    check("os_wait" in d.find_element(By.ID, "gaps").text, "idle gaps show their causes")

    canvas = d.find_element(By.ID, "tl-canvas")
    wait(d, lambda: int(canvas.get_attribute("data-drawn") or 0) > 0, "timeline draws boxes")
    s0, e0 = int(canvas.get_attribute("data-window-start")), int(canvas.get_attribute("data-window-end"))
    full_page_shot(d, shots, "profile.png")
    d.execute_script("document.getElementById('timeline').scrollIntoView()")
    d.find_element(By.ID, "tl-zoom-in").click()
    wait(
        d,
        lambda: int(canvas.get_attribute("data-window-end")) - int(canvas.get_attribute("data-window-start"))
        < (e0 - s0) * 0.6,
        "zoom in narrows the window",
    )
    s1, e1 = int(canvas.get_attribute("data-window-start")), int(canvas.get_attribute("data-window-end"))
    check(abs((e1 - s1) - (e0 - s0) / 2) <= 2, f"zoom in halves the visible window ({e0 - s0} -> {e1 - s1} ns)")
    # The next fetch brings the finer events of the new window.
    wait(d, lambda: int(canvas.get_attribute("data-fetched-end")) - int(canvas.get_attribute("data-fetched-start")) < 3.5 * (e1 - s1), "events of the zoomed window fetched")
    # Zoom with the wheel at the pointer too.
    d.execute_script(
        "const c=arguments[0]; const r=c.getBoundingClientRect();"
        "c.dispatchEvent(new WheelEvent('wheel',{deltaY:120,clientX:r.left+r.width*0.75,clientY:r.top+30,bubbles:true,cancelable:true}));",
        canvas,
    )
    wait(
        d,
        lambda: int(canvas.get_attribute("data-window-end")) - int(canvas.get_attribute("data-window-start")) > (e1 - s1),
        "wheel down zooms out",
    )
    # Hover over a drawn event shows its name and duration.
    tip = d.execute_script(
        "const tl=window.aispTimeline; const d=tl.data;"
        "for (const r of tl.layout) { if (r.track.kind!=='gpu') continue;"
        "  const e=r.track.events.find(e=>{const s=d.start_ns+e.t_ns; return s>tl.view.start && s+e.dur_ns<tl.view.end;});"
        "  if(!e) continue; const sc=tl.plotWidth()/(tl.view.end-tl.view.start);"
        "  const x=tl.LABEL_W+(d.start_ns+e.t_ns-tl.view.start)*sc+Math.max(0.5,e.dur_ns*sc/2); const y=r.y+r.h/2;"
        "  const b=tl.canvas.getBoundingClientRect(); tl.hover({clientX:b.left+x, clientY:b.top+y});"
        "  return document.getElementById('tl-tip').textContent; }"
        "return null;"
    )
    check(bool(tip) and ("duration" in tip or "events" in tip) and "start" in tip, f"hover shows the event: {tip!r}")
    # A finding's link moves the timeline to its place.
    link = d.find_element(By.CSS_SELECTOR, "#findings a.to-timeline")
    ls, le = int(link.get_attribute("data-start")), int(link.get_attribute("data-end"))
    d.execute_script("arguments[0].click()", link)
    wait(
        d,
        lambda: abs(int(canvas.get_attribute("data-window-start")) - ls) <= 1
        and abs(int(canvas.get_attribute("data-window-end")) - le) <= 1,
        "the finding link sets the timeline window",
    )
    check(True, "a finding links to its place on the timeline")
    time.sleep(0.5)
    shot(d, shots, "timeline.png")
    check(not console_errors(d), "profile page: no console errors")

    # The trace downloads for Perfetto (aisp_profile_export's Perfetto JSON, served from its folder).
    d.find_element(By.ID, "perfetto-btn").click()
    status = d.find_element(By.ID, "perfetto-status")
    wait(d, lambda: "ui.perfetto.dev" in status.text or status.find_elements(By.CSS_SELECTOR, ".error"), "trace export")
    check("ui.perfetto.dev" in status.text and ".json" in status.text, f"the trace downloads for Perfetto: {status.text}")

    # The deep link keeps the window.
    d.get(base + f"/profiles?path={urllib.request.quote(TRAIN_GOOD)}&start_ns={ls}&end_ns={le}")
    wait(d, lambda: ready(d), "deep-linked profile page ready")
    canvas = d.find_element(By.ID, "tl-canvas")
    check(
        abs(int(canvas.get_attribute("data-window-start")) - ls) <= 1,
        "a deep link with start_ns/end_ns opens the timeline there",
    )


def test_rank_set(d, base, home, shots, tmp):
    """A folder naming a set of exports (here the two-GPU DDP export, two ranks) opens the cross-rank view:
    the rank x step heat map drawn by the server, each cell the CLI's figure for that rank and step."""
    set_dir = os.path.join(tmp, "rank-set")
    os.makedirs(set_dir, exist_ok=True)
    fixture_xz("ddp.sqlite", set_dir)
    # The heat map is behind `detail` in the lean default answer; the dashboard asks for it.
    ref = cli(["profile", "ranks", set_dir, "--detail"], home)
    hm = ref["set"]["cross_rank"]["heat_map"]
    d.get(base + "/profiles?path=" + urllib.request.quote(set_dir))
    wait(d, lambda: ready(d), "rank set page ready", timeout=120)
    check(not console_errors(d), "rank set page: no console errors")
    view = d.find_element(By.CSS_SELECTOR, "#ranks .rank-set")
    check(view.get_attribute("data-ranks") == "2", "the set shows its two ranks")
    check(d.find_element(By.ID, "overview").get_attribute("hidden") is not None
          and d.find_element(By.ID, "timeline").get_attribute("hidden") is not None,
          "single-export sections are hidden for a set")
    cells = d.execute_script(
        "return Array.from(document.querySelectorAll('#ranks .heat-map svg rect > title')).map(t => t.textContent)")
    want = sum(len(row) for row in hm["values"])
    check(len(cells) == want and want == 2 * len(hm["steps"]),
          f"the heat map has a cell per rank and step ({len(cells)} of {want})")
    tips = {}
    for c in cells:
        m = re.match(r"^rank (\d+), (.+): ([0-9.e+-]+) ms$", c)
        if m:
            tips[(int(m.group(1)), m.group(2))] = float(m.group(3))
    checked = 0
    for r, rank in enumerate(hm["ranks"]):
        for j, step in enumerate(hm["steps"]):
            v = hm["values"][r][j]
            if v is None:
                continue
            got = tips.get((rank, step))
            ms = v / 1e6
            # The chart prints 3 significant figures (fmt_num): compare within its rounding.
            if got is None or abs(got - ms) > max(0.051, ms * 0.005):
                raise AssertionError(f"heat map cell rank {rank}, {step}: {got} ms, the CLI says {ms:.4f} ms")
            checked += 1
    check(checked == want, f"every heat-map cell equals the CLI's step time ({checked} cells, e.g. rank 1 "
          f"{hm['steps'][1]}: {hm['values'][1][1] / 1e6:.3f} ms)")
    full_page_shot(d, shots, "rank-set.png")


def test_tools(d, base, shots):
    d.get(base + "/tools/aisp_profile_kernels")
    wait(d, lambda: ready(d), "kernels tool form")
    d.find_element(By.ID, "f-path").send_keys(TRAIN_GOOD)
    d.find_element(By.ID, "f-limit").send_keys("1")
    d.find_element(By.ID, "tool-submit").click()
    res = d.find_element(By.ID, "tool-result")
    wait(d, lambda: res.get_attribute("data-state") == "done", "kernels answer")
    out = json.loads(res.text)
    expected = json.loads(
        subprocess.run(
            [sys.argv[1], "profile", "kernels", TRAIN_GOOD, "--limit", "1", "--format", "json"],
            capture_output=True, check=True, cwd=ROOT, env=dict(os.environ, AISP_HOME=tempfile.mkdtemp()),
        ).stdout
    )
    check(out["rows"] == expected["rows"] and out["kernels"] == 3689, "the form's answer equals the CLI's for the same arguments")
    check(out["rows"][0]["name"] == "multi_tensor_apply_kernel[FusedAdamMathFunctor]",
          "top kernel of train_good is multi_tensor_apply_kernel[FusedAdamMathFunctor] (by operation)")
    full_page_shot(d, shots, "tool.png")

    d.find_element(By.ID, "f-path").clear()
    d.find_element(By.ID, "f-path").send_keys("/nonexistent/profile.sqlite")
    d.find_element(By.ID, "tool-submit").click()
    wait(d, lambda: d.find_elements(By.CSS_SELECTOR, "#tool-error .error"), "error box")
    box = d.find_element(By.CSS_SELECTOR, "#tool-error .error")
    check(box.get_attribute("data-kind") == "not_found", "a failing call shows its kind")
    check(d.find_elements(By.CSS_SELECTOR, "#tool-error .error .hint"), "and its hint")
    # The 404 of that call is the answer shown, not a page error; drop it from the log.
    d.get_log("browser")

    d.get(base + "/tools/aisp_system_monitor")
    wait(d, lambda: ready(d), "monitor tool form")
    d.find_element(By.ID, "f-duration_s").send_keys("60")
    d.find_element(By.ID, "f-interval_ms").send_keys("200")
    d.find_element(By.ID, "tool-submit").click()
    text = d.find_element(By.ID, "tool-progress-text")
    wait(d, lambda: "running" in text.text, "long-running job shows progress")
    shot(d, shots, "tool-progress.png")
    d.find_element(By.ID, "tool-cancel").click()
    wait(d, lambda: d.find_elements(By.CSS_SELECTOR, "#tool-error .error"), "cancelled job")
    kind = d.find_element(By.CSS_SELECTOR, "#tool-error .error").get_attribute("data-kind")
    check(kind == "cancelled", f"cancel stops the job ({kind})")
    check(not console_errors(d), "tool pages: no console errors")


def view_done(d, slot_id):
    return d.execute_script(
        "const e=document.getElementById(arguments[0]); return e && ['done','error','cancelled'].includes(e.dataset.state) ? e.dataset.state : null;",
        slot_id,
    )


def test_overview(d, base, home, shots):
    d.get(base + "/")
    status = cli(["status"], home)
    triage = cli(["triage"], home)
    if not status["gpu"]["available"]:
        wait(d, lambda: d.find_elements(By.CSS_SELECTOR, '#gpu-live [data-state="no-gpu"]'), "no-GPU state")
        reason = d.find_element(By.CSS_SELECTOR, "#gpu-live .no-gpu .reason").text
        check(reason == status["gpu"]["reason"], f"overview shows no GPU with the probe's reason: {reason}")
    else:
        wait(d, lambda: d.find_elements(By.CSS_SELECTOR, "#gpu-live .gpu-card"), "live GPU cards")
        cards = d.find_elements(By.CSS_SELECTOR, "#gpu-live .gpu-card")
        check(len(cards) == len(status["gpu"]["devices"]), f"one live card per GPU ({len(cards)})")
        first = d.find_element(By.CSS_SELECTOR, '#gpu-live .gpu-card [data-metric="utilization"] polyline')
        wait(d, lambda: len(first.get_attribute("points").split()) >= 2, "sparkline gains a point per second")
    # The live cards' drawing, fed twice with a real H100 answer of aisp_gpu_info (examples/gpu/h100):
    # where no GPU is, this is what the page would show a second apart.
    info = json.load(open(os.path.join(ROOT, "examples", "gpu", "h100", "gpu_info.json")))
    drawn = d.execute_script(
        "const slot=document.createElement('div'); overviewPage.history=new Map();"
        "overviewPage.draw(slot, arguments[0]); overviewPage.draw(slot, arguments[0]);"
        "const m={}; slot.querySelectorAll('.metric').forEach(e=>{m[e.dataset.metric]=[e.querySelector('.value').textContent,"
        " e.querySelector('polyline').getAttribute('points').split(' ').length];}); return m;",
        info,
    )
    g = info["gpus"][0]
    check(drawn["memory used"] == [f"{g['memory']['used_mib']} MiB of {g['memory']['total_mib']}", 2]
          and drawn["power"] == [f"{g['power_draw_w']} W of {g['power_limit_enforced_w']:g}", 2]
          and drawn["temperature"][0] == f"{g['temperature']['gpu_c']} °C",
          f"GPU cards draw an H100's aisp_gpu_info answer as values and sparklines: {drawn}")
    wait(d, lambda: view_done(d, "overview-view"), "triage view")
    steps = [e.get_attribute("data-tool") for e in d.find_elements(By.CSS_SELECTOR, "#next-steps li[data-tool]")]
    check(steps == [s["tool"] for s in triage["next_steps"]], f"the triage's next steps in order: {steps}")
    link = d.find_element(By.CSS_SELECTOR, "#next-steps li a").get_attribute("href")
    check("/tools/" + steps[0] in link, "each next step links to its tool's form")
    check(d.find_elements(By.CSS_SELECTOR, "#stack [data-overall]"), "the software stack's state is shown")
    full_page_shot(d, shots, "overview.png", max_height=2400)
    check(not console_errors(d), "overview: no console errors")


def test_compare(d, base, shots, tmp):
    before = fixture_xz("cut/train_good_steady_nvtx.sqlite", tmp)
    after = fixture_xz("cut/train_good_warmup_nvtx.sqlite", tmp)
    d.get(base + "/compare?before=" + urllib.request.quote(before) + "&after=" + urllib.request.quote(after))
    wait(d, lambda: ready(d), "compare page ready")
    check(view_done(d, "compare-view") == "done", "the comparison rendered")
    v = d.find_element(By.CSS_SELECTOR, "#verdict [data-verdict]")
    check(v.get_attribute("data-verdict") == "no_change" and v.get_attribute("data-basis") == "per_step",
          f"verdict of steady -> warmup: {v.get_attribute('data-verdict')} on {v.get_attribute('data-basis')}")
    check("+2.68 %" in v.text and "95 % interval -4.78 % to +4.89 %" in v.text,
          f"the verdict states its change and interval: {v.text}")
    first = d.find_element(By.CSS_SELECTOR, "#compare-view section.panel")
    check(first.get_attribute("id") == "verdict", "the verdict leads the page")
    check(d.find_elements(By.CSS_SELECTOR, '#comparability tr[data-fact="work_per_step"][data-same="yes"]'),
          "comparability states the work per step")
    check(d.find_elements(By.CSS_SELECTOR, "#steps svg.chart"), "the steps before and after are an SVG chart")
    check(d.find_element(By.ID, "f-before").get_attribute("value") == before, "the deep link fills the form")
    full_page_shot(d, shots, "compare.png", max_height=2400)
    # Cancel: the request is aborted at once and the page says so.
    d.execute_script("document.getElementById('compare-form').requestSubmit(); document.querySelector('#compare-view .view-progress .cancel').click();")
    wait(d, lambda: view_done(d, "compare-view") == "cancelled", "cancelled comparison")
    kind = d.find_element(By.CSS_SELECTOR, "#compare-view .error").get_attribute("data-kind")
    check(kind == "cancelled", "a running comparison can be cancelled")
    d.find_element(By.ID, "f-after").clear()
    d.find_element(By.ID, "f-after").send_keys("/nonexistent/after.sqlite")
    d.find_element(By.CSS_SELECTOR, "#compare-form button[type=submit]").click()
    wait(d, lambda: view_done(d, "compare-view") == "error", "error box")
    box = d.find_element(By.CSS_SELECTOR, "#compare-view .error")
    check(box.get_attribute("data-kind") == "not_found" and box.find_elements(By.CSS_SELECTOR, ".hint"), "a failed comparison shows kind, message and hint")
    d.get_log("browser")  # the 404 above is the answer shown, not a page error


def test_benchmarks(d, base, shots):
    run = json.load(open(EXAMPLES_RUN))
    fp8 = next(r for r in run["results"] if r.get("target", "gemm") == "gemm" and r["variant"] == "cublaslt_fp8")
    speedup = next(s for s in run["speedups"] if s["target"] == "gemm" and s["variant"] == "cublaslt_fp8")
    d.get(base + "/benchmarks")
    wait(d, lambda: ready(d), "benchmarks page ready")
    check(d.find_elements(By.ID, "no-history"), "an empty store says how to get history")
    path = d.find_element(By.ID, "f-path")
    check(path.get_attribute("value") == "examples/benchmark", "the import form holds the tool's example")
    d.find_element(By.CSS_SELECTOR, "#import-form button[type=submit]").click()
    wait(d, lambda: d.find_elements(By.CSS_SELECTOR, ".import-done"), "import")
    added = int(d.find_element(By.CSS_SELECTOR, ".import-done").get_attribute("data-rows-added"))
    check(added == 47, f"47 results imported from examples/benchmark ({added})")
    wait(d, lambda: d.find_elements(By.CSS_SELECTOR, '#leaderboards tr[data-target="gemm"]'), "leaderboards")
    row = d.find_element(By.CSS_SELECTOR, '#leaderboards tr[data-target="gemm"][data-rank="1"]')
    value = row.find_element(By.CSS_SELECTOR, '[data-col="value"]').text
    sp = row.find_element(By.CSS_SELECTOR, '[data-col="speedup"]').text
    check(row.get_attribute("data-variant") == "cublaslt_fp8" and value == f"{fp8['value']:.1f} TFLOP/s",
          f"gemm leaderboard row 1: cublaslt_fp8 {value} (run.json {fp8['value']:.2f})")
    check(sp == f"{speedup['speedup']:.2f}×", f"its speedup over the naive baseline: {sp}")
    roof = d.find_element(By.CSS_SELECTOR, "#roofline .roofline")
    check(roof.get_attribute("data-memory-gb-per-s") == f"{run['roofs']['memory']['value']:.1f}",
          f"roofline uses the measured memory roof ({roof.get_attribute('data-memory-gb-per-s')} GB/s)")
    points = roof.find_elements(By.CSS_SELECTOR, "circle")
    check(len(points) == 9, f"one roofline point per GEMM variant ({len(points)})")
    check(d.find_elements(By.CSS_SELECTOR, "#pareto svg.chart") and d.find_elements(By.CSS_SELECTOR, "#power svg.chart"),
          "Pareto scatter and energy per run are drawn")
    full_page_shot(d, shots, "benchmarks.png", max_height=3400)
    check(not console_errors(d), "benchmarks: no console errors")


def test_planner(d, base, home, shots):
    d.get(base + "/planner")
    wait(d, lambda: ready(d), "planner page ready")
    example = json.loads(urllib.request.urlopen(base + "/api/tools/aisp_distributed_plan").read())["example"]
    d.find_element(By.CSS_SELECTOR, "#plan-form button[type=submit]").click()
    wait(d, lambda: view_done(d, "plan-view"), "plan", timeout=120)
    check(view_done(d, "plan-view") == "done", "the plan rendered")
    plan = cli(["distributed", "plan", "--json", json.dumps(example)], home)
    best = plan["candidates"][0]["memory"]
    mem = d.find_element(By.CSS_SELECTOR, '#layouts tr[data-rank="1"] [data-col="memory-per-gpu"]').text
    check(mem == f"{best['total_gb']:.2f} GB of {best['usable_gb']:.1f} GB", f"memory per GPU of the best layout: {mem}")
    rows = d.find_elements(By.CSS_SELECTOR, "#layouts tr[data-rank]")
    check(len(rows) == len(plan["candidates"]), f"every ranked layout listed ({len(rows)})")
    check(any("Memory per GPU" in (e.get_attribute("aria-label") or "") for e in d.find_elements(By.CSS_SELECTOR, "#plan-view svg.chart")),
          "memory breakdown bars")
    kinds = d.find_element(By.ID, "rejected-kinds").text
    check(all(f"{k}: {n} layouts" in kinds for k, n in plan["rejected_by_kind"]), f"why the others were rejected: {kinds}")
    d.find_element(By.CSS_SELECTOR, "#estimate-form button[type=submit]").click()
    wait(d, lambda: view_done(d, "estimate-view"), "estimate")
    est_example = json.loads(urllib.request.urlopen(base + "/api/tools/aisp_inference_estimate").read())["example"]
    est = cli(["inference", "estimate", "--json", json.dumps(est_example)], home)
    w = d.find_element(By.CSS_SELECTOR, '#estimate-view [data-metric="weights-per-gpu"]').text
    check(w == f"{est['weights_per_gpu_gb']:.2f} GB", f"inference estimate: weights per GPU {w}")
    full_page_shot(d, shots, "planner.png", max_height=2400)
    check(not console_errors(d), "planner: no console errors")


def test_ask(d, base, shots):
    d.get(base + "/ask")
    wait(d, lambda: ready(d), "ask page ready")
    check("No LLM configured" in d.find_element(By.ID, "ask-mode").text, "the page says the offline composer answers")
    d.find_element(By.ID, "f-question").send_keys("why is this training step slow?")
    d.find_element(By.ID, "f-path").send_keys(TRAIN_GOOD)
    d.find_element(By.CSS_SELECTOR, "#ask-form button[type=submit]").click()
    wait(d, lambda: d.find_elements(By.CSS_SELECTOR, '.msg.assistant[data-state="succeeded"]'), "the answer", timeout=120)
    msg = d.find_element(By.CSS_SELECTOR, ".msg.assistant")
    check(msg.find_elements(By.CSS_SELECTOR, ".progress-log li"), "progress was streamed into the chat")
    check(
        "53.44%" in msg.text and "sleeps or waits on a lock" in msg.text,
        "the answer states the top finding with its number",
    )
    cite = msg.find_element(By.CSS_SELECTOR, 'ol.citations li[data-tool="aisp_profile_rules"]')
    ref = msg.find_element(By.CSS_SELECTOR, "a.cite-ref")
    check(ref.get_attribute("href").endswith("#" + cite.get_attribute("id")), "an [E1] label links to its citation")
    link = msg.find_element(By.CSS_SELECTOR, 'li[data-finding="host_os_wait"] a.finding-link')
    check("finding=host_os_wait" in link.get_attribute("href"), "the cited finding links to the profile page")
    full_page_shot(d, shots, "ask.png", max_height=2400)
    check(not console_errors(d), "ask: no console errors")
    link.click()
    wait(d, lambda: "/profiles" in d.current_url and ready(d), "profile page from the citation")
    art = d.find_element(By.CSS_SELECTOR, "article.finding.target")
    check(art.get_attribute("data-rule") == "host_os_wait", "the profile page opens at the cited finding")
    tl = art.find_element(By.CSS_SELECTOR, "a.to-timeline")
    canvas = d.find_element(By.ID, "tl-canvas")
    ls, le = int(tl.get_attribute("data-start")), int(tl.get_attribute("data-end"))
    wait(
        d,
        lambda: abs(int(canvas.get_attribute("data-window-start") or 0) - ls) <= 1
        and abs(int(canvas.get_attribute("data-window-end") or 0) - le) <= 1,
        "the timeline shows the finding's place",
    )
    check(True, "and the timeline shows the finding's place")


def test_token_gate(d, base, shots):
    try:
        urllib.request.urlopen(base + "/api/tools")
        raise AssertionError("the API answered without the token")
    except urllib.error.HTTPError as e:
        check(e.code == 401, "the API refuses a call without the token")
    try:
        urllib.request.urlopen(base + "/dashboard/profile/overview?path=" + urllib.request.quote(TRAIN_GOOD))
        raise AssertionError("a profile section was served without the token")
    except urllib.error.HTTPError as e:
        check(e.code == 401, "profile sections need the token")
    d.get(base + "/profiles?path=" + urllib.request.quote(TRAIN_GOOD))
    wait(d, lambda: "/login" in d.current_url, "redirect to the login page")
    check(not d.find_elements(By.CSS_SELECTOR, "[data-metric]"), "no profile data without the token")
    d.find_element(By.ID, "token-input").send_keys("wrong")
    d.find_element(By.CSS_SELECTOR, "#login-form button").click()
    wait(d, lambda: d.find_elements(By.CSS_SELECTOR, "#login-error .error"), "wrong token refused")
    check(d.execute_script("return sessionStorage.getItem('aisp.token')") is None, "a refused token is not kept")
    shot(d, shots, "login.png")
    inp = d.find_element(By.ID, "token-input")
    inp.clear()
    inp.send_keys(TOKEN)
    d.find_element(By.CSS_SELECTOR, "#login-form button").click()
    wait(d, lambda: "/profiles" in d.current_url and ready(d), "admitted with the token")
    busy = d.find_element(By.CSS_SELECTOR, '[data-metric="steady-busy"] .value').text
    check(busy == "8.83 %", "with the token the profile page loads")
    check(d.execute_script("return localStorage.length") == 0, "the token is not in localStorage")


def main():
    if len(sys.argv) < 2:
        raise SystemExit(__doc__)
    binary = os.path.abspath(sys.argv[1])
    shots = None
    if "--screenshots" in sys.argv:
        shots = os.path.abspath(sys.argv[sys.argv.index("--screenshots") + 1])
        os.makedirs(shots, exist_ok=True)
    homes = [tempfile.mkdtemp(prefix="aisp-dash-"), tempfile.mkdtemp(prefix="aisp-dash-tok-")]
    procs = []
    d = None
    try:
        p, base = start_server(binary, homes[0])
        procs.append(p)
        p, tbase = start_server(binary, homes[1], token=TOKEN)
        procs.append(p)
        d = browser()
        d.set_page_load_timeout(60)
        test_pages(d, base, shots)
        test_profile(d, base, shots)
        rank_tmp = tempfile.mkdtemp(prefix="aisp-dash-set-")
        homes.append(rank_tmp)
        test_rank_set(d, base, homes[0], shots, rank_tmp)
        test_tools(d, base, shots)
        test_overview(d, base, homes[0], shots)
        test_compare(d, base, shots, homes[0])
        test_benchmarks(d, base, shots)
        test_planner(d, base, homes[0], shots)
        test_ask(d, base, shots)
        test_token_gate(d, tbase, shots)
        print("dashboard browser tests passed")
    finally:
        if d is not None:
            d.quit()
        for p in procs:
            p.terminate()
            try:
                p.wait(timeout=10)
            except subprocess.TimeoutExpired:
                p.kill()
        for h in homes:
            shutil.rmtree(h, ignore_errors=True)


if __name__ == "__main__":
    main()
