"""The CLI's commands: each takes the parsed arguments and returns its exit code."""

from __future__ import annotations

import argparse
import base64
import hashlib
import importlib.util
import json
import mimetypes
import os
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from vdq.cli import render
from vdq.cli.client import EXIT_OK, EXIT_PARTIAL, EXIT_USAGE, ApiError, Client, UsageError


def client(args: argparse.Namespace) -> Client:
    url = args.api_url or os.environ.get("VDQ_API_URL")
    if not url:
        raise UsageError("no API URL: set VDQ_API_URL or pass --api-url "
                         "(vdq local prints the local stack's)")  # fmt: skip
    if not url.startswith(("http://", "https://")):
        raise UsageError(f"the API URL {url!r} is not an http:// or https:// URL")
    token = args.token or os.environ.get("VDQ_TOKEN")
    if not token:
        raise UsageError("no token: set VDQ_TOKEN or pass --token (vdq token makes one for the "
                         "local stack; a deployment's Cognito user pool issues them)")  # fmt: skip
    return Client(url, token)


def emit(args: argparse.Namespace, data: Any, human: Any) -> None:
    if args.json:
        print(json.dumps(data, indent=2))
    else:
        human(data)


def _origin(text: str | None) -> dict[str, str] | None:
    if not text:
        return None
    kind, sep, ident = text.partition(":")
    if not sep or not kind or not ident:
        raise UsageError(f"--origin takes TYPE:ID, not {text!r}")
    return {"type": kind, "id": ident}


def _emails(values: list[str] | None) -> list[dict[str, str]]:
    out = []
    for v in values or []:
        name, sep, address = v.rpartition(" <")
        out.append({"email": address.rstrip(">"), "name": name} if sep else {"email": v})
    return out


def _idempotency(args: argparse.Namespace) -> dict[str, str] | None:
    """The Idempotency-Key header of ``--idempotency-key``. An empty one (a shell variable not
    set) is refused: dropped, the retries it was meant to make safe would queue it again."""
    if args.idempotency_key is None:
        return None
    if not args.idempotency_key:
        raise UsageError("--idempotency-key is empty: give the key (is its shell variable set?) "
                         "or leave the option out")  # fmt: skip
    return {"Idempotency-Key": args.idempotency_key}


def _upload_key(args: argparse.Namespace, n: int, data: bytes) -> dict[str, str] | None:
    """The Idempotency-Key of the email's ``n``-th large file's upload: made from the email's
    key, the file's place and its bytes. A run again with the same key names the same uploads
    (the API derives their ids from it), so the email's body is the same and its key answers as
    the first time; a changed file is another upload, and the email's key refuses the new body
    (a 422) rather than answering with the old file."""
    if not args.idempotency_key:
        return None
    digest = hashlib.sha256(f"{args.idempotency_key}\n{n}\n".encode() + data).hexdigest()
    return {"Idempotency-Key": f"vdq-upload-{digest}"}


def _dispatch(body: dict[str, Any], args: argparse.Namespace) -> None:
    """``--priority`` and ``--send-at`` as given: the API checks them (a 400 names the field).
    An empty ``--send-at`` (a shell variable not set) is sent too: dropped, it would send now."""
    if args.priority:
        body["priority"] = args.priority
    if args.send_at is not None:
        body["send_at"] = args.send_at


def send_email(args: argparse.Namespace) -> int:
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
    files = [(name, _read("--attach", name)) for name in args.attach or []]
    large = [(name, _read("--attach-large", name)) for name in args.attach_large or []]
    for name, data in files:
        body.setdefault("attachments", []).append({
            "filename": Path(name).name, "content_type": _type(name),
            "content_base64": base64.b64encode(data).decode(),
        })  # fmt: skip
    if args.origin:
        body["origin"] = _origin(args.origin)
    _dispatch(body, args)
    keyed = _idempotency(args)  # before any upload
    api = client(args)
    for n, (name, data) in enumerate(large):  # each a presigned upload, after every check
        upload = api.call("POST", "/attachments/uploads", {
            "filename": Path(name).name, "content_type": _type(name), "size": len(data),
            "sha256": base64.b64encode(hashlib.sha256(data).digest()).decode()},
            headers=_upload_key(args, n, data))  # fmt: skip
        api.put_upload(upload, data)
        body.setdefault("attachments", []).append({"upload_id": upload["upload_id"]})
    result = api.call("POST", "/emails", body, headers=keyed)
    emit(args, result, render.print_enqueued)
    return EXIT_OK


def _read(option: str, name: str) -> bytes:
    try:
        return Path(name).read_bytes()
    except OSError as exc:
        raise UsageError(f"{option} {name}: cannot read it ({exc.strerror})") from None


def _type(name: str) -> str:
    return mimetypes.guess_type(Path(name).name)[0] or "application/octet-stream"


def sms_sender(sender: str) -> dict[str, str]:
    """The request's sender: a Messaging Service's SID (MG...) or a number."""
    return {"messaging_service_sid" if sender[:2] == "MG" else "cell": sender}


def send_sms(args: argparse.Namespace) -> int:
    body: dict[str, Any] = {"sender": sms_sender(args.sender),
                            "to": [{"cell": c} for c in args.to]}
    if args.body is not None:
        body["body"] = args.body
    if args.media_url:
        body["media_urls"] = args.media_url
    if args.origin:
        body["origin"] = _origin(args.origin)
    _dispatch(body, args)
    key = _idempotency(args)
    result = client(args).call("POST", "/sms", body, headers=key)
    emit(args, result, render.print_enqueued)
    return EXIT_OK


def pages(api: Client, sent: bool, args: argparse.Namespace) -> tuple[list[Any], str | None]:
    """The items of one page (from ``--cursor``), or of every page with ``--all``; and the cursor
    of the page after them (the API's ``cursor``; None at the end)."""
    params: dict[str, Any] = {"limit": args.limit}
    if sent and getattr(args, "scheduled", None):
        raise UsageError("--scheduled lists the queue: sent items wait for nothing")
    for name in ("state", "method", "priority", "scheduled", "cursor"):
        if getattr(args, name, None):
            params[name] = getattr(args, name)
    items: list[dict[str, Any]] = []
    while True:
        page = api.call("GET", "/sent-items" if sent else "/queue-items", params=params)
        items.extend(page.get("items", []))
        cursor = page.get("cursor")
        if not cursor or not getattr(args, "all", False):
            return items, cursor
        params["cursor"] = cursor


def list_items(args: argparse.Namespace) -> int:
    items, cursor = pages(client(args), args.sent, args)

    def human(data: dict[str, Any]) -> None:
        render.print_items(data["items"])
        if data["cursor"]:
            print(f"(more: vdq list{' --sent' if args.sent else ''} --cursor {data['cursor']})",
                  file=sys.stderr)  # fmt: skip

    emit(args, {"items": items, "cursor": cursor}, human)
    return EXIT_OK


def find(args: argparse.Namespace) -> int:
    """GET /search: the items one key (or a time window) names, newest first."""
    params: dict[str, Any] = {"limit": args.limit}
    if args.origin:
        origin = _origin(args.origin)
        assert origin is not None
        params.update(origin_type=origin["type"], origin_id=origin["id"])
    for name, param in (("receiver", "receiver"), ("provider_id", "provider_id"),
                        ("sender", "sender"), ("item_id", "id"), ("since", "since"),
                        ("until", "until"), ("state", "state"), ("method", "method"),
                        ("priority", "priority"), ("cursor", "cursor")):  # fmt: skip
        if getattr(args, name, None):
            params[param] = getattr(args, name)
    if "id" in params:  # Crockford base32 reads either case; an API of before took upper case
        params["id"] = params["id"].strip().upper()
    if not ({"receiver", "origin_type", "provider_id", "sender", "id", "since"} & set(params)):
        raise UsageError("say what to find: --to, --origin, --provider-id, --from, --id or "
                         "--since")  # fmt: skip
    api = client(args)
    items: list[dict[str, Any]] = []
    while True:
        page = api.call("GET", "/search", params=params)
        items.extend(page.get("items", []))
        cursor = page.get("cursor")
        if not cursor or not args.all:
            break
        params["cursor"] = cursor

    def human(data: dict[str, Any]) -> None:
        if data["items"] or not data["cursor"]:
            render.print_found(data["items"])
        else:  # not "no items": the search stopped at its read limit, and may find more
            print("(none on this page: the search stopped at its read limit; the next page "
                  "may hold some)")  # fmt: skip
        if data["cursor"]:
            print(f"(more: vdq find ... --cursor {data['cursor']}; a page that reached its "
                  "read limit may be short)", file=sys.stderr)  # fmt: skip

    emit(args, {"items": items, "cursor": cursor}, human)
    return EXIT_OK


def stats(args: argparse.Namespace) -> int:
    """GET /stats: counts per hour (24 h) or per day (30 days), by method."""
    params: dict[str, Any] = {"period": "days" if args.days else "hours"}
    if args.method:
        params["method"] = args.method
    if args.by:
        params["breakdown"] = args.by
    emit(args, client(args).call("GET", "/stats", params=params), render.print_stats)
    return EXIT_OK


def backfill_receivers(args: argparse.Namespace) -> int:
    """Key the items written before the receiver index (a one-off Scan of the table)."""
    import boto3

    from vdq.results.suppression import normalize
    from vdq.store.search import backfill

    dynamodb = boto3.client("dynamodb", region_name=args.region) if args.region else (
        boto3.client("dynamodb"))  # fmt: skip
    total = 0
    for keyed in backfill(dynamodb, args.table, normalize):
        total += keyed
        print(f"keyed {total} items so far", file=sys.stderr)
    print(f"{total} items keyed: vdq find --to finds them now")
    return EXIT_OK


def backfill_done(args: argparse.Namespace) -> int:
    """Post the items done before the sent list was read from the done postings (a one-off
    Scan of the table)."""
    import boto3

    from vdq.store.done_backfill import backfill

    dynamodb = boto3.client("dynamodb", region_name=args.region) if args.region else (
        boto3.client("dynamodb"))  # fmt: skip
    total = 0
    for posted in backfill(dynamodb, args.table):
        total += posted
        print(f"posted {total} items so far", file=sys.stderr)
    print(f"{total} done items posted: the sent list shows them now")
    return EXIT_OK


MAX_HISTORY_PAGES = 200  # 100,000 entries at 500 a page: more is not an operator's timeline


def show(args: argparse.Namespace) -> int:
    api = client(args)
    item = api.call("GET", f"/queue-items/{args.id}")
    if isinstance(item, dict):  # the whole history: the view holds its first page
        cursor, pages = item.get("history_cursor"), 0
        while cursor and pages < MAX_HISTORY_PAGES:
            page = api.call("GET", f"/queue-items/{args.id}/history",
                            params={"cursor": cursor, "limit": "500"})  # fmt: skip
            item.setdefault("history", []).extend(page.get("entries") or [])
            cursor, pages = page.get("cursor"), pages + 1
        item["history_cursor"] = cursor
    emit(args, item, render.print_item)
    return EXIT_OK


def usage(args: argparse.Namespace) -> int:
    from urllib.parse import quote

    answer = client(args).call("GET", f"/producers/{quote(args.producer, safe=':@')}/usage")
    emit(args, answer, render.print_usage)
    return EXIT_OK


def transition(name: str) -> Any:
    """``vdq retry|cancel ID...``: one id answers as the API does (its answer with --json);
    several are moved one after another, each reported, and fail as ``resend`` does."""
    past = {"retry": "retried", "cancel": "cancelled"}[name]

    def command(args: argparse.Namespace) -> int:
        api = client(args)
        params = {"dry_run": "true"} if args.dry_run else None

        def move(item_id: str) -> Any:
            return api.call("POST", f"/queue-items/{item_id}/transitions/{name}", params=params)

        def human(item_id: str, r: Any) -> None:
            r = r if isinstance(r, dict) else {}
            moved = " -> ".join(render.safe(r.get(k, "?")) for k in ("from_state", "to_state"))
            note = " (dry run: possible, nothing changed)" if args.dry_run else ""
            print(f"{render.safe(item_id)}: {name} {moved}{note}")
            waits = render.retry_wait_note(r, args.dry_run)
            if waits:
                print(waits)
            held = r.get("suppressed")
            if isinstance(held, dict):
                print(f"{render.suppressed_note(held)}: the retry would be cancelled at once, "
                      "unsent")  # fmt: skip

        if len(args.ids) == 1:
            [item_id] = args.ids
            emit(args, move(item_id), lambda r: human(item_id, r))
            return EXIT_OK
        done = each(args, f"{name} ({past})", move)

        def report(d: dict[str, Any]) -> None:
            for item_id, answer in done.answers:
                human(item_id, answer)
            done.print_failures(past)

        emit(args, {"moved": [a for _, a in done.answers], "failed": done.failures}, report)
        return done.exit_code()

    return command


def resend(args: argparse.Namespace) -> int:
    api = client(args)
    done = each(args, "resending", lambda item_id: api.call("POST",
                                                            f"/sent-items/{item_id}/resend"))
    created = [i for _, answer in done.answers for i in answer.get("items", [])]
    # A copy to a receiver suppressed since its original was sent is cancelled, unsent.
    suppressed = [s for _, answer in done.answers for s in answer.get("suppressed") or []]

    def human(d: dict[str, Any]) -> None:
        render.print_enqueued({"items": d["items"], "suppressed": d["suppressed"]})
        done.print_failures("resent")

    emit(args, {"items": created, "suppressed": suppressed, "failed": done.failures}, human)
    return done.exit_code()


@dataclass
class Each:
    """What a command did to each of its ids: the API's answers, and the errors of those it
    could not do (the error's JSON with --json, else its text)."""

    answers: list[tuple[str, Any]] = field(default_factory=list)
    failures: dict[str, Any] = field(default_factory=dict)
    codes: set[int] = field(default_factory=set)

    def print_failures(self, past: str) -> None:
        for item_id, error in self.failures.items():
            print(f"not {past} {render.safe(item_id)}: {render.safe(error)}", file=sys.stderr)

    def exit_code(self) -> int:
        """0 when all were done; the one error's code when none was; else the partial code."""
        if not self.failures:
            return EXIT_OK
        if not self.answers and len(self.codes) == 1:
            return next(iter(self.codes))
        return EXIT_PARTIAL


def each(args: argparse.Namespace, label: str, call: Callable[[str], Any]) -> Each:
    """``call`` for each of ``args.ids`` in turn, with a progress bar; an unreachable API
    stops it (the error is raised), any other error is kept for that id and it goes on."""
    progress = render.Progress(len(args.ids), label)
    done = Each()
    for item_id in args.ids:
        try:
            done.answers.append((item_id, call(item_id)))
            progress.step(True)
        except ApiError as exc:
            if exc.status == 0:
                raise
            done.failures[item_id] = exc.json()["error"] if args.json else str(exc)
            done.codes.add(exc.exit_code)
            progress.step(False)
    return done


def watch(args: argparse.Namespace) -> int:
    """Print each state change of active items (and of items leaving the queue) as it happens."""
    api = client(args)
    seen: dict[str, str] = {}
    deadline = time.monotonic() + args.seconds if args.seconds else None
    first = True
    args.all, args.cursor = True, None
    while deadline is None or time.monotonic() < deadline:
        active = {i["id"]: i for i in pages(api, False, args)[0]}
        for item_id in [i for i in seen if i not in active]:
            try:
                active[item_id] = api.call("GET", f"/queue-items/{item_id}")
            except ApiError as exc:
                if exc.status != 404:
                    raise
                seen.pop(item_id)
        for item_id, item in active.items():
            state = item.get("state", "")
            if seen.get(item_id) != state:
                at = time.strftime("%H:%M:%S")
                if args.json:
                    print(json.dumps({"at": at, "item": item}), flush=True)
                else:
                    print(render.watch_line(at, item), flush=True)
                seen[item_id] = state
            if state in ("succeeded", "cancelled", "unconfirmed") and not first:
                seen.pop(item_id, None)
        first = False
        time.sleep(args.interval)
    return EXIT_OK


def _needs_local_extra() -> None:
    """The local stack and its tokens need moto and PyJWT: the ``local`` extra, not the runtime."""
    missing = [name for name in ("moto", "jwt") if importlib.util.find_spec(name) is None]
    if missing:
        raise UsageError(f"needs the local extra ({', '.join(missing)} not installed): "
                         "pip install 'vdq[local]'")  # fmt: skip


def token(args: argparse.Namespace) -> int:
    _needs_local_extra()
    from vdq.core.settings import Settings
    from vdq.local.front import make_token

    secret = args.secret or Settings.from_env().local_jwt_secret
    if not secret:
        print("vdq token: no secret: set VDQ_LOCAL_JWT_SECRET (vdq local prints it) or pass "
              "--secret", file=sys.stderr)  # fmt: skip
        return EXIT_USAGE
    groups = [g for g in args.groups.split(",") if g]
    print(make_token(secret, groups, subject=args.subject, hours=args.hours))
    return EXIT_OK


def local(args: argparse.Namespace) -> int:
    _needs_local_extra()
    from vdq.local.stack import Options, leave, run

    leave(run(Options(port=args.port, polling=args.polling,
                      visibility_seconds=args.visibility_seconds, faults=args.faults,
                      log_level=args.log_level)))  # fmt: skip
