"""Public test doubles: a scripted in-process model and a scripted HTTP provider.

Use them to test your own agents without a network: the HTTP provider speaks the real wire
formats (OpenAI Chat Completions and Responses, Anthropic Messages) and rejects histories the
real providers would reject, so a test that passes here sends valid requests in production.
"""

from talaria.testing.script import (
    Drop,
    Endless,
    Fail,
    Malformed,
    Reply,
    Script,
    ScriptedCall,
    ScriptExhausted,
    Stall,
    call,
    calls,
    text,
)
from talaria.testing.scripted_model import ScriptedModel
from talaria.testing.server import RecordedRequest, ScriptedProvider

__all__ = [
    "Drop",
    "Endless",
    "Fail",
    "Malformed",
    "RecordedRequest",
    "Reply",
    "Script",
    "ScriptExhausted",
    "ScriptedCall",
    "ScriptedModel",
    "ScriptedProvider",
    "Stall",
    "call",
    "calls",
    "text",
]
