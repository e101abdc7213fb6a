#!/usr/bin/env python3
"""Browser tests of the dashboard: headless Chromium driven by Selenium against
a real `aisp serve --transport http`.

Usage: dashboard_test.py AISP_BINARY [--screenshots DIR]

Asserts: each page loads without console errors; the profile page of
tests/data/train_good.sqlite shows its steady busy % (8.67 %, ground truth in
the fixtures' README) and its top finding (host-bound steps); the timeline
draws and zoom changes the visible window; a finding's link moves the
timeline to its place; a tool form call returns the right answer, an error
shows kind/message/hint, and a long-running tool shows progress and can be
cancelled; the token gate refuses without the token and admits with it.
"""

import json
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


def full_page_shot(d, shots, name):
    if not shots:
        return
    height = d.execute_script("return document.documentElement.scrollHeight")
    d.set_window_size(1400, min(max(height + 40, 1000), 6000))
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
    check(busy == "8.67 %", f"steady busy % is shown: {busy}")
    top = d.find_element(By.CSS_SELECTOR, 'article.finding[data-rank="0"]')
    check(top.get_attribute("data-rule") == "host_bound_steps", "the top finding is host-bound steps")
    check("Host-bound steps" in top.text and "critical" in top.text.lower(), "the top finding shows its title and severity")
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
    check(out["rows"][0]["name"] == "multi_tensor_apply_kernel", "top kernel of train_good is multi_tensor_apply_kernel")
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
    check(busy == "8.67 %", "with the token the profile page loads")
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
        test_tools(d, base, shots)
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
