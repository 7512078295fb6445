"""Defaults live in the schema only: no call site passes its own default for a setting.

A default restated at a call site drifts from the schema's (`agent.max_turns` was 90 in two
places); settings are read as attributes (`config.agent.max_iterations`) or with
`config.get(key)`, which both answer the schema's default. A class built from settings (its
`from_config`, which for a package that cannot import the configuration takes the typed
section, `config.retry`) declares no default of its own for them either: its fields and
keyword parameters have none, or take the schema's (`config_schema.default_for`).
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


NOT_SETTINGS: dict[str, str] = {
    # Fields of classes built from settings that no schema key backs, so their default is
    # their own; an entry that no longer occurs fails the test, so this list only shrinks.
    "ServerSettings.max_run_events": "the events a run keeps for clients that reconnect",
    "ServerSettings.agent_name": "the model name the OpenAI-compatible endpoints answer with",
}


def _fixed(node: ast.expr, constants: set[str]) -> bool:
    """A value written out: constants and operators (`10 * 1024 * 1024`), or a module-level
    name bound to one (`LIMIT = 4 * 1024`, then `size: int = LIMIT`)."""
    if isinstance(node, ast.Constant):
        return True
    if isinstance(node, ast.Name):
        return node.id in constants
    if isinstance(node, ast.BinOp):
        return _fixed(node.left, constants) and _fixed(node.right, constants)
    if isinstance(node, ast.UnaryOp):
        return _fixed(node.operand, constants)
    if isinstance(node, ast.Tuple | ast.List):
        return all(_fixed(item, constants) for item in node.elts)
    return False


def _literal(node: ast.expr | None, constants: set[str]) -> bool:
    """A default written out that is a value (None or an empty tuple means none: no value,
    no limit, nothing listed)."""
    if isinstance(node, ast.Call) and ast.unparse(node.func) == "field":
        node = next((k.value for k in node.keywords if k.arg == "default"), None)
    if node is None or (isinstance(node, ast.Constant) and node.value is None):
        return False
    if isinstance(node, ast.Tuple | ast.List) and not node.elts:
        return False
    return _fixed(node, constants)


def _constants(module: ast.Module) -> set[str]:
    """The module-level names bound to a value written out."""
    names: set[str] = set()
    for statement in module.body:
        if isinstance(statement, ast.Assign) and len(statement.targets) == 1:
            target, value = statement.targets[0], statement.value
        elif isinstance(statement, ast.AnnAssign) and statement.value is not None:
            target, value = statement.target, statement.value
        else:
            continue
        if isinstance(target, ast.Name) and _fixed(value, names):
            names.add(target.id)
    return names


def section_field_defaults(source: str, where: str) -> list[str]:
    """Per class built from settings (it has a `from_config`), its fields and its methods'
    parameters with a default written out."""
    module = ast.parse(source, where)
    constants = _constants(module)
    found: list[str] = []
    for cls in ast.walk(module):
        if not isinstance(cls, ast.ClassDef):
            continue
        methods = [m for m in cls.body if isinstance(m, ast.FunctionDef)]
        if not any(method.name == "from_config" for method in methods):
            continue
        found += [
            f"{where}:{field.lineno}: {cls.name}.{ast.unparse(field.target)}"
            for field in cls.body
            if isinstance(field, ast.AnnAssign) and _literal(field.value, constants)
        ]
        for method in methods:
            arguments = method.args
            positional = [*arguments.posonlyargs, *arguments.args]
            defaulted = positional[len(positional) - len(arguments.defaults) :]
            with_defaults = [
                *zip(defaulted, arguments.defaults, strict=True),
                *zip(arguments.kwonlyargs, arguments.kw_defaults, strict=True),
            ]
            found += [
                f"{where}:{value.lineno}: {cls.name}.{method.name}({parameter.arg})"
                for parameter, value in with_defaults
                if _literal(value, constants)
            ]
    return found


def _exempt(line: str) -> bool:
    return line.partition(": ")[2] in NOT_SETTINGS


def test_no_class_built_from_settings_restates_their_defaults() -> None:
    found: list[str] = []
    for path in sorted(PACKAGE.rglob("*.py")):
        found += section_field_defaults(path.read_text(encoding="utf-8"), str(path))
    restating = [line for line in found if not _exempt(line)]
    assert not restating, "\n".join(restating)
    stale = sorted(set(NOT_SETTINGS) - {line.partition(": ")[2] for line in found})
    assert not stale, f"no longer a default of its own, remove from NOT_SETTINGS: {stale}"


def test_a_field_default_of_a_class_built_from_settings_is_found() -> None:
    code = (
        "LIMIT = 4 * 1024\n"
        "class RetryPolicy:\n"
        "    max_attempts: int = 3\n"
        "    base_delay: float = field(default=1.0)\n"
        "    cost: float | None = None\n"
        "    rng: Callable[[], float] = field(default=_random)\n"
        "    roots: tuple[str, ...] = ()\n"
        "    size: int = LIMIT\n"
        "    max_bytes: int = 10 * 1024\n"
        "    timeout: float = float(default_for('retry.max_delay'))\n"
        "    @classmethod\n"
        "    def from_config(cls, retry: RetrySettings) -> RetryPolicy: ...\n"
        "    def resolve(cls, cwd: Path, n: int = 2, *, mode: str = 'x', home: Path | None = None,"
        " path: str) -> None: ...\n"
    )
    assert section_field_defaults(code, "m.py") == [
        "m.py:3: RetryPolicy.max_attempts",
        "m.py:4: RetryPolicy.base_delay",
        "m.py:8: RetryPolicy.size",
        "m.py:9: RetryPolicy.max_bytes",
        "m.py:13: RetryPolicy.resolve(n)",
        "m.py:13: RetryPolicy.resolve(mode)",
    ]
    unrelated = "class Chunk:\n    size: int = 3\n    def split(self, n: int = 2) -> None: ...\n"
    assert section_field_defaults(unrelated, "m.py") == []
