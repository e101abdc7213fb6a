"""The operation registry, read once from the extension (domains, tools, signatures, docstrings, error classes)."""

import json

from . import _native

REGISTRY = json.loads(_native.registry_json())
