"""``vdq producers``: each producer's bounce and complaint rates against its thresholds
(vdq.results.judging), the items a hold parked, and the release or cancel of a hold
(vdq.results.guard)."""

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
    """The ``producers`` command (``list`` when no action is named); ``global_flags`` adds
    --json, --api-url and --token to each action's parser."""
    from vdq.cli import commands

    def run(args: argparse.Namespace) -> int:
        return ACTIONS[args.action or "list"](commands.client(args), args)

    p = command("producers", "each producer's bounce and complaint rates and holds; release "
                "or cancel what a hold parked (release: vdq-admins)", run)  # fmt: skip
    actions = p.add_subparsers(dest="action", metavar="ACTION")
    common = argparse.ArgumentParser(add_help=False)
    global_flags(common, here=True)

    def action(name: str, help: str) -> argparse.ArgumentParser:
        return actions.add_parser(name, help=help, description=help, parents=[common])

    action("list", "the rates of each producer and of the account, against the thresholds, "
           "and whether items a hold parked are waiting (the default)")  # fmt: skip
    held = action("held", "the items a producer's hold parked, in enqueue order")
    held.add_argument("producer")
    held.add_argument("--limit", type=int, default=50, help="items on a page (1-100, 50)")
    held.add_argument("--after", help="the page after the one that printed this id")
    held.add_argument("--all", action="store_true", help="every page")
    release = action("release", "end a producer's hold and send what it parked")
    release.add_argument("producer")
    cancel = action("cancel-held", "cancel what a producer's hold parked (the hold stays)")
    cancel.add_argument("producer")


def _pct(value: Any, digits: int) -> str:
    return "-" if value is None else f"{float(value):.{digits}f}"


# Whether items are parked: the API's flag (null: it could not be read).
PARKED = {True: "yes", False: "no", None: "unknown"}


def _row(r: dict[str, Any], account: bool = False) -> list[str]:
    t = r.get("thresholds") or {}
    level = (r.get("level") or {}).get("level") or "-"
    return [render.safe(r.get("producer")), render.safe(r.get("sent", 0)),
            render.safe(r.get("bounced", 0)), render.safe(r.get("complained", 0)),
            _pct(r.get("bounce_rate"), 2) + f" / {render.safe(t.get('bounce_hold'))}",
            _pct(r.get("complaint_rate"), 3) + f" / {render.safe(t.get('complaint_hold'))}",
            render.safe(r.get("judged")) + ("" if r.get("rates_count") else " (low volume)")
            + (" (watched)" if r.get("watched") else ""),
            render.safe(level),
            "-" if account else PARKED.get(r.get("parked"), "unknown")]  # fmt: skip


HEADERS = ["PRODUCER", "SENT", "BOUNCED", "COMPLAINED", "BOUNCE % / HOLD", "COMPLAINT % / HOLD",
           "RATES", "LEVEL", "PARKED"]  # fmt: skip


def print_producers(data: dict[str, Any]) -> None:
    rows = [_row(r) for r in data.get("producers") or []]
    print(f"the last {render.safe(data.get('window_hours'))} hours (guard: "
          f"{render.safe(data.get('guard'))}):")
    # The account's row by what it is: a producer may also be called "account".
    account = {**(data.get("account") or {}), "producer": "(whole account)"}
    print(render.table([*rows, _row(account, account=True)], HEADERS))
    ses = data.get("ses") or {}
    if ses.get("available"):
        print(f"SES's own figures: bounce {_pct(ses.get('bounce_rate'), 2)}%, complaint "
              f"{_pct(ses.get('complaint_rate'), 3)}% (SES reviews at 5% / 0.1%)")
    else:
        print(f"SES's own figures: not available ({render.safe(ses.get('why'))})")
    for r in data.get("producers") or []:
        level = r.get("level") or {}
        name = render.safe(r["producer"])
        if level.get("level") == "hold":
            print(f"{name} is held since {render.safe(level.get('hold_id'))}"
                  f": {render.safe(level.get('reason'))}")  # fmt: skip
        elif r.get("parked"):  # a release cut short, whatever the level since
            print(f"{name} is at {render.safe(level.get('level') or 'ok')} with items still "
                  f"parked (a release cut short): `vdq producers release {name}` sends them, "
                  f"`vdq producers cancel-held {name}` cancels them")  # fmt: skip


def list_producers(api: Any, args: argparse.Namespace) -> int:
    from vdq.cli.commands import emit

    emit(args, api.call("GET", "/producers"), print_producers)
    return EXIT_OK


def _path(producer: str, what: str) -> str:
    return f"/producers/{quote(producer, safe='')}/{what}"


def held_items(api: Any, args: argparse.Namespace) -> int:
    from vdq.cli.commands import emit

    params: dict[str, Any] = {"limit": args.limit}
    if args.after:
        params["after"] = args.after
    items: list[dict[str, Any]] = []
    while True:
        page = api.call("GET", _path(args.producer, "held"), params=params)
        items.extend(page.get("items") or [])
        after = page.get("after")
        if not after or not args.all:
            break
        params["after"] = after

    def human(data: dict[str, Any]) -> None:
        if not data["items"]:
            print("(nothing parked)")
        else:
            render.print_items(data["items"])
        if data["after"]:
            print(f"(more: vdq producers held {args.producer} --after {data['after']})",
                  file=sys.stderr)

    emit(args, {"items": items, "after": after}, human)
    return EXIT_OK


def _work(verb: str) -> Callable[[Any, argparse.Namespace], int]:
    def run(api: Any, args: argparse.Namespace) -> int:
        from vdq.cli.commands import emit

        path = _path(args.producer, "release" if verb == "released" else "cancel-held")
        data = api.call("POST", path)

        def human(d: dict[str, Any]) -> None:
            done = "sent again" if verb == "released" else "cancelled"
            level = (d.get("level") or {}).get("level")
            print(f"{render.safe(d.get('producer'))}: {render.safe(d.get('done'))} parked items "
                  f"{done}, {render.safe(d.get('skipped'))} had moved on"
                  + (f"; level {render.safe(level)}" if level else ""))  # fmt: skip
            if d.get("more"):
                print("(more are parked: run it again)", file=sys.stderr)

        emit(args, data, human)
        return EXIT_OK

    return run


ACTIONS = {"list": list_producers, "held": held_items, "release": _work("released"),
           "cancel-held": _work("cancelled")}  # fmt: skip
