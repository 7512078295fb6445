"""Who may talk to the agent: nobody, unless the configuration or the owner says so.

A user in `allow_users` (or one the owner paired) may talk anywhere on the platform; anyone in
a room of `allow_rooms` may talk there. In a group room the agent answers only when
addressed (a mention, a reply to it, or the configured prefix). A stranger in a direct
message gets a pairing code when pairing is on, and otherwise nothing; a stranger elsewhere
always gets nothing. Either way the message reaches no model.
"""

from __future__ import annotations

import secrets
from enum import Enum

from talaria.gateway.platform import Inbound
from talaria.gateway.settings import PlatformSettings

CODE_ALPHABET = "ABCDEFGHJKLMNPQRSTUVWXYZ23456789"  # no 0/O, 1/I
CODE_LENGTH = 8


class Verdict(Enum):
    TALK = "talk"
    PAIR = "pair"
    IGNORE = "ignore"


def is_addressed(settings: PlatformSettings, message: Inbound) -> bool:
    if message.is_direct or message.mentioned or message.reply_to_bot:
        return True
    return bool(settings.prefix) and message.text.lstrip().startswith(str(settings.prefix))


def verdict(settings: PlatformSettings, message: Inbound, paired: bool) -> Verdict:
    """What to do with `message`; `paired`: the owner paired its sender."""
    if not is_addressed(settings, message):
        return Verdict.IGNORE
    known = paired or message.sender_id in settings.allow_users
    if known or (not message.is_direct and message.chat.chat_id in settings.allow_rooms):
        return Verdict.TALK
    if message.is_direct and settings.pairing:
        return Verdict.PAIR
    return Verdict.IGNORE


def may_answer(settings: PlatformSettings, sender_id: str, paired: bool) -> bool:
    """Approvals and questions are answered only by users named or paired, never by anyone
    who happens to be in an allowed room."""
    return paired or sender_id in settings.allow_users


def strip_address(settings: PlatformSettings, text: str) -> str:
    """The message without the prefix that addressed the agent."""
    stripped = text.lstrip()
    if settings.prefix and stripped.startswith(settings.prefix):
        return stripped[len(settings.prefix) :].lstrip()
    return text


def new_code() -> str:
    return "".join(secrets.choice(CODE_ALPHABET) for _ in range(CODE_LENGTH))


def pairing_text(code: str) -> str:
    return (
        "I only talk to people my owner knows. To be let in, ask the owner to run:\n"
        f"talaria gateway pair {code}"
    )
