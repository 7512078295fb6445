"""Which model the examples talk to.

By default a real one: `TALARIA_MODEL` (else gpt-4.1) with the key from the environment
(`OPENAI_API_KEY`, or whatever the provider needs). With `TALARIA_EXAMPLE_BASE_URL` set, the
examples talk to that OpenAI-compatible endpoint instead, as `scripted-model`: CI points it at
talaria's scripted provider (tests/examples/test_examples.py), and you can point it at a local
server (`http://127.0.0.1:11434/v1` for Ollama).
"""

from __future__ import annotations

import os


def endpoint() -> dict[str, str]:
    """The `Agent(...)` arguments that choose the model."""
    base_url = os.environ.get("TALARIA_EXAMPLE_BASE_URL")
    if base_url:
        return {"model": "scripted-model", "base_url": base_url, "api_key": "example"}
    return {"model": os.environ.get("TALARIA_MODEL", "gpt-4.1")}
