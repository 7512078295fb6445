"""`$'...'` read the way bash reads it: the policy judges the command bash will run, so its
decoding of ANSI-C quoting is compared with bash's own, on generated escapes."""

from __future__ import annotations

import os
import shutil
import subprocess

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from talaria.policy.shell_syntax import ansi_c

_PIECES = st.sampled_from(
    [
        "r", "m", " ", "-", "/", "x", "\\\\", "\\n", "\\t", "\\e", "\\a", "\\'", '\\"', "\\?",
        "\\q", "\\x", "\\x9", "\\x72", "\\x6dz", "\\7", "\\162", "\\1555", "\\u72", "\\u006d",
        "\\u1F600", "\\U1F600", "\\U0001F600", "\\cA", "\\c[", "\\0", "\\x0",
    ]
)  # fmt: skip


@pytest.mark.skipif(shutil.which("bash") is None, reason="bash is not installed")
@settings(max_examples=60, deadline=None)
@given(st.lists(_PIECES, max_size=8).map("".join))
def test_ansi_c_quoting_decodes_as_bash_does(body: str) -> None:
    utf8 = {**os.environ, "LC_ALL": "C.UTF-8"}  # \\u beyond ASCII stays literal in the C locale
    printed = subprocess.run(
        ["bash", "-c", f"printf '%s' $'{body}'"], capture_output=True, check=True, env=utf8
    ).stdout
    assert ansi_c(body).encode("utf-8", "surrogatepass") == printed


@pytest.mark.parametrize(
    ("body", "meant"),
    [(r"\x72\x6d", "rm"), (r"\u72\u6d", "rm"), (r"\x9\x72\x6d", "\trm"), (r"r\x6d\0 x", "rm")],
)
def test_spellings_of_rm_read_as_rm(body: str, meant: str) -> None:
    assert ansi_c(body) == meant
