"""`talaria demo`: one real turn on a machine with no model and no network.

A local scripted provider stands in for the model; everything else is what a real session
uses: the official SDK over HTTP, the loop, parallel tools on real files, the session store.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path
from typing import TYPE_CHECKING

from talaria.cli.main import EXIT_AGENT_FAILURE, EXIT_OK

if TYPE_CHECKING:
    from talaria.core import TurnResult
    from talaria.testing.script import StepSource
    from talaria.turn_stream import TurnEvents

ANSWER = (
    "The project has a README and a `src/app.py` whose `main()` returns a greeting. "
    "I added a test in `test_app.py`; nothing else needed changing."
)


def _script() -> list[StepSource]:
    from talaria.testing import Reply, calls

    return [
        calls(
            ("search_files", {"pattern": "def ", "path": "."}), ("read_file", {"path": "README.md"})
        ),
        calls(("write_file", {"path": "test_app.py", "content": _TEST})),
        calls(("terminal", {"command": "python3 test_app.py && echo tests passed"})),
        Reply(text=ANSWER, chunk_size=6, chunk_delay=0.01),
    ]


_TEST = "from src.app import main\n\nassert main() == 'hello'\n"


def _project(root: Path) -> None:
    (root / "src").mkdir()
    (root / "src" / "__init__.py").write_text("")
    (root / "src" / "app.py").write_text("def main():\n    return 'hello'\n")
    (root / "README.md").write_text("# demo\nA tiny project for the talaria demo.\n")


async def _show(turn: TurnEvents) -> TurnResult:
    """The turn's stream as it comes: each tool as it starts, the answer as it streams."""
    from talaria.events import TextDelta, ToolStarted

    async for event in turn:
        if isinstance(event, ToolStarted):
            print(f"  → {event.name}({_brief(event.arguments)})", flush=True)
        elif isinstance(event, TextDelta):
            print(event.text, end="", flush=True)
    assert turn.result is not None  # the iteration ended without an exception
    return turn.result


def run_demo(args: argparse.Namespace) -> int:
    from talaria.agent import Agent
    from talaria.background import run_sync
    from talaria.testing import ScriptedProvider

    with tempfile.TemporaryDirectory() as work, ScriptedProvider(_script()) as server:
        root = Path(work)
        _project(root)
        print(f"talaria demo: a scripted model at {server.openai_base_url}, project in {root}\n")
        with Agent(
            model="scripted-model",
            base_url=server.openai_base_url,
            api_key="demo",
            home=root / ".talaria",
            cwd=root,
            toolsets=["terminal", "file"],
        ) as agent:
            result = run_sync(_show(agent.events("Look around and add a test.")))
        print()
        written = (root / "test_app.py").exists()
        print(
            f"\n{result['api_calls']} model calls · {len(result['messages'])} messages stored · "
            f"test file written: {'yes' if written else 'no'} · "
            f"invalid requests: {len(server.invalid_requests)}"
        )
    ok = result["completed"] and written and not server.invalid_requests
    return EXIT_OK if ok else EXIT_AGENT_FAILURE


def _brief(arguments: dict[str, object]) -> str:
    text = ", ".join(f"{key}={value!r}" for key, value in arguments.items())
    return text if len(text) <= 60 else text[:57] + "..."


if __name__ == "__main__":
    sys.exit(run_demo(argparse.Namespace()))
