"""Structured results: a tool that returns structured data (a TypedDict: the model reads it as
compact JSON), and the whole result of a turn instead of just its answer.

    python examples/structured_results.py
"""

from __future__ import annotations

from typing import TypedDict

from endpoint import endpoint

from talaria import Agent, tool


class Forecast(TypedDict):
    city: str
    sky: str
    celsius: int


@tool
def forecast(city: str) -> Forecast:
    """Tomorrow's weather for a city.

    Args:
        city: the city's name
    """
    return {"city": city, "sky": "sunny", "celsius": 21}


with Agent(**endpoint(), tools=[forecast]) as agent:
    result = agent.run_conversation(user_message="Will it be sunny in Paris tomorrow?")

print("answer:", result["final_response"])
print("ended because:", result["turn_exit_reason"])
print("model calls:", result["api_calls"], "tokens:", result["usage"]["total_tokens"])
for message in result["messages"]:
    if message["role"] == "tool":
        print("the model read:", message["content"])
