"""Splitting answers at a platform's limit: what every part must be, for any text."""

from __future__ import annotations

from hypothesis import example, given, settings
from hypothesis import strategies as st

from talaria.gateway.render import FENCE, split_message

LINES = st.lists(
    st.one_of(st.just("```"), st.just("```python"), st.text(max_size=120).map(str.strip)),
    max_size=40,
)


@settings(max_examples=200, deadline=None)
@given(lines=LINES, limit=st.integers(min_value=40, max_value=300))
@example(lines=["```python", "0" * 31], limit=40)  # a word cut inside a code block
def test_every_part_fits_and_no_code_block_is_left_open_by_a_cut(
    lines: list[str], limit: int
) -> None:
    text = "\n".join(lines)
    parts = split_message(text, limit)
    assert all(len(part) <= limit for part in parts)
    for part in parts[:-1]:  # a cut closes what it cut (the last part is the author's)
        fences = [line for line in part.split("\n") if line.lstrip().startswith(FENCE)]
        assert len(fences) % 2 == 0, part
    kept = "".join("".join(without_fences(p).split()) for p in parts).replace("`", "")
    assert all(word.replace("`", "") in kept for word in without_fences(text).split())


def without_fences(text: str) -> str:
    """The text without its fence lines: a cut inside a code block closes and reopens it, so
    the two halves of a word cut there stand on either side of the reopened fence."""
    return "\n".join(line for line in text.split("\n") if not line.lstrip().startswith(FENCE))
