"""`memvault share`: team spaces, each a sync group of its own shown at shared/NAME/
(sync/; `memvault sync` then syncs them with the rest)."""

from __future__ import annotations

import argparse
import getpass
import os
import sys

from ..errors import UsageError
from ..sync import group
from ..sync.state import load, share_names
from . import output
from .common import common_options, open_in_process
from .sync import ask_groups, entering

SHARE_CODE_ENV = "MEMVAULT_SHARE_CODE"

SHARE_HELP = """\
A team space is a directory, shared/NAME/ in this vault (and in its mount),
kept in step with the same space in other people's vaults through an rclone
remote of its own, under a key of its own. `share create NAME REMOTE:PATH`
starts one and prints its share code once: pass the code to the members
out of band; `share join NAME REMOTE:PATH` (the code from $MEMVAULT_SHARE_CODE
or asked) adds a member. Nothing outside shared/NAME/ ever goes to that
remote, and the personal sync group never carries shared/. All of it works
with the vault locked or unlocked (then the space shows in the mount at once).
"""


def _enter(args: argparse.Namespace, action: str, code: bytearray) -> dict:
    return ask_groups(args, entering(args, action, code, group.check_share_name(args.share)))


def cmd_share_create(args: argparse.Namespace) -> int:
    code = group.new_share_code()
    answer = _enter(args, "create", code)
    output.note(
        f"Created the team space shared/{args.share}/ at {args.remote}. {answer['sentence']}"
    )
    output.note(
        "Its share code follows, shown this once: give it to each member out of band "
        f"(they run `memvault share join {args.share} {args.remote}`)."
    )
    output.data(code.decode() + "\n")
    return 0


def cmd_share_join(args: argparse.Namespace) -> int:
    group.check_share_name(args.share)
    answer = _enter(args, "join", _read_code())
    output.note(
        f"Joined the team space shared/{args.share}/ as {answer['device']!r}. {answer['sentence']}"
    )
    return 0


def cmd_share_remove_member(args: argparse.Namespace) -> int:
    name = group.check_share_name(args.share)
    code = group.new_share_code()
    ask_groups(
        args,
        {"action": "remove", "share": name, "device": args.member, "secret": code.decode()},
    )
    output.note(
        f"Removed {args.member!r} from shared/{name}/: the space has a new key, which every "
        "other member receives at their next sync; the removed member can read nothing "
        "written from now on (what they already have stays with them). The old share code "
        "no longer admits anyone; the new one follows, shown this once, for members who "
        "join later."
    )
    output.data(code.decode() + "\n")
    return 0


def cmd_share_list(args: argparse.Namespace) -> int:
    with open_in_process(args, readonly=True) as vault:
        rows = []
        for name in share_names(vault):
            state = load(vault, name)
            assert state is not None
            rows.append({"name": name, "remote": state.remote, "device": state.name})
    if args.json:
        output.data_json(rows)
    else:
        output.data(
            "".join(f"shared/{r['name']}/  {r['remote']}  (as {r['device']})\n" for r in rows)
        )
    return 0


def _read_code() -> bytearray:
    given = os.environ.get(SHARE_CODE_ENV)
    if given:
        return bytearray(given.strip().encode())
    if not sys.stdin.isatty():
        raise UsageError(f"Give the share code in ${SHARE_CODE_ENV} (no terminal to ask it on).")
    return bytearray(getpass.getpass("Share code: ").strip().encode())


def register(add) -> None:
    p = add("share", None, "team spaces: shared/NAME/, synced with other people's vaults")
    p.description = SHARE_HELP
    p.formatter_class = argparse.RawDescriptionHelpFormatter
    actions = p.add_subparsers(dest="action", metavar="ACTION", required=True)

    def sub(name: str, func, help_text: str) -> argparse.ArgumentParser:
        q = actions.add_parser(
            name, parents=[common_options()], help=help_text, description=help_text
        )
        q.set_defaults(func=func)
        return q

    for name, func, help_text in (
        ("create", cmd_share_create, "start a team space and print its share code once"),
        ("join", cmd_share_join, "join a team space with its share code"),
    ):
        q = sub(name, func, help_text)
        q.add_argument("share", metavar="NAME", help="the space's name: shared/NAME/")
        q.add_argument("remote", metavar="REMOTE:PATH", help="an rclone remote of its own")
        q.add_argument("--name", help="this vault's name in the space (default: the host name)")
        q.add_argument(
            "--rclone-config",
            metavar="FILE",
            help="the rclone configuration that defines REMOTE (default: rclone's own)",
        )
    q = sub(
        "remove-member",
        cmd_share_remove_member,
        "remove a member: the space's key changes (they read nothing written afterwards)",
    )
    q.add_argument("share", metavar="NAME", help="the space: shared/NAME/")
    q.add_argument("member", metavar="MEMBER", help="the member's name in the space")
    q = sub("list", cmd_share_list, "the team spaces this vault is in")
    q.add_argument("--json", action="store_true", help="a JSON list")
