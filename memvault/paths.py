"""Memory paths: '/'-separated, relative to the vault root, always normalised.

The root is the empty string. A leading or trailing '/' is accepted and
dropped; every other oddity ('..', '.', empty names, NUL, names over 255
bytes) is refused, so no two spellings name the same memory. A whole path
has no limit: through the mount the kernel passes names one at a time, so
a tree may be as deep as its directories go.
"""

from __future__ import annotations

from .errors import BadPath, PathTooLong

MAX_NAME_BYTES = 255
ROOT = ""

# The mount shows query results under search/, so no memory may live there.
RESERVED_TOP_LEVEL = frozenset({"search"})


def check_name(name: str, path: str | None = None) -> str:
    """Validate one path component (a file or directory name)."""
    shown = name if path is None else path
    if name == "":
        raise BadPath(shown, "empty file or directory name")
    if name in (".", ".."):
        raise BadPath(shown, f"{name!r} is not allowed as a name")
    if "/" in name or "\0" in name:
        raise BadPath(shown, "names cannot contain '/' or NUL")
    try:
        encoded = name.encode("utf-8")
    except UnicodeEncodeError:
        raise BadPath(shown, "names must be valid UTF-8") from None
    if len(encoded) > MAX_NAME_BYTES:
        raise PathTooLong(shown, f"a name is at most {MAX_NAME_BYTES} bytes")
    return name


def normalize(path: str, *, allow_root: bool = False) -> str:
    """Return the canonical form of ``path`` or raise BadPath."""
    if not isinstance(path, str):
        raise BadPath(path, "paths are text")
    stripped = path.strip("/")
    if stripped == "":
        if allow_root:
            return ROOT
        raise BadPath(path, "a memory needs a file name")
    for part in stripped.split("/"):
        check_name(part, path)
    if stripped.split("/", 1)[0] in RESERVED_TOP_LEVEL:
        raise BadPath(path, "the top-level 'search' directory is reserved for queries")
    return stripped


def parent(path: str) -> str:
    return path.rpartition("/")[0]


def basename(path: str) -> str:
    return path.rpartition("/")[2]


def join(directory: str, name: str) -> str:
    return f"{directory}/{name}" if directory else name


def ancestors(path: str) -> list[str]:
    """Proper ancestors of ``path``, outermost first, excluding the root."""
    parts = path.split("/")[:-1]
    return ["/".join(parts[: i + 1]) for i in range(len(parts))]


def is_within(path: str, directory: str) -> bool:
    """True if ``path`` is ``directory`` or lies below it."""
    return directory == ROOT or path == directory or path.startswith(directory + "/")
