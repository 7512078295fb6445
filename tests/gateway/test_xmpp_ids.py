"""The ids the XMPP adapter gives what people send: the gateway de-duplicates on them, so
they must tell two senders apart and stay the same when the server redelivers a message."""

from __future__ import annotations

import pytest

from talaria.gateway.xmpp import inbound_id

pytest.importorskip("slixmpp")


def message(sender: str, body: str, message_id: str = "", origin: str = "") -> object:
    from slixmpp import Message
    from slixmpp.plugins.xep_0359.stanza import register_plugins

    register_plugins()  # stanza-id and origin-id, as the adapter's client registers them
    msg = Message()
    msg["from"], msg["body"], msg["id"] = sender, body, message_id
    if origin:
        msg["origin_id"]["id"] = origin
    return msg


def test_the_same_client_id_from_two_people_gives_two_ids() -> None:
    alice = inbound_id(message("alice@example.org/phone", "hi", "m1"), "alice@example.org")
    bob = inbound_id(message("bob@example.org/laptop", "hi", "m1"), "bob@example.org")
    assert alice != bob


def test_a_redelivered_message_keeps_its_id() -> None:
    first = message("alice@example.org/phone", "hi", "m1", origin="o1")
    again = message("alice@example.org/phone", "hi", "m1", origin="o1")
    assert inbound_id(first, "alice@example.org") == inbound_id(again, "alice@example.org")


def test_without_any_id_the_sender_and_body_stand_in() -> None:
    said = inbound_id(message("alice@example.org/phone", "hi"), "alice@example.org")
    assert said == inbound_id(message("alice@example.org/phone", "hi"), "alice@example.org")
    assert said != inbound_id(message("bob@example.org/phone", "hi"), "bob@example.org")
