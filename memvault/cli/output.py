"""Where the CLI's words go (the age convention): data on standard output,
messages (what was done, progress, warnings, errors) on standard error."""

from __future__ import annotations

import json
import sys
from typing import Any

PREFIX = "memvault: "


def data(text: str | bytes) -> None:
    """What the command produces: a memory, a listing, results, a report."""
    if isinstance(text, str):
        text = text.encode()
    sys.stdout.buffer.write(text)
    sys.stdout.buffer.flush()


def data_json(value: Any) -> None:
    data(json.dumps(value, indent=2, ensure_ascii=False) + "\n")


def note(message: str) -> None:
    """What was done: "Stored ...", "Locked ..."."""
    print(message, file=sys.stderr, flush=True)


def warn(message: str) -> None:
    print(f"{PREFIX}warning: {message}", file=sys.stderr, flush=True)


def fail(message: str) -> None:
    """The one sentence of a failed command."""
    print(f"{PREFIX}{message}", file=sys.stderr, flush=True)


def progress(done: int, total: int, label: str) -> None:
    """A bar redrawn in place on a terminal; nothing when stderr is not one."""
    if not sys.stderr.isatty():
        return
    width = 30
    filled = width * done // max(total, 1)
    bar = f"[{'#' * filled}{' ' * (width - filled)}] {done}/{total} {label[:40]:<40}"
    print(f"\r{bar}", end="", file=sys.stderr, flush=True)
    if done >= total:
        print(file=sys.stderr)


def human(n: float) -> str:
    """A byte count for people: 512 bytes, 60.0 KiB, 1.2 GiB."""
    for unit in ("bytes", "KiB", "MiB", "GiB"):
        if n < 1024 or unit == "GiB":
            return f"{n:.0f} {unit}" if unit == "bytes" else f"{n:.1f} {unit}"
        n /= 1024
    raise AssertionError  # pragma: no cover
