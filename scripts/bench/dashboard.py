#!/usr/bin/env python3
"""Dashboard speed in headless Chromium (Selenium), measured with the page's own
performance timing.

1. Time to interactive of the profile page: navigation start -> every section
   rendered and the timeline drawn once (`window.aispReady`, set by profile.js),
   cold (fresh AISP_HOME and server: nothing cached) and warm (same server,
   page loaded again: the operations' result cache and the event index are hot).
2. Frame times while panning the timeline with many events in view: the page
   pans by PX pixels on every animation frame for FRAMES frames (75 frames one
   way, 75 back, ...), starting from the default window; reports the
   draw time of each frame (timeline.draw, performance.now) and the interval
   between animation frames, plus the fetches the pan caused.

usage: dashboard.py AISP_BINARY --ttl EXPORT [--pan EXPORT] [--runs N]
Needs chromium, chromedriver and selenium (see .ci/dashboard.sh).
"""

import argparse
import json
import os
import re
import shutil
import statistics
import subprocess
import tempfile
import time
import urllib.parse

from selenium import webdriver
from selenium.webdriver.chrome.options import Options
from selenium.webdriver.chrome.service import Service
from selenium.webdriver.support.ui import WebDriverWait


def start_server(binary):
    home = tempfile.mkdtemp(prefix="aisp-bench-dash-")
    log = open(os.path.join(home, "serve.log"), "w+")
    env = dict(os.environ, AISP_HOME=home, RUST_LOG="warn")
    env.pop("AISP_TOKEN", None)
    proc = subprocess.Popen(
        [binary, "serve", "--transport", "http", "--bind", "127.0.0.1:0"],
        env=env, stdout=subprocess.DEVNULL, stderr=log,
    )
    for _ in range(300):
        log.seek(0)
        m = re.search(r"listening on (http://[0-9.:]+)", log.read())
        if m:
            return proc, m.group(1), home
        time.sleep(0.05)
    raise SystemExit("server did not start")


def stop(proc, home):
    proc.terminate()
    proc.wait(timeout=10)
    shutil.rmtree(home, ignore_errors=True)


def browser():
    opts = Options()
    for flag in ("--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                 "--disable-background-networking", "--disable-component-update", "--disable-sync",
                 "--disable-dev-shm-usage", "--window-size=1400,1000",
                 "--user-data-dir=" + tempfile.mkdtemp(prefix="aisp-bench-chrome-")):
        opts.add_argument(flag)
    opts.binary_location = "/usr/bin/chromium"
    return webdriver.Chrome(service=Service(shutil.which("chromedriver")), options=opts)


def ready_ms(d, base, path, timeout=300):
    d.get(base + "/profiles?path=" + urllib.parse.quote(path))
    WebDriverWait(d, timeout, poll_frequency=0.05).until(
        lambda _: d.execute_script("return document.body.dataset.ready === '1'"))
    return d.execute_script(
        "return {ready: window.aispReady, draw: window.aispTimeline.frameTimes[0],"
        " first_fetch: window.aispTimeline.lastFetchMs,"
        " errors: document.querySelectorAll('.error').length}")


def pct(xs, p):
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(round(p / 100 * (len(xs) - 1))))]


def ttl(binary, path, runs):
    cold, warm = [], []
    for _ in range(runs):
        proc, base, home = start_server(binary)
        d = browser()
        try:
            cold.append(ready_ms(d, base, path))
            warm.append(ready_ms(d, base, path))
        finally:
            d.quit()
            stop(proc, home)
    for name, xs in (("cold", cold), ("warm", warm)):
        r = [x["ready"] for x in xs]
        print(f"time to interactive, {name}: median {statistics.median(r):.0f} ms "
              f"(min {min(r):.0f}, max {max(r):.0f}; {len(r)} runs; errors shown: {sum(x['errors'] for x in xs)})")


PAN_JS = """
const [px, frames, done] = [arguments[0], arguments[1], arguments[arguments.length - 1]];
const tl = window.aispTimeline;
const f0 = tl.fetches, d0 = tl.frameTimes.length;
const stamps = [];
let n = 0;
function step(ts) {
  stamps.push(ts);
  if (n++ >= frames) {
    const draws = tl.frameTimes.slice(d0);
    done({stamps, draws, fetches: tl.fetches - f0, view: tl.view, drawn: tl.lastDrawn,
          fetched_in_window: tl.data.in_window});
    return;
  }
  tl.pan(Math.floor(n / 75) % 2 === 0 ? -px : px);  // back and forth: 75 frames each way
  requestAnimationFrame(step);
}
requestAnimationFrame(step);
"""


def pan(binary, path, frames, px):
    proc, base, home = start_server(binary)
    d = browser()
    try:
        d.set_script_timeout(300)
        ready_ms(d, base, path)
        # Warm the fetches once, then measure.
        d.execute_async_script(PAN_JS, px, 30)
        time.sleep(1)
        r = d.execute_async_script(PAN_JS, px, frames)
        v = r["view"]
        body = json.dumps({"path": path, "start_ns": int(v["start"]), "end_ns": int(v["end"]), "buckets": 1})
        out = subprocess.run(
            ["curl", "-s", "-X", "POST", base + "/api/profile/events", "-d", body],
            capture_output=True, check=True,
        ).stdout
        ans = json.loads(out)
        if "in_window" not in ans:
            raise SystemExit(f"events call failed: {ans}")
        in_view = ans["in_window"]
    finally:
        d.quit()
        stop(proc, home)
    iv = [b - a for a, b in zip(r["stamps"], r["stamps"][1:])]
    dr = r["draws"]
    print(f"pan: {frames} frames of {px} px; events in view at the end: {in_view:,}; "
          f"boxes drawn: {r['drawn']:,}; events in the fetched window: {r['fetched_in_window']:,}; fetches: {r['fetches']}")
    print(f"  draw time per frame: median {statistics.median(dr):.2f} ms, p95 {pct(dr, 95):.2f} ms, max {max(dr):.2f} ms ({len(dr)} draws)")
    print(f"  frame interval: median {statistics.median(iv):.2f} ms, p95 {pct(iv, 95):.2f} ms, max {max(iv):.2f} ms")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("binary")
    ap.add_argument("--ttl", help="export for time to interactive")
    ap.add_argument("--pan", help="export for the pan frame times")
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--frames", type=int, default=300)
    ap.add_argument("--px", type=int, default=4)
    a = ap.parse_args()
    binary = os.path.abspath(a.binary)
    if a.ttl:
        ttl(binary, os.path.abspath(a.ttl), a.runs)
    if a.pan:
        pan(binary, os.path.abspath(a.pan), a.frames, a.px)


if __name__ == "__main__":
    main()
