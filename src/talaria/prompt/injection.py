"""Scanning text that will reach a system prompt (memory entries, context files) for
prompt-injection phrasings and for secrets.

Memory is replayed into every future session, so one poisoned or leaky write would persist;
the memory tool refuses writes with findings. Patterns aim at phrasings that are rarely
innocent ("ignore all previous instructions"), not at ordinary words ("ignore the whitespace").
"""

from __future__ import annotations

import re
import unicodedata

_FLAGS = re.IGNORECASE

_PREVIOUS = r"(?:previous|prior|above|earlier|preceding|foregoing|initial|original|system)"
_ORDERS = r"(?:instructions?|prompts?|rules|directions|guidelines|context|messages?)"

_INJECTION_PATTERNS: tuple[tuple[str, re.Pattern[str]], ...] = (
    (
        "asks to ignore previous instructions",
        re.compile(
            rf"\b(?:ignore|override|bypass)\s+(?:(?:all|any|every|of|the|your|these|those)\s+)*"
            rf"{_PREVIOUS}\s+{_ORDERS}|\bignore\s+(?:everything|all)\s+(?:above|before)\b",
            _FLAGS,
        ),
    ),
    (
        "asks to disregard the system prompt or instructions",
        re.compile(
            rf"\bdisregard\s+(?:(?:all|any|the|your|my|of|these|those)\s+)*"
            rf"(?:{_PREVIOUS}\s+)?(?:system\s+prompt|{_ORDERS})",
            _FLAGS,
        ),
    ),
    (
        "asks to forget instructions",
        re.compile(
            rf"\bforget\s+(?:(?:all|any|everything|the|your|about)\s+)*(?:{_PREVIOUS}\s+)?"
            rf"(?:system\s+prompt|{_ORDERS}|you\s+were\s+told)",
            _FLAGS,
        ),
    ),
    (
        "tries to assign a new identity",
        re.compile(
            r"\byou\s+are\s+(?:now|no\s+longer)\s+(?:an?\s+|the\s+|in\s+)?"
            r"(?:new\s+|different\s+|unrestricted\s+|unfiltered\s+|evil\s+)?"
            r"(?:ai|assistant|model|chatbot|persona|character|dan|developer\s+mode|jailbroken|"
            r"unrestricted|unfiltered|free\s+(?:of|from)|bound\s+by|restricted|limited)\b",
            _FLAGS,
        ),
    ),
    (
        "announces replacement instructions",
        re.compile(
            r"\b(?:new|updated|real|actual)\s+(?:system\s+)?(?:instructions|prompt)\s*:"
            r"|\bsystem\s+prompt\s+override\b",
            _FLAGS,
        ),
    ),
    (
        "asks to hide actions from the user",
        re.compile(
            r"\b(?:do\s+not|don't|never)\s+(?:tell|inform|mention\s+(?:this\s+)?to|alert)\s+"
            r"(?:the\s+)?user\b",
            _FLAGS,
        ),
    ),
    (
        "fake role tag",
        re.compile(
            r"</?\s*(?:system|assistant|developer|instructions?)\s*>|<\|im_start\|>|<\|im_end\|>"
            r"|<\|(?:system|assistant|user)\|>|<<\s*SYS\s*>>|\[/?INST\]",
            _FLAGS,
        ),
    ),
    (
        "sends secrets to the network",
        re.compile(
            r"\b(?:curl|wget|nc|ncat|Invoke-WebRequest|iwr)\b[^\n]*"
            r"(?:\$\{?[A-Z_]*(?:KEY|TOKEN|SECRET|PASSW(?:OR)?D|CREDENTIALS?)[A-Z_]*\}?"
            r"|\.env\b|\.ssh/|id_rsa|id_ed25519|\.aws/credentials|\.netrc|/etc/shadow)",
            _FLAGS,
        ),
    ),
    (
        "reads secrets into a network command",
        re.compile(
            r"(?:\.env\b|\.ssh/|id_rsa|id_ed25519|\.aws/credentials|\.netrc)[^\n]*\|\s*"
            r"(?:curl|wget|nc|ncat)\b",
            _FLAGS,
        ),
    ),
)

_HTML_COMMENT = re.compile(r"<!--(.*?)-->", re.DOTALL)
_COMMENT_IMPERATIVE = re.compile(
    r"\b(?:ignore|instructions?|system|prompt|assistant|ai|model|you\s+(?:must|should|will)|"
    r"do\s+not|don't|execute|run|curl|wget|secret|password|token|api\s+key)\b",
    _FLAGS,
)

_INVISIBLE = frozenset(
    [
        0x00AD,
        0x180E,
        0xFEFF,
        *range(0x200B, 0x2010),
        *range(0x202A, 0x202F),
        *range(0x2060, 0x2065),
        *range(0x2066, 0x206A),
    ]
)

_ZWJ = 0x200D
_TAG_CHARS = (0xE0000, 0xE007F)  # invisible ASCII look-alikes used to smuggle instructions

_SECRET_PATTERNS: tuple[tuple[str, re.Pattern[str]], ...] = (
    ("Anthropic API key", re.compile(r"\bsk-ant-[A-Za-z0-9_-]{20,}")),
    (
        "OpenAI-style API key",
        re.compile(r"\bsk-(?!ant-)(?:proj-|svcacct-|admin-)?[A-Za-z0-9_-]{20,}"),
    ),
    ("AWS access key id", re.compile(r"\b(?:AKIA|ASIA)[0-9A-Z]{16}\b")),
    ("GitHub token", re.compile(r"\b(?:gh[pousr]_[A-Za-z0-9]{36,}|github_pat_[A-Za-z0-9_]{22,})")),
    ("Slack token", re.compile(r"\bxox[abposr]-[A-Za-z0-9-]{10,}")),
    ("Google API key", re.compile(r"\bAIza[0-9A-Za-z_-]{35}")),
    ("private key block", re.compile(r"-----BEGIN (?:[A-Z0-9]+ )*PRIVATE KEY(?: BLOCK)?-----")),
    (
        "JSON Web Token",
        re.compile(r"\beyJ[A-Za-z0-9_-]{8,}\.eyJ[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{8,}"),
    ),
)


def _redact(secret: str) -> str:
    return secret[:6] + "…" if len(secret) > 10 else "…"


def _is_emoji_joiner(text: str, index: int) -> bool:
    """A zero-width joiner right after an emoji builds a sequence (👩‍💻): not hiding text."""
    if ord(text[index]) != _ZWJ or index == 0:
        return False
    previous = text[index - 1]
    return unicodedata.category(previous) in ("So", "Sk", "Mn") or (
        0x1F3FB <= ord(previous) <= 0x1F3FF
    )


def _invisible_findings(text: str) -> list[str]:
    found = sorted(
        {
            ord(ch)
            for index, ch in enumerate(text)
            if (ord(ch) in _INVISIBLE or _TAG_CHARS[0] <= ord(ch) <= _TAG_CHARS[1])
            and not _is_emoji_joiner(text, index)
        }
    )
    return [
        f"invisible unicode character U+{code:04X} ({unicodedata.name(chr(code), 'unnamed')})"
        for code in found
    ]


def scan_text(text: str) -> list[str]:
    """Describe each prompt-injection signal found in `text` (empty list: nothing found)."""
    findings = [
        f"prompt injection: {label} ({match.group(0).strip()[:60]!r})"
        for label, pattern in _INJECTION_PATTERNS
        if (match := pattern.search(text))
    ]
    for comment in _HTML_COMMENT.finditer(text):
        if _COMMENT_IMPERATIVE.search(comment.group(1)):
            findings.append(
                f"prompt injection: hidden instruction in an HTML comment "
                f"({comment.group(0)[:60]!r})"
            )
            break
    return findings + _invisible_findings(text)


def scan_secrets(text: str) -> list[str]:
    """Describe each credential-looking string in `text`, redacted so the finding is safe
    to show or log."""
    return [
        f"secret: {label} ({_redact(match.group(0))})"
        for label, pattern in _SECRET_PATTERNS
        for match in pattern.finditer(text)
    ]
