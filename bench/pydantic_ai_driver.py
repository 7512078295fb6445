"""pydantic-ai's side of the loop and sessions benches; runs inside bench/.venv-pydantic-ai.

Usage: python pydantic_ai_driver.py <loop|sessions|task> '<json params>' (see driver_kit). Each
turn builds a fresh `Agent` on `OpenAIChatModel` (Chat Completions, its own OpenAI client, as
the docs show for a custom base URL) with the `noop` tool, and runs it with an event-stream
handler, so every model call streams. It imports nothing from talaria (different venv).
"""

from __future__ import annotations

import os
import subprocess
import time
from pathlib import Path
from typing import Any

import driver_kit
from common import MODEL


def _agent(url: str) -> Any:
    from pydantic_ai import Agent
    from pydantic_ai.models.openai import OpenAIChatModel
    from pydantic_ai.providers.openai import OpenAIProvider

    model = OpenAIChatModel(MODEL, provider=OpenAIProvider(base_url=url, api_key="x"))
    agent = Agent(model, instructions="You are a helpful agent.")

    @agent.tool_plain
    def noop(n: int) -> str:
        """Do nothing and say ok."""
        return "ok"

    return agent


async def _drain(ctx: Any, events: Any) -> None:
    async for _ in events:
        pass


class PydanticAISide(driver_kit.Side):
    async def turn(self, message: str) -> int:
        from pydantic_ai.messages import ModelResponse
        from pydantic_ai.usage import UsageLimits

        agent = _agent(self.url)
        limits = UsageLimits(request_limit=driver_kit.MAX_STEPS)
        result = await agent.run(message, event_stream_handler=_drain, usage_limits=limits)
        self.kept(agent)
        if result.output != "done":
            raise RuntimeError(f"final answer {result.output!r}")
        return sum(isinstance(m, ModelResponse) for m in result.all_messages())


def _coder(url: str, model_name: str, workspace: Path) -> Any:
    """pydantic-ai has no coding tools of its own: the four a user would write first, the
    plain way its docs show (`@agent.tool_plain`), working in the task's directory."""
    from pydantic_ai import Agent
    from pydantic_ai.models.openai import OpenAIChatModel
    from pydantic_ai.providers.openai import OpenAIProvider

    model = OpenAIChatModel(model_name, provider=OpenAIProvider(base_url=url, api_key="x"))
    agent = Agent(model, instructions=f"You are a coding agent working in {workspace}.")

    @agent.tool_plain
    def read_file(path: str) -> str:
        """Read a text file."""
        return (workspace / path).read_text()

    @agent.tool_plain
    def write_file(path: str, content: str) -> str:
        """Write a text file, replacing what it held."""
        (workspace / path).parent.mkdir(parents=True, exist_ok=True)
        (workspace / path).write_text(content)
        return f"wrote {len(content)} characters to {path}"

    @agent.tool_plain
    def terminal(command: str) -> str:
        """Run a shell command in the working directory; returns its output and exit code."""
        done = subprocess.run(
            command, shell=True, cwd=workspace, capture_output=True, text=True, timeout=60
        )
        return f"{done.stdout}{done.stderr}[exit code {done.returncode}]"

    @agent.tool_plain
    def search_files(pattern: str, path: str = ".") -> str:
        """Search file contents for a regular expression (grep -rn)."""
        done = subprocess.run(
            ["grep", "-rn", "-E", pattern, path], cwd=workspace, capture_output=True, text=True
        )
        return done.stdout or "no matches"

    return agent


def cmd_task(params: dict[str, Any]) -> dict[str, Any]:
    """One coding task (bench/tasks.py) in the task's working directory."""
    from pydantic_ai.messages import ModelResponse
    from pydantic_ai.usage import UsageLimits

    workspace = Path(params["workspace"])
    os.chdir(workspace)
    agent = _coder(params["url"], params["model"], workspace)
    limits = UsageLimits(request_limit=int(params["max_steps"]))
    started = time.monotonic()
    try:
        result = agent.run_sync(params["prompt"], usage_limits=limits)
    except Exception as exc:  # a failed run is the task's outcome, not the driver's crash
        return {"seconds": time.monotonic() - started, "steps": None, "error": repr(exc)[:200]}
    return {
        "seconds": time.monotonic() - started,
        "steps": sum(isinstance(m, ModelResponse) for m in result.all_messages()),
        "answer": str(result.output),
        "error": None,
    }


if __name__ == "__main__":
    driver_kit.main({**driver_kit.coroutine_commands(PydanticAISide), "task": cmd_task})
