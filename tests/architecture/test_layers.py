"""The import layers of talaria: lower layers never import higher ones, and no two packages
import each other, directly or round a longer cycle.

Every import counts: module level, inside functions (lazy imports) and under
``TYPE_CHECKING``, because each one is a dependency a reader and mypy follow. A unit is a
subpackage (``talaria.providers``) or a top-level module (``talaria.events``).
"""

from __future__ import annotations

import ast
import functools
from collections import defaultdict
from collections.abc import Iterator
from pathlib import Path

import talaria

PACKAGE = Path(talaria.__file__).parent

CORE, SUPPORT, SERVICES, ENGINE, INTEGRATIONS = range(5)
LAYER_NAMES = ("core", "support", "services", "engine", "integrations")

LAYERS: dict[str, int] = {
    # The contract: messages, model types, the turn result, the engine's protocols.
    "core": CORE,
    # Small utilities without knowledge of agents or models.
    "fastjson": SUPPORT,
    "offload": SUPPORT,
    "interrupt": SUPPORT,
    "user_cache": SUPPORT,
    "events": SUPPORT,
    "interaction": SUPPORT,
    "callbacks": SUPPORT,
    "background": SUPPORT,
    "claude_names": SUPPORT,  # Claude Code's names for talaria's tools
    # What the engine uses: each is usable alone, none knows the loop or the agent.
    "config_schema": SERVICES,
    "config_masking": SERVICES,
    "config": SERVICES,
    "config_write": SERVICES,
    "config_types": SERVICES,  # generated from the schema, for mypy only
    "messages": SERVICES,
    "prompt": SERVICES,
    "store": SERVICES,
    "plugins": SERVICES,
    "skills": SERVICES,  # Agent Skills folders: discovery and the index
    "hooks": SERVICES,  # hooks in Claude Code's settings shape, on the plugin hook bus
    "providers": SERVICES,
    "telemetry": SERVICES,
    "tools": SERVICES,
    "policy": SERVICES,
    "context": SERVICES,
    "agent_tools": SERVICES,
    "mcp": SERVICES,  # the MCP client: servers' tools for an agent
    "checkpoints": SERVICES,  # snapshots of the writable roots per turn; rewind
    # The loop, and the agent that assembles and runs it.
    "loop": ENGINE,
    "spec": ENGINE,
    "turn_stream": ENGINE,
    "assembly": ENGINE,
    "agent": ENGINE,
    # Front ends and ways to run agents, built on the engine.
    "cli": INTEGRATIONS,
    "acp": INTEGRATIONS,
    "server": INTEGRATIONS,
    "durable": INTEGRATIONS,
    "batch": INTEGRATIONS,
    "gateway": INTEGRATIONS,
    "testing": INTEGRATIONS,
    "talaria": INTEGRATIONS,  # the package's own __init__: the public facade
}

ALLOWED: dict[tuple[str, str], str] = {
    # Each entry is a known exception, to be removed by the step that fixes it; an entry that
    # no longer occurs fails the test, so this list only shrinks.
}


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(PACKAGE.parent).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


MODULE_GROUPS: dict[str, str] = {
    # Top-level modules that are one unit, as a package would be.
    "config_schema": "config",
    "config_write": "config",
    "config_masking": "config",
    "config_types": "config",
}


def _unit(module: str) -> str:
    parts = module.split(".")
    unit = parts[1] if len(parts) > 1 else "talaria"
    return MODULE_GROUPS.get(unit, unit)


def _is_module(dotted: str) -> bool:
    base = PACKAGE.parent.joinpath(*dotted.split("."))
    return base.with_suffix(".py").exists() or (base / "__init__.py").exists()


def _imported(node: ast.AST, module: str, is_package: bool) -> Iterator[str]:
    """The talaria modules one import statement names."""
    if isinstance(node, ast.Import):
        yield from (alias.name for alias in node.names)
    elif isinstance(node, ast.ImportFrom):
        if node.level:
            anchor = module.split(".")
            if not is_package:
                anchor.pop()
            anchor = anchor[: len(anchor) - node.level + 1]
            target = ".".join([*anchor, node.module] if node.module else anchor)
        else:
            target = node.module or ""
        if target == "talaria":
            # `from talaria import events` imports a module; `from talaria import
            # __version__` reads a constant of the package's __init__ and counts as nothing.
            for alias in node.names:
                if _is_module(f"talaria.{alias.name}"):
                    yield f"talaria.{alias.name}"
        else:
            yield target


@functools.cache
def import_edges() -> dict[tuple[str, str], list[str]]:
    """(importing unit, imported unit) -> where, for every import between two units."""
    edges: dict[tuple[str, str], list[str]] = defaultdict(list)
    for path in sorted(PACKAGE.rglob("*.py")):
        module = _module_name(path)
        tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
        for node in ast.walk(tree):
            for target in _imported(node, module, path.name == "__init__.py"):
                if target != "talaria" and not target.startswith("talaria."):
                    continue
                source, imported = _unit(module), _unit(target)
                if source != imported:
                    edges[(source, imported)].append(f"{module}:{node.lineno} -> {target}")
    return edges


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components with more than one unit (Tarjan's algorithm)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    found: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        for nxt in graph.get(node, ()):
            if nxt not in index:
                visit(nxt)
                low[node] = min(low[node], low[nxt])
            elif nxt in stack:
                low[node] = min(low[node], index[nxt])
        if low[node] == index[node]:
            component = []
            while True:
                member = stack.pop()
                component.append(member)
                if member == node:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return found


def test_every_unit_has_a_layer() -> None:
    units = {_unit(_module_name(path)) for path in PACKAGE.rglob("*.py")}
    missing = sorted(units - set(LAYERS))
    assert not missing, f"add these to LAYERS in {__file__}: {missing}"


def test_core_imports_nothing_else_of_talaria() -> None:
    edges = [wheres for (source, _), wheres in import_edges().items() if source == "core"]
    assert not edges, edges


def test_no_lower_layer_imports_a_higher_one() -> None:
    upward = []
    for (source, target), wheres in sorted(import_edges().items()):
        if LAYERS[target] > LAYERS[source] and (source, target) not in ALLOWED:
            upward.append(
                f"{source} ({LAYER_NAMES[LAYERS[source]]}) imports {target} "
                f"({LAYER_NAMES[LAYERS[target]]}): {wheres}"
            )
    assert not upward, "\n".join(upward)


def test_packages_form_no_cycle() -> None:
    graph: dict[str, set[str]] = defaultdict(set)
    for source, target in import_edges():
        if (source, target) not in ALLOWED:
            graph[source].add(target)
    assert _cycles(graph) == []


def test_the_allowlist_only_names_imports_that_still_exist() -> None:
    stale = sorted(set(ALLOWED) - set(import_edges()))
    assert not stale, f"fixed, remove from ALLOWED: {stale}"


def test_a_cycle_and_an_upward_import_are_found() -> None:
    """The checks themselves: a planted cycle is reported, a clean graph is not."""
    assert _cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    assert _cycles({"a": {"b"}, "b": {"c"}}) == []
    assert ("loop", "context") in import_edges()  # a lazy import inside a function counts
