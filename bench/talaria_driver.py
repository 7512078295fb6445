"""talaria's side of the loop and sessions benches; run by the interpreter that has talaria.

Usage: python talaria_driver.py <loop|sessions> '<json params>' (see driver_kit). Every agent
is what `Agent(...)` gives a user (its own session store in one shared home, default config),
with the bench's one `noop` tool instead of the built-in toolsets; turns are streamed.
"""

from __future__ import annotations

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


if __name__ == "__main__":
    driver_kit.main(driver_kit.coroutine_commands(TalariaSide))
