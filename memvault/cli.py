"""The `memvault` command line.

Every failure a user can cause or meet (wrong passphrase, no vault, damaged
vault, bad path, vault in use, full disk) is one sentence on stderr and a
non-zero exit status; tracebacks are only printed with MEMVAULT_DEBUG=1.
"""

from __future__ import annotations

import argparse
import logging
import os
import sys
import time
from collections import Counter
from collections.abc import Callable, Sequence
from pathlib import Path

from . import __version__, paths
from .crypto import DEFAULT_KDF, KdfParams
from .crypto import kdf as kdf_limits
from .errors import (
    CompactionOwed,
    MemvaultError,
    PassphraseError,
    QueryTooLong,
    TooLarge,
    VaultExists,
    VaultInUse,
)
from .fs.runtime import MountError, MountRecord, clean_stale, is_stale, mounted_at, unmount
from .hardening import harden_process
from .mounted import MountedVault
from .passphrase import ENV_VAR, read_passphrase
from .vault import MAX_MEMORY_SIZE, Vault, read_info
from .vault.store import compaction_owed

DEFAULT_VAULT = "~/.memvault/memory.vault"
DEFAULT_MOUNTPOINT = "~/memory"
VAULT_ENV_VAR = "MEMVAULT_VAULT"

EXIT_ERROR = 1
EXIT_INTERRUPTED = 130


def vault_path(args: argparse.Namespace) -> Path:
    given = getattr(args, "vault", None) or os.environ.get(VAULT_ENV_VAR) or DEFAULT_VAULT
    return Path(given).expanduser()


def serving_daemon(args: argparse.Namespace) -> MountRecord | None:
    """The runtime record of the daemon serving this vault, if one is alive."""
    record = MountRecord.load(vault_path(args))
    return record if record is not None and record.alive else None


def open_vault(args: argparse.Namespace, *, readonly: bool = False) -> Vault | MountedVault:
    """The vault itself, or its mount if a daemon serves it (the only writer)."""
    path = vault_path(args)
    record = serving_daemon(args)
    if record is not None:
        return MountedVault(Path(record.mountpoint), record.pid)
    from_stdin = getattr(args, "passphrase_stdin", False)
    vault = Vault.open(
        path,
        lambda: read_passphrase(from_stdin=from_stdin),
        readonly=readonly,
        compact_delay=None,
        accept_journal_loss=getattr(args, "accept_journal_loss", False),
    )
    if vault.damaged:
        print(
            f"memvault: warning: {len(vault.damaged)} record(s) of the vault are damaged "
            f"and cannot be read: {vault.describe_damage()}. `memvault repair` drops them.",
            file=sys.stderr,
        )
    return vault


# -- commands -------------------------------------------------------------------


def cmd_init(args: argparse.Namespace) -> int:
    path = vault_path(args)
    kdf = KdfParams(args.kdf_time, args.kdf_memory * 1024, args.kdf_parallelism)
    try:
        kdf.validate()
    except ValueError as exc:
        raise PassphraseError(f"{exc}.") from None
    if path.exists():
        raise VaultExists(path)
    passphrase = read_passphrase(from_stdin=getattr(args, "passphrase_stdin", False), confirm=True)
    Vault.create(path, passphrase, kdf=kdf, compact_delay=None).close()
    print(f"Created the vault {path} ({kdf.describe()}).")
    return 0


def cmd_status(args: argparse.Namespace) -> int:
    info = read_info(vault_path(args))
    created = time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime(info.header.created_ns / 1e9))
    if info.writer_pid is None:
        state = "locked (no process has it open)"
    else:
        state = f"open for writing by process {info.writer_pid}"
    print(f"vault:     {info.path}")
    print(f"format:    memvault format {info.header.version}")
    print(f"vault id:  {info.header.vault_id.hex()}")
    print(f"created:   {created}")
    print(f"size:      {_human(info.file_size)} ({info.file_size} bytes)")
    record = MountRecord.load(info.path)
    if record is not None and record.alive:
        state = f"unlocked, mounted at {record.mountpoint} by process {record.pid}"
    elif record is not None:
        state = "a daemon died without locking; `memvault lock` cleans up its mount"
    print(f"state:     {state}")
    if record is not None and record.alive:
        print(f"memories:  {record.memories}")
        print(f"pending shreds: {record.pending_shreds}")
        if record.search_index:
            print(f"search index: {record.search_index}")
    elif compaction_owed(info.path):
        print(
            "pending shreds: shredded or overwritten memories are still in the file; "
            "the next unlock (or any writing command) finishes them"
        )
    print(f"keyslots:  {len(info.slots)}")
    for slot in info.slots:
        print(f"  slot {slot.index}: {_slot_kdf(slot)}")
    return 0


def _slot_kdf(slot) -> str:
    """A slot's KDF as stored: nothing vouches for it until a passphrase opens it."""
    if not hasattr(slot, "kdf"):
        return "damaged"
    try:
        slot.kdf.validate()
    except ValueError:
        return f"{slot.kdf.describe()} (over the limits: unlock will refuse it)"
    return f"{slot.kdf.describe()} (unverified until unlock)"


def cmd_put(args: argparse.Namespace) -> int:
    with open_vault(args) as vault:
        data = sys.stdin.buffer.read(MAX_MEMORY_SIZE + 1)  # no more than a memory may hold
        if len(data) > MAX_MEMORY_SIZE:
            raise TooLarge(args.path.strip("/"), f"more than {MAX_MEMORY_SIZE}", MAX_MEMORY_SIZE)
        meta = vault.put(args.path, data)
    print(f"Stored {meta.path} ({meta.size} bytes).", file=sys.stderr)
    return 0


def cmd_get(args: argparse.Namespace) -> int:
    with open_vault(args, readonly=True) as vault:
        data = vault.get(args.path)
    sys.stdout.buffer.write(data)
    sys.stdout.buffer.flush()
    return 0


def cmd_ls(args: argparse.Namespace) -> int:
    with open_vault(args, readonly=True) as vault:
        if args.recursive:
            root = args.directory.strip("/")
            vault.list(root)  # raises if it is not a directory
            prefix = root + "/" if root else ""
            rows = [(m.path[len(prefix) :], m) for m in vault.walk() if m.path.startswith(prefix)]
        else:
            rows = vault.list(args.directory)
    for name, meta in rows:
        shown = name + "/" if meta.is_dir else name
        if args.long:
            mtime = time.strftime("%Y-%m-%d %H:%M", time.localtime(meta.mtime_ns / 1e9))
            print(f"{meta.size:>10}  {mtime}  {shown}")
        else:
            print(shown)
    return 0


def cmd_rm(args: argparse.Namespace) -> int:
    with open_vault(args) as vault:
        count = vault.delete(args.path, recursive=args.recursive)
        print(
            f"Shredded {args.path.strip('/')} ({count} record(s)); compacting...", file=sys.stderr
        )
    return 0


def cmd_mv(args: argparse.Namespace) -> int:
    with open_vault(args) as vault:
        vault.rename(args.old, args.new)
    return 0


def cmd_compact(args: argparse.Namespace) -> int:
    path = vault_path(args)
    with open_vault(args) as vault:
        before = path.stat().st_size
        vault.compact()
        after = path.stat().st_size
    print(f"Compacted {path}: {_human(before)} -> {_human(after)}.")
    return 0


def cmd_search(args: argparse.Namespace) -> int:
    from . import search

    query = search.Query(" ".join(args.query), search.to_k(args.k), args.prefix or "", args.json)
    record = serving_daemon(args)
    if record is not None:  # the daemon's index answers at once
        sys.stdout.buffer.write(_search_through_mount(Path(record.mountpoint), query.file_name()))
        return 0
    with open_vault(args, readonly=True) as vault:
        service = search.open_search(vault)
        service.ensure_model()
        print(f"memvault: indexing {len(vault)} memories (the vault is not unlocked)...",
              file=sys.stderr)  # fmt: skip
        service.catch_up()
        results = service.search(query)
    sys.stdout.buffer.write(search.render(query, results))
    return 0


def _search_through_mount(mountpoint: Path, name: str) -> bytes:
    """The query is a file name under search/, so it is bound by the name limit."""
    size = len(name.encode())
    if size > paths.MAX_NAME_BYTES:
        raise QueryTooLong(size, paths.MAX_NAME_BYTES)
    try:
        return (mountpoint / "search" / name).read_bytes()
    except OSError as exc:
        raise MountError(f"The search through {mountpoint} failed: {exc.strerror}.") from None


def cmd_reindex(args: argparse.Namespace) -> int:
    record = serving_daemon(args)
    if record is not None:
        import signal

        os.kill(record.pid, signal.SIGUSR2)
        print(f"The daemon (pid {record.pid}) is re-indexing with the installed model.")
        return 0
    from .search import open_search

    with open_vault(args) as vault:
        sha = open_search(vault).reindex()
        count = len(vault)
    print(f"Re-indexed {count} memories; the vault is pinned to embedding model {sha[:12]}….")
    return 0


def cmd_ingest(args: argparse.Namespace) -> int:
    from . import ingest
    from .errors import SourceNotFound

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
        print(f"Found no history in {looked}{hint}.", file=sys.stderr)

    def discover() -> tuple[list, Counter]:
        skipped: Counter = Counter()
        return ingest.collect(kinds, roots, skipped), skipped

    first = discover()
    if not first[0] and not args.watch:
        no_history()  # before asking for a passphrase that nothing needs
        return 0

    def once(vault, found: tuple[list, Counter], show_progress: bool = False) -> ingest.Summary:
        sources, skipped = found
        bar = _progress_bar if show_progress and sys.stderr.isatty() else None
        summary = ingest.run(
            vault, sources, dry_run=args.dry_run, redact_secrets=not args.no_redact, progress=bar
        )
        summary.skipped.update(skipped)
        if bar:
            print(file=sys.stderr)
        return summary

    harden_process()  # it holds keys or plaintext, with --watch for days
    with open_vault(args, readonly=args.dry_run) as vault:
        try:
            summary = once(vault, first, show_progress=True)
            for dest, size, messages, source in summary.planned:
                print(f"would import {dest} ({_human(size)}, {messages} messages) from {source}")
            for line in summary.lines():
                print(("dry run: " if args.dry_run else "") + line, flush=True)
            if not summary.sources:
                no_history()
            if not args.watch:
                return 0
            print(f"Watching for new history every {args.interval:g} s; Ctrl-C stops.", flush=True)
            while True:
                time.sleep(args.interval)
                summary = once(vault, discover())
                if summary.new or summary.updated:
                    print(f"{time.strftime('%H:%M:%S')} {summary.lines()[0]}", flush=True)
        except KeyboardInterrupt:
            if not args.watch:
                raise
            print("Stopped watching.", file=sys.stderr)  # what was stored stays stored
            return 0


def _progress_bar(done: int, total: int, label: str) -> None:
    width = 30
    filled = width * done // max(total, 1)
    print(f"\r[{'#' * filled}{' ' * (width - filled)}] {done}/{total} {label[:40]:<40}",
          end="", file=sys.stderr, flush=True)  # fmt: skip


def mountpoint_of(args: argparse.Namespace) -> Path:
    return Path(args.mountpoint or DEFAULT_MOUNTPOINT).expanduser().absolute()


def cmd_unlock(args: argparse.Namespace) -> int:
    path = vault_path(args)
    mountpoint = mountpoint_of(args)
    record = MountRecord.load(path)
    if record is not None and record.alive:
        raise MountError(
            f"The vault {path} is already unlocked at {record.mountpoint} (pid {record.pid})."
        )
    if record is not None:
        record.remove()
    if clean_stale(mountpoint):
        print(f"memvault: cleaned a stale mount at {mountpoint} left by a daemon that died.",
              file=sys.stderr)  # fmt: skip
    if mounted_at(mountpoint) is not None:
        raise MountError(f"{mountpoint} is already a mount point.")
    mountpoint.mkdir(mode=0o700, parents=True, exist_ok=True)
    if any(mountpoint.iterdir()):
        raise MountError(f"{mountpoint} is not empty; unlock mounts on an empty directory.")
    info = read_info(path)
    if info.writer_pid is not None:
        raise VaultInUse(path, f" (pid {info.writer_pid})")
    passphrase = read_passphrase(from_stdin=getattr(args, "passphrase_stdin", False))
    from .fs import daemon  # pyfuse3 and trio: only imported by the commands that mount
    from .fs.mount import serve

    if args.foreground:
        logging.basicConfig(level=logging.INFO, format="memvault: %(message)s")
        vault = Vault.open(
            path,
            passphrase,
            journal=True,
            accept_journal_loss=getattr(args, "accept_journal_loss", False),
        )
        harden_process()
        print(f"Unlocked {path} at {mountpoint}; Ctrl-C (or `memvault lock`) locks it.",
              file=sys.stderr)  # fmt: skip
        serve(vault, mountpoint, allow_other=args.allow_other)
        print("Locked.", file=sys.stderr)
        return 0
    pid = daemon.start(
        path,
        mountpoint,
        passphrase,
        allow_other=args.allow_other,
        accept_journal_loss=getattr(args, "accept_journal_loss", False),
    )
    print(f"Unlocked {path} at {mountpoint} (daemon pid {pid}); `memvault lock` locks it.")
    return 0


def cmd_lock(args: argparse.Namespace) -> int:
    path = vault_path(args)
    if args.mountpoint:
        mountpoint = mountpoint_of(args)
        records = [r for r in MountRecord.all() if Path(r.mountpoint) == mountpoint]
        record = records[0] if records else None
    else:
        record = MountRecord.load(path)
        mountpoint = Path(record.mountpoint) if record else mountpoint_of(args)
    if record is not None and record.alive:
        print(f"Locking {record.vault} (finishing shreds and compaction)...", file=sys.stderr)
        from .fs import daemon

        daemon.stop(record.pid)
        if mounted_at(mountpoint) is not None and is_stale(mountpoint):
            unmount(mountpoint)
        _check_compacted(Path(record.vault), "its daemon could not compact it")
        print(f"Locked {record.vault}; {mountpoint} is unmounted.")
        return 0
    if record is not None:
        record.remove()
    if clean_stale(mountpoint):
        _check_compacted(path, "its daemon died before compacting")
        print(f"Cleaned a stale mount at {mountpoint} (its daemon had died); the vault is locked.")
        return 0
    _check_compacted(path, "an earlier session ended before compacting")
    print(f"The vault {path} is not unlocked.")
    return 0


def _check_compacted(path: Path, why: str) -> None:
    """`lock` succeeds only when no shredded or replaced byte is left in the file."""
    if path.exists() and compaction_owed(path):
        raise CompactionOwed(path, why)


def cmd_repair(args: argparse.Namespace) -> int:
    path = vault_path(args)
    if serving_daemon(args) is not None:
        raise MountError(f"The vault {path} is unlocked; lock it before repairing it.")
    from_stdin = getattr(args, "passphrase_stdin", False)
    with Vault.open(
        path,
        lambda: read_passphrase(from_stdin=from_stdin),
        compact_delay=None,
        accept_journal_loss=getattr(args, "accept_journal_loss", False),
        repair=True,
    ) as vault:
        done = vault.repair(accept_unverified=args.accept_unverified)
    for line in done:
        print(line)
    print(f"Repaired {path}." if done else f"Nothing to repair in {path}.")
    return 0


def _human(n: float) -> str:
    for unit in ("bytes", "KiB", "MiB", "GiB"):
        if n < 1024 or unit == "GiB":
            return f"{n:.0f} {unit}" if unit == "bytes" else f"{n:.1f} {unit}"
        n /= 1024
    raise AssertionError  # pragma: no cover


# -- parser ---------------------------------------------------------------------


def build_parser() -> argparse.ArgumentParser:
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument(
        "--vault",
        metavar="PATH",
        default=argparse.SUPPRESS,
        help=f"the vault file (default: ${VAULT_ENV_VAR}, else {DEFAULT_VAULT})",
    )
    common.add_argument(
        "--passphrase-stdin",
        action="store_true",
        default=argparse.SUPPRESS,
        help="read the passphrase from the first line of standard input "
        f"(otherwise: ${ENV_VAR}, else a prompt)",
    )
    common.add_argument(
        "--accept-journal-loss",
        action="store_true",
        default=argparse.SUPPRESS,
        help="open a vault whose journal was damaged or cut, with the changes that verify "
        "(the rest are lost)",
    )
    parser = argparse.ArgumentParser(
        prog="memvault",
        parents=[common],
        description="An encrypted, offline memory vault for AI agents.",
        epilog="Run `memvault COMMAND --help` for the options of a command.",
    )
    parser.add_argument("--version", action="version", version=f"memvault {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)

    def add(name: str, func: Callable, help_text: str) -> argparse.ArgumentParser:
        p = sub.add_parser(name, parents=[common], help=help_text, description=help_text)
        p.set_defaults(func=func)
        return p

    p = add("init", cmd_init, "create a new vault (asks for the passphrase twice)")
    p.add_argument(
        "--kdf-time",
        type=int,
        default=DEFAULT_KDF.time_cost,
        metavar="N",
        help=f"Argon2id passes (default {DEFAULT_KDF.time_cost}, "
        f"at most {kdf_limits.MAX_TIME_COST})",
    )
    p.add_argument(
        "--kdf-memory",
        type=int,
        default=DEFAULT_KDF.memory_kib // 1024,
        metavar="MIB",
        help=f"Argon2id memory in MiB (default {DEFAULT_KDF.memory_kib // 1024}, "
        f"{kdf_limits.MIN_MEMORY_KIB // 1024} to {kdf_limits.MAX_MEMORY_KIB // 1024})",
    )
    p.add_argument(
        "--kdf-parallelism",
        type=int,
        default=DEFAULT_KDF.parallelism,
        metavar="N",
        help=f"Argon2id lanes (default {DEFAULT_KDF.parallelism}, "
        f"at most {kdf_limits.MAX_PARALLELISM})",
    )
    add(
        "status",
        cmd_status,
        "show the vault's format, size, keyslots and state (no passphrase needed)",
    )
    p = add("put", cmd_put, "store standard input as the memory at PATH")
    p.add_argument("path", metavar="PATH", help="e.g. projects/api.md")
    p = add("get", cmd_get, "write the memory at PATH to standard output")
    p.add_argument("path", metavar="PATH")
    p = add("ls", cmd_ls, "list a directory of the vault (directories end in /)")
    p.add_argument("directory", metavar="DIR", nargs="?", default="")
    p.add_argument("-l", "--long", action="store_true", help="show sizes and times")
    p.add_argument("-R", "--recursive", action="store_true", help="list the whole tree")
    p = add("rm", cmd_rm, "crypto-shred the memory at PATH (its key and bytes are destroyed)")
    p.add_argument("path", metavar="PATH")
    p.add_argument("-r", "--recursive", action="store_true", help="shred a directory tree")
    p = add("mv", cmd_mv, "move or rename a memory or directory (replaces an existing file)")
    p.add_argument("old", metavar="OLD")
    p.add_argument("new", metavar="NEW")
    add("compact", cmd_compact, "rewrite the vault file so no shredded byte remains")
    p = add(
        "repair",
        cmd_repair,
        "drop damaged records (recovering those it can) so a damaged vault opens for writing",
    )
    p.add_argument(
        "--accept-unverified",
        action="store_true",
        help="go on even when what can be read does not add up to the vault's integrity sum "
        "(records may have been removed or rolled back: the vault is accepted as it reads)",
    )
    p = add("search", cmd_search, "search the memories (hybrid: words and meaning)")
    p.add_argument("query", metavar="QUERY", nargs="+", help="what to look for")
    p.add_argument("-k", default="10", metavar="N", help="how many results (1-50)")
    p.add_argument("--in", dest="prefix", metavar="DIR", help="only memories under DIR")
    p.add_argument("--json", action="store_true", help="print JSON instead of Markdown")
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
    add("reindex", cmd_reindex, "rebuild the search index with the installed embedding model")
    p = add("unlock", cmd_unlock, "ask the passphrase and mount the vault as a directory")
    p.add_argument(
        "mountpoint",
        metavar="MOUNTPOINT",
        nargs="?",
        help=f"an empty directory (default {DEFAULT_MOUNTPOINT}; created if missing)",
    )
    p.add_argument(
        "--foreground",
        action="store_true",
        help="stay attached and log to the terminal; Ctrl-C locks",
    )
    p.add_argument(
        "--allow-other",
        action="store_true",
        help="let other users reach the mount (off by default: owner only; "
        "needs user_allow_other in /etc/fuse.conf for non-root users)",
    )
    p = add("lock", cmd_lock, "unmount, finish pending shreds and compaction, wipe the keys")
    p.add_argument(
        "mountpoint",
        metavar="MOUNTPOINT",
        nargs="?",
        help="the mount to lock (default: wherever this vault is mounted)",
    )
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        return args.func(args)
    except MemvaultError as exc:
        _fail(str(exc))
        return exc.exit_code
    except KeyboardInterrupt:
        _fail("interrupted.")
        return EXIT_INTERRUPTED
    except BrokenPipeError:
        return EXIT_ERROR
    except Exception as exc:  # a bug: still one line, the details on request
        if os.environ.get("MEMVAULT_DEBUG"):
            raise
        _fail(
            f"internal error ({type(exc).__name__}: {exc}); "
            "rerun with MEMVAULT_DEBUG=1 for details."
        )
        return EXIT_ERROR


def _fail(message: str) -> None:
    print(f"memvault: {message}", file=sys.stderr)


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
