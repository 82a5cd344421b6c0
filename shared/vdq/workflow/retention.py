"""Retention: done items, their records, content and files expire through DynamoDB's TTL.

An item that enters a done state (succeeded, cancelled, unconfirmed: ``workflow.DONE_STATES``)
gets ``expiration`` = done time + ``VDQ_RETENTION_DAYS``, written in the transition's own
transaction with the history record of that write. No transition leaves a done state, so an
expiration once written never changes. ``errored`` is not done: an operator may still retry or
cancel it, so an errored item (and everything it needs) is kept until then.

**A content expires from birth.** A content without files is written with its expiration,
``⌈max(now, send_at)⌉ + retention + H`` (``content_expiration``; ``H``, ``horizon_seconds``:
the longer provider timeout plus a day), and each of its items stores the value it relies on
as ``cx``. The content outlives every item of it:

- a done item needs ``cx >= its expiration``: the done write is conditional on it, and an item
  done later than its content's horizon (a long backlog, an operator's late retry or cancel, a
  resend's copy) first extends the content to a content written now (``Store.extend_content``),
  then writes the new ``cx`` (``vdq.workflow.transitions.content_outlives``). A crash in between
  leaves a content that lives longer than it needs to;
- an open item waits at most ``H`` past its send time before its content's retention starts to
  run down; one that waits longer (errored, parked by a hold, a long backlog) is found by the
  daily watch (``watch_open``), which reads every open item in the active index and extends
  the content of one within ``watch_margin`` of its expiration (three days at the defaults:
  three daily runs can fail first);
- a resend extends the content in the transaction that writes its copies (``Store.store_copies``);
- an expiration only ever moves later (every extension is conditional on it), and reads treat
  a passed expiration as gone, so the promise is on ``expiration``, not on TTL's deletion.

So the done write never touches the content, and a content shared by many items (a bulk send)
is written once, not once per item.

**Counted contents.** A content with files, and every content written before contents expired
from birth, counts its open items on its REFS record instead (no ``cx`` on its items): each
item releases it in its done transition, and the content expires with the last item that uses
it, stamped from the table's stream once its REFS count is at zero (or absent: one item); a
resend takes the expiration off again. The daily purge deletes the files of such contents.

Records of the item written before it was done (history, event marks) are stamped from the
table's stream, at least once, when the state record gains its expiration (``stamp_changes``);
records written while it is done carry the item's expiration from the start. Provider-ID
mappings carry an expiration from birth that outlives the item's (``mapping_expiration``).

DynamoDB deletes an expired record within about two days, so every read treats a record past
its expiration as gone (``vdq.store.expiry.gone``): lists and reads never show half an item.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Iterable
from datetime import datetime
from typing import Any

from pynamodb.exceptions import TransactWriteError, UpdateError
from pynamodb.transactions import TransactWrite

from vdq.core.clock import iso, parse_iso
from vdq.core.settings import Settings
from vdq.store import NEVER

DAY = 86_400
HOUR = 3_600
# The REFS record outlives its content by this much: the daily purge, which finds idle
# contents through it, deletes the files first.
REFS_GRACE_SECONDS = 2 * DAY
STATE_SK = "STATE"
# The daily watch extends the content of an item still open this close to its expiration:
# three daily runs can fail before anything an open item needs expires.
WATCH_MARGIN_SECONDS = 3 * DAY
# The daily purge deletes an idle content's files this many days before its records expire.
FILES_LEAD_DAYS = 2


def expiration_at(done: datetime, settings: Settings) -> int | None:
    """Epoch seconds at which a record of an item done at ``done`` expires; None: never."""
    if settings.retention_days <= 0:
        return None
    return int(done.timestamp()) + settings.retention_days * DAY


def horizon_seconds(settings: Settings) -> int:
    """``H``: how long an item may take from its send time to a done state without its
    content being extended: the longer provider timeout (awaiting), plus a day for automatic
    retries, scheduling and pacing. An item done later extends its content (``extend``)."""
    hours = max(settings.twilio_sms_timeout_hours, settings.email_timeout_hours)
    return math.ceil(hours * 3600) + DAY


def content_expiration(start: datetime, settings: Settings) -> int:
    """The expiration a content gets when it is written (or extended) at ``start`` (its
    send time, for a scheduled one): an item of it done by ``start + H`` needs no more. Rounded
    up to the hour: later only, the same for every request of that hour, and a number with
    fewer digits (DynamoDB sizes a number by its significant digits). ``NEVER`` without a
    retention."""
    if settings.retention_days <= 0:
        return NEVER
    at = start.timestamp() + settings.retention_days * DAY + horizon_seconds(settings)
    return math.ceil(at / HOUR) * HOUR


def mapping_expiration(written: datetime, settings: Settings) -> int | None:
    """The expiration of a provider-ID mapping written at ``written``: after the item's, since
    the attempt it maps is done at the latest when its awaiting window ends, or moves on to a
    new attempt with a new ID (its events then find no item: they are late either way)."""
    if settings.retention_days <= 0:
        return None
    hours = max(settings.twilio_sms_timeout_hours, settings.email_timeout_hours)
    return int(written.timestamp() + hours * 3600) + settings.retention_days * DAY + DAY


def files_age_seconds(settings: Settings) -> int | None:
    """How long the files of an idle content are kept before the daily purge deletes them:
    the files-age setting, but at most ``FILES_LEAD_DAYS`` less than the retention (the purge,
    which runs daily, finds the files through their content, which must still be there);
    unset, that much. None: forever (neither is set)."""
    if settings.retention_days <= 0:
        return settings.max_files_age_seconds
    latest = max(0, settings.retention_days - FILES_LEAD_DAYS) * DAY
    age = settings.max_files_age_seconds
    return latest if age is None else min(age, latest)


# ---- the watch of open items ------------------------------------------------------------------

WATCH_PAGE = 100  # items read a BatchGetItem


def watch_margin(settings: Settings) -> int:
    """How close to its expiration an open item's content gets before the daily watch extends
    it: three days (three daily runs can fail first), less with a retention so short that a
    content written now would be that close already."""
    return min(WATCH_MARGIN_SECONDS, settings.retention_days * DAY + horizon_seconds(settings))


# Where a pass of the watch stopped when its time ran out (a ScheduledCursorRecord's position,
# JSON): the minute sweep goes on from there (``watch_more``).
WATCH_PLACE = "WATCH#open"
WATCH_BUDGET_SECONDS = 60.0  # of the daily run's 120 s: the file-age purge runs after it
WATCH_MORE_SECONDS = 20.0  # of a minute sweep's, while a pass is unfinished


def watch_open(runtime: Any, visit: Callable[[Any], None] | None = None, *,
               budget: float | None = None) -> int:  # fmt: skip
    """The daily watch: extend the content of every item still open close to its content's
    expiration (an errored item waiting for an operator, a hold's parked item, a long
    backlog), to the expiration of a content written now. Returns contents extended.
    ``visit`` sees every open item read, as read (vdq.schedules.sweeps.lost_messages).

    Every open item is in the active index: each is read (eventually consistent, a hundred a
    request: a stale read costs at most an extension that was not needed), since only the item
    knows the ``cx`` its content was given (the retention and timeouts of its birth may not be
    today's). One within ``watch_margin`` of it has its content extended (once a run) and then
    its ``cx`` raised; a crash in between leaves a content that lives longer than it needs to,
    and the next run raises the item's ``cx``. Nothing is written for an item far from it.

    A pass reads for ``budget`` seconds (``WATCH_BUDGET_SECONDS``; at least a page): one that
    runs out of time leaves its place (``WATCH_PLACE``), and the minute sweeps go on from it
    (``watch_more``) until it is done, so a backlog of a million open items is read within
    minutes, not days."""
    # A pass left unfinished (its minute sweeps failed for a day) is marked done by this one.
    since = iso(runtime.clock.now())  # the pass's own: an older pass never overwrites its place
    return _watch(runtime, visit, {"shard": 0, "after": None, "since": since},
                  WATCH_BUDGET_SECONDS if budget is None else budget,
                  resumed=_place(runtime) is not None)  # fmt: skip


def watch_more(runtime: Any, visit: Callable[[Any], None] | None = None, *,
               budget: float | None = None) -> int:  # fmt: skip
    """Go on with a pass of the watch that ran out of time, from where it stopped; nothing
    (one read) when none is unfinished."""
    place = _place(runtime)
    if place is None:
        return 0
    return _watch(runtime, visit, place, WATCH_MORE_SECONDS if budget is None else budget,
                  resumed=True)  # fmt: skip


def _place(runtime: Any) -> dict[str, Any] | None:
    text = runtime.store.schedule_place(WATCH_PLACE)
    if not text:
        return None
    place = json.loads(text)
    return None if place.get("done") else place


def _keep_place(runtime: Any, place: dict[str, Any]) -> bool:
    """Store the pass's place, unless a newer pass's is stored (a run that read an older
    pass's place while the daily run began a new one): a put conditional on the place read
    just before. False when a newer pass took over."""
    text = runtime.store.schedule_place(WATCH_PLACE)
    for _ in range(3):
        stored = json.loads(text) if text else {}
        if stored.get("since", "") > place.get("since", ""):
            return False
        if runtime.store.swap_schedule_place(WATCH_PLACE, text,
                                            json.dumps(place, sort_keys=True)):  # fmt: skip
            return True
        text = runtime.store.schedule_place(WATCH_PLACE)  # a run of the same pass moved it
    return False  # contended: the runs moving it go on with the pass


def _watch(runtime: Any, visit: Callable[[Any], None] | None, place: dict[str, Any],
           budget: float, *, resumed: bool = False) -> int:  # fmt: skip
    import time

    from vdq.core import resources
    from vdq.workflow.table import DONE_STATES

    settings = runtime.settings
    now = runtime.clock.now()
    near = now.timestamp() + watch_margin(settings)
    later = content_expiration(now, settings)
    extended: dict[str, bool] = {}  # content id -> live and extended this run
    deadline = time.monotonic() + budget
    kept = resumed  # a place is stored: it is marked done at the pass's end
    for k in range(int(place["shard"]), settings.index_shards):
        after: str | None = place["after"] if k == int(place["shard"]) else None
        while True:
            # The shard's partition (vdq.workflow.transitions.active_partition).
            rows = runtime.store.query_index(resources.ACTIVE_INDEX, f"A#{k}",
                                             start_after=after, limit=WATCH_PAGE)
            if not rows:
                break
            after = rows[-1][1]
            items = runtime.store.get_items([item_id for item_id, _ in rows], consistent=False)
            for item in items.values():
                if visit is not None and item.state not in DONE_STATES:
                    visit(item)
                # (Without a retention now, ``later`` is NEVER: a content written with one
                # is kept as long as its items, which are kept forever.)
                if item.state in DONE_STATES or item.cx is None or item.cx >= near:
                    continue  # done, of a counted content (kept while open), or far from it
                if item.content_id not in extended:
                    extended[item.content_id] = runtime.store.extend_content(item.content_id,
                                                                             later)
                if extended[item.content_id]:
                    runtime.store.raise_cx(item.id, later)
            if len(rows) < WATCH_PAGE:
                break
            if time.monotonic() > deadline:
                _keep_place(runtime, {"shard": k, "after": after, "done": False,
                                      "since": place.get("since", "")})  # fmt: skip
                return sum(extended.values())
    if kept:
        _keep_place(runtime, {"shard": 0, "after": None, "done": True,
                              "since": place.get("since", "")})  # fmt: skip
    return sum(extended.values())


# ---- stamping from the stream -----------------------------------------------------------------


def _plain(image: dict[str, Any]) -> dict[str, Any]:
    from boto3.dynamodb.types import TypeDeserializer

    deserialize = TypeDeserializer().deserialize
    return {k: deserialize(v) for k, v in image.items()}


def newly_expiring(records: Iterable[dict[str, Any]]) -> list[dict[str, Any]]:
    """The state items that gained their expiration in a batch of stream records (MODIFY of a
    STATE record only: TTL deletions are REMOVE records and change nothing here)."""
    from vdq.core.resources import TABLE_TTL_ATTRIBUTE as TTL

    out = []
    for record in records:
        if record.get("eventName") != "MODIFY":
            continue
        change = record.get("dynamodb") or {}
        new, old = change.get("NewImage") or {}, change.get("OldImage") or {}
        if (new.get("sk") or {}).get("S") != STATE_SK or TTL not in new or TTL in old:
            continue
        out.append(_plain(new))
    return out


def stamp_changes(records: Iterable[dict[str, Any]], runtime: Any) -> int:
    """Stamp the records of every item that entered a done state in this batch; returns how
    many items. A failure raises, so Lambda delivers the batch again (stamping is idempotent)."""
    items = newly_expiring(records)
    for item in items:
        stamp_done(item, runtime)
    return len(items)


def stamp_done(item: Any, runtime: Any) -> int:
    """What the stream does for one item that entered a done state (its stream image, or its
    record): stamp its older records, and the content of a counted one (an item with ``cx``
    has a content that expires from birth and outlives it by the done write's condition).
    Returns records stamped."""
    fields: dict[str, Any] = item if isinstance(item, dict) else {
        name: getattr(item, name) for name in ("id", "content_id", "expiration", "cx",
                                               "counted", "has_files")}  # fmt: skip
    if not isinstance(item, dict):
        fields["ap"], fields["queued_at"] = item.apart, item.queued_at
    expiration = int(fields["expiration"])
    # An item that says no record was written beside its state item without an expiration
    # (``apart`` 0) has none to stamp: no read of its records. Unless it was queued while
    # functions of a release that does not say so may still have run (apart_trusted_after).
    records = fields.get("ap") != 0 or (
        parse_iso(str(fields["queued_at"])).timestamp() < apart_trusted_after(runtime))
    if fields.get("cx") is not None:
        return int(runtime.store.stamp_item_records(fields["id"], expiration)) if records else 0
    return stamp_item(fields["id"], fields["content_id"], expiration, runtime,
                      counted=bool(fields.get("counted")), files=bool(fields.get("has_files")),
                      records=records)  # fmt: skip


APART_KEY = {"pk": {"S": "CFG#apart"}, "sk": {"S": "CFG"}}
# How long after the first function of a release that says ``ap`` stamps an item, one of the
# release before may still write beside an item without saying so: a deploy updates the
# functions one by one, and an invocation already running finishes on the code it began with.
APART_SETTLE_SECONDS = DAY


def apart_trusted_after(runtime: Any) -> float:
    """Epoch seconds after which an item queued says truly, by ``ap`` 0, that nothing was
    written beside its state item: a day after the table's ``CFG#apart`` (the first time a
    function of a release that says so stamped; written once, read at each cold start)."""
    since = runtime.overrides.get("apart_since")
    if since is None:
        answer = runtime.client("dynamodb").update_item(
            TableName=runtime.settings.table_name, Key=APART_KEY,
            UpdateExpression="SET #since = if_not_exists(#since, :now)",
            ExpressionAttributeNames={"#since": "since"},
            ExpressionAttributeValues={":now": {"N": str(int(runtime.clock.now().timestamp()))}},
            ReturnValues="ALL_NEW")  # fmt: skip
        since = int(answer["Attributes"]["since"]["N"])
        runtime.overrides["apart_since"] = since
    return float(since) + APART_SETTLE_SECONDS


def stamp_item(item_id: str, content_id: str, expiration: int, runtime: Any, *,
               counted: bool, files: bool, records: bool = True) -> int:  # fmt: skip
    """Give the item's records written before it was done (history, event marks) its
    expiration (``records``: there may be some), then its content's if no other item uses
    it. Returns records stamped."""
    stamped = runtime.store.stamp_item_records(item_id, expiration) if records else 0
    stamp_content(content_id, expiration, runtime, counted=counted or files, files=files)
    return stamped


def stamp_content(content_id: str, expiration: int, runtime: Any, *, counted: bool,
                  files: bool) -> bool:  # fmt: skip
    """Give a content ``expiration`` if no item of it is open; a later expiration already
    there is kept. True when stamped.

    The content of one item (not ``counted``): one UpdateItem, conditional on no resend having
    made it shared since (``shared``). A counted content (with files, or of several items):
    one transaction with its REFS record, conditional on its open count being zero, and with
    its attachments' records (``files``: read from the content)."""
    from vdq.store import (
        FILE_SK,
        AttachmentRecord,
        ContentRecord,
        ContentRefsRecord,
        attachment_pk,
        content_key,
        refs_key,
        transact,
    )

    later = ContentRecord.expiration.does_not_exist() | (ContentRecord.expiration < expiration)
    if not counted:
        try:
            ContentRecord(*content_key(content_id)).update(
                actions=[ContentRecord.expiration.set(expiration)],
                condition=ContentRecord.pk.exists() & later
                & ContentRecord.shared.does_not_exist(),
            )  # fmt: skip
        except UpdateError as exc:
            if exc.cause_response_code == "ConditionalCheckFailedException":
                return False
            raise
        return True
    content = runtime.store.get_content(content_id) if files else {}
    if content is None:
        return False
    idle = (ContentRefsRecord.open_items <= 0) & ContentRefsRecord.pending.does_not_exist()

    def fill(tx: TransactWrite) -> None:
        tx.update(ContentRecord(*content_key(content_id)),
                  [ContentRecord.expiration.set(expiration)],
                  condition=ContentRecord.pk.exists() & later)  # fmt: skip
        tx.update(ContentRefsRecord(*refs_key(content_id)),
                  [ContentRefsRecord.expiration.set(expiration + REFS_GRACE_SECONDS)],
                  condition=idle)  # fmt: skip
        for attachment_id in content.get("attachments") or []:
            tx.update(AttachmentRecord(attachment_pk(attachment_id), FILE_SK),
                      [AttachmentRecord.expiration.set(expiration)],
                      condition=AttachmentRecord.pk.exists())  # fmt: skip

    try:
        transact(fill)
    except TransactWriteError as exc:
        if any(r is not None and r.code == "ConditionalCheckFailed"
               for r in exc.cancellation_reasons or []):  # fmt: skip
            # Another item is open (it stamps the content when it is done), or a later
            # expiration is there already, or the content is gone.
            return False
        raise
    return True
