"""Defaults live in the schema only: no call site passes its own default for a setting.

A default restated at a call site drifts from the schema's (`agent.max_turns` was 90 in two
places); settings are read as attributes (`config.agent.max_iterations`) or with
`config.get(key)`, which both answer the schema's default. A class built from settings (its
`from_config`, which for a package that cannot import the configuration takes the typed
section, `config.retry`) declares no default of its own for them either.
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


RESTATING: dict[str, str] = {
    # Settings classes that still declare the schema's defaults as their own, each to be
    # removed by the step that fixes it; an entry that no longer occurs fails the test, so
    # this list only shrinks.
    "ServerSettings": "server.*",
    "BrowserSettings": "browser.*",
    "SandboxPolicy": "sandbox.*",
    "WebSettings": "web.*",
}


def _literal(node: ast.expr | None) -> bool:
    """A constant default that is a value (None means none: no value, no limit)."""
    if isinstance(node, ast.Call) and ast.unparse(node.func) == "field":
        node = next((k.value for k in node.keywords if k.arg == "default"), None)
    return isinstance(node, ast.Constant) and node.value is not None


def section_field_defaults(source: str, where: str) -> dict[str, list[str]]:
    """Per class built from settings (it has a `from_config`), its fields with a literal
    default."""
    found: dict[str, list[str]] = {}
    for cls in ast.walk(ast.parse(source, where)):
        if not isinstance(cls, ast.ClassDef):
            continue
        if not any(isinstance(m, ast.FunctionDef) and m.name == "from_config" for m in cls.body):
            continue
        fields = [
            f"{where}:{field.lineno}: {cls.name}.{ast.unparse(field.target)}"
            for field in cls.body
            if isinstance(field, ast.AnnAssign) and _literal(field.value)
        ]
        if fields:
            found[cls.name] = fields
    return found


def test_no_class_built_from_settings_restates_their_defaults() -> None:
    found: dict[str, list[str]] = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        found.update(section_field_defaults(path.read_text(encoding="utf-8"), str(path)))
    restating = [line for name, lines in found.items() if name not in RESTATING for line in lines]
    assert not restating, "\n".join(restating)
    fixed = sorted(set(RESTATING) - set(found))
    assert not fixed, f"no longer restating defaults, remove from RESTATING: {fixed}"


def test_a_field_default_of_a_class_built_from_settings_is_found() -> None:
    code = (
        "class RetryPolicy:\n"
        "    max_attempts: int = 3\n"
        "    base_delay: float = field(default=1.0)\n"
        "    cost: float | None = None\n"
        "    rng: Callable[[], float] = field(default=_random)\n"
        "    @classmethod\n"
        "    def from_config(cls, retry: RetrySettings) -> RetryPolicy: ...\n"
    )
    assert section_field_defaults(code, "m.py") == {
        "RetryPolicy": ["m.py:2: RetryPolicy.max_attempts", "m.py:3: RetryPolicy.base_delay"]
    }
    unrelated = "class Chunk:\n    size: int = 3\n    def split(self, n: int) -> None: ...\n"
    assert section_field_defaults(unrelated, "m.py") == {}
