"""aisp in process: the GPU performance engineer's toolkit as Python calls.

    import aisp
    engine = aisp.Engine()
    engine.gpu.info()
    engine.profile.summary(path="run.sqlite", limit=10).to_pandas()
    engine.status(); engine.triage(); engine.ask(question="why is my training slow?", path="run.sqlite")

The methods are generated from aisp's operation registry (`help(engine.profile.summary)`), and every call goes
through the same dispatcher as the `aisp` CLI, MCP and HTTP servers.
"""

from ._registry import REGISTRY as _REGISTRY
from ._errors import AispError, from_envelope as _from_envelope  # noqa: F401
from . import _errors
from ._results import Job, Result, to_pandas
from ._engine import Engine, tools

__version__ = _REGISTRY["version"]

for _name in _errors.CLASS_NAMES:
    globals()[_name] = getattr(_errors, _name)

__all__ = ["Engine", "AispError", "Result", "Job", "to_pandas", "tools", *_errors.CLASS_NAMES]
