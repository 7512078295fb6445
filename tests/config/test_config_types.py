"""The typed view of the settings: src/talaria/config_types.py is what scripts/config_types.py
writes from the schema today, `Config` names every top-level section and setting with those
types, and the values read at run time are of the types mypy is told."""

from __future__ import annotations

import ast
import importlib.util
import sys
from pathlib import Path
from types import ModuleType

import talaria.config
from talaria.config import Config
from talaria.config_schema import SCHEMA

ROOT = Path(__file__).resolve().parents[2]


def _generator() -> ModuleType:
    spec = importlib.util.spec_from_file_location(
        "config_types_script", ROOT / "scripts" / "config_types.py"
    )
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


def test_the_generated_types_are_up_to_date_with_the_schema() -> None:
    written = (ROOT / "src" / "talaria" / "config_types.py").read_text(encoding="utf-8")
    assert _generator().render(SCHEMA) == written, "run: python scripts/config_types.py"


def test_a_new_key_changes_the_generated_types() -> None:
    schema = {**SCHEMA, "agent.new_limit": SCHEMA["agent.max_iterations"]}
    text = _generator().render(schema)
    assert "def new_limit(self) -> int:" in text
    assert text != _generator().render(SCHEMA)


def _declared_on_config() -> dict[str, str]:
    """The annotations in `Config`'s `if TYPE_CHECKING:` block, without `ClassVar[...]`."""
    tree = ast.parse(Path(talaria.config.__file__).read_text(encoding="utf-8"))
    config = next(n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == "Config")
    block = next(n for n in config.body if isinstance(n, ast.If))
    declared = {}
    for node in block.body:
        if isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
            annotation = node.annotation
            assert isinstance(annotation, ast.Subscript)
            declared[node.target.id] = ast.unparse(annotation.slice)
    return declared


def test_config_declares_every_top_level_section_and_setting_with_its_type() -> None:
    assert _declared_on_config() == _generator().top_level_types(SCHEMA), (
        "Config's TYPE_CHECKING block must match scripts/config_types.py's top_level_types(SCHEMA)"
    )


def test_typed_reads_return_the_types_mypy_is_told(tmp_path: Path) -> None:
    (tmp_path / "config.yaml").write_text(
        "agent: {max_iterations: 12}\n"
        "compression: {threshold: 0.7}\n"
        "sandbox: {writable_roots: [/tmp/scratch]}\n"
        "model: {options: {timeout: 5}}\n"
        "approvals: {mode: off}\n"
    )
    config = Config.load(tmp_path, env={})
    defaults = Config.load(tmp_path / "none", env={})
    for loaded in (config, defaults):
        assert isinstance(loaded.agent.max_iterations, int)
        assert isinstance(loaded.compression.threshold, float)
        assert isinstance(loaded.agent.tool_timeout, int | float)
        assert isinstance(loaded.agent.stream, bool)
        assert isinstance(loaded.server.host, str)
        assert isinstance(loaded.sandbox.writable_roots, list)
        assert isinstance(loaded.command_allowlist, list)
        assert isinstance(loaded.model.options, dict)
        assert isinstance(loaded.web.search.searxng_url, str | type(None))
        assert loaded.approvals.mode in ("manual", "off")
        assert loaded.agent.max_cost_usd is None
    assert config.agent.max_iterations == 12
    assert config.sandbox.writable_roots == ["/tmp/scratch"]
    assert config.approvals.mode == "off"
