"""The command line: the parser, shell completion and ``main``."""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections.abc import Sequence
from typing import Any

from vdq.cli import commands, dns, producers, render, repair, smoke, suppressions
from vdq.cli.client import EXIT_FAILED, EXIT_OK, EXIT_PARTIAL, EXIT_USAGE, ApiError, UsageError
from vdq.workflow.lanes import PRIORITIES

DESCRIPTION = """The command line client of VDQ's REST API, for any deployment (local or AWS).

Set VDQ_API_URL and VDQ_TOKEN, or pass --api-url and --token (before or after the command).
Tables for people, --json for scripts. "vdq local" runs the whole system on this machine and
prints its URL and tokens; "vdq token" makes more tokens for it."""

EXIT_CODES_HELP = """exit codes:
  0  success (also when a reader such as head stops reading early)
  1  unexpected failure
  2  bad command line, or no API URL or token to use
  3  the API could not be reached (vdq local: the stack could not start)
  4  not authenticated or not allowed (HTTP 401/403), an expired token included
  5  not found (HTTP 404)
  6  not possible in the item's state (HTTP 409)
  7  invalid input (HTTP 400/413/422)
  8  server error (HTTP 5xx)
  9  a bulk command failed for some items (see its output)

environment:
  VDQ_API_URL  base URL of the REST API (vdq local prints it)
  VDQ_TOKEN    bearer token (vdq token, or a Cognito token for a deployment)
  VDQ_LOCAL_JWT_SECRET  the local stack's token secret (for vdq token)
  NO_COLOR     set to print states without colour"""



def dispatch_options(p: argparse.ArgumentParser) -> None:
    p.add_argument("--priority", choices=PRIORITIES,
                   help="the lane: high (codes, resets), normal (default), bulk (newsletters)")
    p.add_argument("--send-at", dest="send_at", metavar="TIME",
                   help="send not before TIME: RFC 3339 with an offset, e.g. "
                        "2026-12-24T09:00:00+01:00 (at most VDQ_MAX_SCHEDULE_DAYS ahead)")

def _states() -> tuple[list[str], list[str]]:
    from vdq.workflow.table import DONE_STATES, State

    return ([s.value for s in State if s not in DONE_STATES],
            [s.value for s in State if s in DONE_STATES])  # fmt: skip


def _global_flags(p: argparse.ArgumentParser, *, here: bool) -> None:
    """--json, --api-url and --token: on the top parser with defaults, and again on each command
    without (SUPPRESS), so that either place works and a later one wins."""
    default: Any = argparse.SUPPRESS if here else None
    p.add_argument("--json", action="store_true", default=argparse.SUPPRESS if here else False,
                   help="print JSON for scripts (errors too, on stderr)")  # fmt: skip
    p.add_argument("--api-url", default=default, help="base URL of the API ($VDQ_API_URL)")
    p.add_argument("--token", default=default, help="bearer token ($VDQ_TOKEN)")


def parser() -> argparse.ArgumentParser:
    from vdq.local.stack import DEFAULT_PORT

    active, done = _states()
    common = argparse.ArgumentParser(add_help=False)
    _global_flags(common, here=True)
    top = argparse.ArgumentParser(prog="vdq", description=DESCRIPTION, epilog=EXIT_CODES_HELP,
                                  formatter_class=argparse.RawDescriptionHelpFormatter)  # fmt: skip
    _global_flags(top, here=False)
    sub = top.add_subparsers(dest="command", required=True, metavar="COMMAND")

    def command(name: str, help: str, fn: Any, parents: list | None = None) -> Any:
        p = sub.add_parser(name, help=help, description=help, epilog=EXIT_CODES_HELP,
                           parents=[common] if parents is None else parents,
                           formatter_class=argparse.RawDescriptionHelpFormatter)  # fmt: skip
        p.set_defaults(fn=fn)
        return p

    p = command("local", "run the whole system on this machine (moto, sandboxes)", commands.local,
                [])  # fmt: skip
    p.add_argument("--port", type=int, default=DEFAULT_PORT, help=f"API port ({DEFAULT_PORT})")
    p.add_argument("--polling", action="store_true",
                   help="no Twilio status callbacks: the schedules poll Twilio")
    p.add_argument("--faults", help="sandbox faults, e.g. duplicate,late,reordered,missing,"
                   "throttle,5xx,slow (default: $VDQ_LOCAL_FAULTS)")
    p.add_argument("--visibility-seconds", type=int, default=60,
                   help="SQS visibility timeout of the local queues (60)")
    p.add_argument("--log-level", default="WARNING", choices=["WARNING", "INFO", "DEBUG"],
                   type=str.upper, help="WARNING (default), INFO or DEBUG")  # fmt: skip

    p = command("token", "print a token for the local stack", commands.token, [])
    p.add_argument("--groups", default="vdq-admins", help="comma-separated groups")
    p.add_argument("--subject", default="local-user", help="the token's sub claim")
    p.add_argument("--hours", type=float, default=12.0, help="lifetime (12)")
    p.add_argument("--secret", help="HS256 secret (default: $VDQ_LOCAL_JWT_SECRET)")

    p = command("send-email", "queue an email (one item per receiver)", commands.send_email)
    p.add_argument("--from", dest="sender", required=True, help="sender address")
    p.add_argument("--from-name", dest="sender_name", help="sender's display name")
    p.add_argument("--to", action="append", required=True,
                   help='receiver, "a@example.org" or "Ada <a@example.org>" (repeatable)')
    p.add_argument("--cc", action="append", help="copy receiver (repeatable)")
    p.add_argument("--bcc", action="append", help="blind copy receiver (repeatable)")
    p.add_argument("--reply-to", dest="reply_to", action="append", help="reply address")
    p.add_argument("--subject", required=True)
    p.add_argument("--text", required=True, help="plain-text body")
    p.add_argument("--html", help="HTML body")
    p.add_argument("--attach", action="append", metavar="FILE", help="file to attach (repeatable)")
    p.add_argument("--attach-large", action="append", metavar="FILE",
                   help="file to attach through a presigned upload, for files over about 4.5 MB "
                   "(repeatable)")  # fmt: skip
    p.add_argument("--origin", help="TYPE:ID of the record that caused the email")
    dispatch_options(p)
    p.add_argument("--idempotency-key", help="Idempotency-Key header: a retry with the same key "
                   "queues nothing twice")  # fmt: skip

    p = command("send-sms", "queue an SMS (one item per receiver)", commands.send_sms)
    p.add_argument("--from", dest="sender", required=True,
                   help="sender number (E.164), or a Messaging Service SID (MG...)")
    p.add_argument("--to", action="append", required=True, help="receiver number (repeatable)")
    p.add_argument("--body", help="the message text (optional with --media-url: an MMS of "
                   "pictures alone)")
    p.add_argument("--media-url", action="append", help="https:// URL of a picture (repeatable)")
    p.add_argument("--origin", help="TYPE:ID of the record that caused the SMS")
    dispatch_options(p)
    p.add_argument("--idempotency-key", help="Idempotency-Key header: a retry with the same key "
                   "queues nothing twice")  # fmt: skip

    p = command("list", "list the active queue (--sent: the sent items), one page at a time",
                commands.list_items)  # fmt: skip
    p.add_argument("--sent", action="store_true", help="done items instead of the queue")
    p.add_argument("--state", choices=active + done, metavar="STATE",
                   help=f"only this state: {', '.join(active)}; with --sent {', '.join(done)}")
    p.add_argument("--method", choices=["email", "sms"])
    p.add_argument("--priority", choices=PRIORITIES, help="only this priority lane")
    p.add_argument("--scheduled", choices=["true", "false"],
                   help="true: only items waiting for their send time; false: the others "
                        "(not with --sent)")  # fmt: skip
    p.add_argument("--limit", type=int, default=50, help="items on a page (1-100, 50)")
    p.add_argument("--cursor", help="the page after the one that printed this cursor")
    p.add_argument("--all", action="store_true", help="follow the cursor to the end")

    p = command("find", "find items by receiver, origin, provider ID, sender, id or time, "
                "newest first", commands.find)  # fmt: skip
    key = p.add_mutually_exclusive_group()
    key.add_argument("--to", dest="receiver", metavar="RECEIVER",
                     help="an address (any case) or E.164 number the items were sent to")
    key.add_argument("--origin", metavar="TYPE:ID", help="what caused the items (the request's "
                     "origin)")  # fmt: skip
    key.add_argument("--provider-id", dest="provider_id", metavar="ID",
                     help="an SES message ID or Twilio SID")
    key.add_argument("--from", dest="sender", metavar="SENDER",
                     help="the items' sender (queued in the last day unless --since says)")
    key.add_argument("--id", dest="item_id", metavar="ID", help="one item's id")
    p.add_argument("--since", metavar="TIME", help="queued at or after TIME (RFC 3339 with an "
                   "offset, or a date); alone, every item since then")  # fmt: skip
    p.add_argument("--until", metavar="TIME", help="queued at or before TIME")
    p.add_argument("--state", choices=active + done, metavar="STATE",
                   help=f"only this state: {', '.join(active + done)}")
    p.add_argument("--method", choices=["email", "sms"])
    p.add_argument("--priority", choices=PRIORITIES, help="only this priority lane")
    p.add_argument("--limit", type=int, default=50, help="items on a page (1-100, 50)")
    p.add_argument("--cursor", help="the page after the one that printed this cursor")
    p.add_argument("--all", action="store_true", help="follow the cursor to the end")

    p = command("stats", "count what entered each state per hour (24 h) or per day (30 days)",
                commands.stats)  # fmt: skip
    p.add_argument("--days", action="store_true", help="per day over the last 30 days")
    p.add_argument("--method", choices=["email", "sms"])
    p.add_argument("--by", choices=["producer", "identity"],
                   help="each producer's or sender identity's sending reputation (24 h)")

    p = command("backfill-done", "post the items done before the sent list was read from "
                "the stream's done postings, so the sent list shows them (once, after the "
                "upgrade; needs AWS credentials for the table)", commands.backfill_done, [])
    p.add_argument("--table", required=True, help="the deployment's DynamoDB table (its "
                   "TableName output)")  # fmt: skip
    p.add_argument("--region", help="the table's region (default: the AWS configuration's)")

    p = command("backfill-receivers", "give items queued before the receiver index their "
                "receiver key, so find --to finds them (once, after the upgrade; needs AWS "
                "credentials for the table)", commands.backfill_receivers, [])  # fmt: skip
    p.add_argument("--table", required=True, help="the deployment's DynamoDB table (its "
                   "TableName output)")  # fmt: skip
    p.add_argument("--region", help="the table's region (default: the AWS configuration's)")

    p = command("show", "show one item, with its history as a timeline", commands.show)
    p.add_argument("id")
    for name in ("retry", "cancel"):
        p = command(name, f"{name} items (several: each reported; exit {EXIT_PARTIAL} when "
                    "some failed)", commands.transition(name))  # fmt: skip
        p.add_argument("ids", nargs="+", metavar="ID")
        p.add_argument("--dry-run", action="store_true", help="check only, change nothing")
    p = command("resend", "resend sent items as new queued items", commands.resend)
    p.add_argument("ids", nargs="+", metavar="ID")
    p = command("usage", "show a producer's quota and what it used of each window",
                commands.usage)  # fmt: skip
    p.add_argument("producer", help="a machine client's id, or group:<name>")
    p = command("watch", "print state changes of the queue as they happen", commands.watch)
    p.add_argument("--interval", type=float, default=1.0, help="seconds between looks (1)")
    p.add_argument("--seconds", type=float, help="stop after this long (default: Ctrl-C)")
    p.add_argument("--limit", type=int, default=100, help=argparse.SUPPRESS)

    suppressions.add_parser(command, _global_flags)
    producers.add_parser(command, _global_flags)
    smoke.add_parser(command)
    dns.add_parser(command)
    repair.add_parser(command)

    p = command("completion", "print a shell completion script: "
                'eval "$(vdq completion bash)" (or zsh)', completion, [])  # fmt: skip
    p.add_argument("shell", choices=["bash", "zsh"])
    return top


def _check(args: argparse.Namespace, top: argparse.ArgumentParser) -> None:
    """What argparse cannot say: a state that the chosen list never holds."""
    if args.command == "stats" and args.by and args.days:
        top.error("stats: --by counts the last 24 hours (leave out --days)")
    if args.command == "list" and args.state:
        active, done = _states()
        wanted = done if args.sent else active
        if args.state not in wanted:
            other = "" if args.sent else " (add --sent for done items)"
            top.error(f"list{' --sent' if args.sent else ''}: --state {args.state} is not one of "
                      f"{', '.join(wanted)}{other}")  # fmt: skip
    if getattr(args, "limit", 1) is not None and not 1 <= getattr(args, "limit", 1) <= 100:
        top.error(f"{args.command}: --limit takes 1 to 100")
    for name, value in vars(args).items():
        for text in value if isinstance(value, list) else [value]:
            if isinstance(text, str) and not _is_utf8(text):
                option = _OPTION_OF.get(name) or "--" + name.replace("_", "-")
                top.error(f"{args.command}: {option} is not UTF-8 text (check the terminal's "
                          "or the file's encoding)")  # fmt: skip


_OPTION_OF = {"sender": "--from", "sender_name": "--from-name", "id": "ID", "ids": "ID",
              "receiver": "--to", "item_id": "--id", "provider_id": "--provider-id"}


def _is_utf8(text: str) -> bool:
    """False for an argument holding bytes the locale could not decode (surrogate escapes)."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def completion(args: argparse.Namespace) -> int:
    from vdq.cli.completion import script

    print(script(parser(), args.shell))
    return EXIT_OK


def _quiet_broken_pipe() -> int:
    """The reader went away (``vdq list | head``): stop without a traceback."""
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, sys.stdout.fileno())  # so the interpreter's last flush cannot fail again
    return EXIT_OK


def main(argv: Sequence[str] | None = None) -> int:
    top = parser()
    args = top.parse_args(argv)
    _check(args, top)
    where = f"vdq {args.command}"
    try:
        code: int = args.fn(args)
        sys.stdout.flush()
        return code
    except BrokenPipeError:
        return _quiet_broken_pipe()
    except UsageError as exc:
        print(f"{where}: {render.safe(exc)}", file=sys.stderr)
        return EXIT_USAGE
    except ApiError as exc:
        if getattr(args, "json", False):
            print(json.dumps(exc.json()), file=sys.stderr)
        else:
            print(f"{where}: {render.safe(exc)}", file=sys.stderr)
        return exc.exit_code
    except KeyboardInterrupt:
        return EXIT_OK if args.command == "watch" else 130
    except OSError as exc:
        print(f"{where}: {render.safe(exc.strerror or exc)}", file=sys.stderr)
        return EXIT_FAILED
