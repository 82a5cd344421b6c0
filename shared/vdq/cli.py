"""``vdq``: the command line client of VDQ's REST API, for any deployment (local or AWS).

Set VDQ_API_URL and VDQ_TOKEN (or pass --api-url / --token). Tables for people, --json for
scripts. ``vdq local`` runs the local stack; ``vdq token`` makes a token for it.
"""

from __future__ import annotations

import argparse
import base64
import json
import mimetypes
import os
import sys
import time
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

EXIT_OK = 0
EXIT_FAILED = 1  # anything unexpected
EXIT_USAGE = 2  # bad command line (argparse)
EXIT_UNREACHABLE = 3  # the API could not be reached (or the local stack could not start)
EXIT_AUTH = 4  # 401/403: no token, a bad token, or a missing permission
EXIT_NOT_FOUND = 5  # 404: no such item
EXIT_CONFLICT = 6  # 409: not possible in the item's state
EXIT_INVALID = 7  # 400/422: the API refused the input
EXIT_SERVER = 8  # 5xx: the API failed
EXIT_PARTIAL = 9  # a bulk command (resend) failed for some of its items

EXIT_CODES_HELP = """exit codes:
  0  success
  1  unexpected failure
  2  bad command line
  3  the API could not be reached (vdq local: the stack could not start)
  4  not authenticated or not allowed (HTTP 401/403)
  5  not found (HTTP 404)
  6  not possible in the item's state (HTTP 409)
  7  invalid input (HTTP 400/422)
  8  server error (HTTP 5xx)
  9  a bulk command failed for some items (see its output)

environment:
  VDQ_API_URL  base URL of the REST API (vdq local prints it)
  VDQ_TOKEN    bearer token (vdq token, or a Cognito token for a deployment)
  VDQ_LOCAL_JWT_SECRET  the local stack's token secret (for vdq token)"""

STATE_COLOURS = {"succeeded": "32", "errored": "31", "cancelled": "90", "unconfirmed": "33",
                 "awaiting": "36", "sending": "36", "delayed": "33", "queued": "0"}  # fmt: skip


class ApiError(Exception):
    def __init__(self, status: int, code: str, message: str) -> None:
        super().__init__(f"{status} {code}: {message}")
        self.status = status
        self.code = code
        self.message = message

    @property
    def exit_code(self) -> int:
        if self.status == 0:
            return EXIT_UNREACHABLE
        if self.status in (401, 403):
            return EXIT_AUTH
        if self.status == 404:
            return EXIT_NOT_FOUND
        if self.status == 409:
            return EXIT_CONFLICT
        if self.status in (400, 413, 422):
            return EXIT_INVALID
        if self.status >= 500:
            return EXIT_SERVER
        return EXIT_FAILED


class Client:
    def __init__(self, url: str, token: str | None, timeout: float = 30.0) -> None:
        import requests

        self.url = url.rstrip("/")
        self.session = requests.Session()
        if token:
            self.session.headers["Authorization"] = f"Bearer {token}"
        self.timeout = timeout

    def call(self, method: str, path: str, body: Any = None, params: dict | None = None,
             headers: dict | None = None, allow_redirects: bool = True) -> Any:  # fmt: skip
        import requests

        try:
            answer = self.session.request(
                method, self.url + path, json=body, params=params, headers=headers,
                timeout=self.timeout, allow_redirects=allow_redirects,
            )  # fmt: skip
        except requests.RequestException as exc:
            raise ApiError(0, "unreachable", f"cannot reach {self.url}: {exc}") from None
        if answer.status_code >= 400:
            try:
                error = answer.json().get("error") or {}
            except ValueError:
                error = {}
            raise ApiError(answer.status_code, error.get("code") or "http_error",
                           error.get("message") or answer.text[:200] or answer.reason)
        if not answer.content:
            return None
        try:
            return answer.json()
        except ValueError:
            return answer.text


# Output.
def _colour(text: str, state: str) -> str:
    code = STATE_COLOURS.get(state)
    if not code or not sys.stdout.isatty() or os.environ.get("NO_COLOR"):
        return text
    return f"\033[{code}m{text}\033[0m"


def _address(part: Any) -> str:
    if not isinstance(part, dict):
        return str(part or "")
    return str(part.get("email") or part.get("cell") or "")


def table(rows: Sequence[Sequence[str]], headers: Sequence[str]) -> str:
    widths = [max(len(str(x)) for x in col) for col in zip(headers, *rows, strict=False)]
    def line(cells: Sequence[str]) -> str:
        return "  ".join(str(c).ljust(w) for c, w in zip(cells, widths, strict=False)).rstrip()
    return "\n".join([line(headers), line(["-" * w for w in widths]), *map(line, rows)])


def item_rows(items: Iterable[dict[str, Any]]) -> list[list[str]]:
    rows = []
    for i in items:
        result = (i.get("result") or "").replace("\n", " ")
        rows.append([i.get("id", ""), i.get("method", ""), i.get("state", ""),
                     _address(i.get("receiver")), str(i.get("attempt", "")),
                     (i.get("updated_at") or "")[:19], result[:50]])  # fmt: skip
    return rows


def print_items(items: list[dict[str, Any]]) -> None:
    if not items:
        print("(no items)")
        return
    print(table(item_rows(items),
                ["ID", "METHOD", "STATE", "RECEIVER", "ATTEMPT", "UPDATED", "RESULT"]))


def print_item(item: dict[str, Any]) -> None:
    fields = [("id", item.get("id")), ("method", item.get("method")),
              ("state", _colour(str(item.get("state")), str(item.get("state")))),
              ("sender", _address(item.get("sender"))),
              ("receiver", _address(item.get("receiver"))),
              ("attempt", item.get("attempt")), ("provider id", item.get("provider_id")),
              ("queued at", item.get("queued_at")), ("updated at", item.get("updated_at")),
              ("result", item.get("result"))]  # fmt: skip
    origin = item.get("origin")
    if origin:
        fields.append(("origin", f"{origin.get('type')}:{origin.get('id')}"))
    if item.get("resent_from"):
        fields.append(("resent from", item["resent_from"]))
    for name, value in fields:
        if value not in (None, ""):
            print(f"{name:>12}  {value}")
    content = item.get("content") or {}
    if content.get("subject"):
        print(f"{'subject':>12}  {content['subject']}")
    if content.get("body"):
        print(f"{'body':>12}  {content['body']}")
    for attachment in item.get("attachments") or []:
        print(f"{'attachment':>12}  {attachment.get('filename')} "
              f"({attachment.get('content_type')}) {attachment.get('download_path') or ''}")
    history = item.get("history") or []
    if history:
        print("\nhistory")
        for entry in history:
            change = entry.get("name") or entry.get("kind") or ""
            if entry.get("from_state") and entry.get("to_state"):
                change += f"  {entry['from_state']} -> {entry['to_state']}"
            who = entry.get("actor") or ""
            if entry.get("source"):
                who += f" ({entry['source']})"
            print(f"  {(entry.get('at') or '')[:23]:<23}  {change:<32} {who}")
            if entry.get("text"):
                print(f"  {'':<23}  {entry['text']}")


def emit(args: argparse.Namespace, data: Any, human: Any) -> None:
    if args.json:
        print(json.dumps(data, indent=2))
    else:
        human(data)


class Progress:
    """A one-line progress bar on stderr (plain lines when stderr is not a terminal)."""

    def __init__(self, total: int, label: str) -> None:
        self.total, self.label, self.done, self.failed = total, label, 0, 0
        self.tty = sys.stderr.isatty()

    def step(self, ok: bool) -> None:
        self.done += 1
        self.failed += 0 if ok else 1
        width = 30
        filled = int(width * self.done / max(self.total, 1))
        text = (f"{self.label} [{'#' * filled}{'.' * (width - filled)}] {self.done}/{self.total}"
                + (f" ({self.failed} failed)" if self.failed else ""))  # fmt: skip
        if self.tty:
            sys.stderr.write("\r" + text)
            if self.done == self.total:
                sys.stderr.write("\n")
        elif self.done == self.total or self.done % 10 == 0:
            sys.stderr.write(text + "\n")
        sys.stderr.flush()


# Commands.
def _client(args: argparse.Namespace) -> Client:
    url = args.api_url or os.environ.get("VDQ_API_URL")
    if not url:
        raise ApiError(0, "no_api_url", "set VDQ_API_URL (vdq local prints it) or --api-url")
    return Client(url, args.token or os.environ.get("VDQ_TOKEN"))


def _origin(text: str | None) -> dict[str, str] | None:
    if not text:
        return None
    kind, sep, ident = text.partition(":")
    if not sep:
        raise SystemExit("vdq: --origin takes TYPE:ID")
    return {"type": kind, "id": ident}


def _emails(values: list[str] | None) -> list[dict[str, str]]:
    out = []
    for v in values or []:
        name, sep, address = v.rpartition(" <")
        out.append({"email": address.rstrip(">"), "name": name} if sep else {"email": v})
    return out


def cmd_send_email(args: argparse.Namespace) -> int:
    body: dict[str, Any] = {
        "sender": {"email": args.sender,
                   **({"name": args.sender_name} if args.sender_name else {})},
        "to": _emails(args.to), "subject": args.subject, "text": args.text,
    }  # fmt: skip
    for key in ("cc", "bcc", "reply_to"):
        if getattr(args, key):
            body[key] = _emails(getattr(args, key))
    if args.html:
        body["html"] = args.html
    if args.attach:
        body["attachments"] = []
        for name in args.attach:
            path = Path(name)
            body["attachments"].append({
                "filename": path.name,
                "content_type": mimetypes.guess_type(path.name)[0] or "application/octet-stream",
                "content_base64": base64.b64encode(path.read_bytes()).decode(),
            })  # fmt: skip
    if args.origin:
        body["origin"] = _origin(args.origin)
    headers = {"Idempotency-Key": args.idempotency_key} if args.idempotency_key else None
    result = _client(args).call("POST", "/emails", body, headers=headers)
    emit(args, result, lambda r: print_items(r.get("items", [])))
    return EXIT_OK


def cmd_send_sms(args: argparse.Namespace) -> int:
    body: dict[str, Any] = {"sender": {"cell": args.sender},
                            "to": [{"cell": c} for c in args.to], "body": args.body}
    if args.media_url:
        body["media_urls"] = args.media_url
    if args.origin:
        body["origin"] = _origin(args.origin)
    result = _client(args).call("POST", "/sms", body)
    emit(args, result, lambda r: print_items(r.get("items", [])))
    return EXIT_OK


def _list(client: Client, sent: bool, args: argparse.Namespace) -> list[dict[str, Any]]:
    params: dict[str, Any] = {"limit": args.limit}
    if getattr(args, "state", None):
        params["state"] = args.state
    if getattr(args, "method", None):
        params["method"] = args.method
    items: list[dict[str, Any]] = []
    while True:
        page = client.call("GET", "/sent-items" if sent else "/queue-items", params=params)
        items.extend(page.get("items", []))
        cursor = page.get("next_cursor") or page.get("cursor")
        if not cursor or not getattr(args, "all", False):
            return items
        params["cursor"] = cursor


def cmd_list(args: argparse.Namespace) -> int:
    items = _list(_client(args), args.sent, args)
    emit(args, {"items": items}, lambda d: print_items(d["items"]))
    return EXIT_OK


def cmd_show(args: argparse.Namespace) -> int:
    item = _client(args).call("GET", f"/queue-items/{args.id}")
    emit(args, item, print_item)
    return EXIT_OK


def _transition(name: str):
    def command(args: argparse.Namespace) -> int:
        params = {"dry_run": "true"} if args.dry_run else None
        result = _client(args).call("POST", f"/queue-items/{args.id}/transitions/{name}",
                                    params=params)  # fmt: skip
        def human(r: Any) -> None:
            r = r if isinstance(r, dict) else {}
            move = f"{r.get('from_state', '?')} -> {r.get('to_state', '?')}"
            note = " (dry run: possible, nothing changed)" if args.dry_run else ""
            print(f"{args.id}: {name} {move}{note}")
        emit(args, result, human)
        return EXIT_OK
    return command


def cmd_resend(args: argparse.Namespace) -> int:
    client = _client(args)
    progress = Progress(len(args.ids), "resending")
    created: list[dict[str, Any]] = []
    failures: dict[str, str] = {}
    codes: set[int] = set()
    for item_id in args.ids:
        try:
            result = client.call("POST", f"/sent-items/{item_id}/resend")
            created.extend(result.get("items", []))
            progress.step(True)
        except ApiError as exc:
            if exc.status == 0:
                raise
            failures[item_id] = str(exc)
            codes.add(exc.exit_code)
            progress.step(False)
    data = {"items": created, "failed": failures}

    def human(d: dict[str, Any]) -> None:
        print_items(d["items"])
        for item_id, error in d["failed"].items():
            print(f"not resent {item_id}: {error}", file=sys.stderr)
    emit(args, data, human)
    if not failures:
        return EXIT_OK
    if not created and len(codes) == 1:
        return codes.pop()
    return EXIT_PARTIAL


def cmd_watch(args: argparse.Namespace) -> int:
    """Print each state change of active items (and of items leaving the queue) as it happens."""
    client = _client(args)
    seen: dict[str, str] = {}
    deadline = time.monotonic() + args.seconds if args.seconds else None
    first = True
    while deadline is None or time.monotonic() < deadline:
        active = {i["id"]: i for i in _list(client, False, args)}
        for item_id in [i for i in seen if i not in active]:
            try:
                active[item_id] = client.call("GET", f"/queue-items/{item_id}")
            except ApiError as exc:
                if exc.status != 404:
                    raise
                seen.pop(item_id)
        for item_id, item in active.items():
            state = item.get("state", "")
            if seen.get(item_id) != state:
                if args.json:
                    print(json.dumps({"at": time.strftime("%H:%M:%S"), "item": item}), flush=True)
                else:
                    print(f"{time.strftime('%H:%M:%S')}  {item_id}  {item.get('method', ''):<5} "
                          f"{_colour(f'{state:<11}', state)} {_address(item.get('receiver'))}  "
                          f"{(item.get('result') or '')[:60]}", flush=True)  # fmt: skip
                seen[item_id] = state
            if state in ("succeeded", "cancelled", "unconfirmed") and not first:
                seen.pop(item_id, None)
        first = False
        time.sleep(args.interval)
    return EXIT_OK


def cmd_token(args: argparse.Namespace) -> int:
    from vdq.local.front import make_token
    from vdq.settings import Settings

    secret = args.secret or Settings.from_env().local_jwt_secret
    if not secret:
        print("vdq token: set VDQ_LOCAL_JWT_SECRET (vdq local prints it) or --secret",
              file=sys.stderr)
        return EXIT_USAGE
    groups = [g for g in args.groups.split(",") if g]
    print(make_token(secret, groups, subject=args.subject, hours=args.hours))
    return EXIT_OK


def cmd_local(args: argparse.Namespace) -> int:
    from vdq.local.stack import Options, run

    return run(Options(port=args.port, polling=args.polling,
                       visibility_seconds=args.visibility_seconds, faults=args.faults,
                       log_level=args.log_level))  # fmt: skip


# The command line.
def parser() -> argparse.ArgumentParser:
    from vdq.local.stack import DEFAULT_PORT

    common = argparse.ArgumentParser(add_help=False)
    common.add_argument("--json", action="store_true", help="print JSON for scripts")
    common.add_argument("--api-url", help="base URL of the API (default: $VDQ_API_URL)")
    common.add_argument("--token", help="bearer token (default: $VDQ_TOKEN)")
    top = argparse.ArgumentParser(
        prog="vdq", description=__doc__, epilog=EXIT_CODES_HELP,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )  # fmt: skip
    sub = top.add_subparsers(dest="command", required=True, metavar="COMMAND")

    def command(name: str, help: str, fn: Any, parents: list | None = None):
        p = sub.add_parser(name, help=help, description=help, epilog=EXIT_CODES_HELP,
                           parents=[common] if parents is None else parents,
                           formatter_class=argparse.RawDescriptionHelpFormatter)  # fmt: skip
        p.set_defaults(fn=fn)
        return p

    p = command("local", "run the whole system on this machine (moto, sandboxes)", cmd_local, [])
    p.add_argument("--port", type=int, default=DEFAULT_PORT, help=f"API port ({DEFAULT_PORT})")
    p.add_argument("--polling", action="store_true",
                   help="no Twilio status callbacks: the schedules poll Twilio")
    p.add_argument("--faults", help="sandbox faults, e.g. duplicate,late,reordered,missing,"
                   "throttle,5xx,slow (default: $VDQ_LOCAL_FAULTS)")
    p.add_argument("--visibility-seconds", type=int, default=60,
                   help="SQS visibility timeout of the local queues (60)")
    p.add_argument("--log-level", default="WARNING", help="WARNING (default), INFO, DEBUG")

    p = command("token", "print a token for the local stack", cmd_token, [])
    p.add_argument("--groups", default="vdq-admins", help="comma-separated groups")
    p.add_argument("--subject", default="local-user", help="the token's sub claim")
    p.add_argument("--hours", type=float, default=12.0, help="lifetime (12)")
    p.add_argument("--secret", help="HS256 secret (default: $VDQ_LOCAL_JWT_SECRET)")

    p = command("send-email", "queue an email (one item per receiver)", cmd_send_email)
    p.add_argument("--from", dest="sender", required=True, help="sender address")
    p.add_argument("--from-name", dest="sender_name")
    p.add_argument("--to", action="append", required=True, help="receiver (repeatable)")
    p.add_argument("--cc", action="append")
    p.add_argument("--bcc", action="append")
    p.add_argument("--reply-to", dest="reply_to", action="append")
    p.add_argument("--subject", required=True)
    p.add_argument("--text", required=True, help="plain-text body")
    p.add_argument("--html", help="HTML body")
    p.add_argument("--attach", action="append", help="file to attach (repeatable)")
    p.add_argument("--origin", help="TYPE:ID of the record that caused the email")
    p.add_argument("--idempotency-key", help="Idempotency-Key header")

    p = command("send-sms", "queue an SMS (one item per receiver)", cmd_send_sms)
    p.add_argument("--from", dest="sender", required=True, help="sender number (E.164)")
    p.add_argument("--to", action="append", required=True, help="receiver (repeatable)")
    p.add_argument("--body", required=True)
    p.add_argument("--media-url", action="append")
    p.add_argument("--origin", help="TYPE:ID")

    for name, help_text in (("list", "list the active queue (--sent: the sent items)"),):
        p = command(name, help_text, cmd_list)
        p.add_argument("--sent", action="store_true", help="done items instead of the queue")
        p.add_argument("--state")
        p.add_argument("--method", choices=["email", "sms"])
        p.add_argument("--limit", type=int, default=50)
        p.add_argument("--all", action="store_true", help="follow the cursor to the end")

    p = command("show", "show one item, with its history as a timeline", cmd_show)
    p.add_argument("id")
    for name in ("retry", "cancel"):
        p = command(name, f"{name} an item", _transition(name))
        p.add_argument("id")
        p.add_argument("--dry-run", action="store_true", help="check only, change nothing")
    p = command("resend", "resend sent items as new queued items", cmd_resend)
    p.add_argument("ids", nargs="+", metavar="ID")
    p = command("watch", "print state changes of the queue as they happen", cmd_watch)
    p.add_argument("--interval", type=float, default=1.0)
    p.add_argument("--seconds", type=float, help="stop after this long (default: Ctrl-C)")
    p.add_argument("--limit", type=int, default=100)
    p.add_argument("--all", action="store_true", default=True, help=argparse.SUPPRESS)
    return top


def main(argv: Sequence[str] | None = None) -> int:
    args = parser().parse_args(argv)
    try:
        return args.fn(args)
    except ApiError as exc:
        if getattr(args, "json", False):
            print(json.dumps({"error": {"status": exc.status, "code": exc.code,
                                        "message": exc.message}}), file=sys.stderr)  # fmt: skip
        else:
            print(f"vdq {args.command}: {exc}", file=sys.stderr)
        return exc.exit_code
    except KeyboardInterrupt:
        return EXIT_OK if args.command == "watch" else 130
    except OSError as exc:
        print(f"vdq {args.command}: {exc}", file=sys.stderr)
        return EXIT_FAILED


if __name__ == "__main__":
    sys.exit(main())
