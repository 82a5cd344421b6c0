"""The harsh world of the model-based test: moto behind the fault seam, a fake Twilio that counts
its calls per (item, attempt), reads of moto's backend that cost no request and cross no seam,
and the invariants every step is checked against."""

from __future__ import annotations

import itertools
import json
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any
from urllib.parse import parse_qs, urlsplit

from twilio.http.response import Response

import requests
from tests.reliability.harsh import Seam, installed
from tests.reliability.queues import DAY, Queue, deliver
from tests.reliability.support import (
    DONE,
    FIGURES,
    TABLE,
    Crash,
    FakeSes,
    check_history,
    forget_items,
    make_settings,
    moto_aws,
    runtime_for,
)
from tests.support.fake_twilio import ACCOUNT_SID, AUTH_TOKEN, FakeTwilioHttp
from vdq.core.clock import parse_iso
from vdq.core.errors import VdqError
from vdq.core.settings import Settings
from vdq.local import motolean
from vdq.providers.twilio import TwilioProvider
from vdq.runtime import Runtime
from vdq.store import HistoryRecord, QueueItemRecord, unpack_history
from vdq.workflow.transitions import TIMER_AWAIT, TIMER_EMAIL_AWAIT

MAX_STATE_BYTES = 4096  # the state item's stored size, by DynamoDB's rules (moto's Item.size)
WEBHOOK = "https://hooks.example.com/twilio/status"
DOCUMENTED = {400, 401, 403, 404, 409, 410, 413, 422, 429, 503}


class ModelTwilio(FakeTwilioHttp):
    """Twilio's API for the model: creates return new SIDs, fetches return each SID's latest
    status (``truth``, set by the status callbacks the model sends). Counts creates per (item,
    attempt); the attempt is the item's in moto at the time of the call."""

    def __init__(self, world: World) -> None:
        super().__init__(None)
        self.world = world
        self.reset()

    def reset(self) -> None:
        self.calls: Counter[tuple[str, int]] = Counter()
        self.accepted: dict[str, tuple[str, int]] = {}
        self.truth: dict[str, str] = {}
        self.plan = "ok"
        self.during: Any = None  # runs once inside the next create, after Twilio took it
        self._sids = (f"SM{n:032d}" for n in itertools.count(1))

    def request(self, method: str, uri: str, params: Any = None, data: Any = None,
                headers: Any = None, auth: Any = None, timeout: Any = None,
                allow_redirects: bool = False) -> Response:  # fmt: skip
        if method != "POST":
            sid = uri.rsplit("/", 1)[-1].removesuffix(".json")
            return Response(200, json.dumps({"sid": sid, "status": self.truth.get(sid, "sent")}))
        form = dict(data or {})
        item_id = parse_qs(urlsplit(form.get("StatusCallback", "")).query)["queue_item"][0]
        item = self.world.item(item_id)
        key = (item_id, int(item.attempt) if item is not None else 0)
        self.calls[key] += 1
        FIGURES["provider calls"] += 1
        if self.plan == "transient":
            return Response(503, json.dumps({"code": 20503, "message": "Service unavailable",
                                             "status": 503}))  # fmt: skip
        if self.plan == "permanent":
            return Response(400, json.dumps({"code": 21211, "status": 400,
                                             "message": "Invalid 'To' Phone Number"}))  # fmt: skip
        sid = next(self._sids)
        self.accepted[sid] = key
        if self.plan == "ambiguous":
            raise requests.ReadTimeout("read timed out")
        if self.plan == "crash":
            raise Crash()
        during, self.during = self.during, None
        if during is not None:
            during()
        return Response(201, json.dumps({"sid": sid, "status": "queued"}))


@dataclass
class World:
    """One moto AWS for a test module; ``fresh()`` gives each example a clean table."""

    settings: Settings
    seam: Seam
    clients: dict[str, Any]
    ses: FakeSes = field(default_factory=FakeSes)
    twilio: ModelTwilio = field(init=False)
    provider: TwilioProvider = field(init=False)
    rt: Runtime = field(init=False)
    known_ids: dict[tuple[str, int], str] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.twilio = ModelTwilio(self)
        self.provider = TwilioProvider(lambda: (ACCOUNT_SID, AUTH_TOKEN), http_client=self.twilio)

    # ---- SQS and Lambda's event source mappings ----------------------------------------------

    @property
    def send_queue(self) -> Queue:
        return self.seam.queues[self.settings.send_queue_url]

    @property
    def results_queue(self) -> Queue:
        return self.seam.queues[self.settings.results_queue_url]

    def deliver_sends(self, *, limit: int = 10, start: int = 0, late: float = 0.0,
                      first: Any = None) -> Any:  # fmt: skip
        """The send function's event source mapping, one round: a batch of the send queue's
        visible messages to the send function (as functions/send does: vdq.dispatch.sendbatch),
        then their deletes. Returns the delivery (None when no message was visible)."""
        from vdq.core import resources
        from vdq.dispatch import sendbatch

        def function(event: dict[str, Any]) -> dict[str, Any]:
            remaining = resources.SEND_FUNCTION_TIMEOUT_SECONDS * 1000
            return {"batchItemFailures": sendbatch.process(event["Records"], self.rt, remaining)}

        delivery, _ = deliver(self.send_queue, function, self.rt.clock.now, limit=limit,
                              start=start, late=late, first=first,
                              advance=self.rt.clock.advance)  # fmt: skip
        return delivery if delivery.taken else None

    def deliver_results(self, *, limit: int = 10, start: int = 0, late: float = 0.0) -> Any:
        """The results function's event source mapping, one round (functions/webhook's
        ``results_batch``): deferred lookups and whatever else VDQ sends itself."""
        from functions.webhook.handler import results_batch

        delivery, _ = deliver(self.results_queue,
                              lambda event: results_batch(event["Records"], self.rt),
                              self.rt.clock.now, limit=limit, start=start, late=late,
                              advance=self.rt.clock.advance)  # fmt: skip
        return delivery if delivery.taken else None

    def pending(self) -> bool:
        """A message is in a queue the functions read (visible, delayed or in flight)."""
        return bool(self.send_queue.messages or self.results_queue.messages)

    def fresh(self, clock: Any) -> Runtime:
        forget_items(self.backend())
        self.seam.clock = clock
        self.seam.reset()
        self.ses = FakeSes()
        self.twilio.reset()
        self.known_ids = {}
        self.rt = runtime_for(self.settings, clock, ses_provider=self.ses, twilio=self.provider,
                              **self.clients)  # fmt: skip
        return self.rt

    # ---- moto's backend, read directly ----------------------------------------------------

    def backend(self) -> Any:
        return self.seam.backend()

    def _rows(self, prefix: str) -> Iterator[tuple[str, str, Any]]:
        for h, rows in list(self.backend().items.items()):
            if h.value.startswith(prefix):
                for r, item in rows.items():
                    yield h.value, r.value, item

    def raw_items(self) -> dict[str, Any]:
        return {pk[3:]: it for pk, sk, it in self._rows("QI#") if sk == "STATE"}

    def items(self) -> dict[str, QueueItemRecord]:
        return {i: _record(QueueItemRecord, it) for i, it in self.raw_items().items()}

    def item(self, item_id: str) -> QueueItemRecord | None:
        from moto.dynamodb.models.dynamo_type import DynamoType

        rows = self.backend().items.get(DynamoType({"S": f"QI#{item_id}"}))
        found = rows.get(DynamoType({"S": "STATE"})) if rows else None
        return _record(QueueItemRecord, found) if found is not None else None

    def history(self, item_id: str) -> list[HistoryRecord]:
        from moto.dynamodb.models.dynamo_type import DynamoType

        rows = self.backend().items.get(DynamoType({"S": f"QI#{item_id}"})) or {}
        return unpack_history((_record(HistoryRecord, it) for r, it in sorted(rows.items(),
                               key=lambda kv: kv[0].value) if r.value.startswith("H#")),
                              self.item(item_id))  # fmt: skip

    def files(self) -> dict[str, list[str]]:
        """content id -> the S3 keys of its attachments."""
        out: dict[str, list[str]] = {}
        for _, _, it in self._rows("AT#"):
            attrs = it.to_json()["Attributes"]
            out.setdefault(attrs["content_id"]["S"], []).append(attrs["s3_key"]["S"])
        return out

    def s3_keys(self) -> set[str]:
        from moto.core import DEFAULT_ACCOUNT_ID
        from moto.s3.models import s3_backends

        bucket = s3_backends[DEFAULT_ACCOUNT_ID]["aws"].buckets[self.settings.attachments_bucket]
        return set(bucket.keys.keys())


def engagement_event(kind: str, message_id: str, item_id: str, attempt: int,
                     n: int) -> dict[str, Any]:  # fmt: skip
    """The n-th SES Open or Click event of one email (each its own event: its own time)."""
    from tests.support.results import ses_event

    event = ses_event("delivery", message_id=message_id, item_id=item_id, attempt=attempt)
    event.pop("delivery")
    event["eventType"] = kind
    detail = {"timestamp": f"2026-12-02T13:{n // 3600 % 60:02d}:{n // 60 % 60:02d}.{n % 60:02d}0Z",
              "ipAddress": "192.0.2.1", "userAgent": "Mozilla/5.0"}  # fmt: skip
    if kind == "Click":
        detail["link"] = "https://example.com/order"
    event[kind.lower()] = detail
    return event


def _record(model: Any, item: Any) -> Any:
    return model.from_raw_data(item.to_json()["Attributes"])


def queues_of(settings: Settings) -> dict[str, Queue]:
    """The queues the functions read, as deployed (infra/messaging.py): visibility six times
    the consumer's timeout plus its batching window, a dead-letter queue at maxReceiveCount,
    the retention of each; by URL, the dead-letter queues too."""
    from vdq.core import resources as r

    def arn(url: str) -> str:
        return f"arn:aws:sqs:us-east-1:123456789012:{url.rsplit('/', 1)[-1]}"

    def lane(url: str, dead_url: str, timeout: int, window: int, days: int) -> list[Queue]:
        dead = Queue("dead letters", dead_url, arn(dead_url), visibility=30,
                     retention=r.DEAD_LETTER_RETENTION_DAYS * DAY)  # fmt: skip
        queue = Queue(url.rsplit("-", 1)[-1], url, arn(url),
                      visibility=r.visibility_seconds(timeout, window),
                      max_receives=r.MAX_RECEIVE_COUNT, dead=dead,
                      retention=days * DAY)  # fmt: skip
        return [queue, dead]

    made = [*lane(settings.send_queue_url, settings.send_dead_letter_queue_url,
                  r.SEND_FUNCTION_TIMEOUT_SECONDS, r.SEND_BATCHING_WINDOW_SECONDS,
                  r.SEND_RETENTION_DAYS),
            *lane(settings.results_queue_url, settings.results_dead_letter_queue_url,
                  r.RESULTS_FUNCTION_TIMEOUT_SECONDS, r.RESULTS_BATCHING_WINDOW_SECONDS,
                  r.RESULTS_RETENTION_DAYS)]  # fmt: skip
    return {q.url: q for q in made}


@contextmanager
def harsh_world(**changes: Any) -> Iterator[World]:
    """moto with VDQ's resources, the seam installed, clients made once."""
    with moto_aws() as created:
        # One send at a time: a sending thread would make the order of AWS requests, and so
        # a schedule's outcome, depend on the machine (Hypothesis replays schedules).
        dead = {"send_dead_letter_queue_url": created.queues["send"] + "-dlq",
                "results_dead_letter_queue_url": created.queues["results"] + "-dlq"}
        changes = {"send_parallelism": 1, **dead, **changes}
        settings = make_settings(created, twilio_account_sid=ACCOUNT_SID,
                                 twilio_auth_token=AUTH_TOKEN, twilio_webhook_url=WEBHOOK,
                                 **changes)  # fmt: skip
        seam = Seam(TABLE, settings.send_queue_url, settings.results_queue_url,
                    queues=queues_of(settings))  # fmt: skip
        # Made once (a client costs tens of milliseconds, an example's runtime would make its
        # own), as the runtime makes them: with the functions' retry mode, attempts and timeouts.
        made = runtime_for(settings)
        clients = {name: made.client(name) for name in ("sqs", "s3", "events", "dynamodb")}
        with installed(seam), motolean.installed():
            yield World(settings, seam, clients)


# ---- invariants: each returns the problems it finds (empty: none) ------------------------------


def twice_per_attempt(world: World) -> list[str]:
    doubles = {**world.ses.double_calls(),
               **{k: n for k, n in world.twilio.calls.items() if n > 1}}  # fmt: skip
    return [f"provider called {n} times for (item, attempt) {k}" for k, n in doubles.items()]


def workflow_problems(world: World, items: dict[str, QueueItemRecord],
                      last_sweep: datetime | None) -> list[str]:  # fmt: skip
    problems = []
    for item_id, item in items.items():
        found = check_history(item, world.history(item_id))
        problems.extend(f"{item_id}: {p}" for p in found)
    return problems


def await_timer_required(item: QueueItemRecord, settings: Settings) -> bool:
    return item.method == "sms" or getattr(settings, "email_timeout_hours", None) is not None


def parked(world: World, *, held_only: bool = False) -> set[str]:
    """The items a reputation hold parked: listed under ``HELD#<producer>`` for its release;
    ``held_only``: of producers still held (a release cut short leaves the rest to the minute
    sweep, which sends them)."""
    from vdq.results import guard

    rows = [(pk.removeprefix("HELD#"), sk) for pk, sk, _ in world._rows("HELD#")]
    if not held_only:
        return {sk for _, sk in rows}
    store = guard.holds_of(world.rt)
    levels = {producer: store.level(producer) for producer, _ in rows}
    return {sk for producer, sk in rows
            if (level := levels[producer]) is not None and level.held}  # fmt: skip


def messages_of(world: World) -> set[tuple[str, int]]:
    """(item, attempt) of every send message SQS holds (visible, delayed, in flight) or its
    dead-letter queue does."""
    from vdq.workflow.sendqueue import SendMessage

    queue = world.send_queue
    held = [*queue.messages, *(queue.dead.messages if queue.dead is not None else [])]
    out = set()
    for message in held:
        parsed = SendMessage.parse(message.body)
        out.add((parsed.item_id, parsed.attempt))
    return out


def checks_of(world: World) -> set[tuple[str, int]]:
    """(item, attempt) of every send a check SQS holds (or its dead-letter queue) names."""
    queue = world.results_queue
    out = set()
    for message in [*queue.messages, *(queue.dead.messages if queue.dead is not None else [])]:
        data = json.loads(message.body)
        if data.get("kind") == "vdq.check":
            out.update((item_id, attempt) for item_id, attempt, _, _ in data["sent"])
    return out


def stranded(world: World, items: dict[str, QueueItemRecord], settings: Settings,
             parked: set[str] | frozenset[str] = frozenset()) -> list[str]:  # fmt: skip
    """Every item is done, or an operator can act on it, or something will move it on:

    - queued or delayed: its publish timer, or (parked by a hold, without a timer) a release
      finds it;
    - sending: a send message of its attempt, in SQS or its dead-letter queue (the message is
      the claim's lease: its delivery, or the dead-letter sweep, ends it), or a check that
      names it (the provider accepted it: the check records it awaiting);
    - awaiting an SMS: its timeout's timer;
    - awaiting an email: its timeout's timer, or a check or a send message of its attempt
      (either gives it that timer)."""
    problems = []
    sends, checked = messages_of(world), checks_of(world)
    for item_id, item in items.items():
        timer = (item.timer_pk or "").split("#")[0]
        state, key = item.state, (item_id, int(item.attempt))
        if state in DONE or state == "errored":
            continue
        if state in ("queued", "delayed") and item_id in parked and not timer:
            continue
        if state in ("queued", "delayed") and not timer and (
                key in sends or ahead_of_strays(world, item)):  # fmt: skip
            continue  # its message is in SQS, or the schedule finds it (vdq.schedules.strays)
        if state in ("queued", "delayed") and timer != "publish":
            problems.append(f"{item_id} is {state} without a publish timer ({item.timer_pk}), "
                            "send message, or the strays cursor behind it")  # fmt: skip
        if state == "sending" and key not in sends and key not in checked:
            problems.append(f"{item_id} is sending attempt {key[1]} with no send message nor "
                            "check of it in SQS or its dead-letter queue")  # fmt: skip
        if state == "awaiting" and await_timer_required(item, settings):
            need = TIMER_AWAIT if item.method == "sms" else TIMER_EMAIL_AWAIT
            guarded = item.method == "email" and (key in checked or key in sends)
            if timer != need and not guarded:
                problems.append(f"{item_id} is awaiting ({item.method}) without a {need} timer "
                                f"(timer: {item.timer_pk}), check or send message")  # fmt: skip
    return problems


def ahead_of_strays(world: World, item: QueueItemRecord) -> bool:
    """The strays schedule has yet to read the item: its active index entry sorts after its
    lane's place in the cursor of its shard (no place yet: the first run reads the shard from
    its start)."""
    from vdq.schedules.strays import CURSOR_PREFIX, lane_places
    from vdq.workflow.lanes import priority_of

    if not item.active_pk or not item.active_sk:
        return False
    shard_ = item.active_pk.split("#", 1)[1]
    places = lane_places(world.rt.store.schedule_place(f"{CURSOR_PREFIX}{shard_}"))
    place = places[priority_of(item)]
    return place is None or item.active_sk > place


def overdue(items: dict[str, QueueItemRecord], settings: Settings, at: datetime) -> list[str]:
    """After every timer had passed and the schedules ran: nothing still waits on a timer."""
    problems = []
    for item_id, item in items.items():
        if item.state == "sending":
            problems.append(f"{item_id} still sending after its lease passed and a sweep ran")
        if item.state == "awaiting" and await_timer_required(item, settings):
            hours = settings.twilio_sms_timeout_hours if item.method == "sms" else (
                getattr(settings, "email_timeout_hours", 0) or 0)  # fmt: skip
            # Each method's window runs from the claim that sent the item.
            if parse_iso(item.claimed_at or item.queued_at) + timedelta(hours=hours) < at:
                problems.append(f"{item_id} ({item.method}) still awaiting after its timeout "
                                f"and the checks ran (provider ID {item.provider_id})")  # fmt: skip
    return problems


def oversized(world: World) -> list[str]:
    return [f"{i}: state item is {it.size()} bytes (bound {MAX_STATE_BYTES})"
            for i, it in world.raw_items().items() if it.size() > MAX_STATE_BYTES]  # fmt: skip


def file_problems(world: World, items: dict[str, QueueItemRecord], *,
                  after_purge: bool) -> list[str]:  # fmt: skip
    """Files are deleted only when every item of their content is done; with immediate cleanup,
    a content whose items are all done has no file left after a purge run."""
    problems = []
    present = world.s3_keys()
    by_content: dict[str, list[QueueItemRecord]] = {}
    for item in items.values():
        by_content.setdefault(item.content_id, []).append(item)
    for content_id, keys in world.files().items():
        members = by_content.get(content_id, [])
        if not members:
            continue  # a content whose items were never stored (a failed enqueue)
        missing = [k for k in keys if k not in present]
        open_items = [f"{i.id}={i.state}" for i in members if i.state not in DONE]
        if missing and open_items:
            problems.append(f"content {content_id}: files deleted while {open_items} not done")
        for item in members:
            said_gone = item.result and ("was deleted" in item.result or "is gone" in item.result)
            if said_gone and not missing:
                problems.append(f"{item.id} failed with {item.result!r}, but its files exist")
        immediate = world.settings.max_files_age_seconds == 0
        if after_purge and immediate and not open_items and len(missing) < len(keys):
            problems.append(f"content {content_id}: every item done, files kept after a purge")
    return problems


def count_problems(world: World, items: dict[str, QueueItemRecord]) -> list[str]:
    """A content's open count is its items not done: once every item of it is done and no
    enqueue's count is pending on it, nothing is left counted (a count left would keep its
    files and its records for ever)."""
    problems = []
    by_content: dict[str, list[QueueItemRecord]] = {}
    for item in items.values():
        by_content.setdefault(item.content_id, []).append(item)
    for content_id, members in by_content.items():
        if any(i.state not in DONE for i in members):
            continue
        refs = world.rt.store.get_refs(content_id)
        if refs is not None and refs.pending is None and refs.open_items > 0:
            problems.append(f"content {content_id}: every item done, {refs.open_items} counted")
    return problems


def unstamped(world: World, items: dict[str, QueueItemRecord]) -> list[str]:
    """Records beside a done item's state item without the item's expiration."""
    problems = []
    for pk, sk, it in world._rows("QI#"):
        item = items.get(pk[3:])
        if sk == "STATE" or item is None or item.state not in DONE:
            continue
        FIGURES["records beside done items checked"] += 1
        ttl = it.to_json()["Attributes"].get("expiration")
        if ttl is None or int(ttl["N"]) != item.expiration:
            problems.append(f"{item.id} ({item.state}) record {sk} expires at "
                            f"{ttl['N'] if ttl else None}, the item at {item.expiration}")
    return problems


def retention_problems(world: World, items: dict[str, QueueItemRecord]) -> list[str]:
    """An item not done has no expiration, nor has any of its records; a done item expires
    the retention after its done time, and a record of it that has an expiration has the
    item's. Every content's expiration is at least each of its items' expiration (done) or
    now plus the watch's margin less the day between its runs (open), and at least the ``cx``
    each item relies on (vdq.workflow.retention)."""
    from vdq.store import content_id_of
    from vdq.workflow.retention import DAY, expiration_at, watch_margin

    problems = []
    now = world.rt.clock.now().timestamp()
    by_content: dict[str, list[QueueItemRecord]] = {}
    for item in items.values():
        by_content.setdefault(item.content_id, []).append(item)
    records: dict[str, list[tuple[str, Any]]] = {}
    for pk, sk, it in world._rows("QI#"):
        if sk != "STATE":
            ttl = it.to_json()["Attributes"].get("expiration")
            records.setdefault(pk[3:], []).append((sk, int(ttl["N"]) if ttl else None))
    for item_id, item in items.items():
        done = item.state in DONE
        if not done and item.expiration is not None:
            problems.append(f"{item_id} is {item.state} but expires at {item.expiration}")
        if done:
            assert item.done_at is not None
            want = expiration_at(parse_iso(item.done_at), world.settings)
            if item.expiration != want:
                problems.append(f"{item_id} done at {item.done_at} expires at "
                                f"{item.expiration}, not {want}")  # fmt: skip
        for sk, ttl in records.get(item_id, []):
            if ttl is not None and ttl != item.expiration:
                problems.append(f"{item_id} record {sk} expires at {ttl}, the item at "
                                f"{item.expiration} ({item.state})")  # fmt: skip
    contents = [(pk, sk, it) for prefix in ("CT#", "CO#") for pk, sk, it in world._rows(prefix)
                if sk == "CONTENT" or sk.startswith("C#")]  # fmt: skip
    for pk, sk, it in contents:
        ttl = it.to_json()["Attributes"].get("expiration")
        if ttl is None:
            continue  # kept: counted while an item is open, or written without a retention
        expires = int(ttl["N"])
        content_id = content_id_of(pk, sk)
        # (A content no stored item uses, from an enqueue that died before its items, just
        # expires: there is no item for it to outlive.)
        for i in by_content.get(content_id, []):
            if i.expiration is not None and i.expiration <= now:
                continue  # gone itself
            if i.state in DONE and expires < int(i.expiration):
                problems.append(f"content {content_id} expires at {expires}, before its done "
                                f"item {i.id} ({i.expiration})")  # fmt: skip
            if i.state not in DONE and expires < now + watch_margin(world.settings) - DAY:
                problems.append(f"content {content_id} expires at {expires}, too soon for its "
                                f"open item {i.id}={i.state} (now {now:.0f})")  # fmt: skip
            if i.cx is not None and expires < int(i.cx):
                problems.append(f"content {content_id} expires at {expires}, before the {i.cx} "
                                f"its item {i.id} relies on")  # fmt: skip
    return problems


def note_provider_ids(world: World, items: dict[str, QueueItemRecord]) -> None:
    """Remember the provider ID each (item, attempt) stored that the provider gave that very
    attempt (whoever stored it: the worker, an event, a check)."""
    accepted = {**world.ses.accepted, **world.twilio.accepted}
    for item_id, item in items.items():
        key = (item_id, int(item.attempt))
        if key not in world.known_ids and accepted.get(item.provider_id or "") == key:
            world.known_ids[key] = item.provider_id or ""


def undone(items: dict[str, QueueItemRecord],
           parked: set[str] | frozenset[str] = frozenset()) -> list[str]:  # fmt: skip
    """Items neither done nor errored, nor parked by a reputation hold still on (queued or
    delayed, listed for its release: an operator's to release or cancel, as an errored item
    is). After a drain none may be."""
    return [f"{i} is {it.state} at attempt {it.attempt} (timer {it.timer_pk}, claimed "
            f"{it.claimed_at})" for i, it in items.items()
            if it.state not in DONE and it.state != "errored"
            and not (it.state in ("queued", "delayed") and i in parked)]  # fmt: skip


def drain(world: World, step: Any, rounds: int) -> int | None:
    """Deliver every message of the queues the functions read, by their mappings, until none
    is left: visible ones at once, delayed and in-flight ones once the clock reaches them;
    when the queues are empty, every timer passes (the timeouts, the lease, the publish grace)
    and the per-minute schedules run, and it goes on while they put messages back. The clock
    passes the timers a day at most at a time, the daily schedule running after each day, as
    EventBridge runs it. ``step`` runs one piece of work as the model's steps run (no fault).
    Returns the rounds taken, None when the queues were not empty after ``rounds``."""
    from vdq.schedules import sweeps as schedules

    rt, s = world.rt, world.rt.settings
    hours = max(s.twilio_sms_timeout_hours, s.email_timeout_hours)
    passed = hours * 3600 + s.lease_seconds + s.publish_grace_seconds + 1
    for n in range(rounds):
        now = rt.clock.now()
        if world.send_queue.visible_messages(now):
            step(lambda: world.deliver_sends(limit=10))
        elif world.results_queue.visible_messages(now):
            step(lambda: world.deliver_results(limit=10))
        else:
            waiting = [t for t in (world.send_queue.next_visible(now),
                                   world.results_queue.next_visible(now)) if t is not None]
            if waiting:
                rt.clock.advance((min(waiting) - now).total_seconds() + 0.001)
                continue
            left = passed
            while left > DAY:
                rt.clock.advance(DAY)
                left -= DAY
                _, exc = step(lambda: schedules.run(["purge"], rt))
                assert exc is None, exc
            rt.clock.advance(left)
            _, exc = step(lambda: schedules.run(list(schedules.MINUTE), rt))
            assert exc is None, exc
            if not world.pending():
                return n
    return None


def provider_id_kept(world: World, items: dict[str, QueueItemRecord]) -> list[str]:
    """A provider ID an attempt stored (one the provider gave it) stays the item's while it is
    at that attempt."""
    problems = []
    for item_id, item in items.items():
        recorded = world.known_ids.get((item_id, int(item.attempt)))
        if recorded is not None and item.provider_id != recorded:
            problems.append(f"{item_id} attempt {item.attempt}: it stored {recorded}, "
                            f"now it stores {item.provider_id}")  # fmt: skip
    return problems


def answer_problems(exc: BaseException | None, stored: set[str], receivers: list[str],
                    answered: list[str] | None,
                    stored_receivers: dict[str, str]) -> list[str]:  # fmt: skip
    """An enqueue's answer says exactly which receivers were stored."""
    if exc is None:
        ok = answered is not None and set(answered) == stored and len(stored) == len(receivers)
        return [] if ok else [f"answered {answered}, stored {sorted(stored)}"]
    if not isinstance(exc, VdqError):
        return [f"answered {type(exc).__name__} (a 5xx): {exc}"]
    if exc.status not in DOCUMENTED:
        return [f"answered {exc.status} {exc.code}: {exc.message}"]
    accepted = exc.details.get("accepted") if exc.code == "partially_enqueued" else []
    if set(accepted or []) != stored:
        return [f"answered {exc.status} {exc.code} accepting {accepted}, but stored "
                f"{sorted(stored)}"]  # fmt: skip
    if exc.code == "partially_enqueued":
        rejected = sorted(_address(r) for r in exc.details.get("rejected", []))
        expected = sorted(receivers)
        for item_id in stored:
            expected.remove(stored_receivers[item_id])
        if rejected != expected:
            return [f"answered rejected={rejected}, but {expected} were not stored"]
    return []


def _address(receiver: Any) -> str:
    if isinstance(receiver, dict):
        return str(receiver.get("email") or receiver.get("cell"))
    return str(receiver)


__all__ = ["DONE", "World", "harsh_world"]
