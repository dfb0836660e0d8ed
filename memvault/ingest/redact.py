"""Redaction of lines that look like credentials, before anything is stored.

Deliberately eager: a redacted non-secret costs little, a stored secret is
the one thing an encrypted memory of agent sessions must not hold.
"""

from __future__ import annotations

import re

MARK = "[REDACTED]"

_PRIVATE_KEY = re.compile(
    r"-----BEGIN [A-Z0-9 ]*PRIVATE KEY-----.*?(?:-----END [A-Z0-9 ]*PRIVATE KEY-----|\Z)",
    re.DOTALL,
)
_TOKENS = re.compile(
    r"\b(?:"
    r"sk-(?:ant-|proj-)?[A-Za-z0-9_\-]{20,}"  # OpenAI / Anthropic
    r"|gh[pousr]_[A-Za-z0-9]{30,}|github_pat_[A-Za-z0-9_]{40,}"  # GitHub
    r"|glpat-[A-Za-z0-9_\-]{20,}"  # GitLab
    r"|xox[abprs]-[A-Za-z0-9\-]{10,}"  # Slack
    r"|(?:AKIA|ASIA)[0-9A-Z]{16}"  # AWS access key id
    r"|AIza[0-9A-Za-z_\-]{35}"  # Google API key
    r"|eyJ[A-Za-z0-9_\-]{10,}\.eyJ[A-Za-z0-9_\-]{10,}\.[A-Za-z0-9_\-]{10,}"  # JWT
    r"|(?:sk|rk|pk)_live_[A-Za-z0-9]{20,}"  # Stripe
    r")"
)
_ASSIGNMENT = re.compile(
    r"(?i)\b([A-Z0-9_.\-]*(?:secret|token|passw(?:or)?d|passwd|api[_\-]?key|access[_\-]?key|"
    r"private[_\-]?key|credentials?|auth)[A-Z0-9_.\-]*)"
    r"(\s*[=:]\s*|\"\s*:\s*\")"
    r"([^\s\"',;]{6,})"
)
_BEARER = re.compile(r"(?i)\b(bearer|basic)\s+[A-Za-z0-9_\-.=+/]{16,}")
_URL_PASSWORD = re.compile(r"\b([a-z][a-z0-9+.\-]*://[^\s:/@]+):([^\s@/]{3,})@")
_PLACEHOLDER = re.compile(
    r"^(?:\*+|x+|\$\{?[A-Za-z_]+\}?|<[^>]*>|\.\.\.|null|none|true|false)$", re.IGNORECASE
)


def redact(text: str) -> tuple[str, int]:
    """``text`` with credentials replaced by [REDACTED], and how many were."""
    count = 0

    def mark(_match: re.Match) -> str:
        nonlocal count
        count += 1
        return MARK

    def keep_name(match: re.Match) -> str:
        nonlocal count
        if _PLACEHOLDER.match(match.group(3)) or match.group(3) == MARK:
            return match.group(0)
        count += 1
        return match.group(1) + match.group(2) + MARK

    def url(match: re.Match) -> str:
        nonlocal count
        count += 1
        return f"{match.group(1)}:{MARK}@"

    text = _PRIVATE_KEY.sub(mark, text)
    text = _TOKENS.sub(mark, text)
    text = _BEARER.sub(lambda m: (mark(m), f"{m.group(1)} {MARK}")[1], text)
    text = _URL_PASSWORD.sub(url, text)
    text = _ASSIGNMENT.sub(keep_name, text)
    return text, count
