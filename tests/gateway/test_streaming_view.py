"""A streamed answer as the chat shows it: one message, edited at most once per
`edit_interval` however fast the text comes, each edit showing all the text so far."""

from __future__ import annotations

from talaria import events as ev
from talaria.gateway.fake import FakePlatform
from talaria.gateway.platform import ChatRef
from talaria.gateway.view import CURSOR, ChatUI, TurnView


async def test_a_streamed_answer_is_edited_at_most_once_per_interval() -> None:
    now = [0.0]
    platform = FakePlatform()
    ui = ChatUI(platform, ChatRef("fake", "dm-alice"), edit_interval=1.0, clock=lambda: now[0])
    view = TurnView(ui)

    await view.on_event(ev.TextDelta("The "))  # the first text opens the message
    for word in ["answer ", "is ", "being "]:  # within the same second: no edit
        now[0] += 0.3
        await view.on_event(ev.TextDelta(word))
    now[0] = 1.0
    await view.on_event(ev.TextDelta("written"))  # a second has passed: one edit

    [message] = platform.messages
    assert message.edits == ["The " + CURSOR]
    assert message.text == "The answer is being written" + CURSOR
