"""Commands that move memories out of the vault and back in: export, import.
Both work whether or not the vault is unlocked (through the mount when it is)."""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path
from typing import TextIO

from .. import transfer
from ..errors import AlreadyExists, UsageError
from ..vault.records import SYMLINK
from . import output
from .common import open_memories


def cmd_export(args: argparse.Namespace) -> int:
    if (args.plaintext is None) == (args.jsonl is None):
        raise UsageError(
            "Give one of --plaintext DIR or --jsonl FILE; see `memvault export --help`."
        )
    dest = Path(args.plaintext) if args.plaintext is not None else None
    if dest is not None:
        transfer.check_destination(dest)  # before the passphrase is asked
    if args.jsonl not in (None, "-") and os.path.lexists(args.jsonl):
        raise UsageError(f"{args.jsonl} already exists: export writes only to a new file.")
    # Not read-only: the export is recorded in the audit trail.
    with open_memories(args) as vault:
        vault.note("export", "plaintext tree" if dest is not None else "jsonl")
        metas = vault.walk()
        memories = transfer.memories_of(vault, metas)
        if dest is not None:
            count, where = transfer.export_tree(memories, dest), str(dest)
        elif args.jsonl == "-":
            count, where = transfer.export_jsonl(memories, sys.stdout), "standard output"
            sys.stdout.flush()
        else:
            with _new_file(args.jsonl) as out:
                count, where = transfer.export_jsonl(memories, out), args.jsonl
    links = sum(1 for meta in metas if meta.type == SYMLINK)
    if links:
        output.warn(f"{links} symbolic link(s) not exported (only memories and their folders).")
    output.warn(
        f"{count} memories written to {where} UNENCRYPTED: anyone who can read it reads "
        "them. Delete it (and any copy or backup of it) when you are done."
    )
    return 0


def _new_file(path: str) -> TextIO:
    """``path`` created for writing, 0600; never an existing file."""
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
    try:
        return open(os.open(path, flags, 0o600), "w", encoding="utf-8")
    except FileExistsError:
        raise AlreadyExists(path) from None


def cmd_import(args: argparse.Namespace) -> int:
    memories = transfer.read_source(Path(args.source), args.prefix or "")
    with open_memories(args, readonly=args.dry_run) as vault:
        new, clashing = transfer.plan(vault, memories)
        if clashing:
            more = f" (and {len(clashing) - 1} more)" if len(clashing) > 1 else ""
            raise UsageError(
                f"{clashing[0]}{more} already holds other content; nothing was imported "
                "(use --prefix DIR to import beside it)."
            )
        if args.dry_run:
            output.data("".join(f"{len(m.data):>10}  {m.path}\n" for m in new))
            output.note(f"Would import {len(new)} of {len(memories)} memories (dry run).")
            return 0
        vault.note("import", f"{len(new)} memories")
        transfer.import_memories(vault, new)
    same = len(memories) - len(new)
    output.note(
        f"Imported {len(new)} memories" + (f" ({same} already there, unchanged)." if same else ".")
    )
    return 0


def register(add) -> None:
    p = add("export", cmd_export, "copy every memory out of the vault, unencrypted")
    p.add_argument(
        "--plaintext",
        metavar="DIR",
        help="a Markdown tree in DIR (new or empty; made 0700), modes and times kept",
    )
    p.add_argument(
        "--jsonl",
        metavar="FILE",
        help="one JSON object per memory (path, content, mode, mtime_ns) in FILE "
        "(new; made 0600), or - for standard output",
    )
    p = add(
        "import",
        cmd_import,
        "store the files of a directory tree, or the memories of an export --jsonl file",
    )
    p.add_argument("source", metavar="SOURCE", help="a directory, or a .jsonl file")
    p.add_argument("--prefix", metavar="DIR", help="put them under DIR in the vault")
    p.add_argument(
        "--dry-run", action="store_true", help="list what would be imported; write nothing"
    )
