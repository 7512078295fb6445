"""talaria's side of the loop and sessions benches; run by the interpreter that has talaria.

Usage: python talaria_driver.py <loop|sessions|task> '<json params>' (see driver_kit). Every
agent is what `Agent(...)` gives a user (its own session store in one shared home, default
config), with the bench's one `noop` tool instead of the built-in toolsets; turns are streamed.
`task` runs one of bench/tasks.py's coding tasks with the built-in tools instead.
"""

from __future__ import annotations

import time
from typing import Any

import driver_kit
from common import MODEL

from talaria import Agent, tool


@tool
def noop(n: int) -> str:
    """Do nothing and say ok.

    Args:
        n: the step number (ignored).
    """
    return "ok"


class TalariaSide(driver_kit.Side):
    async def turn(self, message: str) -> int:
        agent = Agent(
            model=MODEL,
            base_url=self.url,
            api_key="x",
            toolsets=[],
            tools=[noop],
            home=self.home,
            cwd=self.home,
            max_iterations=driver_kit.MAX_STEPS,
        )
        try:
            result = await agent.arun_conversation(message)
        finally:
            if self.keep:
                self.alive.append(agent)
            else:
                await agent.aclose()
        if result.get("error"):
            raise RuntimeError(result["error"])
        return int(result["api_calls"])


def cmd_task(params: dict[str, Any]) -> dict[str, Any]:
    """One coding task (bench/tasks.py) as a user runs one: the built-in tools, approvals off,
    in the task's working directory, on the local model server."""
    agent = Agent(
        model=params["model"],
        base_url=params["url"],
        home=params["home"],
        cwd=params["workspace"],
        max_iterations=int(params["max_steps"]),
        config={"approvals.mode": "off"},
    )
    started = time.monotonic()
    with agent:
        result = agent.run_conversation(params["prompt"])
    return {
        "seconds": time.monotonic() - started,
        "steps": int(result["api_calls"]),
        "answer": result.get("final_response") or "",
        "error": result.get("error"),
    }


if __name__ == "__main__":
    driver_kit.main({**driver_kit.coroutine_commands(TalariaSide), "task": cmd_task})
