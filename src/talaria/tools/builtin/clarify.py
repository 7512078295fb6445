"""The `clarify` tool: ask the user a question mid-task and wait for the answer.

It is interactive, so the executor runs it alone, never beside other calls. Whether it is
offered at all is the agent's decision: when no front end answers clarify requests the agent
leaves the "clarify" toolset out. If it is called anyway (a model replaying an old schema), the call
fails with a message telling the model to carry on with its own judgement.
"""

from __future__ import annotations

from talaria.tools.base import Tool, ToolContext, ToolError

NO_ONE_TO_ASK = "No one can answer questions in this session; proceed with your best judgement."
MAX_CHOICES = 10


async def clarify(question: str, ctx: ToolContext, choices: list[str] | None = None) -> str:
    """Ask the user `question` (optionally offering `choices`) and return the answer."""
    if ctx.clarify is None:
        raise ToolError(NO_ONE_TO_ASK)
    if not question.strip():
        raise ToolError("question is empty; say what you need to know")
    options = [c.strip() for c in choices or [] if c.strip()][:MAX_CHOICES] or None
    answer = await ctx.clarify(question.strip(), options)
    if answer is None:
        return "The question timed out unanswered; proceed with your best judgement."
    answer = answer.strip()
    if not answer:
        return "The user gave no answer; proceed with your best judgement."
    return f"The user answered: {answer}"


CLARIFY_TOOL = Tool(
    name="clarify",
    description=(
        "Ask the user a question when you cannot proceed well without their input (an "
        "ambiguous requirement, a choice between approaches with real trade-offs). Offer "
        f"choices (at most {MAX_CHOICES}) when the answer is one of a few options. Do not ask "
        "what you can find out yourself."
    ),
    parameters={
        "type": "object",
        "properties": {
            "question": {"type": "string", "description": "The question to ask."},
            "choices": {
                "type": "array",
                "items": {"type": "string"},
                "description": "Optional answers to pick from; the user may still answer freely.",
            },
        },
        "required": ["question"],
        "additionalProperties": False,
    },
    handler=clarify,
    toolset="clarify",
    interactive=True,
    context_param="ctx",
    retry_safe=True,
)
