"""Results: plain dicts with `.to_pandas()` for their tables and an HTML view for Jupyter; job handles."""

import asyncio
import html
import json
import time

from . import _errors

#: Rows shown per table in the HTML view (the dict keeps all of them).
HTML_ROWS = 50


def _is_table(value):
    return isinstance(value, list) and value and all(isinstance(r, dict) for r in value)


def find_tables(value, prefix="", out=None, depth=0):
    """Every list of objects inside `value`, by path (`reports.0.rows`), outermost first."""
    if out is None:
        out = {}
    if depth > 4:
        return out
    if isinstance(value, dict):
        for key, item in value.items():
            path = f"{prefix}.{key}" if prefix else str(key)
            if _is_table(item):
                out[path] = item
            if isinstance(item, (dict, list)):
                find_tables(item, path, out, depth + 1)
    elif isinstance(value, list):
        for i, item in enumerate(value):
            if isinstance(item, dict):
                find_tables(item, f"{prefix}.{i}" if prefix else str(i), out, depth + 1)
    return out


def main_table(tables):
    """The first table at the outermost level, in the answer's order (`find_tables` keeps that order)."""
    return min(tables, key=lambda k: k.count("."))


def to_pandas(value, table=None):
    """A pandas DataFrame of one table of a result.

    `table` is a path from `Result.tables()` (e.g. `"rows"` or `"cuda_gpu_kern_sum.rows"`); by default the
    result's main table: its only one, else the first at the outermost level in the answer's order (the
    kernels report of a summary, not the largest table), with a warning naming the others. A result without
    tables becomes one row of its scalar fields. Nested objects in rows become dotted columns
    (`pandas.json_normalize`). pandas is imported here, only when asked for.
    """
    try:
        import pandas as pd
    except ImportError as e:  # no hard dependency
        raise ImportError("to_pandas() needs pandas: pip install pandas") from e
    if isinstance(value, list):
        return pd.json_normalize(value) if _is_table(value) else pd.DataFrame({"value": value})
    tables = find_tables(value)
    if table is None:
        if not tables:
            scalars = {k: v for k, v in value.items() if not isinstance(v, (dict, list))}
            return pd.DataFrame([scalars])
        table = main_table(tables)
        if len(tables) > 1:
            import warnings

            others = [t for t in tables if t != table]
            warnings.warn(
                f"to_pandas(): this result has {len(tables)} tables; giving {table!r}. "
                f"Pass table= for another: {', '.join(others[:6])}{', ...' if len(others) > 6 else ''}",
                stacklevel=3,
            )
    if table not in tables:
        raise KeyError(f"no table {table!r} in this result; tables: {', '.join(tables) or 'none'}")
    return pd.json_normalize(tables[table])


class Result(dict):
    """An operation's answer: a plain dict shaped like the tool's output (see `aisp schemas`)."""

    __slots__ = ("tool",)

    def __init__(self, data=(), tool=""):
        super().__init__(data)
        self.tool = tool

    def tables(self):
        """Path → rows for every list of objects in the result."""
        return find_tables(self)

    def to_pandas(self, table=None):
        """See `aisp.to_pandas`."""
        return to_pandas(self, table)

    def __reduce__(self):
        return (Result, (dict(self), self.tool))

    def _repr_html_(self):
        return _html_result(self)


# --- HTML for Jupyter ---------------------------------------------------------------------------------------

_STYLE = (
    "<style>.aisp-r{font-family:system-ui,sans-serif;font-size:13px}"
    ".aisp-r table{border-collapse:collapse;margin:4px 0 10px}"
    ".aisp-r th,.aisp-r td{border:1px solid #8884;padding:2px 6px;text-align:left;vertical-align:top}"
    ".aisp-r td.n{text-align:right;font-variant-numeric:tabular-nums}"
    ".aisp-card{border:1px solid #8886;border-left-width:5px;border-radius:4px;padding:6px 10px;margin:6px 0}"
    ".aisp-card.high,.aisp-card.critical{border-left-color:#d33}.aisp-card.medium{border-left-color:#e90}"
    ".aisp-card.low{border-left-color:#39c}.aisp-card.info{border-left-color:#999}"
    ".aisp-sev{font-weight:600;text-transform:uppercase;font-size:11px;margin-right:6px}</style>"
)


def _esc(v):
    if isinstance(v, float):
        return html.escape(f"{v:,.6g}")
    if isinstance(v, (dict, list)):
        text = json.dumps(v, ensure_ascii=False)
        return html.escape(text if len(text) <= 200 else text[:200] + "…")
    return html.escape(str(v))


def _cell(v):
    cls = ' class="n"' if isinstance(v, (int, float)) and not isinstance(v, bool) else ""
    return f"<td{cls}>{_esc(v)}</td>"


def _html_table(rows):
    cols = []
    for r in rows[:HTML_ROWS]:
        for k in r:
            if k not in cols:
                cols.append(k)
    head = "".join(f"<th>{html.escape(str(c))}</th>" for c in cols)
    body = "".join("<tr>" + "".join(_cell(r.get(c, "")) for c in cols) + "</tr>" for r in rows[:HTML_ROWS])
    more = f"<div>… {len(rows) - HTML_ROWS} more rows (all in the dict and .to_pandas())</div>" if len(rows) > HTML_ROWS else ""
    return f"<table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>{more}"


def _html_findings(findings):
    cards = []
    for f in findings:
        sev = str(f.get("severity", "info")).lower()
        title = f.get("title") or f.get("summary") or f.get("rule") or f.get("id") or ""
        rest = {k: v for k, v in f.items() if k not in ("severity", "title") and v not in (None, "", [], {})}
        body = "".join(f"<tr><th>{html.escape(str(k))}</th>{_cell(v)}</tr>" for k, v in rest.items())
        cards.append(
            f'<div class="aisp-card {html.escape(sev)}"><span class="aisp-sev">{html.escape(sev)}</span>'
            f"<b>{_esc(title)}</b><table>{body}</table></div>"
        )
    return "".join(cards)


def _html_value(value, depth=0):
    if _is_table(value):
        return _html_table(value)
    if isinstance(value, dict):
        scalars = {k: v for k, v in value.items() if not isinstance(v, (dict, list))}
        parts = []
        if scalars:
            parts.append(
                "<table>" + "".join(f"<tr><th>{html.escape(str(k))}</th>{_cell(v)}</tr>" for k, v in scalars.items()) + "</table>"
            )
        for k, v in value.items():
            if not isinstance(v, (dict, list)) or v in ([], {}):
                continue
            if k == "findings" and _is_table(v):
                inner = _html_findings(v)
            elif depth >= 3:
                inner = f"<code>{_esc(v)}</code>"
            else:
                inner = _html_value(v, depth + 1)
            parts.append(f"<details open><summary><b>{html.escape(str(k))}</b></summary>{inner}</details>")
        return "".join(parts)
    if isinstance(value, list):
        return "<ul>" + "".join(f"<li>{_esc(v)}</li>" for v in value[:HTML_ROWS]) + "</ul>"
    return _esc(value)


def _html_result(result):
    title = f"<div><b>{html.escape(result.tool)}</b></div>" if result.tool else ""
    return f'{_STYLE}<div class="aisp-r">{title}{_html_value(dict(result))}</div>'


# --- Jobs ---------------------------------------------------------------------------------------------------


class Job:
    """A background call started with `async_=True`: poll it, wait for it, cancel it.

    The job runs on the engine's runtime and is recorded in the store (as `aisp_job_status` sees it); it lives as
    long as the engine does.
    """

    def __init__(self, engine, ticket):
        self._engine = engine
        self.id = ticket["job_id"]
        self.tool = ticket.get("tool", "")
        self.ticket = ticket

    def __repr__(self):
        return f"<aisp.Job {self.id} {self.tool}>"

    def status(self):
        """The job's record: state, progress, and result or error once finished."""
        return self._engine.job.status(job_id=self.id)

    def done(self):
        return self.status()["state"] in ("succeeded", "failed", "cancelled")

    def _outcome(self, record):
        if record["state"] == "succeeded":
            return Result(record.get("result") or {}, self.tool)
        raise _errors.from_envelope({"error": record.get("error") or {"kind": "internal", "message": "job failed"}}, self.tool)

    def result(self, timeout_s=None, poll_s=0.1):
        """Wait for the job and return its result (or raise its error). Ctrl-C stops waiting, not the job."""
        deadline = None if timeout_s is None else time.monotonic() + timeout_s
        while True:
            record = self.status()
            if record["state"] in ("succeeded", "failed", "cancelled"):
                return self._outcome(record)
            if deadline is not None and time.monotonic() >= deadline:
                raise _errors.BY_KIND["timeout"](
                    f"job {self.id} is still {record['state']} after {timeout_s} s",
                    "Wait longer, or cancel it with job.cancel().",
                    "timeout",
                    self.tool,
                )
            time.sleep(poll_s)

    async def wait(self, poll_s=0.1):
        """`await job.wait()`: the result without blocking the event loop."""
        while True:
            record = await asyncio.get_running_loop().run_in_executor(None, self.status)
            if record["state"] in ("succeeded", "failed", "cancelled"):
                return self._outcome(record)
            await asyncio.sleep(poll_s)

    def cancel(self):
        """Ask the job to stop; answers its record."""
        return self._engine.job.cancel(job_id=self.id)
