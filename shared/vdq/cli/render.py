"""What the CLI prints for people: tables, the item detail, watch lines, the progress bar.

Producer and provider text (an SMS body, a result, a history entry) reaches an operator's
terminal only through ``safe``: every character that is not printable (C0 and C1 controls, ESC
sequences, bidi overrides, line separators, zero-width and other format characters) is shown
as its escape, so no value can retitle the window, move the cursor or draw a fake line. Columns
are padded by display width (wide characters take two cells).
"""

from __future__ import annotations

import os
import sys
import unicodedata
from collections.abc import Iterable, Sequence
from datetime import UTC, datetime
from typing import Any

STATE_COLOURS = {"succeeded": "32", "errored": "31", "cancelled": "90", "unconfirmed": "33",
                 "awaiting": "36", "sending": "36", "delayed": "33", "queued": "0"}  # fmt: skip


def safe(value: Any) -> str:
    """``value`` as text with every non-printable character escaped (``\\x1b``, ``\\u202e``)."""
    text = "" if value is None else str(value)
    if text.isprintable():
        return text
    out = []
    for c in text:
        if c.isprintable():
            out.append(c)
        elif ord(c) < 0x100:
            out.append(f"\\x{ord(c):02x}")
        elif ord(c) < 0x10000:
            out.append(f"\\u{ord(c):04x}")
        else:
            out.append(f"\\U{ord(c):08x}")
    return "".join(out)


def width(text: str) -> int:
    """Terminal cells ``text`` takes (``safe`` text: no controls)."""
    return sum(2 if unicodedata.east_asian_width(c) in "WF" else
               0 if unicodedata.combining(c) else 1 for c in text)  # fmt: skip


def pad(text: str, cells: int) -> str:
    return text + " " * max(0, cells - width(text))


def clip(text: str, cells: int) -> str:
    """``text`` cut to at most ``cells`` cells, ending in an ellipsis when cut."""
    if width(text) <= cells:
        return text
    out, used = [], 0
    for c in text:
        w = width(c)
        if used + w > cells - 1:
            break
        out.append(c)
        used += w
    return "".join(out) + "…"


def colour(text: str, state: str) -> str:
    code = STATE_COLOURS.get(state)
    if not code or not sys.stdout.isatty() or os.environ.get("NO_COLOR"):
        return text
    return f"\033[{code}m{text}\033[0m"


def address(part: Any) -> str:
    if not isinstance(part, dict):
        return safe(part or "")
    return safe(part.get("email") or part.get("cell") or part.get("messaging_service_sid") or "")


def table(rows: Sequence[Sequence[str]], headers: Sequence[str]) -> str:
    widths = [max(width(x) for x in col) for col in zip(headers, *rows, strict=False)]

    def line(cells: Sequence[str]) -> str:
        return "  ".join(pad(c, w) for c, w in zip(cells, widths, strict=False)).rstrip()

    return "\n".join([line(headers), line(["-" * w for w in widths]), *map(line, rows)])


def state_of(item: dict[str, Any]) -> str:
    """The state, marked when the reputation guard parked the item (it stays queued until an
    operator releases or cancels its producer's items: ``vdq producers``)."""
    return safe(item.get("state")) + (" (held)" if item.get("held") else "")


# A cancelled item's results that VDQ wrote itself (a suppression, the reputation guard's
# cancel of a parked item), not a provider's of an earlier attempt.
VDQ_CANCEL_RESULTS = ("not sent", "cancelled while")


def result_of(item: dict[str, Any]) -> str:
    """The result as an operator should read it (as the console does): a cancelled item was
    stopped by VDQ or an operator, whatever a provider said of an earlier attempt (its "retry
    1 of 12 in 16 s" will never run); a queued item with a ``send_at`` waits for it."""
    result = safe(item.get("result")) if item.get("result") else ""
    # Not stuck: it waits for its time (a retry after it clears send_at). A parked item (``held``)
    # waits for its producer's release instead, whatever time it was scheduled for.
    waiting = item.get("state") == "queued" and not item.get("held")
    if waiting and item.get("send_at") and not result:
        return f"Scheduled: sends at {safe(item['send_at'])[:19]}Z"
    if item.get("state") != "cancelled" or result.startswith(VDQ_CANCEL_RESULTS):
        return result  # VDQ's own words of why it was not sent
    if not result:
        return "Cancelled: not sent."
    return f"Cancelled: not sent again. A provider result of an earlier attempt: {result}"


def signals_of(item: dict[str, Any]) -> str:
    """The marks beside the state (a bounce, a complaint, ...): without them a delivery the
    receiver reported as spam reads as a plain success."""
    return safe(",".join(item.get("signals") or []))


def item_rows(items: Iterable[dict[str, Any]]) -> list[list[str]]:
    return [[safe(i.get("id")), safe(i.get("method")), state_of(i),
             address(i.get("receiver")), safe(i.get("attempt")),
             safe((i.get("updated_at") or "")[:19]), signals_of(i), clip(result_of(i), 50)]
            for i in items]  # fmt: skip


def print_usage(usage: dict[str, Any]) -> None:
    producer, counters = safe(usage.get("producer")), safe(usage.get("counters"))
    whose = f" (the counters of {counters}, which it is charged to)" if (
        counters and counters != producer) else ""
    print(f"producer {producer} at {safe(usage.get('at'))}{whose}")
    rows = [[safe(w.get("limit")), safe(w.get("quota")), safe(w.get("used")),
             safe(w.get("remaining")), safe(w.get("resets_at"))]
            for w in usage.get("limits") or []]  # fmt: skip
    print(table(rows, ["LIMIT", "QUOTA", "USED", "REMAINING", "RESETS AT"]))


def print_items(items: list[dict[str, Any]]) -> None:
    if not items:
        print("(no items)")
        return
    print(table(item_rows(items),
                ["ID", "METHOD", "STATE", "RECEIVER", "ATTEMPT", "UPDATED", "SIGNALS",
                 "RESULT"]))  # fmt: skip


def suppressed_note(found: dict[str, Any]) -> str:
    """"note: <receiver> is on the suppression list since <time> (<reason>)", or unsubscribed
    from its list: what an answer's ``suppressed`` entry says of a receiver."""
    where = (f"unsubscribed from the list {safe(found['list'])}" if found.get("list")
             else "on the suppression list")  # fmt: skip
    return (f"note: {safe(found.get('receiver'))} is {where} since {safe(found.get('since'))} "
            f"({safe(found.get('reason'))})")


def retry_wait_note(answer: dict[str, Any], dry_run: bool) -> str | None:
    """What a retry's answer says of the item's send_at: a retry before it keeps the item
    waiting for it (the API clears a passed one); a dry run's item is as it was, its time
    read against this machine's clock."""
    item = answer.get("item") if isinstance(answer.get("item"), dict) else {}
    send_at = item.get("send_at") if isinstance(item, dict) else None
    if answer.get("transition") != "retry" or not isinstance(send_at, str):
        return None
    if not dry_run:
        return f"note: waits for its send_at {safe(send_at)}: sent then, not now"
    try:
        ahead = datetime.fromisoformat(send_at.replace("Z", "+00:00")) > datetime.now(UTC)
    except ValueError:
        return None
    return f"note: the retry would wait for its send_at {safe(send_at)}" if ahead else None


def print_enqueued(answer: Any) -> None:
    """An enqueue's items, and what the answer says will keep some from being sent: a
    receiver on the suppression list (its item is cancelled, unsent) and a held producer
    (its email waits for a release). Without these notes every item reads as plainly queued."""
    answer = answer if isinstance(answer, dict) else {}
    print_items(answer.get("items") or [])
    for found in answer.get("suppressed") or []:
        if not isinstance(found, dict):
            continue
        print(f"{suppressed_note(found)}: its item will be cancelled, unsent")
    held = answer.get("held")
    if isinstance(held, dict):
        print(f"note: producer {safe(held.get('producer'))}'s email is held since "
              f"{safe(held.get('since'))} ({safe(held.get('reason'))}): its items wait until "
              "an operator releases the hold (vdq producers)")


def excerpt_of(item: dict[str, Any]) -> str:
    """The start of its subject or body; an MMS of media alone has neither (not content lost)."""
    if not item.get("excerpt") and item.get("method") == "sms" and item.get("segments") == 0:
        return "(media only)"
    return safe(item.get("excerpt"))


def found_rows(items: Iterable[dict[str, Any]]) -> list[list[str]]:
    return [[safe(i.get("id")), state_of(i), address(i.get("receiver")),
             clip(excerpt_of(i), 30), safe((i.get("queued_at") or "")[:19]),
             signals_of(i), clip(result_of(i), 40)]
            for i in items]  # fmt: skip


def print_found(items: list[dict[str, Any]]) -> None:
    if not items:
        print("(no items)")
        return
    print(table(found_rows(items),
                ["ID", "STATE", "RECEIVER", "SUBJECT", "QUEUED", "SIGNALS", "RESULT"]))


TILES = ("queued", "sent", "delivered", "bounced", "complained", "rejected", "errored",
         "unconfirmed", "cancelled")  # fmt: skip


def print_stats(data: dict[str, Any]) -> None:
    """A table per method: a row per bucket and the totals; then the breakdown, if asked."""
    hourly = data.get("period") == "hours"
    for method in ("email", "sms"):
        totals = (data.get("totals") or {}).get(method)
        if totals is None:
            continue
        rows = []
        for bucket in data.get("buckets") or []:
            counts = bucket.get(method) or {}
            start = safe(bucket.get("start") or "")
            rows.append([start[11:16] if hourly else start[:10],
                         *(safe(counts.get(t, 0)) for t in TILES)])  # fmt: skip
        rows.append(["total", *(safe(totals.get(t, 0)) for t in TILES)])
        print(f"{method}, per {'hour (UTC)' if hourly else 'day'}:")
        print(table(rows, ["HOUR" if hourly else "DAY", *(t.upper() for t in TILES)]))
        print()
    breakdown = data.get("breakdown")
    if breakdown is not None:
        rows = [[safe(r.get("name")), *(safe(r.get(k, 0)) for k in
                                         ("sent", "delivered", "bounced", "complained",
                                          "rejected")),
                 _rate(r.get("bounced"), r.get("sent")), _rate(r.get("complained"),
                                                               r.get("sent"))]
                for r in breakdown]  # fmt: skip
        print("the last 24 hours:")
        print(table(rows, ["NAME", "SENT", "DELIVERED", "BOUNCED", "COMPLAINED", "REJECTED",
                           "BOUNCE %", "COMPLAINT %"]) if rows else "(nothing sent)")
    print(f"(counts follow what happened by up to {safe(data.get('lag_seconds'))} s)")


def _rate(part: Any, whole: Any) -> str:
    if not whole:
        return "-"
    return f"{100 * (part or 0) / whole:.2f}"


def print_item(item: dict[str, Any]) -> None:
    state = safe(item.get("state"))
    fields = [("id", item.get("id")), ("method", item.get("method")), ("state", state),
              ("sender", address(item.get("sender"))),
              ("receiver", address(item.get("receiver"))),
              ("attempt", item.get("attempt")), ("provider id", item.get("provider_id")),
              ("queued at", item.get("queued_at")), ("updated at", item.get("updated_at")),
              ("result", result_of(item) or None), ("signals", signals_of(item)),
              ("held", item.get("held"))]  # fmt: skip
    origin = item.get("origin")
    if isinstance(origin, dict):
        fields.append(("origin", f"{origin.get('type')}:{origin.get('id')}"))
    if item.get("priority") not in (None, "normal"):
        fields.append(("priority", item["priority"]))
    if item.get("send_at"):
        fields.append(("send at", item["send_at"]))
    if item.get("resent_from"):
        fields.append(("resent from", item["resent_from"]))
    if item.get("segments") is not None:
        # An MMS of media alone has no text: no segments and no encoding.
        how = item.get("encoding") or "no text: one MMS"
        fields.append(("segments", f"{item['segments']} ({how})"))
    content = item.get("content") or {}
    fields += [("subject", content.get("subject")), ("body", content.get("body"))]
    fields += [("media", url) for url in content.get("media_urls") or []]  # an MMS's pictures
    for attachment in item.get("attachments") or []:
        fields.append(("attachment", f"{safe(attachment.get('filename'))} "
                       f"({safe(attachment.get('content_type'))}) "
                       f"{safe(attachment.get('download_path') or '')}".rstrip()))  # fmt: skip
    for name, value in fields:
        if value in (None, ""):
            continue
        text = colour(state, state) if name == "state" else safe(value)
        print(f"{name:>12}  {text}")
    history = item.get("history") or []
    if history:
        print("\nhistory")
        rows = []
        for entry in history:
            change = safe(entry.get("name") or entry.get("kind") or "")
            if entry.get("kind") in ("late", "ignored"):
                # A late delivery belongs to the attempt it names, not the item's current one.
                change += f" ({safe(entry['kind'])})"
            if entry.get("from_state") and entry.get("to_state"):
                change += f"  {safe(entry['from_state'])} -> {safe(entry['to_state'])}"
            who = safe(entry.get("actor"))
            if entry.get("source"):
                who += f" ({safe(entry['source'])})"
            if entry.get("attempt") is not None:
                who += f", attempt {safe(entry['attempt'])}"
            rows.append((safe((entry.get("at") or "")[:23]), change, who, safe(entry.get("text"))))
        change_width = max(width(r[1]) for r in rows)
        for at, change, who, text in rows:
            print(f"  {pad(at, 23)}  {pad(change, change_width)}  {who}".rstrip())
            if text:
                print(f"  {'':<23}  {text}")


WATCH_RECEIVER = 30


def watch_line(at: str, item: dict[str, Any]) -> str:
    """One state change: time, id, method, state, receiver and result in fixed columns."""
    state = safe(item.get("state"))
    receiver = pad(clip(address(item.get("receiver")), WATCH_RECEIVER), WATCH_RECEIVER)
    return (f"{at}  {pad(safe(item.get('id')), 26)}  {pad(safe(item.get('method')), 5)}  "
            f"{colour(pad(state, 11), state)}  {receiver}  "
            f"{clip(result_of(item), 60)}").rstrip()  # fmt: skip


class Progress:
    """A one-line progress bar on stderr (plain lines when stderr is not a terminal)."""

    def __init__(self, total: int, label: str) -> None:
        self.total, self.label, self.done, self.failed = total, label, 0, 0
        self.tty = sys.stderr.isatty()

    def step(self, ok: bool) -> None:
        self.done += 1
        self.failed += 0 if ok else 1
        bar = 30
        filled = int(bar * self.done / max(self.total, 1))
        text = (f"{self.label} [{'#' * filled}{'.' * (bar - filled)}] {self.done}/{self.total}"
                + (f" ({self.failed} failed)" if self.failed else ""))  # fmt: skip
        if self.tty:
            sys.stderr.write("\r" + text)
            if self.done == self.total:
                sys.stderr.write("\n")
        elif self.done == self.total or self.done % 10 == 0:
            sys.stderr.write(text + "\n")
        sys.stderr.flush()
