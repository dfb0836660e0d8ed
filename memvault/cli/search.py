"""Commands that ask the search index: search, and reindex (re-embed every
memory with the installed model). Through the daemon when the vault is
unlocked, whose index is ready; in process otherwise."""

from __future__ import annotations

import argparse

from .. import search
from ..fs import control
from ..mounted import MountedVault
from . import output
from .common import daemon_of, open_in_process


def cmd_search(args: argparse.Namespace) -> int:
    query = search.Query(" ".join(args.query), search.to_k(args.k), args.prefix or "", args.json)
    record = daemon_of(args)
    if record is not None:  # the daemon's index answers at once
        with MountedVault(record) as mounted:
            output.data(mounted.search(query))
        return 0
    with open_in_process(args, readonly=True) as vault:
        service = search.open_search(vault)
        service.ensure_model()
        output.note(f"memvault: indexing {len(vault)} memories (the vault is not unlocked)...")
        service.catch_up()
        results = service.search(query)
    output.data(search.render(query, results))
    return 0


def cmd_reindex(args: argparse.Namespace) -> int:
    record = daemon_of(args)
    if record is not None:
        output.note(f"The daemon (pid {record.pid}) is re-indexing with the installed model...")
        done = control.ask(record.control_path, "reindex", pid=record.pid)
        count, sha = done["memories"], done["model"]
    else:
        with open_in_process(args) as vault:
            sha = search.open_search(vault).reindex()
            count = len(vault)
    output.note(f"Re-indexed {count} memories; the vault is pinned to embedding model {sha[:12]}….")
    return 0


def register(add) -> None:
    p = add("search", cmd_search, "search the memories (hybrid: words and meaning)")
    p.add_argument("query", metavar="QUERY", nargs="+", help="what to look for")
    p.add_argument(
        "-k",
        default=str(search.DEFAULT_K),
        metavar="N",
        help=f"how many results (1-{search.MAX_K})",
    )
    p.add_argument("--in", dest="prefix", metavar="DIR", help="only memories under DIR")
    p.add_argument("--json", action="store_true", help="print JSON instead of Markdown")
    add(
        "reindex",
        cmd_reindex,
        "re-embed every memory with the installed embedding model (returns when done)",
    )
