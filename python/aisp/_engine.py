"""`aisp.Engine`: `engine.<domain>.<op>(**kwargs)`, generated at import from the registry.

Nothing here names an operation: the domains, their tools, keyword names, annotations, defaults and docstrings
all come from the extension (`aisp::registry::python`), and every call goes through the engine's dispatcher,
the path the CLI, MCP and HTTP front ends take.
"""

import difflib
import inspect
import keyword
import json
import os
import typing

from . import _errors, _native
from ._registry import REGISTRY
from ._results import Job, Result

_ANNOTATION_NAMES = {n: getattr(typing, n) for n in ("Any", "Callable", "Dict", "List", "Literal", "Optional", "Union")}
_ANNOTATION_NAMES.update(str=str, int=int, float=float, bool=bool)
_PROGRESS = inspect.Parameter(
    "progress",
    inspect.Parameter.KEYWORD_ONLY,
    default=None,
    annotation=typing.Optional[typing.Callable[[typing.Dict[str, typing.Any]], typing.Any]],
)


def _annotation(text):
    try:
        return eval(text, {"__builtins__": {}}, _ANNOTATION_NAMES)  # text made by aisp::registry::python
    except Exception:
        return text


def _jsonable(value):
    """Arguments as JSON: paths as strings, tuples and sets as lists, numpy scalars as numbers."""
    if isinstance(value, os.PathLike):
        return os.fspath(value)
    if isinstance(value, (tuple, set, frozenset)):
        return [_jsonable(v) for v in value]
    if isinstance(value, list):
        return [_jsonable(v) for v in value]
    if isinstance(value, dict):
        return {str(k): _jsonable(v) for k, v in value.items()}
    if hasattr(value, "item") and callable(value.item) and type(value).__module__ == "numpy":
        return value.item()
    return value


def _make_method(spec, qualname):
    tool = spec["tool"]
    params = spec["params"]
    arg_of = {p["name"]: p["arg"] for p in params}
    required = [p["name"] for p in params if p["required"]]
    name = spec["method"]

    def method(self, **kwargs):
        progress = kwargs.pop("progress", None)
        args = {}
        for key, value in kwargs.items():
            arg = arg_of.get(key)
            if arg is None:
                close = difflib.get_close_matches(key, list(arg_of), n=1)
                also = f"; did you mean {close[0]!r}?" if close else ""
                raise TypeError(f"{name}() got an unexpected keyword argument {key!r}{also}")
            if value is not None:  # None: the operation's own default
                args[arg] = _jsonable(value)
        missing = [r for r in required if arg_of[r] not in args]
        if missing:
            raise TypeError(f"{name}() missing required keyword argument(s): {', '.join(missing)}")
        return self._aisp_call(tool, args, progress)

    sig = [inspect.Parameter("self", inspect.Parameter.POSITIONAL_OR_KEYWORD)]
    for p in params:
        sig.append(
            inspect.Parameter(
                p["name"],
                inspect.Parameter.KEYWORD_ONLY,
                default=inspect.Parameter.empty if p["required"] else p["default"],
                annotation=_annotation(p["annotation"]),
            )
        )
    sig.append(_PROGRESS)
    method.__signature__ = inspect.Signature(sig)
    method.__name__ = name
    method.__qualname__ = f"{qualname}.{name}"
    method.__doc__ = spec["doc"]
    method.__module__ = "aisp"
    method.aisp_tool = tool
    return method


class _Domain:
    """The operations of one domain, bound to an engine."""

    __slots__ = ("_engine",)

    def __init__(self, engine):
        self._engine = engine

    def _aisp_call(self, tool, args, progress):
        return self._engine._aisp_call(tool, args, progress)

    def __repr__(self):
        ops = ", ".join(n for n in dir(type(self)) if not n.startswith("_"))
        return f"<aisp {self._aisp_domain} domain: {ops}>"


def _camel(name):
    return "".join(w[:1].upper() + w[1:] for w in name.split("_"))


DOMAIN_CLASSES = {}
for _d in REGISTRY["domains"]:
    _cls_name = f"{_camel(_d['name'])}Domain"
    _body = {"__doc__": _d["description"], "__module__": "aisp", "__slots__": (), "_aisp_domain": _d["name"]}
    for _t in _d["tools"]:
        _body[_t["method"]] = _make_method(_t, _cls_name)
    DOMAIN_CLASSES[_d["name"] + "_" if keyword.iskeyword(_d["name"]) else _d["name"]] = type(_cls_name, (_Domain,), _body)


class Engine:
    """The aisp engine in this process: `engine.<domain>.<op>(**kwargs)`.

    Same configuration and store as the `aisp` CLI: `AISP_HOME` (or `home=`), the config file (`AISP_CONFIG`),
    the `AISP_*` variables. `allow_exec=True` allows operations that run commands you supply (captures).

    Every method takes keyword arguments named as in the tool's input schema (`async` is `async_`); `None`
    means the operation's default. Long-running operations also take `timeout_s` and `async_=True` (answers an
    `aisp.Job`); all take `progress=callback`. Ctrl-C cancels the call. Results are `aisp.Result` dicts.
    """

    def __init__(self, home=None, allow_exec=None):
        try:
            self._native = _native.Engine(home=None if home is None else os.fspath(home), allow_exec=allow_exec)
        except ValueError as e:
            raise _errors.BY_KIND["invalid_input"](
                str(e), "Fix the config file or the AISP_* variables, then create the engine again.", "invalid_input"
            ) from None
        for name, cls in DOMAIN_CLASSES.items():
            object.__setattr__(self, name, cls(self))

    def __repr__(self):
        return f"<aisp.Engine home={self.home!r}>"

    @property
    def home(self):
        """The folder of the store, cache and runs (`AISP_HOME`)."""
        return os.fspath(self._native.home)

    @property
    def allow_exec(self):
        return self._native.allow_exec

    def domains(self):
        """The domain names, in the registry's order (`engine.list_domains()` describes them)."""
        return list(DOMAIN_CLASSES)

    def _aisp_call(self, tool, args, progress):
        try:
            text = json.dumps(args, allow_nan=False)
        except (TypeError, ValueError) as e:
            raise _errors.BY_KIND["invalid_input"](
                f"the arguments of {tool} are not JSON: {e}",
                "Pass str, int, float (finite), bool, None, list, dict or os.PathLike values.",
                "invalid_input",
                tool,
            ) from None
        ok, answer = self._native.call(tool, text, progress)
        value = json.loads(answer)
        if not ok:
            raise _errors.from_envelope(value, tool)
        if args.get("async") is True and isinstance(value, dict) and "job_id" in value:
            return Job(self, value)
        return Result(value, tool)


# The short-named tools (`aisp_status`, `aisp_triage`, `aisp_ask`, `aisp_recommend`, `aisp_list_domains`...)
# are also methods of the engine, as the seed's top-level conveniences.
for _d in REGISTRY["domains"]:
    for _t in _d["tools"]:
        if _t["short"]:
            if hasattr(Engine, _t["method"]) or _t["method"] in DOMAIN_CLASSES:
                raise ImportError(f"aisp: short tool name {_t['method']!r} collides with an Engine attribute")
            setattr(Engine, _t["method"], _make_method(_t, "Engine"))


def tools():
    """Every operation: tool name, domain, method name, summary and flags."""
    return [
        {k: t[k] for k in ("tool", "domain", "method", "short", "summary", "long_running", "needs_gpu")}
        for d in REGISTRY["domains"]
        for t in d["tools"]
    ]
