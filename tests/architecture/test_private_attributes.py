"""No module reads another module's private attributes.

A name with one leading underscore is private to the module that defines it. Reading
``other._name`` couples a module to another's internals, which is how every new option used to
be threaded through three places; the parts talk through public attributes and `AgentSpec`
instead. Reads on ``self`` and ``cls`` are a class's own business, and a module may read the
private attributes it defines itself (on any object: a class's helpers, its tests of itself).
"""

from __future__ import annotations

import ast
from pathlib import Path

import talaria

PACKAGE = Path(talaria.__file__).parent

STDLIB_IDIOMS: dict[tuple[str, str], str] = {
    ("os", "_exit"): "the documented way to end a process without running clean-up handlers "
    "(after a fork, or when a signal must end it now)",
    ("zlib", "_Decompress"): "the type of zlib.decompressobj(), which zlib exports under no "
    "other name",
}


def _defined_privately(tree: ast.AST) -> set[str]:
    """Private names this module defines: functions, classes, assigned attributes and names."""
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.add(node.name)
        elif isinstance(node, ast.Attribute) and isinstance(node.ctx, ast.Store):
            names.add(node.attr)
        elif isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
            names.add(node.id)
        elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
            names.add(node.target.id)
    return {name for name in names if _is_private(name)}


def _is_private(name: str) -> bool:
    return name.startswith("_") and not name.startswith("__")


def foreign_private_reads(source: str, where: str) -> list[str]:
    tree = ast.parse(source, where)
    own = _defined_privately(tree)
    found = []
    for node in ast.walk(tree):
        if not (isinstance(node, ast.Attribute) and _is_private(node.attr)):
            continue
        owner = node.value.id if isinstance(node.value, ast.Name) else None
        if owner in ("self", "cls") or node.attr in own:
            continue
        if owner is not None and (owner, node.attr) in STDLIB_IDIOMS:
            continue
        found.append(f"{where}:{node.lineno}: {ast.unparse(node)}")
    return found


def test_no_module_reads_another_modules_private_attributes() -> None:
    found = []
    for path in sorted(PACKAGE.rglob("*.py")):
        found += foreign_private_reads(path.read_text(encoding="utf-8"), str(path))
    assert not found, "\n".join(found)


def test_a_foreign_private_read_is_found() -> None:
    """The check itself: reading another object's private attribute is reported; the same
    read of a name this module defines, or on self, is not."""
    foreign = "def f(agent):\n    return agent._user_tools\n"
    own = "class A:\n    def __init__(self):\n        self._x = 1\n\ndef f(a):\n    return a._x\n"
    assert foreign_private_reads(foreign, "m.py") == ["m.py:2: agent._user_tools"]
    assert foreign_private_reads(own, "m.py") == []
    assert foreign_private_reads("import os\nos._exit(1)\n", "m.py") == []
