"""The Python API against the real fixtures, side by side with the `aisp` CLI on the same files.

Run by .ci/run (.ci/python.sh) after `maturin develop`; the CLI is target/debug/aisp (or $AISP_BIN).
"""

import ast
import asyncio
import builtins
import inspect
import json
import os
import pathlib
import signal
import subprocess
import sys
import textwrap
import threading
import time

import pytest

import aisp

ROOT = pathlib.Path(__file__).resolve().parents[2]
DATA = ROOT / "tests" / "data"
TRAIN_GOOD = str(DATA / "train_good.sqlite")
AISP_BIN = os.environ.get("AISP_BIN", str(ROOT / "target" / "debug" / "aisp"))


@pytest.fixture(scope="session")
def home(tmp_path_factory):
    path = tmp_path_factory.mktemp("aisp-home")
    os.environ["AISP_HOME"] = str(path)  # the engine and the CLI read the same variable
    os.environ.pop("AISP_ALLOW_EXEC", None)
    os.environ.pop("AISP_CONFIG", None)
    return path


@pytest.fixture(scope="session")
def engine(home):
    return aisp.Engine()


@pytest.fixture(scope="session")
def has_gpu(engine):
    return bool(engine.status()["gpu"].get("available"))


def cli(*args):
    """`aisp ... --format json` with the same AISP_HOME, parsed."""
    out = subprocess.run(
        [AISP_BIN, *args, "--format", "json"], capture_output=True, text=True, env=os.environ, timeout=300
    )
    return json.loads(out.stdout)


def cli_call(tool_method, kwargs):
    """The same call through the CLI: `aisp <domain> <op> --json '{...}'` (or `aisp <op>` for short tools)."""
    spec = next(t for t in aisp.tools() if t["tool"] == tool_method.aisp_tool)
    words = [spec["method"].replace("_", "-")] if spec["short"] else [spec["domain"], spec["method"].replace("_", "-")]
    return cli(*words, "--json", json.dumps(kwargs))


# --- same configuration and store as the CLI -----------------------------------------------------------------


def test_the_engine_uses_the_cli_home_and_store(engine, home):
    assert pathlib.Path(engine.home) == home
    assert engine.status()["store_path"] == cli("status")["store_path"]
    assert engine.status()["tool_count"] == len(aisp.tools())


# --- the numbers of a fixture equal the CLI's ----------------------------------------------------------------


def test_kernel_count_and_busy_percent_of_train_good_equal_the_cli(engine):
    k = engine.profile.kernels(path=TRAIN_GOOD)
    assert (k["kernels"], k["total_ns"]) == (3689, 32_075_674)
    k_cli = cli("profile", "kernels", TRAIN_GOOD)
    assert (k["kernels"], k["total_ns"], k["rows"]) == (k_cli["kernels"], k_cli["total_ns"], k_cli["rows"])

    u = engine.profile.utilization(path=TRAIN_GOOD)
    u_cli = cli("profile", "utilization", TRAIN_GOOD)
    busy = {w["window"]["kind"]: w["busy_pct"] for w in u["devices"][0]["windows"]}
    assert busy == {"span": 5.37, "steps": 5.34, "steady": 8.83}
    assert busy == {w["window"]["kind"]: w["busy_pct"] for w in u_cli["devices"][0]["windows"]}
    assert u == u_cli


def test_profile_summary_is_the_cli_answer(engine):
    r = engine.profile.summary(path=TRAIN_GOOD, limit=5)
    assert isinstance(r, dict) and r.tool == "aisp_profile_summary"
    assert r == cli("profile", "summary", TRAIN_GOOD, "--limit", "5")
    json.dumps(r)  # plain JSON-able Python objects


# --- a call per domain ---------------------------------------------------------------------------------------

# One real call per domain, checked against the CLI's answer to the same arguments where the answer does not
# depend on the moment. Domains whose every operation needs a GPU answer gpu_unavailable on a host without one.
DOMAIN_CALLS = {
    "core": ("list_domains", {}, "cli"),
    "job": ("list", {"limit": 5}, "keys:jobs"),
    "gpu": ("info", {}, "gpu"),
    "system": ("software", {}, "keys:"),
    "profile": ("info", {"path": TRAIN_GOOD}, "cli"),
    "benchmark": ("targets", {}, "cli"),
    "hw": ("roofline", {}, "gpu"),
    "analyze": ("whatif", {"model": "llama-3.1-8b", "max_gpus": 8}, "cli"),
    "optimize": ("recommend", {"model": "llama-3.1-70b", "gpus": 8}, "cli"),
    "distributed": ("plan", {"model": "llama-3.1-8b", "gpu": "h100-sxm", "gpus": 8}, "cli"),
    "inference": ("estimate", {"model": "llama-3.1-8b", "gpu": "h100-sxm"}, "cli"),
    "export": ("html", {}, "keys:"),
    "ai": ("troubleshoot", {"symptom": "low GPU utilization"}, "cli"),
}


ALL_DOMAINS = [d["name"] for d in aisp._registry.REGISTRY["domains"]]


def _example_call(domain):
    """A domain without a case above: its first operation that runs nothing, with the registry's example."""
    tools = next(d["tools"] for d in aisp._registry.REGISTRY["domains"] if d["name"] == domain)
    t = next((t for t in tools if not t["executes_commands"]), tools[0])
    kwargs = {p["name"]: t["example"][p["arg"]] for p in t["params"] if p["arg"] in t["example"]}
    return t["method"], kwargs, "example"


def test_the_cases_name_real_domains():
    assert set(DOMAIN_CALLS) <= set(ALL_DOMAINS)


@pytest.mark.parametrize("domain", ALL_DOMAINS)
def test_a_call_per_domain(engine, has_gpu, domain, tmp_path):
    op, kwargs, check = DOMAIN_CALLS.get(domain) or _example_call(domain)
    if check == "example":
        # A new domain: the call must answer or raise an aisp error, never anything else.
        try:
            assert isinstance(getattr(getattr(engine, domain), op)(**kwargs), aisp.Result)
        except aisp.AispError as e:
            assert e.kind and e.message and e.hint
        return
    if domain == "export":
        kwargs = {"profile": TRAIN_GOOD, "output": str(tmp_path / "report.html")}
    method = getattr(getattr(engine, domain), op)
    if check == "gpu":
        if has_gpu:
            pytest.skip("GPU host: the GPU call is made in the device run")
        with pytest.raises(aisp.GpuUnavailableError) as e:
            method(**kwargs)
        assert e.value.kind == "gpu_unavailable" and e.value.hint
        return
    r = method(**kwargs)
    assert isinstance(r, aisp.Result) and isinstance(r, dict) and r
    if domain == "export":
        assert (tmp_path / "report.html").read_text().lstrip().lower().startswith("<!doctype html")
    if check == "cli":
        assert r == cli_call(method, kwargs)
    else:
        for key in filter(None, check.split(":")[1].split(",")):
            assert key in r


def test_top_level_conveniences_are_the_short_tools(engine):
    assert engine.list_domains() == engine.core.list_domains()
    assert engine.recommend(model="llama-3.1-70b", gpus=8) == engine.optimize.recommend(model="llama-3.1-70b", gpus=8)
    triage, triage_cli = engine.triage(), cli("triage")
    assert list(triage) == list(triage_cli)
    assert (triage["gpu_available"], triage["exec_allowed"], triage["version"]) == (
        triage_cli["gpu_available"],
        triage_cli["exec_allowed"],
        triage_cli["version"],
    )
    assert engine.status()["tool_count"] == engine.core.status()["tool_count"]
    short = {t["method"] for t in aisp.tools() if t["short"]}
    assert {"status", "triage", "ask", "recommend", "list_domains"} <= short
    for name in short:
        assert callable(getattr(engine, name))


def test_ask_without_a_model_answers_from_the_evidence(engine):
    os.environ.pop("AISP_LLM_BASE_URL", None)
    os.environ.pop("OPENAI_API_KEY", None)
    r = engine.ask(question="why is my training slow?", path=TRAIN_GOOD)
    r_cli = cli("ask", "--json", json.dumps({"question": "why is my training slow?", "path": TRAIN_GOOD}))
    assert r["llm_used"] is False and "host_os_wait" in r["answer"]
    # Everything but the conversation (a new one per call) is the CLI's answer.
    assert r["conversation_id"] != r_cli["conversation_id"]
    strip = lambda d: {k: v for k, v in d.items() if k != "conversation_id"}  # noqa: E731
    assert strip(r) == strip(r_cli)


# --- errors per kind -----------------------------------------------------------------------------------------


def test_error_classes_per_kind_do_not_shadow_builtins():
    import asyncio as aio

    kinds = [e["kind"] for e in aisp._registry.REGISTRY["errors"]]
    assert len(kinds) == 9 and "busy" in kinds
    for entry in aisp._registry.REGISTRY["errors"]:
        cls = getattr(aisp, entry["class"])
        assert issubclass(cls, aisp.AispError) and cls is not aisp.AispError
        assert not hasattr(builtins, entry["class"]) and not hasattr(aio, entry["class"])
        err = aisp._errors.from_envelope({"error": {"kind": entry["kind"], "message": "m", "hint": "h"}}, "t")
        assert type(err) is cls and (err.kind, err.message, err.hint, err.tool) == (entry["kind"], "m", "h", "t")
    assert aisp.AispTimeoutError is not builtins.TimeoutError


def _raises(cls, fn, **kwargs):
    with pytest.raises(cls) as e:
        fn(**kwargs)
    err = e.value
    assert isinstance(err, aisp.AispError) and err.message and err.hint and err.kind
    return err


def test_invalid_input(engine):
    err = _raises(aisp.InvalidInputError, engine.profile.summary, path=TRAIN_GOOD, limit=-1)
    assert err.kind == "invalid_input" and "limit" in err.message
    err = _raises(aisp.InvalidInputError, engine.profile.summary, path=str(DATA / "store-v1.sqlite"))
    assert "not a readable Nsight Systems export" in err.message
    _raises(aisp.InvalidInputError, engine.optimize.recommend, model="llama-3.1-70b", gpus=float("nan"))


def test_not_found(engine):
    err = _raises(aisp.NotFoundError, engine.profile.summary, path="/nonexistent/run.sqlite")
    assert err.kind == "not_found" and "/nonexistent/run.sqlite" in err.message
    _raises(aisp.NotFoundError, engine.job.status, job_id="no-such-job")


def test_gpu_unavailable(engine, has_gpu):
    if has_gpu:
        pytest.skip("GPU host")
    err = _raises(aisp.GpuUnavailableError, engine.gpu.info)
    assert err.kind == "gpu_unavailable"


def test_exec_not_allowed(engine):
    assert engine.allow_exec is False
    err = _raises(aisp.ExecNotAllowedError, engine.profile.nsys, command=["python3", "train.py"])
    assert err.kind == "exec_not_allowed"


def test_timeout(engine):
    started = time.monotonic()
    err = _raises(aisp.AispTimeoutError, engine.system.monitor, duration_s=30, timeout_s=0.3)
    assert err.kind == "timeout" and time.monotonic() - started < 5


def test_a_full_job_queue_is_busy(home, tmp_path):
    # Its own process: the cap (AISP_MAX_JOBS) is read when the engine starts.
    code = (
        "import aisp\n"
        "e = aisp.Engine()\n"
        "job = e.system.monitor(duration_s=30, interval_ms=1000, async_=True)\n"
        "try:\n"
        "    e.system.monitor(duration_s=30, interval_ms=1000, async_=True)\n"
        "except aisp.BusyError as err:\n"
        "    print(err.kind, '|', err.hint)\n"
        "job.cancel()\n"
    )
    env = dict(os.environ, AISP_MAX_JOBS="1", AISP_HOME=str(tmp_path))
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=120)
    assert out.stdout.startswith("busy |"), out.stdout + out.stderr
    assert "limits.max_jobs" in out.stdout


def test_engines_of_one_process_share_its_jobs(engine, home):
    job = engine.system.monitor(duration_s=30, interval_ms=200, async_=True)
    other = aisp.Engine()  # opening the store again must not take the running job for an orphan
    assert other.job.status(job_id=job.id)["state"] in ("queued", "running")
    other.job.cancel(job_id=job.id)
    with pytest.raises(aisp.AispCancelledError):
        job.result(timeout_s=10)


def test_unsupported_cancelling_another_process_job(engine, home):
    job = engine.system.monitor(duration_s=30, interval_ms=200, async_=True)
    code = (
        "import aisp\n"
        "try:\n"
        f"    aisp.Engine().job.cancel(job_id={job.id!r})\n"
        "except aisp.UnsupportedError as e:\n"
        "    print(e.kind, '|', e.hint)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=os.environ, timeout=120)
    assert out.stdout.startswith("unsupported |"), out.stdout + out.stderr
    assert engine.job.status(job_id=job.id)["state"] in ("queued", "running")
    job.cancel()
    with pytest.raises(aisp.AispCancelledError):
        job.result(timeout_s=10)


def test_bad_keywords_are_type_errors(engine):
    with pytest.raises(TypeError, match="did you mean 'limit'"):
        engine.profile.summary(path=TRAIN_GOOD, limti=3)
    with pytest.raises(TypeError, match="missing required keyword argument"):
        engine.profile.summary()


# --- long calls: progress, cancellation, Ctrl-C, GIL, jobs ---------------------------------------------------


def test_progress_callback_sees_reports_and_cancels_a_30s_monitor(engine):
    seen = []

    def progress(report):
        seen.append(report)
        return False  # cancel

    started = time.monotonic()
    with pytest.raises(aisp.AispCancelledError):
        engine.system.monitor(duration_s=30, interval_ms=100, progress=progress)
    assert time.monotonic() - started < 2
    assert seen and set(seen[0]) == {"progress", "total", "message"}


def test_an_exception_in_the_callback_cancels_and_propagates(engine):
    class Stop(Exception):
        pass

    def progress(report):
        raise Stop()

    started = time.monotonic()
    with pytest.raises(Stop):
        engine.system.monitor(duration_s=30, interval_ms=100, progress=progress)
    assert time.monotonic() - started < 2


def test_ctrl_c_cancels_a_call_in_under_2_s(home):
    child = textwrap.dedent(
        """
        import sys, time, aisp
        engine = aisp.Engine()
        started = []
        def progress(report):
            if not started:
                started.append(1)
                print("running", flush=True)
        try:
            engine.system.monitor(duration_s=30, interval_ms=100, progress=progress)
            print("finished")
        except KeyboardInterrupt:
            print("interrupted", flush=True)
        """
    )
    p = subprocess.Popen([sys.executable, "-c", child], stdout=subprocess.PIPE, text=True, env=os.environ)
    assert p.stdout.readline().strip() == "running"
    sent = time.monotonic()
    p.send_signal(signal.SIGINT)
    out, _ = p.communicate(timeout=30)
    assert time.monotonic() - sent < 2
    assert out.strip() == "interrupted"


def test_the_gil_is_released_while_a_call_runs(engine):
    done = threading.Event()

    def call():
        engine.system.monitor(duration_s=1, interval_ms=200)
        done.set()

    t = threading.Thread(target=call)
    t.start()
    spins = 0
    while not done.is_set():
        spins += 1
    t.join()
    assert spins > 100_000  # the main thread ran Python the whole second


def test_async_returns_a_job_in_the_same_store(engine):
    job = engine.system.monitor(duration_s=0.3, interval_ms=100, async_=True)
    assert isinstance(job, aisp.Job) and job.tool == "aisp_system_monitor"
    result = job.result(timeout_s=20)
    assert len(result["samples"]) >= 2
    assert cli("job", "status", "--json", json.dumps({"job_id": job.id}))["state"] == "succeeded"
    job2 = engine.system.monitor(duration_s=0.2, interval_ms=100, async_=True)
    assert len(asyncio.run(job2.wait())["samples"]) >= 1


# --- results: DataFrames, HTML ------------------------------------------------------------------------------


def test_results_convert_to_dataframes(engine):
    pd = pytest.importorskip("pandas")
    k = engine.profile.kernels(path=TRAIN_GOOD, limit=50)
    df = k.to_pandas()
    assert isinstance(df, pd.DataFrame)
    # Grouped by operation (the default): a generic launcher's rows split by what each carries.
    assert len(df) == k["rows_total"] == 16
    assert int(df["total_ns"].sum()) == k["total_ns"] == 32_075_674
    assert df.loc[0, "name"] == "multi_tensor_apply_kernel[FusedAdamMathFunctor]"
    u = engine.profile.utilization(path=TRAIN_GOOD)
    windows = u.to_pandas("devices.0.windows")
    assert list(windows["window.kind"]) == ["span", "steps", "steady"]
    assert list(windows["busy_pct"]) == [5.37, 5.34, 8.83]
    assert "devices.0.windows" in u.tables()
    with pytest.raises(KeyError):
        u.to_pandas("nope")


def test_a_summary_gives_its_kernels_table_and_says_there_are_others(engine):
    pd = pytest.importorskip("pandas")
    r = engine.profile.summary(path=TRAIN_GOOD, limit=10)
    with pytest.warns(UserWarning, match="cuda_api_sum.rows"):
        df = r.to_pandas()
    assert list(df["name"]) == [row["name"] for row in r["cuda_gpu_kern_sum"]["rows"]]
    assert isinstance(r.to_pandas("cuda_api_sum.rows"), pd.DataFrame)


def test_the_readme_python_example_reads_real_keys(engine):
    """Each `r[...]` of the README's Python example exists in the answer it names."""
    readme = (ROOT / "README.md").read_text()
    block = readme.split("```python", 1)[1].split("```", 1)[0]
    r = engine.profile.summary(path=TRAIN_GOOD, limit=10)
    chains = [line.split("#")[0].strip() for line in block.splitlines() if line.strip().startswith("r[")]
    assert chains, "the example reads the summary's answer"
    for chain in chains:
        eval(chain, {"r": r})  # raises KeyError on a key the answer does not have


def test_pandas_is_not_needed_to_import(home):
    code = (
        "import sys; sys.modules['pandas'] = None\n"
        "import aisp\n"
        f"r = aisp.Engine().profile.kernels(path={TRAIN_GOOD!r})\n"
        "assert r['kernels'] == 3689\n"
        "try:\n    r.to_pandas()\nexcept ImportError as e:\n    print(e)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=os.environ, timeout=120)
    assert out.returncode == 0, out.stderr
    assert "pip install pandas" in out.stdout


def test_jupyter_shows_tables_and_finding_cards(engine):
    k = engine.profile.kernels(path=TRAIN_GOOD)._repr_html_()
    assert "<table>" in k and "multi_tensor_apply_kernel" in k
    rules = engine.profile.rules(path=TRAIN_GOOD)
    assert rules.get("findings"), "train_good has findings"
    html = rules._repr_html_()
    assert html.count('class="aisp-card') == len(rules["findings"])
    assert "<script" not in html


# --- generated signatures, docstrings and stubs --------------------------------------------------------------


def _methods():
    for d in aisp._registry.REGISTRY["domains"]:
        cls = aisp._engine.DOMAIN_CLASSES[d["name"]]
        for t in d["tools"]:
            yield cls.__name__, getattr(cls, t["method"]), t


def test_every_operation_is_a_method_with_every_argument_documented(engine):
    count = 0
    for _, method, t in _methods():
        count += 1
        sig = inspect.signature(method)
        names = [p for p in sig.parameters if p != "self"]
        assert names[-1] == "progress"
        doc = inspect.getdoc(method)
        for name in names:
            assert f"\n{name} : " in doc, f"{t['tool']}: {name} not documented"
        assert t["tool"] in doc
    assert count == len(aisp.tools()) == engine.status()["tool_count"]
    sig = inspect.signature(engine.profile.summary)
    assert sig.parameters["path"].default is inspect.Parameter.empty
    assert sig.parameters["limit"].default is None
    assert inspect.signature(engine.system.monitor).parameters["async_"].default is False


def test_the_stubs_declare_the_runtime_signatures():
    tree = ast.parse((ROOT / "python" / "aisp" / "__init__.pyi").read_text())
    classes = {n.name: n for n in tree.body if isinstance(n, ast.ClassDef)}
    checked = 0
    for cls_name, method, t in _methods():
        stub = next(f for f in classes[cls_name].body if isinstance(f, ast.FunctionDef) and f.name == t["method"])
        stub_names = [a.arg for a in stub.args.kwonlyargs]
        runtime = [p for p in inspect.signature(method).parameters.values() if p.name != "self"]
        assert stub_names == [p.name for p in runtime], t["tool"]
        for a, d, p in zip(stub.args.kwonlyargs, stub.args.kw_defaults, runtime):
            assert (d is None) == (p.default is inspect.Parameter.empty), (t["tool"], a.arg)
        checked += 1
    assert checked == len(aisp.tools())
    engine_stub = {n.target.id for n in classes["Engine"].body if isinstance(n, ast.AnnAssign)}
    assert {d["name"] for d in aisp._registry.REGISTRY["domains"]} <= engine_stub
