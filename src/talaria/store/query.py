"""How a user's search text becomes search terms, whatever engine runs the search.

Both backends render the same terms (SQLite as an FTS5 expression, PostgreSQL as a tsquery),
so a query means the same thing on either: punctuation is text, never syntax.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from talaria.store.base import SearchQueryError

_OPERATORS = {"AND", "OR", "NOT"}
_TOKEN = re.compile(r'"([^"]*)"|(\S+)')
_WORD = re.compile(r"[^\W_]+")


@dataclass(frozen=True, slots=True)
class QueryTerm:
    text: str
    """The term as the user wrote it (a word, or the inside of a "quoted phrase")."""
    prefix: bool = False
    """A trailing `*`: match words that start with the term's last word."""
    operator: str | None = None
    """"OR" or "NOT" joining this term to the previous ones; None means AND."""

    @property
    def words(self) -> list[str]:
        """The term split the way the indexes split text: runs of letters and digits."""
        return _WORD.findall(self.text.lower())


def parse_query(text: str) -> list[QueryTerm]:
    """The terms of a search text.

    Balanced "double quotes" keep a phrase; a trailing `*` asks for a prefix; upper-case OR /
    NOT between two terms are operators, AND is implied. Terms with no letter or digit are
    dropped; if nothing is left the query is refused.
    """
    terms: list[QueryTerm] = []
    pending_op: str | None = None
    for match in _TOKEN.finditer(text.replace("\x00", " ")):  # NUL ends a C string
        phrase, word = match.group(1), match.group(2)
        if word in _OPERATORS:
            pending_op = word if terms and word != "AND" else None
            continue
        raw = phrase if phrase is not None else word.replace('"', " ")
        prefix = phrase is None and raw.endswith("*")
        raw = raw.rstrip("*") if prefix else raw
        if not any(ch.isalnum() for ch in raw):
            continue
        terms.append(QueryTerm(raw, prefix, pending_op if terms else None))
        pending_op = None
    if not terms:
        raise SearchQueryError(
            f"search query {text!r} has no words to search for; use letters or digits"
        )
    return terms


def index_words(body: str) -> str:
    """A message body as the words a PostgreSQL index sees (letters and digits only)."""
    return " ".join(_WORD.findall(body.lower()))
