"""Plugins installed as distributions (`talaria.plugins` entry points) are found without
`importlib.metadata`, with the same result: checked against it for every group of this
environment, and for installs it has rules about (the same plugin twice on the path: the first
one wins; an editable install whose code lives outside site-packages; names spelt
differently), through a real Agent whose plugins' tools reach the scripted model.
"""

from __future__ import annotations

import json
import sys
import textwrap
from importlib import metadata
from pathlib import Path

from helpers import run_python
from talaria.plugins.entry_points import entry_points
from talaria.testing import ScriptedProvider, text


def test_every_group_of_this_environment_reads_as_importlib_metadata_reads_it() -> None:
    groups = metadata.entry_points().groups
    assert "console_scripts" in groups  # the environment has installed distributions
    for group in sorted(groups):
        expected = [(e.name, e.value, e.group) for e in metadata.entry_points(group=group)]
        assert [(e.name, e.value, e.group) for e in entry_points(group)] == expected, group


def _distribution(site: Path, folder: str, entries: str) -> None:
    info = site / folder
    info.mkdir(parents=True)
    name, version = folder.rsplit(".", 1)[0].split("-", 1)
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n")
    (info / "entry_points.txt").write_text(textwrap.dedent(entries))


def _plugin_module(folder: Path, module: str, tool_name: str) -> None:
    path = folder / (module.replace(".", "/") + ".py")
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(
        textwrap.dedent(f'''
        from talaria import tool

        @tool
        def {tool_name}() -> str:
            """A tool from an installed plugin."""
            return "ok"

        def register(bus):
            bus.register_tool({tool_name})
        ''')
    )


def _installs(tmp_path: Path) -> tuple[Path, Path]:
    """Two site folders: the first holds `Demo.Plugin` 2.0; the second holds `demo_plugin` 1.0
    (the same distribution, shadowed) and an editable install whose code is in `src/`."""
    first, second, src = tmp_path / "first", tmp_path / "second", tmp_path / "src"
    _distribution(first, "Demo.Plugin-2.0.dist-info", "[talaria.plugins]\ndemo = demo_new\n")
    _plugin_module(first, "demo_new", "tool_from_the_first_install")
    _distribution(
        second,
        "demo_plugin-1.0.dist-info",
        "[talaria.plugins]\ndemo = demo_old:register\n",
    )
    _plugin_module(second, "demo_old", "tool_from_the_shadowed_install")
    _distribution(
        second,
        "edit_plug-0.1.dist-info",
        """
        [console_scripts]
        edit = edit_plug.cli:main

        # a comment, then the group
        [talaria.plugins]
        edit  =  edit_plug.hooks : register
        """,
    )
    (second / "__editable__.edit_plug-0.1.pth").write_text(f"{src}\n")
    _plugin_module(src, "edit_plug.hooks", "tool_from_the_editable_install")
    return first, second


AGENT = """
import json, site, sys
from importlib import metadata
for folder in sys.argv[1:3]:
    site.addsitedir(folder)
from talaria import Agent
from talaria.plugins.entry_points import entry_points

ours = [[e.name, e.value] for e in entry_points("talaria.plugins")]
theirs = [[e.name, e.value] for e in metadata.entry_points(group="talaria.plugins")]
agent = Agent(model="scripted-model", base_url=sys.argv[3], api_key="k", home=sys.argv[4],
              cwd=sys.argv[4], toolsets=[])
assert agent.chat("hello") == "hi"
print(json.dumps({"ours": ours, "theirs": theirs}))
"""


def test_the_first_install_on_the_path_wins_and_an_editable_install_loads(
    tmp_path: Path,
) -> None:
    first, second = _installs(tmp_path)
    home = tmp_path / "home"
    _plugin_module(home / "plugins", "from_home", "tool_from_the_home_folder")
    with ScriptedProvider([text("hi")]) as server:
        argv = (str(first), str(second), server.openai_base_url, str(home))
        printed = run_python(AGENT, *argv, cwd=home, home=home)
        seen = json.loads(printed.strip().splitlines()[-1])
        tools = {t["function"]["name"] for t in server.requests[-1].body.get("tools", [])}
    assert seen["ours"] == seen["theirs"]
    assert ["demo", "demo_new"] in seen["ours"]
    assert ["edit", "edit_plug.hooks : register"] in seen["ours"]
    assert "tool_from_the_first_install" in tools
    assert "tool_from_the_editable_install" in tools
    assert "tool_from_the_home_folder" in tools
    assert "tool_from_the_shadowed_install" not in tools


def test_a_zip_archive_on_the_path_is_read_through_importlib_metadata(tmp_path: Path) -> None:
    import zipfile

    archive = tmp_path / "plugins.zip"
    with zipfile.ZipFile(archive, "w") as bundle:
        bundle.writestr("zipped-1.0.dist-info/METADATA", "Name: zipped\nVersion: 1.0\n")
        bundle.writestr(
            "zipped-1.0.dist-info/entry_points.txt", "[talaria.plugins]\nzipped = zipped_mod\n"
        )
    sys.path.insert(0, str(archive))
    try:
        found = [(e.name, e.value) for e in entry_points("talaria.plugins")]
    finally:
        sys.path.remove(str(archive))
    assert ("zipped", "zipped_mod") in found
