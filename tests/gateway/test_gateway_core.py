"""`talaria gateway`'s core on the in-memory platform: what a chat user sees, and who may talk."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest

from gateway_support import Gate, running_gateway
from helpers import FOREVER
from talaria.config_schema import default_for
from talaria.gateway.chat import BUSY_ACKS
from talaria.gateway.fake import press, user_message
from talaria.gateway.platform import Attachment, Capabilities, ChatRef
from talaria.store.sqlite import SQLiteSessionStore
from talaria.testing import Fail, ScriptedProvider, call, calls, text

ROOM = ChatRef("fake", "room-1")


async def test_a_message_gets_one_answer_in_a_session_of_its_own(tmp_path: Path) -> None:
    server = ScriptedProvider([text("Hello Alice!")])
    with server:
        async with running_gateway(server, tmp_path) as gw:
            await gw.platform.deliver(user_message("hi"))
            answer = await gw.platform.wait_for(lambda m: "Hello Alice!" in m.text)
            await gw.until(lambda: not gw.store.ledger_unfinished_inbound("fake"))
            sessions = gw.store.list_sessions()
    assert answer.text == "Hello Alice!" and answer.chat == ChatRef("fake", "dm-alice")
    assert [s.source for s in sessions] == ["gateway"]
    assert gw.store.load_messages(sessions[0].id)[0]["content"] == "hi"
    assert gw.store.ledger_pending("fake") == []


async def test_a_tool_turn_shows_one_progress_message_then_the_answer(tmp_path: Path) -> None:
    server = ScriptedProvider([calls(("add", {"a": 2, "b": 3})), text("It is 5.")])
    with server:
        async with running_gateway(server, tmp_path) as gw:
            await gw.platform.deliver(user_message("what is 2+3?"))
            await gw.platform.wait_for(lambda m: m.text == "It is 5.")
    progress, answer = gw.platform.messages
    assert progress.text == "✓ add → 5"
    assert progress.edits and "{" not in progress.text  # edited in place, no raw JSON
    assert answer.text == "It is 5."


async def test_without_edits_each_tool_is_a_follow_up_and_answers_are_split_at_the_limit(
    tmp_path: Path,
) -> None:
    long_answer = "```\n" + "\n".join(f"line {n}" for n in range(30)) + "\n```"
    server = ScriptedProvider([calls(("add", {"a": 1, "b": 1})), text(long_answer)])
    plain = Capabilities(can_edit=False, max_len=100)
    with server:
        async with running_gateway(server, tmp_path, capabilities=plain) as gw:
            await gw.platform.deliver(user_message("count"))
            await gw.platform.wait_for(lambda m: "line 29" in m.text)
    follow_up, *parts = gw.texts()
    assert follow_up == "✓ add → 2"
    assert len(parts) > 1 and all(len(p) <= 100 for p in parts)
    assert all(p.startswith("```") and p.endswith("```") for p in parts)  # each renders alone
    assert not any(m.edits for m in gw.platform.messages)


async def test_a_stranger_reaches_no_model_and_a_paired_one_does(tmp_path: Path) -> None:
    server = ScriptedProvider([text("Welcome, Mallory.")])
    with server:
        async with running_gateway(server, tmp_path) as gw:
            await gw.platform.deliver(user_message("hi all", chat=ROOM, sender="mallory"))
            await gw.platform.deliver(
                user_message("@bot hi", chat=ROOM, sender="mallory", mentioned=True)
            )
            await gw.platform.deliver(user_message("let me in", sender="mallory"))
            code_message = await gw.platform.wait_for(lambda m: "gateway pair" in m.text)
            assert server.requests == [] and len(gw.platform.messages) == 1
            code = code_message.text.rsplit(" ", 1)[-1]
            assert gw.store.ledger_approve_pairing(code, ttl=3600) == ("fake", "mallory")
            await gw.platform.deliver(user_message("now?", sender="mallory"))
            await gw.platform.wait_for(lambda m: m.text == "Welcome, Mallory.")


async def test_an_expired_pairing_code_is_replaced_at_the_strangers_next_message(
    tmp_path: Path,
) -> None:
    now, ttl = [1_000_000.0], float(default_for("gateway.pairing_code_ttl"))
    store = SQLiteSessionStore(tmp_path / "state.db", clock=lambda: now[0])
    with ScriptedProvider([]) as server:
        async with running_gateway(server, tmp_path, store=store) as gw:
            await gw.platform.deliver(user_message("let me in", sender="mallory"))
            first = await gw.platform.wait_for(lambda m: "gateway pair" in m.text)
            now[0] += ttl
            await gw.platform.deliver(user_message("hello again", sender="mallory"))
            await gw.until(lambda: len(gw.platform.messages) == 2)
    old, fresh = (m.text.rsplit(" ", 1)[-1] for m in gw.platform.messages)
    assert old != fresh and first.text.endswith(old)
    assert store.ledger_approve_pairing(old, ttl=ttl) is None  # replaced
    assert store.ledger_approve_pairing(fresh, ttl=ttl) == ("fake", "mallory")
    assert server.requests == []


async def test_without_pairing_a_stranger_gets_nothing_at_all(tmp_path: Path) -> None:
    server = ScriptedProvider([])
    with server:
        async with running_gateway(server, tmp_path, settings={"pairing": False}) as gw:
            await gw.platform.deliver(user_message("hello?", sender="mallory"))
            await gw.until(lambda: not gw.store.ledger_unfinished_inbound("fake"))
    assert gw.platform.messages == [] and server.requests == []


async def test_in_a_group_it_answers_only_when_addressed(tmp_path: Path) -> None:
    server = ScriptedProvider([text("one"), text("two"), text("three")])
    with server:
        async with running_gateway(server, tmp_path, settings={"prefix": "!ai"}) as gw:
            await gw.platform.deliver(user_message("chatting", chat=ROOM))
            await gw.platform.deliver(user_message("!ai first", chat=ROOM))
            await gw.platform.wait_for(lambda m: m.text == "one")
            await gw.platform.deliver(user_message("second", chat=ROOM, reply_to_bot=True))
            await gw.platform.wait_for(lambda m: m.text == "two")
    prompts = [r.body["messages"][-1]["content"] for r in server.requests]
    assert prompts == ["first", "second"]


async def test_a_redelivered_update_gets_one_reply(tmp_path: Path) -> None:
    server = ScriptedProvider([text("only once"), text("never")])
    with server:
        async with running_gateway(server, tmp_path) as gw:
            message = user_message("hi", message_id="update-7")
            await gw.platform.deliver(message)
            await gw.platform.deliver(message)
            await gw.platform.wait_for(lambda m: m.text == "only once")
            await gw.until(lambda: not gw.store.ledger_unfinished_inbound("fake"))
    assert gw.texts() == ["only once"] and len(server.requests) == 1


async def test_a_rate_limited_answer_waits_then_arrives_once(tmp_path: Path) -> None:
    server = ScriptedProvider([text("patience")])
    with server:
        async with running_gateway(server, tmp_path, settings={"stream": False}) as gw:
            gw.platform.flood(7.0, 3.0)
            await gw.platform.deliver(user_message("hi"))
            await gw.platform.wait_for(lambda m: m.text == "patience")
    assert gw.platform.refused == 2 and gw.waits == [7.0, 3.0]
    assert gw.texts() == ["patience"]


async def test_an_approval_answered_with_a_button_runs_the_command(tmp_path: Path) -> None:
    doomed = tmp_path / "doomed"
    doomed.mkdir()
    server = ScriptedProvider(
        [calls(("terminal", {"command": f"rm -rf {doomed}"})), text("Deleted.")]
    )
    agent = {"toolsets": ["terminal"], "tools": []}
    with server:
        async with running_gateway(server, tmp_path, agent=agent) as gw:
            await gw.platform.deliver(user_message("delete it"))
            question = await gw.platform.wait_for(lambda m: "Request 1" in m.text)
            assert question.buttons[0].label == "Allow once"
            await gw.platform.deliver(press(question, "1:once", sender="mallory"))  # not theirs
            await gw.platform.deliver(press(question, "1:once"))
            await gw.platform.wait_for(lambda m: m.text == "Deleted.")
    assert not doomed.exists()
    assert "Answered: once" in question.text and question.buttons == ()


async def test_an_approval_denied_with_a_command_does_not_run_it(tmp_path: Path) -> None:
    kept = tmp_path / "kept"
    kept.mkdir()
    server = ScriptedProvider([calls(("terminal", {"command": f"rm -rf {kept}"})), text("OK.")])
    agent = {"toolsets": ["terminal"], "tools": []}
    plain = Capabilities(can_edit=False, max_len=1000)
    with server:
        async with running_gateway(server, tmp_path, agent=agent, capabilities=plain) as gw:
            await gw.platform.deliver(user_message("delete it"))
            question = await gw.platform.wait_for(lambda m: "/deny 1" in m.text)
            await gw.platform.deliver(user_message("/deny 1"))
            await gw.platform.wait_for(lambda m: m.text == "OK.")
    assert kept.exists()
    assert "Request 1 denied." in gw.texts()
    assert question.buttons == ()


async def test_a_withdrawn_request_edits_its_message(tmp_path: Path) -> None:
    kept = tmp_path / "kept"
    kept.mkdir()
    server = ScriptedProvider([calls(("terminal", {"command": f"rm -rf {kept}"})), text("OK.")])
    agent = {"toolsets": ["terminal"], "tools": [], "config": {"approvals.timeout": 0.2}}
    with server:
        async with running_gateway(server, tmp_path, agent=agent) as gw:
            await gw.platform.deliver(user_message("delete it"))
            question = await gw.platform.wait_for(lambda m: "Withdrawn (timeout)" in m.text)
            await gw.platform.wait_for(lambda m: "approval timed out" in m.text)
    assert kept.exists() and question.text.startswith("Request 1")


async def test_stop_ends_a_running_turn_and_no_reply_follows(tmp_path: Path) -> None:
    server = ScriptedProvider([text("too late", delay=FOREVER), text("fresh")])
    with server:
        async with running_gateway(server, tmp_path) as gw:
            await gw.platform.deliver(user_message("slow question"))
            await gw.until(lambda: len(server.requests) == 1)
            await gw.platform.deliver(user_message("/stop"))
            await gw.platform.wait_for(lambda m: m.text == "Stopped.")
            chat = gw.gateway.chat("fake", ChatRef("fake", "dm-alice"))
            await gw.until(lambda: chat.run is not None and chat.run.done())
            await gw.platform.deliver(user_message("again"))
            await gw.platform.wait_for(lambda m: m.text == "fresh")
    assert "too late" not in " ".join(gw.texts())


TURN_ENDINGS = {
    # the turn's script, what alice says while it runs, the turns whose typing ended
    "answered": ([text("done")], None, 1),
    "stopped": ([text("never", delay=FOREVER)], "/stop", 1),
    "failed": ([Fail(400)], None, 1),
    "interrupted": ([text("never", delay=FOREVER), text("instead")], "do this instead", 2),
}


@pytest.mark.parametrize("ending", TURN_ENDINGS)
async def test_the_typing_indicator_ends_with_the_turn(tmp_path: Path, ending: str) -> None:
    script, meanwhile, turns = TURN_ENDINGS[ending]
    server = ScriptedProvider(script)
    dm = ChatRef("fake", "dm-alice")
    with server:
        async with running_gateway(server, tmp_path, settings={"busy": "interrupt"}) as gw:
            await gw.platform.deliver(user_message("work"))
            await gw.until(lambda: (dm, True) in gw.platform.typing_calls)
            if meanwhile:
                await gw.platform.deliver(user_message(meanwhile))
            chat = gw.gateway.chat("fake", dm)
            await gw.until(lambda: chat.run is not None and chat.run.done())
    assert gw.platform.typing_calls[-1] == (dm, False)  # the chat no longer shows it typing
    assert gw.platform.typing_calls.count((dm, False)) == turns  # and not between two turns


@pytest.mark.parametrize("refusals", [0, 5], ids=["at-once", "through-a-flood-wait"])
async def test_busy_queue_answers_both_in_order(tmp_path: Path, refusals: int) -> None:
    """Acknowledged once (a flood wait longer than a UI message's tries delays the
    acknowledgement, it does not lose it), then answered in order."""
    gate = Gate()
    server = ScriptedProvider([gate.hold(text("first answer")), text("second answer")])
    with server:
        async with running_gateway(server, tmp_path) as gw:
            await gw.platform.deliver(user_message("first"))
            await gw.until(lambda: len(server.requests) == 1)
            gw.platform.flood(*[0.01] * refusals)
            await gw.platform.deliver(user_message("second"))
            await gw.platform.wait_for(lambda m: m.text.startswith("Queued"))
            gate.open()
            await gw.platform.wait_for(lambda m: m.text == "second answer")
    texts = gw.texts()
    queued = "Queued: I will answer this when the current task is done."
    assert texts.count(queued) == 1
    assert texts.index(queued) < texts.index("first answer") < texts.index("second answer")


async def test_busy_interrupt_drops_the_stale_reply_and_answers_the_new_message(
    tmp_path: Path,
) -> None:
    server = ScriptedProvider([text("stale", delay=FOREVER), text("current")])
    with server:
        async with running_gateway(server, tmp_path, settings={"busy": "interrupt"}) as gw:
            await gw.platform.deliver(user_message("first"))
            await gw.until(lambda: len(server.requests) == 1)
            await gw.platform.deliver(user_message("never mind, this"))
            await gw.platform.wait_for(lambda m: m.text == "current")
    assert "stale" not in " ".join(gw.texts())
    assert "Stopping the current task to answer this." in gw.texts()
    assert server.requests[-1].body["messages"][-1]["content"].endswith("never mind, this")


async def test_busy_steer_reaches_the_running_turn(tmp_path: Path) -> None:
    gate = Gate()
    server = ScriptedProvider([gate.hold(call("add", {"a": 1, "b": 2})), text("steered")])
    with server:
        async with running_gateway(server, tmp_path, settings={"busy": "steer"}) as gw:
            await gw.platform.deliver(user_message("add"))
            await gw.until(lambda: len(server.requests) == 1)
            await gw.platform.deliver(user_message("also say hi"))
            await gw.platform.wait_for(lambda m: m.text.startswith("Noted"))
            gate.open()
            await gw.platform.wait_for(lambda m: m.text == "steered")
    contents = [str(m.get("content")) for m in server.requests[1].body["messages"]]
    assert any("also say hi" in c for c in contents)
    assert "Noted: I am adding this to the task in progress." in gw.texts()
    assert len(server.requests) == 2


async def test_commands_new_model_usage_help_and_busy(tmp_path: Path) -> None:
    server = ScriptedProvider([text("one"), text("two")])
    with server:
        async with running_gateway(server, tmp_path) as gw:
            await gw.platform.deliver(user_message("hi"))
            await gw.platform.wait_for(lambda m: m.text == "one")
            for command in ("/usage", "/model other-model", "/busy steer", "/help", "/new"):
                await gw.platform.deliver(user_message(command))
            await gw.platform.wait_for(lambda m: m.text == "New conversation started.")
            await gw.platform.deliver(user_message("hello again"))
            await gw.platform.wait_for(lambda m: m.text == "two")
    texts = gw.texts()
    assert texts[1].startswith("This conversation: ") and "tokens in" in texts[1]
    assert "Model for this chat: other-model" in texts and "Busy mode for this chat: steer" in texts
    assert any(t.startswith("Commands:") for t in texts)
    assert server.requests[-1].body["model"] == "other-model"
    assert len(server.requests[-1].body["messages"]) == 2  # system + the new message only
    assert len(gw.store.list_sessions()) == 2


async def test_a_reply_never_goes_to_another_room(tmp_path: Path) -> None:
    server = ScriptedProvider([text("for A", delay=0.3), text("for B")])
    room_b = ChatRef("fake", "room-b")
    with server:
        async with running_gateway(server, tmp_path, settings={"allow_rooms": ["room-a"]}) as gw:
            await gw.platform.deliver(
                user_message("a?", chat=ChatRef("fake", "room-a"), mentioned=True)
            )
            await gw.until(lambda: len(server.requests) == 1)
            await gw.platform.deliver(user_message("b?", chat=room_b, mentioned=True))
            await gw.platform.wait_for(lambda m: m.text == "for B")
            await gw.platform.wait_for(lambda m: m.text == "for A")
    by_text = {m.text: m.chat.chat_id for m in gw.platform.messages}
    assert by_text == {"for A": "room-a", "for B": "room-b"}


async def test_after_a_restart_a_pending_answer_is_sent_once(tmp_path: Path) -> None:
    server = ScriptedProvider([])
    from talaria.store.ledger import OutboundPart
    from talaria.store.sqlite import SQLiteSessionStore

    store = SQLiteSessionStore(tmp_path / "state.db")
    store.ledger_take_inbound("fake", "in-1", "k", {"text": "hi"})
    unsent = OutboundPart("fake:in-1/0", "fake", "dm-alice", None, "the answer")
    tried = OutboundPart("fake:in-2/0", "fake", "dm-alice", None, "maybe sent")
    store.ledger_record_answer([unsent, tried], inbound=("fake", "in-1"))
    store.ledger_count_attempt(tried.id)
    with server:
        async with running_gateway(server, tmp_path, store=store) as gw:
            await gw.platform.wait_for(lambda m: "maybe sent" in m.text)
        async with running_gateway(server, tmp_path, store=store, platform=gw.platform):
            await asyncio.sleep(0)
    assert gw.texts() == [
        "the answer",
        "(sent again after a restart; you may see this twice)\nmaybe sent",
    ]
    assert server.requests == []


async def test_a_session_past_the_threshold_is_compressed_between_turns(tmp_path: Path) -> None:
    words = "word " * 1200
    answers = [text("one " * 600), text("two " * 600), text("SUMMARY of it all"), text("three")]
    server = ScriptedProvider(answers)
    agent = {"config": {"context.engine": "default", "model.context_length": 4500,
                        "compression.threshold": 0.9, "compression.protect_last_n": 1}}  # fmt: skip
    with server:
        async with running_gateway(server, tmp_path, agent=agent) as gw:
            for first_word, answer in [("first", "one " * 600), ("second", "two " * 600)]:
                await gw.platform.deliver(user_message(f"{first_word} {words}"))
                await gw.platform.wait_for(lambda m, answer=answer: m.text == answer)
            await gw.platform.deliver(user_message("third"))  # the summary comes first
            await gw.platform.wait_for(lambda m: m.text == "three")
            chat = gw.store.ledger_chat(ChatRef("fake", "dm-alice").key)
            sessions = gw.store.list_sessions()
    assert gw.texts() == ["one " * 600, "two " * 600, "three"]
    summarising, after = server.requests[2].body, server.requests[3].body
    assert "compress" in summarising["messages"][0]["content"]
    assert "SUMMARY of it all" in str(after["messages"]) and "second word" not in str(after)
    assert chat is not None and chat["session_id"] == sessions[0].id
    assert sessions[0].parent_session_id == sessions[1].id


async def test_a_full_session_is_compressed_before_a_queued_message(tmp_path: Path) -> None:
    gate, words = Gate(), "word " * 1200
    answers = [gate.hold(text("one " * 600)), text("two " * 600), text("SUMMARY of it all"),
               text("three")]  # fmt: skip
    server = ScriptedProvider(answers)
    agent = {"config": {"context.engine": "default", "model.context_length": 4500,
                        "compression.threshold": 0.9, "compression.protect_last_n": 1}}  # fmt: skip
    with server:
        async with running_gateway(server, tmp_path, agent=agent) as gw:
            await gw.platform.deliver(user_message(f"first {words}"))
            await gw.until(lambda: len(server.requests) == 1)
            for said in (f"second {words}", "third"):  # both wait while the first runs
                await gw.platform.deliver(user_message(said))
            await gw.until(lambda: gw.texts().count(BUSY_ACKS["queue"]) == 2)
            gate.open()
            await gw.platform.wait_for(lambda m: m.text in ("three", "SUMMARY of it all"))
    assert [t for t in gw.texts() if t != BUSY_ACKS["queue"]] == ["one " * 600, "two " * 600,
                                                                   "three"]  # fmt: skip
    summarising, after = server.requests[2].body, server.requests[3].body
    assert "compress" in summarising["messages"][0]["content"]
    # compressed before "third" was taken in, as for a new message: not inside its turn,
    # where the first request is kept whole and only the middle is summarised
    assert "SUMMARY of it all" in str(after["messages"])
    assert "first word" not in str(after) and "second word" not in str(after)


async def test_a_message_taken_in_but_never_answered_is_answered_after_a_restart(
    tmp_path: Path,
) -> None:
    from talaria.gateway.core import payload
    from talaria.store.sqlite import SQLiteSessionStore

    store = SQLiteSessionStore(tmp_path / "state.db")
    message = user_message("are you there?", message_id="in-crashed")
    store.ledger_take_inbound("fake", message.message_id, message.chat.key, payload(message))
    server = ScriptedProvider([text("Yes, back again."), text("never")])
    with server:
        async with running_gateway(server, tmp_path, store=store) as gw:
            await gw.platform.wait_for(lambda m: m.text == "Yes, back again.")
            await gw.platform.deliver(message)  # the platform hands it over again: no reply
            await gw.until(lambda: not gw.store.ledger_unfinished_inbound("fake"))
    assert gw.texts() == ["Yes, back again."] and len(server.requests) == 1


async def test_a_message_that_arrives_while_the_platform_starts_is_answered_once(
    tmp_path: Path,
) -> None:
    from talaria.gateway.fake import FakePlatform
    from talaria.gateway.platform import Sink

    class CatchesUpAtStart(FakePlatform):
        """Hands over what came while it was away before `start` returns (Matrix's first
        sync does)."""

        async def start(self, sink: Sink) -> None:
            await super().start(sink)
            await self.deliver(user_message("did you miss me?", message_id="while-away"))

    gate = Gate()
    server = ScriptedProvider([gate.hold(text("Only once.")), text("twice!")])
    with server:
        async with running_gateway(server, tmp_path, platform=CatchesUpAtStart()) as gw:
            await gw.until(lambda: server.requests)
            gate.open()  # the turn was still running when the gateway finished starting
            await gw.platform.wait_for(lambda m: m.text == "Only once.")
            await gw.until(lambda: not gw.store.ledger_unfinished_inbound("fake"))
    assert gw.texts() == ["Only once."] and len(server.requests) == 1


async def test_an_answer_waits_out_a_platform_out_of_reach_and_goes_out_once_unmarked(
    tmp_path: Path,
) -> None:
    from talaria.gateway.delivery import MAX_ATTEMPTS
    from talaria.gateway.fake import FakePlatform
    from talaria.gateway.platform import NotSent

    class Unreachable(FakePlatform):
        """Out of reach for longer than the attempts a failing send gets."""

        down = MAX_ATTEMPTS * 2

        async def send(self, chat: ChatRef, text: str, **kwargs: Any) -> str:
            if self.down:
                self.down -= 1
                raise NotSent("not connected")
            return await super().send(chat, text, **kwargs)

    server = ScriptedProvider([text("Worth the wait.")])
    with server:
        unstreamed = {"stream": False}  # the answer is the only send
        async with running_gateway(
            server, tmp_path, platform=Unreachable(), settings=unstreamed
        ) as gw:
            await gw.platform.deliver(user_message("hi"))
            await gw.platform.wait_for(lambda m: "Worth the wait." in m.text)
    assert gw.texts() == ["Worth the wait."]  # not marked as possibly repeated
    assert len(gw.waits) == MAX_ATTEMPTS * 2 and gw.store.ledger_pending("fake") == []


async def test_a_left_over_answer_that_cannot_go_out_yet_holds_up_nothing_else(
    tmp_path: Path,
) -> None:
    from talaria.gateway.fake import FakePlatform
    from talaria.store.ledger import OutboundPart
    from talaria.store.sqlite import SQLiteSessionStore

    class Stuck(FakePlatform):
        """Room A's sends hang until the test lets them through."""

        released = asyncio.Event()

        async def send(self, chat: ChatRef, text: str, **kwargs: Any) -> str:
            if chat == ROOM:
                await self.released.wait()
            return await super().send(chat, text, **kwargs)

    store = SQLiteSessionStore(tmp_path / "state.db")
    store.ledger_record_answer([OutboundPart("old/0", "fake", ROOM.chat_id, None, "left over")])
    server = ScriptedProvider([text("Still here.")])
    with server:
        async with running_gateway(server, tmp_path, platform=Stuck(), store=store) as gw:
            await gw.platform.deliver(user_message("hi"))  # another chat
            await gw.platform.wait_for(lambda m: m.text == "Still here.")
            gw.platform.released.set()
            await gw.platform.wait_for(lambda m: m.text == "left over")
    assert gw.texts() == ["Still here.", "left over"]


async def test_a_room_uses_its_own_model_and_prompt(tmp_path: Path) -> None:
    server = ScriptedProvider([text("Arr."), text("A verse.")])
    settings = {
        "prompt": "Talk like a pirate.",
        "allow_rooms": ["room-1"],
        "rooms": {"room-1": {"model": "poet-model", "prompt": "Answer in verse."}},
    }
    with server:
        async with running_gateway(server, tmp_path, settings=settings) as gw:
            await gw.platform.deliver(user_message("hi"))
            await gw.platform.wait_for(lambda m: m.text == "Arr.")
            await gw.platform.deliver(user_message("hi", chat=ROOM, mentioned=True))
            await gw.platform.wait_for(lambda m: m.text == "A verse.")
    direct, room = (r.body for r in server.requests)
    assert direct["messages"][0] == {"role": "system", "content": "Talk like a pirate."}
    assert room["messages"][0] == {"role": "system", "content": "Answer in verse."}
    assert (direct["model"], room["model"]) == ("scripted-model", "poet-model")


async def test_resume_continues_an_earlier_conversation_in_the_chat(tmp_path: Path) -> None:
    server = ScriptedProvider([text("Blue it is."), text("Fresh start."), text("You said blue.")])
    with server:
        async with running_gateway(server, tmp_path) as gw:
            await gw.platform.deliver(user_message("my colour is blue"))
            await gw.platform.wait_for(lambda m: m.text == "Blue it is.")
            (first,) = gw.store.list_sessions()
            await gw.platform.deliver(user_message("/new"))
            await gw.platform.deliver(user_message("hello"))
            await gw.platform.wait_for(lambda m: m.text == "Fresh start.")
            await gw.platform.deliver(user_message("/resume"))
            listing = await gw.platform.wait_for(lambda m: m.text.startswith("Recent"))
            await gw.platform.deliver(user_message(f"/resume {first.id}"))
            await gw.platform.deliver(user_message("what is my colour?"))
            await gw.platform.wait_for(lambda m: m.text == "You said blue.")
    assert first.id in listing.text
    assert f"Continuing conversation {first.id}." in gw.texts()
    history = [m["content"] for m in server.requests[-1].body["messages"][1:]]
    assert history == ["my colour is blue", "Blue it is.", "what is my colour?"]


async def test_a_clarify_question_is_answered_with_a_button_or_a_reply(tmp_path: Path) -> None:
    question = {"question": "Which colour?", "choices": ["red", "green"]}
    server = ScriptedProvider(
        [calls(("clarify", question)), text("Red it is."),
         calls(("clarify", question)), text("Green it is.")]
    )  # fmt: skip
    agent = {"toolsets": ["clarify"], "tools": []}
    with server:
        async with running_gateway(server, tmp_path, agent=agent) as gw:
            await gw.platform.deliver(user_message("paint it"))
            asked = await gw.platform.wait_for(lambda m: m.text.startswith("Question 1"))
            assert [b.label for b in asked.buttons] == ["red", "green"]
            await gw.platform.deliver(press(asked, asked.buttons[0].value))
            await gw.platform.wait_for(lambda m: m.text == "Red it is.")
            await gw.platform.deliver(user_message("again"))
            await gw.platform.wait_for(lambda m: m.text.startswith("Question 2"))
            await gw.platform.deliver(user_message("2"))  # a reply: the second choice
            await gw.platform.wait_for(lambda m: m.text == "Green it is.")
    results = [m["content"] for m in server.requests[-1].body["messages"] if m["role"] == "tool"]
    assert "red" in results[0] and "green" in results[1]
    assert "Answered: red" in asked.text


async def test_two_messages_back_to_back_are_both_answered_in_order(tmp_path: Path) -> None:
    server = ScriptedProvider([text("answer one"), text("answer two")])
    with server:
        async with running_gateway(server, tmp_path) as gw:
            await gw.platform.deliver(user_message("one"))
            await gw.platform.deliver(user_message("two"))  # before the first turn started
            await gw.platform.wait_for(lambda m: m.text == "answer two")
    answers = [t for t in gw.texts() if t.startswith("answer")]
    assert answers == ["answer one", "answer two"]
    assert server.requests[1].body["messages"][-1]["content"] == "two"


async def test_a_file_comes_in_and_a_platform_without_files_says_what_it_could_not_send(
    tmp_path: Path,
) -> None:
    server = ScriptedProvider([text("Read it.\nMEDIA:notes.txt")])
    folder = tmp_path / "chat-files" / "fake-dm-alice"
    with server:
        async with running_gateway(server, tmp_path) as gw:
            sent = Attachment("notes.txt", "text/plain", data=b"remember the milk")
            await gw.platform.deliver(user_message("keep this", attachments=(sent,)))
            await gw.platform.wait_for(lambda m: "notes.txt was not sent" in m.text)
    assert (folder / "notes.txt").read_bytes() == b"remember the milk"
    assert str(folder / "notes.txt") in server.requests[0].body["messages"][-1]["content"]
    assert gw.texts() == [
        "Read it.\nnotes.txt was not sent: this chat platform cannot carry files from the bot."
    ]
    assert "MEDIA:" not in server.requests[0].body["messages"][0]["content"]  # not offered
