"""The gateway on Slack: slack_sdk in Socket Mode against a local Slack (tests/slack_fake.py)
that speaks the Web API and Socket Mode wire formats, the model scripted."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest
from gateway_process import GatewayProcess, killed_while_sending

from gateway_support import TERMINAL, Gate, Harness, removal_asked, running_gateway
from helpers import FOREVER
from slack_fake import FakeSlack
from talaria.gateway.delivery import REPEAT_MARK
from talaria.gateway.slack import SlackPlatform
from talaria.testing import ScriptedProvider, call, calls, text

ALICE, MALLORY = "U1", "U666"


@asynccontextmanager
async def slack_gateway(
    server: ScriptedProvider, home: Path, api: FakeSlack, **kwargs: Any
) -> AsyncIterator[Harness]:
    settings = {"bot_token": "xoxb-test", "app_token": "xapp-test", "base_url": api.base_url}
    platform = SlackPlatform("slack", settings)
    chosen = {"allow_users": [ALICE], **kwargs.pop("settings", {})}
    async with running_gateway(server, home, platform=platform, settings=chosen, **kwargs) as gw:
        yield gw


async def test_a_message_gets_one_answer_in_its_thread_and_is_acknowledged(
    tmp_path: Path,
) -> None:
    server = ScriptedProvider([text("Hello from Slack, streamed into one message.")])
    with server, FakeSlack() as api:
        async with slack_gateway(server, tmp_path, api):
            envelope = api.user_says("hi", thread_ts="1700000000.000001")
            await api.until(lambda: api.find("streamed into one message."))
            await api.until(lambda: envelope["envelope_id"] in api.acked)
    (answer,) = api.messages
    assert answer.text == "Hello from Slack, streamed into one message." and answer.edits
    assert answer.thread_ts == "1700000000.000001"


async def test_a_tool_turn_updates_one_progress_message(tmp_path: Path) -> None:
    server = ScriptedProvider([calls(("add", {"a": 40, "b": 2})), text("Forty-two.")])
    with server, FakeSlack() as api:
        async with slack_gateway(server, tmp_path, api):
            api.user_says("add")
            await api.until(lambda: "Forty-two." in api.texts())
    progress, answer = api.messages
    assert progress.text == "✓ add → 42" and progress.edits == ["… add"]
    assert answer.text == "Forty-two."


async def test_an_approval_is_answered_with_a_block_kit_button(tmp_path: Path) -> None:
    doomed = tmp_path / "doomed"
    doomed.mkdir()
    server = ScriptedProvider([calls(("terminal", {"command": f"rm -rf {doomed}"})), text("Gone.")])
    agent = {"toolsets": ["terminal"], "tools": []}
    with server, FakeSlack() as api:
        async with slack_gateway(server, tmp_path, api, agent=agent):
            api.user_says("remove it")
            question = await api.until(lambda: api.find("Request 1"))
            values = [b["value"] for b in question.buttons]
            assert values == ["1:once", "1:session", "1:deny"]
            api.press(question, "1:once", user=MALLORY)  # not theirs to answer
            api.press(question, "1:once")
            await api.until(lambda: api.find("Gone."))
    assert not doomed.exists()
    assert question.buttons == [] and "Answered: once" in question.text


async def test_a_denied_approval_runs_nothing_and_the_chat_says_so(tmp_path: Path) -> None:
    kept, server = removal_asked(tmp_path, "I left it alone.")
    with server, FakeSlack() as api:
        async with slack_gateway(server, tmp_path, api, agent=TERMINAL):
            api.user_says("remove it")
            question = await api.until(lambda: api.find("Request 1"))
            api.press(question, "1:deny")
            await api.until(lambda: api.find("I left it alone."))
    assert kept.exists()
    assert question.buttons == [] and "Answered: deny" in question.text
    progress = api.messages[0].text
    assert progress.startswith("✗ terminal") and "Denied by the user" in progress


async def test_a_stranger_gets_nothing_and_reaches_no_model(tmp_path: Path) -> None:
    server = ScriptedProvider([text("for alice")])
    with server, FakeSlack() as api:
        async with slack_gateway(server, tmp_path, api, settings={"pairing": False}) as gw:
            api.user_says("<@UBOT> hi", user=MALLORY, channel="C1", channel_type="channel")
            api.user_says("hello", user=MALLORY, channel="D9")
            api.user_shares_file(b"payload", "x.bin", "application/octet-stream", user=MALLORY)
            api.user_says("chatting, not to the bot", channel="C1", channel_type="channel")
            api.user_says("<@UBOT> hi", channel="C1", channel_type="channel")
            await api.until(lambda: api.find("for alice"))
            await gw.until(lambda: not gw.store.ledger_unfinished_inbound("slack"))
    assert api.texts() == ["for alice"] and api.messages[0].channel == "C1"
    assert len(server.requests) == 1 and not api.downloads  # a stranger's file stays unread
    assert server.requests[0].body["messages"][-1]["content"] == "hi"


async def test_stop_ends_the_running_turn(tmp_path: Path) -> None:
    server = ScriptedProvider([text("never shown", delay=FOREVER)])
    with server, FakeSlack() as api:
        async with slack_gateway(server, tmp_path, api):
            api.user_says("think hard")
            await api.until(lambda: server.requests)
            api.user_says("/stop")
            await api.until(lambda: api.find("Stopped."))
    assert "never shown" not in " ".join(api.texts())


@pytest.mark.parametrize(
    ("mode", "ack", "answers"),
    [("queue", "Queued", ["one", "two"]), ("interrupt", "Stopping", ["two"])],
)
async def test_a_busy_room_queues_or_interrupts(
    tmp_path: Path, mode: str, ack: str, answers: list[str]
) -> None:
    gate = Gate()
    first = text("one", delay=FOREVER) if mode == "interrupt" else gate.hold(text("one"))
    server = ScriptedProvider([first, text("two")])
    with server, FakeSlack() as api:
        async with slack_gateway(server, tmp_path, api, settings={"busy": mode}):
            api.user_says("first")
            await api.until(lambda: server.requests)
            api.user_says("second")
            await api.until(lambda: api.find(ack))
            gate.open()
            await api.until(lambda: api.find(answers[-1]))
            await asyncio.sleep(0.2)
    assert [t for t in api.texts() if t in ("one", "two")] == answers


async def test_a_busy_room_steers(tmp_path: Path) -> None:
    gate = Gate()
    server = ScriptedProvider([gate.hold(call("add", {"a": 1, "b": 1})), text("steered")])
    with server, FakeSlack() as api:
        async with slack_gateway(server, tmp_path, api, settings={"busy": "steer"}):
            api.user_says("first")
            await api.until(lambda: server.requests)
            api.user_says("mind the docs")
            await api.until(lambda: api.find("Noted"))
            gate.open()
            await api.until(lambda: api.find("steered"))
    assert "mind the docs" in json.dumps(server.requests[1].body["messages"])


async def test_a_retried_event_gets_one_reply(tmp_path: Path) -> None:
    server = ScriptedProvider([text("just once"), text("a second reply")])
    with server, FakeSlack() as api:
        async with slack_gateway(server, tmp_path, api):
            envelope = api.user_says("hi")
            await api.until(lambda: api.find("just once"))
            api.redeliver(envelope)
            api.user_says("/help")
            await api.until(lambda: api.find("Commands:"))
    assert api.texts().count("just once") == 1 and len(server.requests) == 1


async def test_a_429_delays_the_answer_then_delivers_it(tmp_path: Path) -> None:
    server = ScriptedProvider([text("after the flood")])
    with server, FakeSlack() as api:
        async with slack_gateway(server, tmp_path, api, settings={"stream": False}) as gw:
            api.flood = [3]
            api.user_says("hi")
            await api.until(lambda: api.find("after the flood"))
    assert api.refused == 1 and gw.waits == [3.0] and api.texts() == ["after the flood"]


PNG = b"\x89PNG\r\n\x1a\n" + b"\x00" * 32


async def test_shared_files_are_downloaded_with_the_bot_token_and_saved(tmp_path: Path) -> None:
    server = ScriptedProvider([text("Got both.")])
    with server, FakeSlack() as api:
        async with slack_gateway(server, tmp_path, api):
            api.user_shares_file(PNG, "chart.png", "image/png", text="what is this?")
            await api.until(lambda: api.find("Got both."))
    folder = tmp_path / "chat-files" / "slack-D1"
    assert (folder / "chart.png").read_bytes() == PNG and api.downloads
    words, image = server.requests[0].body["messages"][-1]["content"]
    assert "what is this?" in words["text"] and str(folder / "chart.png") in words["text"]
    assert image["image_url"]["url"].startswith("data:image/png;base64,")


async def test_a_shared_file_over_the_limit_is_refused_without_downloading(
    tmp_path: Path,
) -> None:
    server = ScriptedProvider([text("never")])
    with server, FakeSlack() as api:
        async with slack_gateway(server, tmp_path, api):
            api.user_shares_file(b"big", "big.iso", "application/octet-stream", size=30 << 20)
            refusal = await api.until(lambda: api.find("I could not take big.iso"))
    assert "over the 20 MB limit" in refusal.text
    assert not api.downloads and not server.requests


async def test_the_agent_sends_a_file_back_through_the_upload_flow(tmp_path: Path) -> None:
    folder = tmp_path / "chat-files" / "slack-D1-1700000000.000001"  # the thread's own
    folder.mkdir(parents=True)
    (folder / "report.txt").write_text("the report")
    server = ScriptedProvider([text("Here it is.\nMEDIA:report.txt")])
    with server, FakeSlack() as api:
        async with slack_gateway(server, tmp_path, api) as gw:
            api.flood_files = [3]  # refused for flooding once, then shared
            api.user_says("send me the report", thread_ts="1700000000.000001")
            await api.until(lambda: api.sent_files)
    (sent,) = api.sent_files
    assert (sent.title, sent.data, sent.channel) == ("report.txt", b"the report", "D1")
    assert sent.thread_ts == "1700000000.000001" and 3 in gw.waits
    assert [t for t in api.texts() if "Here it is." in t] == ["Here it is."]


async def test_when_slack_refreshes_the_connection_what_was_said_meanwhile_gets_one_reply(
    tmp_path: Path,
) -> None:
    server = ScriptedProvider([text("first reply"), text("second reply"), text("never")])
    with server, FakeSlack() as api:
        async with slack_gateway(server, tmp_path, api):
            api.user_says("one")
            await api.until(lambda: api.find("first reply"))
            api.refresh()
            second = api.user_says("two")  # while the app connects again
            await api.until(lambda: api.find("second reply"))
            await api.until(lambda: second["envelope_id"] in api.acked)
            await asyncio.sleep(0.2)  # a repeated reply would have come by now
    assert api.texts() == ["first reply", "second reply"] and api.links >= 2
    assert len(server.requests) == 2


async def test_kill_9_between_the_answer_and_the_send_delivers_it_once_after_restart(
    tmp_path: Path,
) -> None:
    server = ScriptedProvider([text("the one answer")])
    with server, FakeSlack() as api:
        settings = {"bot_token": "xoxb-test", "app_token": "xapp-test", "base_url": api.base_url,
                    "allow_users": [ALICE], "stream": False}  # fmt: skip
        with GatewayProcess(tmp_path / "home", server, "slack", settings) as gateway:
            envelope = await killed_while_sending(gateway, api, lambda: api.find("the one answer"))
    assert envelope["envelope_id"] in api.acked  # taken before the crash: not sent again
    assert [t for t in api.texts() if "the one answer" in t] == [REPEAT_MARK + "the one answer"]
    assert len(server.requests) == 1  # the model was not asked again
