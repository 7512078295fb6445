"""What an editor waits for with `talaria acp`: process start to `initialize`, `session/new`,
the first prompt (SDKs load) and later prompts, against the scripted provider (zero delay),
then the session picker: `session/list` over a home holding 1,000 earlier sessions, and
`session/close`.

    python bench/acp_latency.py --reps 5
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import acp

from talaria.store.sqlite import SQLiteSessionStore
from talaria.testing import ScriptedProvider, call, text

HERE = Path(__file__).resolve().parent
EARLIER = 1000


class _Quiet:
    async def session_update(self, session_id: str, update: Any, **_: Any) -> None:
        return None


async def _once(server: ScriptedProvider, home: Path) -> dict[str, float]:
    env = {k: v for k, v in os.environ.items() if not k.endswith("_API_KEY")}
    env.update(TALARIA_HOME=str(home), PYTHONPATH=str(HERE.parent / "src"))
    command = [sys.executable, "-m", "talaria.cli.main", "acp", "--model", "scripted-model"]
    command += ["--base-url", server.openai_base_url, "--api-key", "test-key"]
    figures: dict[str, float] = {}
    started = time.perf_counter()
    async with acp.spawn_agent_process(_Quiet(), *command, env=env, cwd=home) as (conn, _):
        await conn.initialize(protocol_version=acp.PROTOCOL_VERSION)
        figures["start to initialize"] = time.perf_counter() - started
        mark = time.perf_counter()
        session = await conn.new_session(cwd=str(home))
        figures["session/new"] = time.perf_counter() - mark
        for label in ("first prompt (text)", "next prompt (text)"):
            server.add(text("hello"))
            mark = time.perf_counter()
            await conn.prompt(session_id=session.session_id, prompt=[acp.text_block("hi")])
            figures[label] = time.perf_counter() - mark
        server.add(*[call("read_file", {"path": "config.yaml"}) for _ in range(3)], text("ok"))
        mark = time.perf_counter()
        await conn.prompt(session_id=session.session_id, prompt=[acp.text_block("read")])
        figures["prompt with 3 tool steps"] = time.perf_counter() - mark
        mark = time.perf_counter()
        await conn.list_sessions()
        figures[f"session/list (first page, {EARLIER + 1} sessions)"] = time.perf_counter() - mark
        mark = time.perf_counter()
        await conn.list_sessions(cwd=str(home))
        figures["session/list with a cwd filter"] = time.perf_counter() - mark
        mark = time.perf_counter()
        await conn.close_session(session_id=session.session_id)
        figures["session/close"] = time.perf_counter() - mark
    return figures


def _earlier_sessions(home: Path) -> None:
    with SQLiteSessionStore(home / "state.db") as store:
        for n in range(EARLIER):
            store.create_session(f"20260101_{n:06d}_bench", cwd=str(home), title=f"task {n}")


async def main(reps: int) -> None:
    runs = []
    with ScriptedProvider() as server:
        for _ in range(reps):
            with tempfile.TemporaryDirectory() as home:
                (Path(home) / "config.yaml").write_text("context:\n  engine: none\n")
                _earlier_sessions(Path(home))
                runs.append(await _once(server, Path(home)))
    print(f"load average {os.getloadavg()[0]:.1f}, {reps} runs (median)")
    for label in runs[0]:
        value = statistics.median(run[label] for run in runs)
        print(f"| {label} | {value * 1000:.0f} ms |")


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--reps", type=int, default=3)
    asyncio.run(main(parser.parse_args().reps))
