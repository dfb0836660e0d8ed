"""The `memvault` command line, one module per command group: vault.py (the
vault itself), keys.py (passphrases, keyslots, 2FA, recovery), mount.py
(unlock, lock), search.py, ingest.py, transfer.py (export, import),
integrity.py (check, salvage), audit.py, copies.py (backup, restore, verify),
agents.py (serve), sync.py (sync); common.py and output.py are what they share.

Every failure a user can cause or meet is one sentence on stderr and the
exit status of its kind (errors.py; `memvault --help` lists them);
tracebacks are only printed with MEMVAULT_DEBUG=1.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Callable, Sequence

from .. import __version__
from ..errors import EXIT_FAILED, EXIT_INTERRUPTED, EXIT_STATUSES, MemvaultError, UsageError
from ..vault.audit import current_caller, this_process
from . import (
    agents,
    audit,
    copies,
    ingest,
    integrity,
    keys,
    mount,
    output,
    search,
    share,
    sync,
    transfer,
    vault,
)
from .common import common_options

GROUPS = (
    vault,
    integrity,
    audit,
    copies,
    keys,
    mount,
    search,
    ingest,
    transfer,
    agents,
    sync,
    share,
)


class _Parser(argparse.ArgumentParser):
    """A bad command line is one sentence and exit status 2, like every usage error."""

    def error(self, message: str):
        raise UsageError(f"{message[:1].upper()}{message[1:]}; see `{self.prog} --help`.")


def build_parser() -> argparse.ArgumentParser:
    common = common_options()
    statuses = "\n".join(f"  {code:>3}  {what}" for code, what in EXIT_STATUSES.items())
    parser = _Parser(
        prog="memvault",
        parents=[common],
        description="An encrypted, offline memory vault for AI agents.",
        epilog="Run `memvault COMMAND --help` for the options of a command.\n\n"
        f"Exit status:\n{statuses}",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--version", action="version", version=f"memvault {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)

    def add(name: str, func: Callable, help_text: str) -> argparse.ArgumentParser:
        p = sub.add_parser(name, parents=[common], help=help_text, description=help_text)
        if func is not None:  # a group's actions set their own
            p.set_defaults(func=func)
        return p

    for group in GROUPS:
        group.register(add)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    try:
        args = build_parser().parse_args(argv)
        current_caller.set(this_process("cli", args.command))  # audit.py
        return args.func(args)
    except MemvaultError as exc:
        output.fail(str(exc))
        return exc.exit_code
    except KeyboardInterrupt:
        output.fail("interrupted.")
        return EXIT_INTERRUPTED
    except BrokenPipeError:
        return EXIT_FAILED
    except Exception as exc:  # a bug: still one line, the details on request
        if os.environ.get("MEMVAULT_DEBUG"):
            raise
        output.fail(
            f"internal error ({type(exc).__name__}: {exc}); "
            "rerun with MEMVAULT_DEBUG=1 for details."
        )
        return EXIT_FAILED


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
