"""Defaults live in the schema only: no call site passes its own default for a setting.

A default restated at a call site drifts from the schema's (`agent.max_turns` was 90 in two
places); settings are read as attributes (`config.agent.max_iterations`) or with
`config.get(key)`, which both answer the schema's default.
"""

from __future__ import annotations

import ast
from pathlib import Path

import talaria
from talaria.config_schema import ALIASES, SCHEMA, SECTIONS

PACKAGE = Path(talaria.__file__).parent
SETTINGS = set(SCHEMA) | set(ALIASES) | set(SECTIONS)


def restated_defaults(source: str, where: str) -> list[str]:
    found = []
    for node in ast.walk(ast.parse(source, where)):
        if not (isinstance(node, ast.Call) and len(node.args) > 1):
            continue
        if isinstance(node.func, ast.Attribute):
            receiver = ast.unparse(node.func.value).lower()
            reads_settings = node.func.attr == "get" and (
                "config" in receiver or "settings" in receiver
            )
        else:
            # a getter handed over as a function: `get`, `config_get`
            reads_settings = isinstance(node.func, ast.Name) and (
                node.func.id == "get" or node.func.id.endswith("_get")
            )
        key = node.args[0]
        if reads_settings and isinstance(key, ast.Constant) and key.value in SETTINGS:
            found.append(f"{where}:{node.lineno}: {ast.unparse(node)}")
    return found


def test_no_call_site_restates_a_default() -> None:
    found = []
    for path in sorted(PACKAGE.rglob("*.py")):
        found += restated_defaults(path.read_text(encoding="utf-8"), str(path))
    assert not found, "\n".join(found)


def test_a_restated_default_is_found() -> None:
    code = (
        'limit = self.config.get("agent.max_iterations", 90)\nother = config.get("agent.stream")\n'
    )
    assert restated_defaults(code, "m.py") == [
        "m.py:1: self.config.get('agent.max_iterations', 90)"
    ]
    assert restated_defaults('get("retry.max_delay", 30.0)\n', "m.py") != []
    assert restated_defaults('config_get("server.keep_alive_timeout", 5)\n', "m.py") != []
    assert restated_defaults('headers.get("host", "")\n', "m.py") == []
    assert restated_defaults('entry.get("model", "?")\n', "m.py") == []  # not the settings
