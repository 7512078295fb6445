"""The gateway on Telegram: python-telegram-bot against a local Bot API server that speaks the
documented wire format (tests/telegram_fake.py), the model scripted."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest
from gateway_process import GatewayProcess, killed_while_sending

from gateway_support import TERMINAL, Gate, Harness, removal_asked, running_gateway
from helpers import FOREVER
from talaria import events as ev
from talaria.gateway.delivery import REPEAT_MARK
from talaria.gateway.platform import ChatRef, NotSent
from talaria.gateway.telegram import TelegramPlatform
from talaria.gateway.view import ChatUI, TurnView
from talaria.testing import ScriptedProvider, call, calls, text
from telegram_fake import FakeTelegram

pytest.importorskip("telegram")

ALICE, MALLORY = 1, 666
GROUP = -100


@asynccontextmanager
async def telegram_gateway(
    server: ScriptedProvider, home: Path, api: FakeTelegram, **kwargs: Any
) -> AsyncIterator[Harness]:
    platform = TelegramPlatform(
        "telegram", {"token": "123:TEST", "base_url": api.base_url, "poll_timeout": 1}
    )
    settings = {"allow_users": [str(ALICE)], **kwargs.pop("settings", {})}
    async with running_gateway(
        server, home, platform=platform, settings=settings, **kwargs
    ) as harness:
        yield harness


async def test_a_message_gets_one_streamed_answer(tmp_path: Path) -> None:
    server = ScriptedProvider([text("Hello from Telegram, this answer streams in pieces.")])
    with server, FakeTelegram() as api:
        async with telegram_gateway(server, tmp_path, api):
            asked = api.user_says("hi")
            await api.until(lambda: api.find("this answer streams in pieces."))
            await api.until(lambda: api.confirmed > asked["update_id"])
    (answer,) = api.messages
    assert answer.text == "Hello from Telegram, this answer streams in pieces."
    assert answer.edits  # a preview first, then edited into the answer
    assert (ALICE, "typing") in api.actions


async def test_a_tool_turn_edits_one_progress_message(tmp_path: Path) -> None:
    server = ScriptedProvider([calls(("add", {"a": 20, "b": 22})), text("The sum is 42.")])
    with server, FakeTelegram() as api:
        async with telegram_gateway(server, tmp_path, api):
            api.user_says("add 20 and 22")
            await api.until(lambda: "The sum is 42." in api.texts())
    progress, answer = api.messages
    assert progress.text == "✓ add → 42" and progress.edits == ["… add"]
    assert answer.text == "The sum is 42."


async def test_a_flood_wait_on_an_edit_holds_back_the_streamed_preview(tmp_path: Path) -> None:
    answer = "A long answer that streams in many small pieces, each one worth an edit."
    server = ScriptedProvider([text(answer, chunk_size=4)])
    with server, FakeTelegram() as api:
        api.flood_edits = [3600]
        async with telegram_gateway(server, tmp_path, api):
            api.user_says("hi")
            await api.until(lambda: api.find(answer))
    refused, *later = api.edit_requests
    assert "▌" in refused
    assert later == [answer]  # no preview edit while Telegram said wait; the answer once
    assert api.texts() == [answer]


@asynccontextmanager
async def chat_ui(api: FakeTelegram, now: list[float]) -> AsyncIterator[ChatUI]:
    """Alice's chat's live messages, on a clock the test sets (a wait moves it on)."""

    async def ignored(update: Any) -> None:
        pass

    async def sleep(seconds: float) -> None:
        now[0] += seconds

    platform = TelegramPlatform("telegram", {"token": "123:TEST", "base_url": api.base_url})
    await platform.start(ignored)
    try:
        chat = ChatRef("telegram", str(ALICE), "")
        yield ChatUI(platform, chat, clock=lambda: now[0], sleep=sleep)
    finally:
        await platform.stop()


async def test_live_edits_resume_once_the_flood_wait_has_passed() -> None:
    now = [0.0]
    with FakeTelegram() as api:
        api.flood_edits = [30]
        async with chat_ui(api, now) as ui:
            shown = await ui.send("draft")
            assert shown is not None
            await ui.edit(shown, "draft 1")  # refused: retry after 30 s
            await ui.edit(shown, "draft 2")
            now[0] = 29.9
            await ui.edit(shown, "draft 3")
            now[0] = 30.0
            await ui.edit(shown, "draft 4")
    assert api.edit_requests == ["draft 1", "draft 4"]
    assert api.texts() == ["draft 4"]


async def test_the_last_progress_edit_held_by_a_flood_wait_is_made_once_it_has_passed() -> None:
    now = [0.0]
    with FakeTelegram() as api:
        async with chat_ui(api, now) as ui:
            view = TurnView(ui)
            await view.on_event(ev.ToolStarted("c1", "add", {"a": 1, "b": 1}))
            api.flood_edits = [30]
            now[0] = 5.0
            await view.on_event(ev.ToolFinished("c1", "add", "2", False, 0.1))  # refused: 30 s
            await view.settle()  # the turn ends while edits are held: nothing would overtake it
            await api.until(lambda: len(api.edit_requests) == 2)
    assert api.edit_requests == ["✓ add → 2", "✓ add → 2"]
    assert api.texts() == ["✓ add → 2"]
    assert now[0] == 35.0  # made once the wait was over, not during it


@pytest.mark.parametrize("flood", [[], [1]], ids=["at-once", "after-a-flood-wait"])
async def test_an_approval_is_answered_with_an_inline_button(
    tmp_path: Path, flood: list[int]
) -> None:
    doomed = tmp_path / "doomed"
    doomed.mkdir()
    server = ScriptedProvider(
        [calls(("terminal", {"command": f"rm -rf {doomed}"})), text("Removed it.")]
    )
    agent = {"toolsets": ["terminal"], "tools": []}
    with server, FakeTelegram() as api:
        async with telegram_gateway(server, tmp_path, api, agent=agent):
            api.user_says("remove the folder")
            question = await api.until(lambda: api.find("Request 1"))
            labels = [row[0]["text"] for row in question.keyboard]
            assert labels == ["Allow once", "Allow for this chat", "Deny"]
            api.flood_edits = flood  # the note under the question: refused, then made later
            press = api.press(question, question.keyboard[0][0]["callback_data"])
            await api.until(lambda: api.find("Removed it."))
            await api.until(lambda: "Answered: once" in question.text)
    assert not doomed.exists()
    assert press["callback_query"]["id"] in api.answered_queries
    assert question.keyboard == [] and "Answered: once" in question.text


async def test_a_denied_approval_runs_nothing_and_the_chat_says_so(tmp_path: Path) -> None:
    kept, server = removal_asked(tmp_path, "I left it alone.")
    with server, FakeTelegram() as api:
        async with telegram_gateway(server, tmp_path, api, agent=TERMINAL):
            api.user_says("remove the folder")
            question = await api.until(lambda: api.find("Request 1"))
            deny = question.keyboard[2][0]
            assert deny["text"] == "Deny"
            api.press(question, deny["callback_data"])
            await api.until(lambda: api.find("I left it alone."))
    assert kept.exists()
    assert question.keyboard == [] and "Answered: deny" in question.text
    progress = api.messages[0].text
    assert progress.startswith("✗ terminal") and "Denied by the user" in progress


async def test_a_stranger_in_a_group_gets_nothing_and_reaches_no_model(tmp_path: Path) -> None:
    server = ScriptedProvider([text("for alice")])
    with server, FakeTelegram() as api:
        async with telegram_gateway(server, tmp_path, api, settings={"pairing": False}) as gw:
            api.user_says("@talaria_bot hi", user_id=MALLORY, chat_id=GROUP, chat_type="group")
            api.user_says("hello", user_id=MALLORY)
            api.user_says("@talaria_bot hi", chat_id=GROUP, chat_type="group")
            await api.until(lambda: api.find("for alice"))
            await gw.until(lambda: not gw.store.ledger_unfinished_inbound("telegram"))
    assert api.texts() == ["for alice"] and len(server.requests) == 1
    assert api.messages[0].chat_id == GROUP


async def test_stop_ends_the_running_turn(tmp_path: Path) -> None:
    server = ScriptedProvider([text("never shown", delay=FOREVER)])
    with server, FakeTelegram() as api:
        async with telegram_gateway(server, tmp_path, api):
            api.user_says("think hard")
            await api.until(lambda: server.requests)
            api.user_says("/stop")
            await api.until(lambda: api.find("Stopped."))
    assert "never shown" not in " ".join(api.texts())


@pytest.mark.parametrize(
    ("mode", "ack", "answers"),
    [
        ("queue", "Queued", ["one", "two"]),
        ("interrupt", "Stopping", ["two"]),
        ("steer", "Noted", ["one"]),
    ],
)
async def test_a_busy_room_queues_interrupts_or_steers(
    tmp_path: Path, mode: str, ack: str, answers: list[str]
) -> None:
    gate = Gate()
    first = gate.hold(call("add", {"a": 1, "b": 1}) if mode == "steer" else text("one"))
    if mode == "interrupt":  # a held step would hold the script: this one never answers
        first = text("one", delay=FOREVER)
    server = ScriptedProvider([first, text("one" if mode == "steer" else "two")])
    with server, FakeTelegram() as api:
        async with telegram_gateway(server, tmp_path, api, settings={"busy": mode}):
            api.user_says("first")
            await api.until(lambda: server.requests)
            api.user_says("second")
            await api.until(lambda: api.find(ack))
            gate.open()
            await api.until(lambda: api.find(answers[-1]))
            await asyncio.sleep(0.2)  # a stale reply would have been sent by now
    assert [t for t in api.texts() if t in ("one", "two")] == answers
    if mode == "steer":
        contents = json.dumps(server.requests[1].body["messages"])
        assert "second" in contents


async def test_a_redelivered_update_gets_one_reply(tmp_path: Path) -> None:
    server = ScriptedProvider([text("just once"), text("a second reply")])
    with server, FakeTelegram() as api:
        async with telegram_gateway(server, tmp_path, api):
            update = api.user_says("hi")
            await api.until(lambda: api.find("just once"))
            api.redeliver(update)
            await api.until(lambda: api.confirmed > update["update_id"] and not api.updates)
            api.user_says("/help")
            await api.until(lambda: api.find("Commands:"))
    assert api.texts().count("just once") == 1 and len(server.requests) == 1


async def test_a_429_delays_the_answer_then_delivers_it(tmp_path: Path) -> None:
    server = ScriptedProvider([text("after the flood")])
    with server, FakeTelegram() as api:
        async with telegram_gateway(server, tmp_path, api, settings={"stream": False}) as gw:
            api.flood = [2, 1]
            api.user_says("hi")
            await api.until(lambda: api.find("after the flood"))
    assert api.refused == 2 and gw.waits == [2.0, 1.0]
    assert api.texts() == ["after the flood"]


def _process(home: Path, server: ScriptedProvider, api: FakeTelegram) -> GatewayProcess:
    settings = {"token": "${TG_TOKEN}", "base_url": api.base_url, "poll_timeout": 1,
                "allow_users": [str(ALICE)], "stream": False}  # fmt: skip
    return GatewayProcess(home, server, "telegram", settings, {"TG_TOKEN": "123:TEST"})


async def _killed_while_held(
    home: Path, server: ScriptedProvider, api: FakeTelegram, hold: str, sent: Callable[[], object]
) -> None:
    with _process(home, server, api) as gateway:
        await killed_while_sending(gateway, api, sent, hold)


async def test_kill_9_between_the_answer_and_the_send_delivers_it_once_after_restart(
    tmp_path: Path,
) -> None:
    server = ScriptedProvider([text("the one answer")])
    with server, FakeTelegram() as api:
        await _killed_while_held(
            tmp_path / "home", server, api, "hold_sends", lambda: api.find("the one answer")
        )
    assert [t for t in api.texts() if "the one answer" in t] == [REPEAT_MARK + "the one answer"]
    assert len(server.requests) == 1  # the model was not asked again


async def test_kill_9_while_a_file_goes_out_sends_it_once_after_restart(tmp_path: Path) -> None:
    home = tmp_path / "home"
    folder = chat_folder(home)
    folder.mkdir(parents=True)
    (folder / "report.txt").write_text("the report")
    server = ScriptedProvider([text("Here it is.\nMEDIA:report.txt")])
    with server, FakeTelegram() as api:
        await _killed_while_held(home, server, api, "hold_files", lambda: api.sent_files)
    assert [(f.name, f.data) for f in api.sent_files] == [("report.txt", b"the report")]
    assert [t for t in api.texts() if "Here it is." in t] == ["Here it is."]  # sent once
    assert len(server.requests) == 1  # the model was not asked again


async def test_kill_9_while_a_file_comes_in_downloads_it_again_after_restart(
    tmp_path: Path,
) -> None:
    home = tmp_path / "home"
    server = ScriptedProvider([text("Read it.")])
    with server, FakeTelegram() as api, _process(home, server, api) as gateway:
        api.hold_downloads = True
        api.user_sends_file(b"remember the milk", name="notes.txt", caption="keep this")
        await api.until(lambda: api.held)  # taken in and confirmed, the file not yet saved
        gateway.kill()
        api.hold_downloads = False
        gateway.start()
        await api.until(lambda: api.find("Read it."))
    saved = chat_folder(home) / "notes.txt"
    assert saved.read_bytes() == b"remember the milk"
    assert str(saved) in last_user_content(server) and "keep this" in last_user_content(server)


async def test_an_update_the_store_could_not_take_is_not_confirmed_and_comes_again(
    tmp_path: Path,
) -> None:
    from talaria.store.base import StoreError
    from talaria.store.sqlite import SQLiteSessionStore

    class OnceLocked(SQLiteSessionStore):
        failed = False

        def ledger_take_inbound(self, *args: Any) -> bool:
            if not self.failed:
                self.failed = True
                raise StoreError("database is locked")
            return super().ledger_take_inbound(*args)

    server = ScriptedProvider([text("got it"), text("never")])
    store = OnceLocked(tmp_path / "state.db")
    with server, FakeTelegram() as api:
        async with telegram_gateway(server, tmp_path, api, store=store):
            update = api.user_says("hi")
            await api.until(lambda: api.find("got it"))
            await api.until(lambda: api.confirmed > update["update_id"])
    assert store.failed and api.texts() == ["got it"] and len(server.requests) == 1


PNG = b"\x89PNG\r\n\x1a\n" + b"\x00" * 32


def chat_folder(home: Path) -> Path:
    return home / "chat-files" / f"telegram-{ALICE}"


def last_user_content(server: ScriptedProvider) -> Any:
    messages = server.requests[-1].body["messages"]
    return next(m["content"] for m in reversed(messages) if m["role"] == "user")


async def test_a_photo_is_saved_in_the_chat_folder_and_the_model_sees_it(tmp_path: Path) -> None:
    server = ScriptedProvider([text("A tiny picture.")])
    with server, FakeTelegram() as api:
        async with telegram_gateway(server, tmp_path, api):
            api.user_sends_file(PNG, caption="what is this?")
            await api.until(lambda: api.find("A tiny picture."))
    (saved,) = chat_folder(tmp_path).iterdir()
    assert saved.read_bytes() == PNG
    words, image = last_user_content(server)
    assert "what is this?" in words["text"] and str(saved) in words["text"]
    assert image["image_url"]["url"].startswith("data:image/png;base64,")  # by its bytes


async def test_a_document_with_a_hostile_name_lands_inside_the_folder(tmp_path: Path) -> None:
    server = ScriptedProvider([text("Got it."), text("Got that too.")])
    home = tmp_path / "home"
    with server, FakeTelegram() as api:
        async with telegram_gateway(server, home, api):
            api.user_sends_file(b"one", name="../../x", mime="image/png")  # not an image
            await api.until(lambda: api.find("Got it."))
            api.user_sends_file(b"two", name="../../x")
            await api.until(lambda: api.find("Got that too."))
    folder = chat_folder(home)
    assert sorted(p.name for p in folder.iterdir()) == ["x", "x-1"]
    assert (folder / "x").read_bytes() == b"one" and (folder / "x-1").read_bytes() == b"two"
    assert not (tmp_path / "x").exists() and not (home / "x").exists()
    assert isinstance(last_user_content(server), str)  # the claimed image/png sent no image
    assert str(folder / "x-1") in last_user_content(server)


async def test_a_file_over_the_limit_is_refused_without_downloading(tmp_path: Path) -> None:
    server = ScriptedProvider([text("never")])
    with server, FakeTelegram() as api:
        async with telegram_gateway(server, tmp_path, api):
            api.user_sends_file(b"big", name="big.iso", size=30 * 1024 * 1024)
            refusal = await api.until(lambda: api.find("I could not take big.iso"))
    assert "over the 20 MB limit" in refusal.text
    assert not api.downloads and not server.requests


async def test_the_agent_sends_a_file_back(tmp_path: Path) -> None:
    server = ScriptedProvider(
        [text("Here is the report.\nMEDIA:report.txt\nMEDIA:chart.png"), text("All done.")]
    )
    folder = chat_folder(tmp_path)
    folder.mkdir(parents=True)
    (folder / "report.txt").write_text("the report")
    (folder / "chart.png").write_bytes(PNG)
    with server, FakeTelegram() as api:
        async with telegram_gateway(server, tmp_path, api) as gw:
            api.flood_files = [7]  # the first file is refused for flooding, then sent
            api.user_says("send me the report")
            await api.until(lambda: len(api.sent_files) == 2)
    assert api.texts() == ["Here is the report."] and api.refused == 1 and 7 in gw.waits
    document, photo = api.sent_files
    assert (document.method, document.name, document.data) == (
        "document",
        "report.txt",
        b"the report",
    )
    assert (photo.method, photo.data, photo.chat_id) == ("photo", PNG, ALICE)


async def test_a_file_the_platform_refuses_is_said_in_the_chat_and_not_sent_again(
    tmp_path: Path,
) -> None:
    folder = chat_folder(tmp_path)
    folder.mkdir(parents=True)
    (folder / "huge.bin").write_bytes(b"pretend this is big")
    server = ScriptedProvider([text("Here.\nMEDIA:huge.bin")])
    with server, FakeTelegram() as api:
        async with telegram_gateway(server, tmp_path, api) as gw:
            api.refuse_files = True
            api.user_says("send it")
            await api.until(lambda: api.find("Could not send huge.bin"))
            # The file is dropped, not left to be sent at a restart; the notice is marked sent
            # a moment after the platform has it.
            await api.until(lambda: not gw.store.ledger_pending("telegram"))
    assert api.texts() == ["Here.", "Could not send huge.bin: the platform refused it."]
    assert not api.sent_files


async def test_a_file_outside_the_chat_folder_is_refused(tmp_path: Path) -> None:
    secret = tmp_path / "secret.txt"
    secret.write_text("keys")
    folder = chat_folder(tmp_path)
    folder.mkdir(parents=True)
    (folder / "link.txt").symlink_to(secret)
    answer = f"Here.\nMEDIA:{secret}\nMEDIA:link.txt\nMEDIA:../../secret.txt"
    server = ScriptedProvider([text(answer)])
    with server, FakeTelegram() as api:
        async with telegram_gateway(server, tmp_path, api):
            api.user_says("send me the secret")
            reply = await api.until(lambda: api.find("Here."))
    assert not api.sent_files
    assert reply.text.count("was not sent: only files in") == 3


FILES_LINE = (
    f"This conversation is a telegram chat. To send the user a file, put it in "
    f"chat-files/telegram-{ALICE}/ (where the files they send are saved) and write a line "
    "MEDIA:<file name> in your answer."
)


@pytest.mark.parametrize("prompt", [None, "Be brief."], ids=["talaria's prompt", "the chat's"])
async def test_the_agent_is_told_how_to_send_files_in_a_system_prompt_that_stays_the_same(
    tmp_path: Path, prompt: str | None
) -> None:
    server = ScriptedProvider([text("one"), text("two")])
    settings = {"prompt": prompt} if prompt else {}
    with server, FakeTelegram() as api:
        async with telegram_gateway(server, tmp_path, api, settings=settings):
            api.user_says("hi")
            await api.until(lambda: api.find("one"))
            api.user_says("again")
            await api.until(lambda: api.find("two"))
    first, second = (request.body["messages"][0] for request in server.requests)
    assert first == second and first["role"] == "system"
    assert first["content"].endswith("\n\n" + FILES_LINE)
    if prompt:
        assert first["content"] == f"{prompt}\n\n{FILES_LINE}"


async def test_polling_waits_longer_after_each_failure_and_recovers() -> None:
    waits: list[float] = []

    async def recorded(seconds: float) -> None:
        waits.append(seconds)
        await asyncio.sleep(0)

    received: asyncio.Queue[Any] = asyncio.Queue()
    with FakeTelegram() as api:
        api.failing_polls = 7
        platform = TelegramPlatform(
            "telegram", {"token": "123:TEST", "base_url": api.base_url, "poll_timeout": 1},
            sleep=recorded,
        )  # fmt: skip
        await platform.start(received.put)
        try:
            api.user_says("still there?", user_id=ALICE)
            message = await asyncio.wait_for(received.get(), FOREVER)
        finally:
            await platform.stop()
    assert message.text == "still there?"
    assert waits == [2.0, 4.0, 8.0, 16.0, 32.0, 60.0, 60.0]


async def test_a_send_that_never_reached_telegram_is_not_sent() -> None:
    """Nothing left this machine (no server listens): the outbox may wait without marking a
    later send as a possible repeat."""
    with FakeTelegram() as api:
        unreachable = api.base_url
    platform = TelegramPlatform("telegram", {"token": "123:TEST", "base_url": unreachable})
    with pytest.raises(NotSent):
        await platform.send(ChatRef("telegram", str(ALICE), ""), "hello", key="k1")
