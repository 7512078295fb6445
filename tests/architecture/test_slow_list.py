"""tests/slow.txt names test functions that exist.

tests/conftest.py marks the tests named there `slow`; a name left behind by a renamed or moved
test marks nothing, and the test runs in the fast part under its new name until
scripts/slow_tests.py is run again. This names the stale entries."""

from __future__ import annotations

import re
from pathlib import Path

TESTS = Path(__file__).resolve().parents[1]
SHARED = TESTS.parent / "src" / "talaria" / "testing"
"""Where a test class's inherited tests live (the store conformance suite)."""


def _defines(source: str, keyword: str, name: str) -> bool:
    return re.search(rf"^\s*(?:async\s+)?{keyword} {re.escape(name)}\b", source, re.M) is not None


def test_every_name_in_the_slow_list_is_a_test_that_exists() -> None:
    listing = (TESTS / "slow.txt").read_text(encoding="utf-8").splitlines()
    names = [line.strip() for line in listing if line.strip() and not line.startswith("#")]
    shared = "\n".join(path.read_text(encoding="utf-8") for path in SHARED.glob("*.py"))
    stale = []
    for name in names:
        file, *classes, function = name.split("::")
        path = TESTS.parent / file
        source = path.read_text(encoding="utf-8") if path.is_file() else ""
        if classes:  # a method, perhaps inherited: the class here, the method here or shared
            found = _defines(source, "class", classes[0]) and (
                _defines(source, "def", function) or _defines(shared, "def", function)
            )
        else:
            found = _defines(source, "def", function)
        if not found:
            stale.append(name)
    assert names and not stale, f"run scripts/slow_tests.py; gone: {stale}"
