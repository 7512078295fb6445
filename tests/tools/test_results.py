"""What the model reads back from a tool: serialised values and capped, spilled long output."""

from __future__ import annotations

import dataclasses
import re
from pathlib import Path

from talaria.tools.results import cap_result, serialise_result


def test_short_text_is_untouched(tmp_path: Path) -> None:
    text = "x" * 100
    assert cap_result(text, limit=100, spill_dir=tmp_path, call_id="c1", tool_name="t") == text
    assert list(tmp_path.iterdir()) == []


def test_long_text_keeps_head_and_tail_and_spills_the_full_text(tmp_path: Path) -> None:
    text = "".join(f"line {i}\n" for i in range(5000))
    spill = tmp_path / "spill"
    capped = cap_result(text, limit=2000, spill_dir=spill, call_id="call_9/x", tool_name="terminal")
    assert len(capped) < 2000
    assert capped.startswith("line 0\nline 1\n")
    assert capped.endswith("line 4999\n")
    match = re.search(
        r"\[\.\.\. ([\d,]+) of ([\d,]+) characters omitted here\. "
        r"The full output is saved in (\S+); read that file",
        capped,
    )
    assert match is not None
    omitted, total, path = int(match[1].replace(",", "")), int(match[2].replace(",", "")), match[3]
    assert total == len(text)
    head, tail = capped.split("\n[...")[0], capped.split("...]\n")[1]
    assert omitted == len(text) - len(head) - len(tail)
    assert Path(path).parent == spill
    assert Path(path).name == "terminal-call_9_x.txt"
    assert Path(path).read_text(encoding="utf-8") == text


def test_cut_lands_on_line_boundaries(tmp_path: Path) -> None:
    text = "".join(f"{i:04d} abcdefghij\n" for i in range(1000))
    capped = cap_result(text, limit=1000, call_id="c", tool_name="t")
    head, tail = capped.split("\n[...")[0], capped.split("...]\n")[1]
    assert all(re.fullmatch(r"\d{4} abcdefghij", line) for line in head.splitlines())
    assert all(re.fullmatch(r"\d{4} abcdefghij", line) for line in tail.splitlines())


def test_without_spill_dir_the_marker_still_counts(tmp_path: Path) -> None:
    capped = cap_result("a" * 10_000, limit=1000, call_id="c", tool_name="t")
    assert (
        capped == "a" * 400 + "\n[... 9,200 of 10,000 characters omitted here. ...]\n" + "a" * 400
    )


def test_spill_failure_is_reported_not_raised(tmp_path: Path) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("not a directory")
    capped = cap_result("b" * 5000, limit=100, spill_dir=blocker, call_id="c", tool_name="t")
    assert "The full output could not be saved" in capped
    assert capped.startswith("b" * 40)


@dataclasses.dataclass
class Thing:
    name: str


def test_serialise_result() -> None:
    assert serialise_result("plain") == "plain"
    assert serialise_result(None) == ""
    assert serialise_result({"é": [1, 2], "ok": True}) == '{"é":[1,2],"ok":true}'
    assert serialise_result([1, "a", None]) == '[1,"a",null]'
    assert serialise_result({"thing": Thing("x")}) == '{"thing":"Thing(name=\'x\')"}'
    assert serialise_result(b"\x00\x01\x02") == "[binary output (3 bytes) not shown]"
    assert serialise_result(42) == "42"
    assert serialise_result(Thing("y")) == "Thing(name='y')"
