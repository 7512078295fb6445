"""read_file, write_file, patch and search_files on real files."""

from __future__ import annotations

import os
import threading
from pathlib import Path

import pytest

from talaria.tools.base import ToolContext, ToolError
from talaria.tools.builtin import builtin_tools, files
from talaria.tools.builtin.files import patch, read_file, search_files, write_file
from talaria.tools.write_boundary import write_path_of


def _ctx(cwd: Path) -> ToolContext:
    return ToolContext(
        task_id="task-1",
        session_id="session-1",
        cwd=cwd,
        home=cwd / ".talaria",
        interrupt=threading.Event(),
        emit=lambda event: None,
    )


@pytest.fixture
def ctx(tmp_path: Path) -> ToolContext:
    return _ctx(tmp_path)


def _numbered(count: int) -> str:
    return "".join(f"line {n}\n" for n in range(1, count + 1))


def test_read_file_numbers_lines_and_says_how_to_read_more(ctx: ToolContext) -> None:
    (ctx.cwd / "notes.txt").write_text(_numbered(10))
    result = read_file("notes.txt", ctx, offset=3, limit=2)
    assert result.splitlines() == [
        "3|line 3",
        "4|line 4",
        "(lines 3-4 of 10; call read_file with offset=5 to read more)",
    ]
    tail = read_file("notes.txt", ctx, offset=9)
    assert tail.splitlines()[-1] == "(lines 9-10 of 10; end of file)"


def test_read_file_defaults_to_500_lines(ctx: ToolContext) -> None:
    (ctx.cwd / "big.txt").write_text(_numbered(1200))
    lines = read_file("big.txt", ctx).splitlines()
    assert lines[0] == "1|line 1" and lines[499] == "500|line 500"
    assert lines[500] == "(lines 1-500 of 1200; call read_file with offset=501 to read more)"


def test_read_file_accepts_absolute_paths(
    ctx: ToolContext, tmp_path_factory: pytest.TempPathFactory
) -> None:
    elsewhere = tmp_path_factory.mktemp("elsewhere") / "a.txt"
    elsewhere.write_text("hello\n")
    assert read_file(str(elsewhere), ctx).splitlines()[0] == "1|hello"


def test_read_file_missing_suggests_similar_names(ctx: ToolContext) -> None:
    (ctx.cwd / "config.yaml").write_text("a: 1\n")
    with pytest.raises(ToolError, match=r"Did you mean: config\.yaml"):
        read_file("config.yml", ctx)


def test_read_file_refuses_binary_and_directories(ctx: ToolContext) -> None:
    (ctx.cwd / "archive.bin").write_bytes(b"\x1f\x8b\x08\x00\x00\x00\x00\x00")
    with pytest.raises(ToolError, match="binary file"):
        read_file("archive.bin", ctx)  # an image is shown instead: tests/world/test_vision_in.py
    (ctx.cwd / "folder").mkdir()
    with pytest.raises(ToolError, match="is a directory"):
        read_file("folder", ctx)


def test_read_file_offset_past_the_end_is_an_error(ctx: ToolContext) -> None:
    (ctx.cwd / "short.txt").write_text("one\ntwo\n")
    with pytest.raises(ToolError, match="past the end"):
        read_file("short.txt", ctx, offset=5)


def test_write_file_creates_parents_and_reports_size(ctx: ToolContext) -> None:
    result = write_file("deep/er/new.py", "print('hi')\nprint('bye')\n", ctx)
    target = ctx.cwd / "deep" / "er" / "new.py"
    assert target.read_text() == "print('hi')\nprint('bye')\n"
    assert result == f"Created {target}: 25 bytes, 2 lines."


def test_write_file_overwrites_keeping_permissions_and_leaves_no_temp_files(
    ctx: ToolContext,
) -> None:
    script = ctx.cwd / "run.sh"
    script.write_text("old\n")
    script.chmod(0o755)
    result = write_file("run.sh", "#!/bin/sh\necho new\n", ctx)
    assert result.startswith("Overwrote")
    assert script.read_text() == "#!/bin/sh\necho new\n"
    assert script.stat().st_mode & 0o777 == 0o755
    assert sorted(p.name for p in ctx.cwd.iterdir()) == ["run.sh"]


def test_patch_replaces_once_and_returns_a_diff(ctx: ToolContext) -> None:
    (ctx.cwd / "app.py").write_text("def f():\n    return 1\n")
    result = patch("app.py", "return 1", "return 2", ctx)
    assert (ctx.cwd / "app.py").read_text() == "def f():\n    return 2\n"
    assert "--- a/app.py" in result and "+++ b/app.py" in result
    assert "-    return 1" in result and "+    return 2" in result


def test_patch_missing_text_shows_the_closest_lines(ctx: ToolContext) -> None:
    (ctx.cwd / "app.py").write_text("import os\n\ndef greet(name):\n    print('Hello', name)\n")
    with pytest.raises(ToolError) as error:
        patch("app.py", "def greet(name):\n  print('Hello', name)", "x", ctx)
    message = str(error.value)
    assert "not found" in message
    assert "3|def greet(name):" in message and "4|    print('Hello', name)" in message


def test_patch_ambiguous_match_asks_for_more_context(ctx: ToolContext) -> None:
    (ctx.cwd / "a.txt").write_text("x = 1\ny = 2\nx = 1\n")
    with pytest.raises(ToolError, match=r"matches 2 places .*lines 1, 3.*replace_all"):
        patch("a.txt", "x = 1", "x = 3", ctx)
    assert (ctx.cwd / "a.txt").read_text() == "x = 1\ny = 2\nx = 1\n"
    patch("a.txt", "x = 1", "x = 3", ctx, replace_all=True)
    assert (ctx.cwd / "a.txt").read_text() == "x = 3\ny = 2\nx = 3\n"


def test_patch_keeps_windows_line_endings(ctx: ToolContext) -> None:
    target = ctx.cwd / "win.txt"
    target.write_bytes(b"one\r\ntwo\r\n")
    patch("win.txt", "two", "three", ctx)
    assert target.read_bytes() == b"one\r\nthree\r\n"


def test_parallel_patches_to_one_file_are_never_lost(ctx: ToolContext) -> None:
    target = ctx.cwd / "slots.txt"
    target.write_text("".join(f"slot {n};\n" for n in range(40)))
    barrier = threading.Barrier(40)

    def edit(n: int) -> None:
        barrier.wait()
        patch("slots.txt", f"slot {n};", f"done {n};", ctx)

    threads = [threading.Thread(target=edit, args=(n,)) for n in range(40)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert target.read_text() == "".join(f"done {n};\n" for n in range(40))


def test_write_path_of_resolves_like_the_tools(ctx: ToolContext) -> None:
    assert write_path_of("write_file", {"path": "a/../b.txt"}, ctx.cwd) == ctx.cwd / "b.txt"
    assert write_path_of("patch", {"path": "/etc/hosts"}, ctx.cwd) == Path("/etc/hosts")
    assert write_path_of("read_file", {"path": "b.txt"}, ctx.cwd) is None
    assert write_path_of("write_file", {}, ctx.cwd) is None


@pytest.fixture(params=["builtin", "ripgrep"])
def project(
    ctx: ToolContext, monkeypatch: pytest.MonkeyPatch, request: pytest.FixtureRequest
) -> Path:
    """A small tree, searched by each engine: the answers must not depend on which runs."""
    if request.param == "builtin":
        monkeypatch.setattr(files, "ripgrep", lambda: None)
    elif files.ripgrep() is None:
        if os.environ.get("CI") == "true":
            pytest.fail("ripgrep is missing: .ci/run installs it with apt")
        pytest.skip("ripgrep is not installed here (.ci/run installs it)")
    root = ctx.cwd
    (root / "src").mkdir()
    (root / "src" / "app.py").write_text("import os\n\ndef main():\n    return os.getcwd()\n")
    (root / "src" / "util.py").write_text("def helper():\n    return 'main'\n")
    (root / "README.md").write_text("Run main() to start.\n")
    (root / ".git").mkdir()
    (root / ".git" / "config").write_text("main = yes\n")
    (root / "node_modules").mkdir()
    (root / "node_modules" / "lib.js").write_text("function main() {}\n")
    (root / "logo.bin").write_bytes(b"\x00main\x00")
    return root


def test_search_content_reports_path_line_text(ctx: ToolContext, project: Path) -> None:
    result = search_files(r"def \w+\(", ctx)
    assert result.splitlines() == ["src/app.py:3:def main():", "src/util.py:1:def helper():"]


def test_search_content_skips_hidden_vendored_and_binary_files(
    ctx: ToolContext, project: Path
) -> None:
    result = search_files("main", ctx)
    assert result.splitlines() == [
        "README.md:1:Run main() to start.",
        "src/app.py:3:def main():",
        "src/util.py:2:    return 'main'",
    ]


def test_search_content_within_a_path_and_without_matches(ctx: ToolContext, project: Path) -> None:
    assert search_files("getcwd", ctx, path="src/app.py") == "src/app.py:4:    return os.getcwd()"
    assert search_files("nothing_here", ctx, path="src") == "No matches for 'nothing_here' in src."


def test_search_rejects_bad_regex_and_target(ctx: ToolContext, project: Path) -> None:
    with pytest.raises(ToolError, match="invalid regular expression"):
        search_files("(unclosed", ctx)
    with pytest.raises(ToolError, match="target must be"):
        search_files("x", ctx, target="names")


def test_search_results_are_capped(ctx: ToolContext, project: Path) -> None:
    (project / "many.txt").write_text("hit\n" * 500)
    lines = search_files("hit", ctx).splitlines()
    assert len(lines) == files.MAX_MATCHES + 1
    assert lines[-1].startswith("(more than 200 matches")


def test_search_files_by_name(ctx: ToolContext, project: Path) -> None:
    assert search_files("*.py", ctx, target="files").splitlines() == ["src/app.py", "src/util.py"]
    assert search_files("readme", ctx, target="files") == "README.md"
    assert search_files("src/*.py", ctx, target="files").splitlines() == [
        "src/app.py",
        "src/util.py",
    ]


def test_a_name_search_that_finds_nothing_points_at_the_content_search(
    ctx: ToolContext, project: Path
) -> None:
    """Small models ask for names when they mean the text inside (the bench's 1.5B model on
    "which file contains a TODO?"): the empty answer says what was searched and what to use."""
    empty = search_files("main", ctx, target="files")
    assert "No file names match 'main'" in empty and "target 'content'" in empty
    assert "src/app.py:3:def main():" in search_files("main", ctx, target="content")


def test_file_tools_are_registered_with_their_public_names() -> None:
    tools = {tool.name: tool for tool in builtin_tools() if tool.toolset == "file"}
    assert set(tools) == {"read_file", "write_file", "patch", "search_files"}
    assert set(tools["patch"].parameters["properties"]) == {
        "path",
        "old_string",
        "new_string",
        "replace_all",
    }
    assert set(tools["search_files"].parameters["properties"]) == {"pattern", "path", "target"}
