"""``vdq suppressions``: list, show, add and remove entries of the suppression list."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from typing import Any
from urllib.parse import quote

from vdq.cli import render
from vdq.cli.client import EXIT_OK


def add_parser(command: Callable[..., Any],
               global_flags: Callable[..., None]) -> None:  # fmt: skip
    """The ``suppressions`` command; ``global_flags`` adds --json, --api-url and --token to
    each action's parser (vdq.cli.main's, passed in: main imports this module)."""
    from vdq.cli import commands

    def run(args: argparse.Namespace) -> int:
        return ACTIONS[args.action](commands.client(args), args)

    p = command("suppressions", "list, show, add or remove receivers VDQ does not send to "
                "(needs vdq-suppressions)", run)  # fmt: skip
    actions = p.add_subparsers(dest="action", required=True, metavar="ACTION")
    common = argparse.ArgumentParser(add_help=False)
    global_flags(common, here=True)  # --json, --api-url and --token after the action too

    def action(name: str, help: str) -> argparse.ArgumentParser:
        return actions.add_parser(name, help=help, description=help, parents=[common])

    listing = action("list", "the list, by receiver, a page at a time")
    listing.add_argument("--channel", choices=["email", "sms"])
    listing.add_argument("--receiver", help="only this address or number")
    listing.add_argument("--limit", type=int, default=50, help="entries on a page (1-100, 50)")
    listing.add_argument("--cursor", help="the page after the one that printed this cursor")
    listing.add_argument("--all", action="store_true", help="follow the cursor to the end")
    show = action("show", "one receiver's suppression and its history")
    show.add_argument("receiver")
    add = action("add", "suppress an address or number")
    add.add_argument("receiver")
    add.add_argument("--text", help="why, for the history")
    add.add_argument("--list", help="only the list mail of this list (an unsubscribe)")
    remove = action("remove", "send to an address or number again")
    remove.add_argument("receiver")
    remove.add_argument("--list", help="only its unsubscribe from this list")
    remove.add_argument("--text", help="why, for the history")


def _scope(receiver: Any) -> str:
    """What a suppression of no list covers: every message to the receiver."""
    return "(all SMS)" if str(receiver or "").startswith("+") else "(all mail)"


def _rows(entries: list[dict[str, Any]]) -> list[list[str]]:
    return [[render.safe(e.get("receiver")),
             render.safe(e.get("list") or _scope(e.get("receiver"))),
             render.safe(e.get("reason")), render.safe((e.get("since") or "")[:19]),
             render.safe(e.get("actor")), render.clip(render.safe(e.get("text")), 50)]
            for e in entries]  # fmt: skip


def print_entries(entries: list[dict[str, Any]]) -> None:
    if not entries:
        print("(no suppressions)")
        return
    print(render.table(_rows(entries), ["RECEIVER", "LIST", "REASON", "SINCE", "BY", "TEXT"]))


def list_entries(api: Any, args: argparse.Namespace) -> int:
    from vdq.cli.commands import emit

    params: dict[str, Any] = {"limit": args.limit}
    for name in ("channel", "receiver", "cursor"):
        if getattr(args, name):
            params[name] = getattr(args, name)
    entries: list[dict[str, Any]] = []
    while True:
        page = api.call("GET", "/suppressions", params=params)
        entries.extend(page.get("suppressions") or [])
        cursor = page.get("cursor")
        if not cursor or not args.all:
            break
        params["cursor"] = cursor

    def human(data: dict[str, Any]) -> None:
        print_entries(data["suppressions"])
        if data["cursor"]:
            print(f"(more: vdq suppressions list --cursor {data['cursor']})", file=sys.stderr)

    emit(args, {"suppressions": entries, "cursor": cursor}, human)
    return EXIT_OK


def _path(receiver: str) -> str:
    return "/suppressions/" + quote(receiver, safe="")


def show_entry(api: Any, args: argparse.Namespace) -> int:
    from vdq.cli.commands import emit

    data = api.call("GET", _path(args.receiver) + "/history")

    def human(d: dict[str, Any]) -> None:
        now = d.get("suppression")
        # Unsubscribed from a list but not suppressed: "not suppressed" alone would read as
        # the whole answer.
        nowhere = "not suppressed" + (" from all its mail" if d.get("lists") else "")
        print(f"{render.safe(d.get('receiver'))}: " + (
            f"suppressed since {render.safe(now.get('since'))} ({render.safe(now.get('reason'))})"
            if now else nowhere))  # fmt: skip
        for left in d.get("lists") or []:
            print(f"  unsubscribed from the list {render.safe(left.get('list'))} since "
                  f"{render.safe(left.get('since'))} ({render.safe(left.get('reason'))})")
        for e in d.get("history") or []:
            print(f"  {render.safe((e.get('at') or '')[:19])}  {render.safe(e.get('action'))}"
                  + (f" (list {render.safe(e.get('list'))})" if e.get("list") else "")
                  + f" by {render.safe(e.get('actor'))}"
                  + (f" ({render.safe(e.get('reason'))})" if e.get("reason") else "")
                  + (f": {render.safe(e.get('text'))}" if e.get("text") else ""))

    emit(args, data, human)
    return EXIT_OK


def add_entry(api: Any, args: argparse.Namespace) -> int:
    from vdq.cli.commands import emit

    body = {"receiver": args.receiver, **({"text": args.text} if args.text else {}),
            **({"list": args.list} if args.list else {})}  # fmt: skip
    data = api.call("POST", "/suppressions", body)

    def human(d: dict[str, Any]) -> None:
        held = d["suppression"]
        scope = f" from the list {render.safe(held['list'])}" if held.get("list") else ""
        if held.get("list") and held.get("channel") == "sms":
            print(f"{render.safe(held['receiver'])}: recorded as unsubscribed{scope}, which "
                  "stops nothing: SMS has no lists (leave --list out to suppress the number)")
        elif d.get("added"):
            print(f"{render.safe(held['receiver'])}: suppressed{scope}")
        else:
            print(f"{render.safe(held['receiver'])}: already suppressed{scope} since "
                  f"{render.safe(held['since'])} ({render.safe(held['reason'])})")

    emit(args, data, human)
    return EXIT_OK


def remove_entry(api: Any, args: argparse.Namespace) -> int:
    from vdq.cli.commands import emit

    params = {k: v for k, v in (("list", args.list), ("text", args.text)) if v} or None
    data = api.call("DELETE", _path(args.receiver), params=params)

    def human(d: dict[str, Any]) -> None:
        held = d["suppression"]
        scope = f" from the list {render.safe(held['list'])}" if held.get("list") else ""
        print(f"{render.safe(held['receiver'])}: no longer suppressed{scope}")

    emit(args, data, human)
    return EXIT_OK


ACTIONS = {"list": list_entries, "show": show_entry, "add": add_entry, "remove": remove_entry}
