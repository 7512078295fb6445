"""A tool: a typed, documented Python function the model may call.

python examples/tool.py
"""

from __future__ import annotations

from endpoint import endpoint

from talaria import Agent, tool


@tool
def add(a: int, b: int) -> int:
    """Add two integers.

    Args:
        a: the first number
        b: the second number
    """
    return a + b


with Agent(**endpoint(), tools=[add]) as agent:
    print(agent.chat("What is 2 + 40? Use the add tool."))
