"""Input schemas made acceptable to Chat Completions, Responses and Anthropic Messages alike.

MCP servers send any JSON Schema; the wire APIs want an object at the root with `properties`,
and reject root-level combinators, `$schema` and non-object roots. Nested parts are left as
the server wrote them (all three accept ordinary nested JSON Schema).
"""

from __future__ import annotations

import copy
from typing import Any

_ROOT_ONLY_REJECTED = ("$schema", "$id", "oneOf", "anyOf", "allOf", "not", "enum", "const")


def normalise_schema(schema: Any) -> dict[str, Any]:
    if not isinstance(schema, dict):
        return {"type": "object", "properties": {}}
    result = copy.deepcopy(schema)
    for key in _ROOT_ONLY_REJECTED:
        result.pop(key, None)
    result["type"] = "object"
    properties = result.get("properties")
    if not isinstance(properties, dict):
        properties = {}
    result["properties"] = properties
    required = result.get("required")
    if isinstance(required, list):
        kept = [name for name in required if isinstance(name, str) and name in properties]
        if kept:
            result["required"] = kept
        else:
            result.pop("required")
    elif required is not None:
        result.pop("required")
    return result
