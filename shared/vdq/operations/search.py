"""GET /search: find items by receiver, origin, provider ID, sender, id or time, newest first.

Every search reads an index or keys, never the table (vdq.store.search, vdq.store.postings):

- ``receiver``: the receiver index (one Query a page), active and sent items in one answer;
- ``origin_type`` + ``origin_id``: the origin's partitions of contents (one Query each, side by
  side), their items;
- ``provider_id``: the provider-ID mapping (one GetItem) when the ID has one (an untagged
  email, an SMS sent before callbacks named the attempt); for a Twilio SID without a window,
  Twilio's record of the message (its receiver and creation time) and that receiver's items;
  for an SES message ID without one, first the postings of the hours after the send time the
  ID carries; else the postings of the time window (an ID is posted when its item stores it:
  its first result or its check);
- ``sender``, or only ``since``/``until``: the postings of the window, hour by hour;
- ``id``: the item itself.

The items of a page are read in one eventually consistent BatchGetItem and filtered by
``method``, ``state`` and ``priority`` (postings carry method and lane, so those filter before
any read). A page is newest first by enqueue time (an item's id begins with it), and its
cursor says where the next one starts. The work of one request is bounded: ``MAX_ROUNDS`` reads
of an index, or ``MAX_POSTING_BYTES`` of postings; a page that stopped there may hold fewer
items than asked (even none) and still carry a cursor.

Postings and counts follow the stream's window (up to 70 s in a deployment): an item enqueued a
moment ago is found by receiver, origin and id at once, by sender and time a minute later.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any

from vdq.core import ids
from vdq.core.errors import BadRequest, SettingsError, ValidationError
from vdq.core.observability import logger
from vdq.core.text import MESSAGING_SERVICE_SID
from vdq.intake import messages
from vdq.operations import cursor as cursors
from vdq.operations.spec import PROVIDER_ID_PATTERN
from vdq.operations.suppressions import typed_receiver
from vdq.results.suppression import normalize
from vdq.store import QueueItemRecord
from vdq.store.postings import Accepted, Entered, Tallies, provider_hash, sender_hash
from vdq.store.search import receiver_key
from vdq.workflow.lanes import priority_of
from vdq.workflow.views import item_json

if TYPE_CHECKING:
    from vdq.runtime import Runtime

LIST_PERMISSION = "vdq.list_queueitem"
MAX_ROUNDS = 4  # index reads of one request
MAX_POSTING_BYTES = 4_000_000  # postings one request reads (about 4 hours at 1M emails a day)
DEFAULT_WINDOW = timedelta(days=1)  # sender and provider-ID searches without ``since``
MAX_HOURS = 48  # hours of postings one request reads (an empty hour costs a Query too)
# A Twilio message SID (SMS, or MMS with media): Twilio can say whom it went to, and when.
TWILIO_SID = re.compile(r"(SM|MM)[0-9a-f]{32}", re.ASCII)
# An item is queued before Twilio creates its message; clocks may differ by this much.
TWILIO_CLOCK_SKEW = timedelta(minutes=10)
# An SES message ID: 16 hex digits (the send time in their 5th to 16th: ses_sent_at), a UUID,
# and six digits.
SES_ID = re.compile(r"[0-9a-f]{16}-[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}"
                    r"-[0-9]{6}", re.ASCII)  # fmt: skip
# The hours of postings a hinted search reads: from a little before the send time an SES ID
# carries to this long after it (its first result, or its check at five minutes).
SES_HINT_SKEW = timedelta(minutes=10)
SES_HINT_SPAN = timedelta(hours=2)
KEYS = ("receiver", "origin", "provider_id", "sender", "id")
EPOCH = datetime(1970, 1, 1, tzinfo=UTC)  # an id's time counts from it
_DATE = re.compile(r"\d{4}-\d{2}-\d{2}", re.ASCII)
# RFC 3339 takes a lower-case t and z as well, and any number of fraction digits (its section
# 5.6); Python reads at most microseconds.
_TIME = re.compile(r"\d{4}-\d{2}-\d{2}[Tt]\d{2}:\d{2}:\d{2}(\.\d+)?([Zz]|[+-]\d{2}:\d{2})",
                   re.ASCII)  # fmt: skip
# An offset whose + a query string decoded as a space.
_LOST_PLUS = re.compile(r"\d{4}-\d{2}-\d{2}[Tt]\d{2}:\d{2}:\d{2}(\.\d+)? \d{2}:\d{2}", re.ASCII)


@dataclass(frozen=True)
class Query:
    """A search as validated: what it looks for, where in time, what it keeps."""

    by: str  # one of KEYS, or "time"
    value: str = ""  # the receiver (normalised), provider ID, sender, or id
    origin: tuple[str, str] | None = None
    since: datetime | None = None
    until: datetime | None = None
    method: str | None = None
    state: str | None = None
    priority: str | None = None

    def wanted(self, item: QueueItemRecord) -> bool:
        if self.method is not None and item.method != self.method:
            return False
        if self.state is not None and item.state != self.state:
            return False
        if self.priority is not None and priority_of(item) != self.priority:
            return False
        queued = ids.time_ms(item.id)
        if self.since is not None and queued < _ms(self.since):
            return False
        if self.until is not None and queued > _ms(self.until):
            return False
        if self.by == "receiver" and normalize(item.receiver) != self.value:
            return False
        # A sender as its postings name it: in lower case (a Messaging Service SID's hex too).
        if self.by == "sender" and normalize(item.sender).lower() != self.value.lower():
            return False
        return not (self.by == "provider_id" and item.provider_id != self.value)

    def key(self) -> cursors.ListKey:
        """What a cursor of this search is valid for."""
        origin = "\x1f".join(self.origin) if self.origin else None
        return cursors.ListKey("search", (self.by, self.value or origin, _text(self.since),
                                          _text(self.until), self.method, self.state,
                                          self.priority), 1)  # fmt: skip


def _ms(at: datetime) -> int:
    return int(at.timestamp() * 1000)


def _text(at: datetime | None) -> str | None:
    return None if at is None else at.astimezone(UTC).isoformat()


def parse_time(value: str, field: str, *, end: bool = False) -> datetime:
    """An RFC 3339 time with an offset, or a date (UTC: its start, or with ``end`` its last
    moment), in UTC, surrounding spaces left out; a 422 naming ``field`` otherwise, and for a
    time before 1970 (an id, whose start is its enqueue time, counts from then) or one past
    what a date holds in UTC."""
    value = value.strip()
    if _DATE.fullmatch(value):
        try:
            day = datetime.strptime(value, "%Y-%m-%d").replace(tzinfo=UTC)
        except ValueError:
            raise ValidationError(field, f"{value!r} is not a date") from None
        at = day + timedelta(days=1, microseconds=-1) if end else day
    elif _LOST_PLUS.fullmatch(value):
        raise ValidationError(field, f"{value!r} lost the + of its offset: a query string "
                                     "decodes + as a space, so write it as %2B")  # fmt: skip
    elif not (time := _TIME.fullmatch(value)):
        raise ValidationError(field, "must be an RFC 3339 time with an offset "
                                     "(2026-12-24T09:00:00Z) or a date (2026-12-24)")  # fmt: skip
    else:
        fraction = time.group(1) or ""
        text = value.replace(fraction, fraction[:7], 1) if len(fraction) > 7 else value
        try:
            at = datetime.fromisoformat(text.upper().replace("Z", "+00:00")).astimezone(UTC)
        except (ValueError, OverflowError):
            raise ValidationError(field, f"{value!r} is not a valid time") from None
    if at < EPOCH:
        raise ValidationError(field, "must be 1970-01-01 or later (no item was queued before)")
    return at


def parse(params: dict[str, Any], now: datetime) -> Query:
    """The search the query string asks for: exactly one key (or a time window), each value
    checked as enqueue checks it. A 422 names the field at fault."""
    given = [name for name in ("receiver", "origin_type", "provider_id", "sender", "id")
             if params.get(name) is not None]  # fmt: skip
    if params.get("origin_id") is not None and params.get("origin_type") is None:
        raise ValidationError("origin_type", "is required with origin_id")
    if len(given) > 1:
        raise ValidationError(given[1], f"search by one of receiver, origin, provider_id, "
                                        f"sender or id at a time (not {given[0]} too)")  # fmt: skip
    since = parse_time(params["since"], "since") if params.get("since") else None
    until = parse_time(params["until"], "until", end=True) if params.get("until") else None
    if since and until and since > until:
        raise ValidationError("until", "is before since")
    common: dict[str, Any] = {"since": since, "until": until, "method": params.get("method"),
                              "state": params.get("state"),
                              "priority": params.get("priority")}  # fmt: skip
    if not given:
        if since is None:
            raise ValidationError("since", "is required to search by time alone (or give "
                                           "receiver, origin_type and origin_id, provider_id, "
                                           "sender or id)")  # fmt: skip
        return Query("time", **common)
    name = given[0]
    value = params[name]
    if name == "sender" and re.match(MESSAGING_SERVICE_SID, value.strip(), re.IGNORECASE):
        # An SMS sent through a Messaging Service: its SID's hex is read in either case.
        return Query(name, "MG" + value.strip()[2:].lower(), **common)
    if name in ("receiver", "sender"):
        return Query(name, typed_receiver(value, name, query=True), **common)
    if name == "id":
        value = ids.typed(value)
        if not ids.is_id(value):
            raise ValidationError("id", "must be an item id (26 characters of Crockford "
                                        "base32)")  # fmt: skip
        return Query("id", value, **common)
    if name == "provider_id":
        value = _provider_id(value.strip())
        if len(value) > 256 or not re.fullmatch(PROVIDER_ID_PATTERN, value):
            raise ValidationError("provider_id", "must be an SES message ID or a Twilio SID")
        return Query("provider_id", value, **common)
    if params.get("origin_id") is None:
        raise ValidationError("origin_id", "is required with origin_type")
    try:
        found = messages.origin({"type": value, "id": params["origin_id"]})
    except ValidationError as exc:
        raise ValidationError(exc.field.replace("origin.", "origin_"),
                              str(exc.message).split(": ", 1)[-1]) from None
    assert found is not None
    return Query("origin", origin=(found.type, found.id), **common)


def _provider_id(value: str) -> str:
    """A provider ID as its provider writes it, whatever case a copy gave it: a Twilio SID's
    and an SES message ID's hex digits are lower case (a SID's prefix upper)."""
    sid = value[:2].upper() + value[2:].lower()
    if TWILIO_SID.fullmatch(sid):
        return sid
    return value.lower() if SES_ID.fullmatch(value.lower()) else value


def search(runtime: Runtime, params: dict[str, Any]) -> dict[str, Any]:
    """``{"items": [...], "cursor": str | None}``: one page of the search, newest first."""
    limit = int(params.get("limit") or 50)
    query = parse(params, runtime.clock.now())
    table = runtime.settings.table_name
    key = query.key()
    position = _position(query, cursors.decode(params["cursor"], key, table)[0]) \
        if params.get("cursor") else None  # fmt: skip
    if query.by == "id":
        items, more = _by_id(runtime, query), None
    elif query.by in ("receiver", "origin"):
        items, more = _by_index(runtime, query, position, limit)
    else:
        items, more = _by_postings(runtime, query, position, limit)
    return {"items": [item_json(i) for i in items],
            "cursor": cursors.encode([more], key, table) if more else None}  # fmt: skip


def _position(query: Query, position: str | None) -> str | None:
    """A cursor's position, if it is one this search writes: an item id (receiver, postings),
    or ``<content ulid>:<item id or nothing>`` (origin). Its signature only proves it unedited
    by someone without the table's name (the key derives from it), so anything else is a 400
    before it reaches a read."""
    if position is None:
        return None
    if query.by == "origin":
        content, colon, last = position.partition(":")
        valid = bool(colon) and ids.is_id(content) and (not last or ids.is_id(last))
    else:
        valid = ids.is_id(position)
    if not valid:
        raise BadRequest("the cursor is not valid for this list; start again without it",
                         details={"field": "cursor"})  # fmt: skip
    return position


def _by_id(runtime: Runtime, query: Query) -> list[QueueItemRecord]:
    item = runtime.store.get_item(query.value)
    return [item] if item is not None and query.wanted(item) else []


def _read(runtime: Runtime, item_ids: list[str]) -> dict[str, QueueItemRecord]:
    return runtime.store.get_items(item_ids, consistent=False) if item_ids else {}


def _by_index(runtime: Runtime, query: Query, position: str | None,
              limit: int) -> tuple[list[QueueItemRecord], str | None]:  # fmt: skip
    """Receiver or origin: candidates from the index a round at a time, newest first. The
    position is the last candidate examined (origin: ``<content>:<item>``)."""
    page: list[QueueItemRecord] = []
    for _ in range(MAX_ROUNDS):
        candidates, position, done = _candidates(runtime, query, position, limit - len(page))
        records = _read(runtime, candidates)
        page += [records[c] for c in candidates if c in records and query.wanted(records[c])]
        if done or len(page) >= limit:
            return page, None if done else position
    return page, position


def _candidates(runtime: Runtime, query: Query, position: str | None,
                want: int) -> tuple[list[str], str | None, bool]:  # fmt: skip
    """Up to ``want`` item ids after ``position``, the position after them, and whether the
    index has no more."""
    store = runtime.store
    above = ids.bound(_ms(query.since), upper=False) if query.since else None
    if query.by == "receiver":
        below = position or (ids.bound(_ms(query.until), upper=True) if query.until else None)
        found = store.query_receiver(receiver_key(query.value), below=below, above=above,
                                     limit=want + 1)  # fmt: skip
        more = len(found) > want
        found = found[:want]
        return found, (found[-1] if found else position), not more
    assert query.origin is not None
    content, _, last = (position or "").partition(":")
    until = ids.bound(_ms(query.until), upper=True) if query.until else None
    below = until
    if content and last:  # go on inside the cursor's content: ask from it (inclusive)
        below = _next_id(content)
    elif content:  # the cursor's content was read to its end
        below = content
    contents = store.query_origin(*query.origin, below=below, above=above, limit=want + 1)
    out: list[str] = []
    for n, (ulid, items) in enumerate(contents):
        left = sorted((i for i in items if not (ulid == content and last and i >= last)),
                      reverse=True)  # fmt: skip
        for k, item_id in enumerate(left):
            out.append(item_id)
            if len(out) == want:
                rest = k + 1 < len(left) or n + 1 < len(contents)
                return out, f"{ulid}:{item_id}" if k + 1 < len(left) else f"{ulid}:", not rest
    end = f"{contents[-1][0]}:" if contents else position
    return out, end, len(contents) <= want


def _next_id(ulid: str) -> str:
    """An id just after ``ulid`` (its last character one up), so a bound that excludes it
    includes it."""
    alphabet = ids.ALPHABET
    last = alphabet.index(ulid[-1])
    return ulid[:-1] + alphabet[last + 1] if last + 1 < len(alphabet) else ulid + "0"


def _by_postings(runtime: Runtime, query: Query, position: str | None,
                 limit: int) -> tuple[list[QueueItemRecord], str | None]:  # fmt: skip
    """Sender, provider ID or time alone: the postings of the window, newest hour first.
    The position is an id: the next page holds items queued before it."""
    now = runtime.clock.now()
    # Postings are kept as long as the items they name (and 3 days more): nothing older.
    kept = now - timedelta(days=max(runtime.settings.retention_days, 30) + 3)
    if query.by == "provider_id":
        mapped = runtime.store.find_by_provider_id(query.value)
        if mapped is not None and mapped.item_id:
            item = runtime.store.get_item(mapped.item_id)
            return ([item] if item is not None and query.wanted(item) else []), None
        first_page = query.since is None and position is None  # no window asked for
        if first_page and TWILIO_SID.fullmatch(query.value):
            told = _by_twilio(runtime, query)
            if told is not None:
                return told, None
        sent = ses_sent_at(query.value) if first_page else None
        if sent is not None and kept <= sent <= now + SES_HINT_SKEW:
            # Only the hours the ID was stored in: its first result or its check, most often
            # within minutes of the send. Not there: the last day, as without the hint.
            page, _ = _scan(runtime, query, None, limit, sent - SES_HINT_SKEW,
                            min(sent + SES_HINT_SPAN, now))  # fmt: skip
            if page:
                return page, None
    until = min(query.until or now, now)
    since = max(query.since or (until - DEFAULT_WINDOW), kept)
    return _scan(runtime, query, position, limit, since, until)


def _scan(runtime: Runtime, query: Query, position: str | None, limit: int, since: datetime,
          until: datetime) -> tuple[list[QueueItemRecord], str | None]:  # fmt: skip
    """The postings of the hours from ``until`` (or the position's) back to ``since``."""
    top = position or ids.bound(_ms(until), upper=True)
    floor = ids.bound(_ms(since), upper=False)
    tallies = Tallies(runtime.client("dynamodb"), runtime.settings.table_name)
    page: list[QueueItemRecord] = []
    spent = hours = 0
    hour = datetime.fromtimestamp(ids.time_ms(top) / 1000, UTC).replace(minute=0, second=0,
                                                                       microsecond=0)
    while hour >= since.replace(minute=0, second=0, microsecond=0):
        found: set[str] = set()
        for entries, size in tallies.postings(hour.strftime("%Y-%m-%dT%H")):
            spent += size
            found |= set(_matching(query, entries, floor, top))
        hours += 1
        wanted = sorted(found, reverse=True)
        for start in range(0, len(wanted), 100):
            chunk = wanted[start : start + 100]
            records = _read(runtime, chunk)
            for item_id in chunk:
                item = records.get(item_id)
                if item is not None and query.wanted(item):
                    page.append(item)
                if len(page) >= limit or (query.by == "provider_id" and page):
                    return page, (item_id if len(page) >= limit else None)
        top = ids.bound(_ms(hour), upper=False)
        hour -= timedelta(hours=1)
        if (spent >= MAX_POSTING_BYTES or hours >= MAX_HOURS) and hour >= since.replace(
                minute=0, second=0, microsecond=0):  # fmt: skip
            return page, top
    return page, None


def ses_sent_at(provider_id: str) -> datetime | None:
    """When SES sent the message of ``provider_id``, as its ID says: an SES message ID's hex
    digits 5 to 16 are the send time in milliseconds (seen in every SES ID since 2014, and
    within a second or two of the ``timestamp`` of the mail it names; not documented by AWS,
    so a hint that narrows a search and never decides one). None for another kind of ID."""
    if not SES_ID.fullmatch(provider_id):
        return None
    try:
        return datetime.fromtimestamp(int(provider_id[4:16], 16) / 1000, UTC)
    except (OverflowError, OSError, ValueError):
        return None


def _by_twilio(runtime: Runtime, query: Query) -> list[QueueItemRecord] | None:
    """A Twilio SID without a window: Twilio's own record of the message names its receiver
    and when it was created, and the item is among that receiver's items queued before then
    (the receiver index, newest first). Exact at any age, for one call to Twilio and a few
    reads. None when Twilio cannot say (no account configured, an error, a receiver VDQ would
    not have sent to), the search wants emails only (no email has a SID), or the receiver's
    items do not hold the SID (Twilio's clock behind VDQ's by more than the skew allowed, a
    receiver Twilio prints in another form) or ran past ``MAX_ROUNDS`` reads first: the caller
    reads the postings of the last day instead, so asking Twilio never finds less than the
    postings did.

    The receiver index holds every item the table still holds (DynamoDB's TTL takes an item's
    entry with it), so it is read without a lower bound: an item may have been queued long
    before the postings' horizon (a send_at far ahead, items kept forever), and Twilio keeps a
    message longer than the postings are kept."""
    if query.method == "email" or not runtime.settings.sms_checks_enabled:
        return None
    from aws_lambda_powertools.utilities.parameters.exceptions import (
        GetParameterError,
        TransformParameterError,
    )

    from vdq.providers import ProviderError
    from vdq.providers.twilio import get_twilio

    try:
        message = get_twilio(runtime, lookup=True).fetch(query.value)
    except (ProviderError, SettingsError, GetParameterError, TransformParameterError) as exc:
        logger.warning("Twilio could not look up the SID; searching the postings",
                       extra={"provider_id": query.value, "error": str(exc)})  # fmt: skip
        return None
    if not message.to or message.created is None:
        return None
    try:
        receiver = typed_receiver(message.to, "provider_id")
    except ValidationError:
        return None
    # Twilio's times are UTC; no item was queued after now, whatever time Twilio names.
    created = message.created if message.created.tzinfo else message.created.replace(tzinfo=UTC)
    below = ids.bound(_ms(min(created, runtime.clock.now()) + TWILIO_CLOCK_SKEW), upper=True)
    key = receiver_key(receiver)
    for _ in range(MAX_ROUNDS):
        found = runtime.store.query_receiver(key, below=below, limit=100)
        records = _read(runtime, found)
        for item_id in found:
            item = records.get(item_id)
            if item is not None and item.provider_id == query.value:
                return [item] if query.wanted(item) else []
        if len(found) < 100:
            return None
        below = found[-1]
    return None


def _matching(query: Query, entries: Iterable[Any], floor: str, top: str) -> Iterable[str]:
    """The ids of the entries a posting search wants, between ``floor`` and below ``top`` (a
    provider ID's entry is in the hour the ID was stored, its id that of the enqueue: any)."""
    want_sender = sender_hash(query.value) if query.by == "sender" else None
    want_provider = provider_hash(query.value) if query.by == "provider_id" else None
    for entry in entries:
        if want_provider is not None:
            if isinstance(entry, Accepted) and entry.provider == want_provider:
                yield entry.item_id
            continue
        if not floor <= entry.item_id < top:
            continue
        if not isinstance(entry, Entered):
            continue
        if want_sender is not None and entry.sender != want_sender:
            continue
        if query.method is not None and entry.method != query.method:
            continue
        if query.priority is not None and entry.priority != query.priority:
            continue
        yield entry.item_id
