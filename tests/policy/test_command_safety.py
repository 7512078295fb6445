"""The dangerous-command policy: a corpus of real commands and bypass attempts (the file
tools' write policy is in tests/security/test_write_boundary.py)."""

from __future__ import annotations

import os
import threading
from pathlib import Path

import pytest
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st

from talaria.policy.command_safety import assess_command

_CORPUS = yaml.safe_load((Path(__file__).parents[1] / "data" / "command_corpus.yaml").read_text())


@pytest.fixture(scope="module")
def workspace(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The corpus's working directory, holding the files its commands run or read."""
    root = tmp_path_factory.mktemp("corpus")
    for name, content in _CORPUS["files"].items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(content)
    return root


def _cases() -> list[tuple[str, str, str | None]]:
    cases: list[tuple[str, str, str | None]] = []
    for expect in ("safe", "unknown", "approve", "blocked"):
        for line in _CORPUS[expect].splitlines():
            if line.startswith("#"):
                continue
            command, _, pattern = line.partition(" => ")
            cases.append((command, expect, pattern or None))
    for item in _CORPUS["multiline"]:
        cases.append((item["command"], item["expect"], None))
    return cases


CASES = _cases()


def _outcome(command: str, cwd: Path | None = None, sandboxed: bool = True) -> str:
    home = cwd / ".talaria" if cwd else None
    verdict = assess_command(command, cwd=cwd, home=home, sandboxed=sandboxed)
    if verdict is None:
        return "safe"
    return "blocked" if verdict.blocked else "approve"


def _verdicts(command: str, cwd: Path) -> str:
    """The corpus's name for what the policy says inside and outside the sandbox."""
    inside, outside = _outcome(command, cwd), _outcome(command, cwd, sandboxed=False)
    return "unknown" if (inside, outside) == ("safe", "approve") else outside


def test_corpus_is_large_and_covers_every_outcome() -> None:
    outcomes = [expect for _, expect, _ in CASES]
    assert len(CASES) >= 200
    counts = {o: outcomes.count(o) >= 40 for o in ("safe", "unknown", "approve", "blocked")}
    assert counts == {"safe": True, "unknown": True, "approve": True, "blocked": True}


@pytest.mark.parametrize(("command", "expect", "pattern"), CASES, ids=[c[0][:60] for c in CASES])
def test_corpus(command: str, expect: str, pattern: str | None, workspace: Path) -> None:
    assert _verdicts(command, workspace) == expect
    if pattern is not None:
        verdict = assess_command(command, cwd=workspace, home=workspace / ".talaria")
        assert verdict is not None and verdict.pattern == pattern


def test_an_unknown_command_asks_only_when_no_sandbox_contains_it(workspace: Path) -> None:
    assert assess_command("make test", cwd=workspace) is None
    verdict = assess_command("make test", cwd=workspace, sandboxed=False)
    assert verdict is not None and verdict.pattern == "no sandbox"
    assert verdict.reason == "runs make with no sandbox to contain it (not known to be harmless)"
    assert not verdict.blocked and not verdict.needs_a_human


def test_a_computed_delete_needs_a_human_only_without_a_sandbox(workspace: Path) -> None:
    command = 'rm -rf "$(sort dirs.txt)"'
    inside = assess_command(command, cwd=workspace)
    outside = assess_command(command, cwd=workspace, sandboxed=False)
    assert inside is not None and not inside.needs_a_human
    assert outside is not None and outside.needs_a_human
    assert "known only at run time" in outside.reason


def test_pattern_is_a_stable_key_not_the_command() -> None:
    first = assess_command("git push --force origin main")
    second = assess_command("git push -f upstream feature")
    assert first is not None and second is not None
    assert first.pattern == second.pattern == "git push --force"
    assert first.command == "git push --force origin main"
    assert "history" in first.reason


def test_every_danger_in_a_line_is_part_of_its_pattern() -> None:
    """A session grant for one danger must not cover a second one chained after it."""
    verdict = assess_command("git push --force && git reset --hard HEAD~3")
    assert verdict is not None
    assert verdict.pattern == "git push --force + git reset --hard"


def test_a_blocked_part_blocks_the_whole_line() -> None:
    verdict = assess_command("git push -f; sudo rm -rf /")
    assert verdict is not None and verdict.blocked
    assert verdict.pattern == "rm -r /"


def test_nesting_beyond_the_cap_needs_approval() -> None:
    command = "eval " * 12 + "ls"
    verdict = assess_command(command)
    assert verdict is not None and not verdict.blocked
    assert verdict.pattern == "deep nesting"


def test_home_directory_is_protected_by_its_absolute_path(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv("HOME", str(tmp_path))
    verdict = assess_command(f"rm -rf {tmp_path}")
    assert verdict is not None and verdict.blocked
    below = assess_command(f"rm -rf {tmp_path}/project/build")
    assert below is not None and not below.blocked


_SHELLISH = st.text(
    alphabet=st.sampled_from(list("rmf -/~$'\"\\`(){}[]|&;<>*?=:\n\tabcIFSHOME.ce0123")),
    max_size=80,
)


@settings(max_examples=400, deadline=None)
@given(_SHELLISH)
def test_any_text_gets_a_verdict_never_an_exception(command: str) -> None:
    verdict = assess_command(command)
    assert verdict is None or (verdict.pattern and verdict.reason)


@pytest.mark.parametrize(
    "command", ["sh queue", "cat queue | sh", "psql < queue", "make -f - < queue"]
)
def test_a_fifo_is_never_opened_so_the_check_cannot_stall(tmp_path: Path, command: str) -> None:
    """Opening a FIFO for reading blocks until a writer comes: the policy must not."""
    os.mkfifo(tmp_path / "queue")
    verdicts: list[object] = []
    checker = threading.Thread(target=lambda: verdicts.append(assess_command(command, tmp_path)))
    checker.start()
    checker.join(60)
    if checker.is_alive():
        with open(tmp_path / "queue", "w"):
            pass  # let the stalled check finish before failing
        checker.join()
        pytest.fail(f"{command!r} opened the FIFO and waited for a writer")
    assert verdicts != [None]
