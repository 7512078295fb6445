"""The front ends read a turn as the engine's one stream, `agent.events()` (or hear it with
`agent.subscribe`); none builds its agent with the constructor's callbacks.

The callbacks (`event_callback`, `stream_delta_callback`, ...) stay for library users as
adapters over the same events (`talaria.callbacks`); a front end fed by them is a second way to
bridge events, which is what the one stream replaced.
"""

from __future__ import annotations

import ast
from pathlib import Path

import talaria
from talaria.callbacks import CALLBACK_NAMES

PACKAGE = Path(talaria.__file__).parent


def callbacks_passed(source: str, where: str) -> list[str]:
    return [
        f"{where}:{node.lineno}: {keyword.arg}="
        for node in ast.walk(ast.parse(source, where))
        if isinstance(node, ast.Call)
        for keyword in node.keywords
        if keyword.arg in CALLBACK_NAMES
    ]


def test_no_front_end_is_fed_by_the_constructor_callbacks() -> None:
    found = []
    for path in sorted(PACKAGE.rglob("*.py")):
        found += callbacks_passed(path.read_text(encoding="utf-8"), str(path.relative_to(PACKAGE)))
    assert not found, "\n".join(found)


def test_a_callback_passed_to_an_agent_is_found() -> None:
    code = "agent = Agent(session_id=s, event_callback=self._on_event, **kwargs)\n"
    assert callbacks_passed(code, "m.py") == ["m.py:1: event_callback="]
    assert callbacks_passed("agent.subscribe(listen, answers=('approval',))\n", "m.py") == []
