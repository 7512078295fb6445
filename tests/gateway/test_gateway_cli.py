"""`talaria gateway` and `talaria gateway pair CODE` as the owner runs them."""

from __future__ import annotations

from pathlib import Path

from cli_process import cli
from talaria.store.sqlite import SQLiteSessionStore


def test_pair_lets_in_the_user_the_code_was_given_to(tmp_path: Path) -> None:
    with SQLiteSessionStore(tmp_path / "state.db") as store:
        code = store.ledger_request_pairing("telegram", "42", "Bob", "K7M2Q9XA", ttl=3600)
    unknown = cli(tmp_path, "gateway", "pair", "NOPE1234")
    assert unknown.returncode == 2 and "no pairing request" in unknown.stderr
    done = cli(tmp_path, "gateway", "pair", code.lower())
    assert done.returncode == 0 and "paired 42 on telegram" in done.stdout
    again = cli(tmp_path, "gateway", "pair", code)
    assert again.returncode == 2 and "used already" in again.stderr
    with SQLiteSessionStore(tmp_path / "state.db") as store:
        assert store.ledger_is_paired("telegram", "42")


def test_pair_refuses_an_expired_code_and_the_ttl_is_configurable(tmp_path: Path) -> None:
    # codes given at the clock's start (1970): long expired for the default hour
    with SQLiteSessionStore(tmp_path / "state.db", clock=lambda: 0.0) as store:
        old = store.ledger_request_pairing("telegram", "42", "Bob", "K7M2Q9XA", ttl=3600)
        kept = store.ledger_request_pairing("telegram", "43", "Eve", "P3RQ7W2Z", ttl=3600)
    expired = cli(tmp_path, "gateway", "pair", old)
    assert expired.returncode == 2
    assert "expired; ask the user to write again" in expired.stderr
    (tmp_path / "config.yaml").write_text("gateway:\n  pairing_code_ttl: 1.0e+12\n")
    done = cli(tmp_path, "gateway", "pair", kept)
    assert done.returncode == 0 and "paired 43 on telegram" in done.stdout


def test_without_platforms_or_with_an_unknown_one_the_gateway_refuses_to_start(
    tmp_path: Path,
) -> None:
    nothing = cli(tmp_path, "gateway")
    assert nothing.returncode == 2 and "no platform configured" in nothing.stderr
    (tmp_path / "config.yaml").write_text("gateway:\n  platforms:\n    chat: {type: fax}\n")
    unknown = cli(tmp_path, "gateway")
    assert unknown.returncode == 2 and "'fax' is not one of" in unknown.stderr


async def test_a_chat_is_a_session_the_terminal_lists_and_resumes(tmp_path: Path) -> None:
    from cli_process import ask
    from gateway_support import running_gateway
    from talaria.gateway.fake import user_message
    from talaria.testing import ScriptedProvider, text

    server = ScriptedProvider([text("Noted: the deploy is on Friday."), text("On Friday.")])
    with server:
        async with running_gateway(server, tmp_path) as gw:
            await gw.platform.deliver(user_message("the deploy is on Friday"))
            await gw.platform.wait_for(lambda m: m.text.startswith("Noted"))
            (session,) = gw.store.list_sessions()
            # the answer shows while it streams; the turn is stored once it has ended
            await gw.until(lambda: len(gw.store.load_messages(session.id)) == 2)
        listed = cli(tmp_path, "sessions", "list")
        resumed = ask(tmp_path, server, "when is the deploy?", "--resume", session.id)
    assert session.id in listed.stdout
    assert resumed.returncode == 0 and "On Friday." in resumed.stdout
    said, answered, asked = (m["content"] for m in server.requests[-1].body["messages"][1:])
    assert (said, answered) == ("the deploy is on Friday", "Noted: the deploy is on Friday.")
    assert asked.startswith("when is the deploy?")  # (and a note: the terminal's folder differs)
