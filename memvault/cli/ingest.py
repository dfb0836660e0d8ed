"""`memvault ingest`: agents' histories into memories, once or as they grow.
What would be imported (--dry-run) is data on stdout; the summary and the
watch's progress are messages on stderr."""

from __future__ import annotations

import argparse
import time
from collections import Counter
from pathlib import Path

from .. import ingest
from ..errors import SourceNotFound
from ..hardening import harden_process
from . import output
from .common import open_memories


def cmd_ingest(args: argparse.Namespace) -> int:
    kinds = ingest.KINDS if args.what == "all" else (args.what,)
    if args.source:
        for given in args.source:
            if not Path(given).expanduser().exists():
                raise SourceNotFound(given)
        roots = {k: [Path(s).expanduser().resolve() for s in args.source] for k in kinds}
    else:
        roots = {k: ingest.default_roots(k) for k in kinds}

    def no_history() -> None:
        looked = ", ".join(str(p) for k in kinds for p in roots[k])
        hint = "" if args.source else "; point --source at it"
        output.note(f"Found no history in {looked}{hint}.")

    def discover() -> tuple[list, Counter]:
        skipped: Counter = Counter()
        return ingest.collect(kinds, roots, skipped), skipped

    first = discover()
    if not first[0] and not args.watch:
        no_history()  # before asking for a passphrase that nothing needs
        return 0

    def once(vault, found: tuple[list, Counter], show_progress: bool = False) -> ingest.Summary:
        sources, skipped = found
        summary = ingest.run(
            vault,
            sources,
            dry_run=args.dry_run,
            redact_secrets=not args.no_redact,
            progress=output.progress if show_progress else None,
        )
        summary.skipped.update(skipped)
        return summary

    harden_process()  # it holds keys or plaintext, with --watch for days
    with open_memories(args, readonly=args.dry_run) as vault:
        try:
            summary = once(vault, first, show_progress=True)
            output.data(
                "".join(
                    f"would import {dest} ({output.human(size)}, {messages} messages) "
                    f"from {source}\n"
                    for dest, size, messages, source in summary.planned
                )
            )
            for line in summary.lines():
                output.note(("dry run: " if args.dry_run else "") + line)
            if not summary.sources:
                no_history()
            if not args.watch:
                return 0
            output.note(f"Watching for new history every {args.interval:g} s; Ctrl-C stops.")
            while True:
                time.sleep(args.interval)
                summary = once(vault, discover())
                if summary.new or summary.updated:
                    output.note(f"{time.strftime('%H:%M:%S')} {summary.lines()[0]}")
        except KeyboardInterrupt:
            if not args.watch:
                raise
            output.note("Stopped watching.")  # what was stored stays stored
            return 0


def register(add) -> None:
    p = add(
        "ingest",
        cmd_ingest,
        "import Claude Code, Codex and Cursor sessions and context files as memories",
    )
    p.add_argument(
        "what",
        nargs="?",
        default="all",
        choices=["claude", "codex", "cursor", "context", "all"],
        help="which history to import (default: all)",
    )
    p.add_argument(
        "--source",
        action="append",
        metavar="PATH",
        help="read this file or directory (searched recursively) instead of the agent's "
        "default location; repeatable. For `context`: the project roots to search",
    )
    p.add_argument("--dry-run", action="store_true", help="show what would be imported")
    p.add_argument(
        "--no-redact",
        action="store_true",
        help="keep lines that look like credentials (redacted by default)",
    )
    p.add_argument("--watch", action="store_true", help="keep importing until Ctrl-C")
    p.add_argument(
        "--interval", type=float, default=10.0, metavar="SECONDS", help="for --watch (default 10)"
    )
