"""`aisp.AispError` and one subclass per error kind of the engine (`ErrorKind` in Rust).

The classes are made from the registry's list, so a new kind gets its class without an edit here; names that
would hide a Python built-in (`TimeoutError`) or asyncio's `CancelledError` carry the prefix `Aisp`.
"""

from ._registry import REGISTRY


class AispError(Exception):
    """A failed aisp call: `kind` (machine-readable), `message` (what went wrong), `hint` (what to do next)."""

    def __init__(self, message, hint="", kind="internal", tool=None):
        super().__init__(message)
        self.message = message
        self.hint = hint
        self.kind = kind
        self.tool = tool

    def __str__(self):
        text = f"{self.message} ({self.kind})"
        return f"{text}\nhint: {self.hint}" if self.hint else text

    def __reduce__(self):
        return (type(self), (self.message, self.hint, self.kind, self.tool))


AispError.__module__ = "aisp"

#: Error kind (`not_found`) → exception class (`NotFoundError`).
BY_KIND = {}
for _entry in REGISTRY["errors"]:
    _cls = type(
        _entry["class"],
        (AispError,),
        {"__doc__": f"An aisp call failed with error kind `{_entry['kind']}`.", "__module__": "aisp"},
    )
    BY_KIND[_entry["kind"]] = _cls
    globals()[_entry["class"]] = _cls

CLASS_NAMES = [e["class"] for e in REGISTRY["errors"]]


def from_envelope(envelope, tool=None):
    """The exception for `{"error": {kind, message, hint}}`."""
    err = envelope.get("error", envelope) if isinstance(envelope, dict) else {}
    kind = err.get("kind", "internal")
    return BY_KIND.get(kind, AispError)(err.get("message", str(envelope)), err.get("hint", ""), kind, tool)
