"""The Python API of a producing service (``vdq.add_email``, ``vdq.add_sms``): a request body
built from arguments and enqueued as a named producer's, through the REST API's own enqueue
(vdq.intake.rest.accept): the same checks, quota, reputation guard and suppression flags."""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from collections.abc import Set as AbstractSet
from datetime import datetime
from typing import Any

from vdq.api import Caller
from vdq.core.errors import BadRequest, ValidationError
from vdq.intake import rest
from vdq.intake.enqueue import PENDING_SECONDS
from vdq.intake.quotas import GROUP_PREFIX
from vdq.operations.spec import PRODUCER_PATTERN
from vdq.runtime import Runtime
from vdq.store import QueueItemRecord

# How the REST API's Idempotency-Key is given here, and what its refusals name.
KEY_ARGUMENT = "idempotency_key"

# The producer of a request that names none: its quota, hold and counters are this name's.
DEFAULT_PRODUCER = "python-api"


class Enqueued(list[QueueItemRecord]):
    """A request's items, one per distinct receiver in request order, with what the REST API
    answers beside them: ``suppressed``, the receivers on the suppression list (queued all the
    same, they end cancelled), and ``held``, the reputation guard's notice when the producer's
    email is held until a release (None when it is not)."""

    suppressed: list[dict[str, Any]]
    held: dict[str, Any] | None

    def __init__(self, items: Iterable[QueueItemRecord], answer: Mapping[str, Any]) -> None:
        super().__init__(items)
        self.suppressed = answer["suppressed"]
        self.held = answer.get("held")


# A group as a token's cognito:groups can carry it to the REST API: API Gateway passes the list
# as text split at commas and spaces (vdq.api.parse_groups), so a name holds neither.
GROUP_PATTERN = r"[^\s,\[\]]{1,128}"


def _producer(producer: Any, groups: Any) -> Caller:
    """The caller a request is enqueued as: named as a REST producer is (a client id or a
    token's subject), never as a group's shared counters (``group:<name>``), in ``groups`` as
    its token's ``cognito:groups`` would put it (a group quota applies to it as to them)."""
    if (not isinstance(producer, str) or not re.fullmatch(PRODUCER_PATTERN, producer)
            or producer.startswith(GROUP_PREFIX)):  # fmt: skip
        raise ValidationError("producer", "must be a client id or a token's subject: 1 to 128 "
                              "letters, digits and : . _ @ + = -, starting with a letter or "
                              "digit, and not group:<name>")  # fmt: skip
    if isinstance(groups, AbstractSet | Mapping):
        # The first group with a quota is charged: a set's order is not the caller's (it
        # changes from one process to the next), and a mapping's values would be dropped.
        raise ValidationError("groups", "must be in order, as a token's cognito:groups lists "
                              "them (its first group with a quota is charged): a list, not a "
                              "set or a mapping")  # fmt: skip
    try:
        names = [groups] if isinstance(groups, str) else list(() if groups is None else groups)
    except TypeError:  # not a list of names at all
        names = [None]
    if not all(isinstance(g, str) and re.fullmatch(GROUP_PATTERN, g) for g in names):
        raise ValidationError("groups", "must be group names as a token's cognito:groups "
                              "carries them: 1 to 128 characters each, no spaces, commas or "
                              "brackets")  # fmt: skip
    return Caller(producer, tuple(names), frozenset())


class _Deadline:
    """What the idempotency utility asks a Lambda context: how long the request may still run.
    A producer's process is given the longest a Lambda runs, so a key it left in progress when
    it died frees in minutes, not after VDQ_IDEMPOTENCY_SECONDS (as the enqueue function's
    does at its invocation's deadline: functions/enqueue)."""

    def get_remaining_time_in_millis(self) -> int:
        return PENDING_SECONDS * 1000


def _enqueue(method: str, body: dict[str, Any], producer: Any, groups: Any,
             idempotency_key: str | None, runtime: Runtime) -> Enqueued:  # fmt: skip
    if idempotency_key is not None:
        config = rest.idempotency_config(runtime.settings.idempotency_seconds)
        config.register_lambda_context(_Deadline())
    try:
        accepted = rest.accept(method, body, _producer(producer, groups), runtime,
                               idempotency_key=idempotency_key)  # fmt: skip
    except rest.InProgress:
        raise rest.InProgress(KEY_ARGUMENT) from None
    except (ValidationError, BadRequest) as exc:
        if exc.details.get("field") != rest.KEY_HEADER:
            raise
        # Named as the caller wrote it: the argument, not the REST API's header.
        if isinstance(exc, ValidationError):
            raise ValidationError(KEY_ARGUMENT, "was already used with different arguments") \
                from None
        raise BadRequest(exc.message.replace(rest.KEY_HEADER, KEY_ARGUMENT),
                         details={"field": KEY_ARGUMENT}) from None
    items = accepted.items
    if items is None:  # a repeat under its key: the first request's items, as they are now
        ids = [i["id"] for i in accepted.answer["items"]]
        found = runtime.store.get_items(ids)
        items = [found[i] for i in ids if i in found]  # one past its retention is gone
    return Enqueued(items, accepted.answer)


def _origin(origin: tuple[str, str] | Mapping[str, str]) -> Any:
    return {"type": origin[0], "id": origin[1]} if isinstance(origin, tuple) else origin


def _dispatch(body: dict[str, Any], priority: str | None,
              send_at: str | datetime | None) -> None:  # fmt: skip
    if priority is not None:
        body["priority"] = priority
    if send_at is not None:
        body["send_at"] = send_at.isoformat() if isinstance(send_at, datetime) else send_at


def _listed(values: Iterable[Any] | str | Mapping[str, str] | None) -> list[Any]:
    """One receiver given alone (a string, or a mapping) as a list of it: a string read as a
    list would be a list of its characters."""
    if isinstance(values, (str, Mapping)):
        return [values]
    return list(values or [])


def _addresses(values: Iterable[Any] | str | Mapping[str, str] | None) -> list[Any]:
    return [{"email": v} if isinstance(v, str) else v for v in _listed(values)]


def add_email(
    sender: str | Mapping[str, str],
    to: str | Mapping[str, str] | Iterable[str | Mapping[str, str]],
    subject: str,
    text: str,
    *,
    html: str | None = None,
    cc: str | Mapping[str, str] | Iterable[str | Mapping[str, str]] | None = None,
    bcc: str | Mapping[str, str] | Iterable[str | Mapping[str, str]] | None = None,
    reply_to: str | Mapping[str, str] | Iterable[str | Mapping[str, str]] | None = None,
    attachments: Iterable[Mapping[str, Any]] | None = None,
    origin: tuple[str, str] | Mapping[str, str] | None = None,
    list_unsubscribe: bool = False,
    list_name: str | None = None,
    priority: str | None = None,
    send_at: str | datetime | None = None,
    producer: str = DEFAULT_PRODUCER,
    groups: str | Iterable[str] = (),
    idempotency_key: str | None = None,
    runtime: Runtime | None = None,
) -> Enqueued:
    """Queue an email: one item per receiver across to, cc and bcc (each a list, or one
    address alone). Validates all first.
    ``producer``: whose request it is (its quota, reputation guard and uploads), named as a
    REST producer is: a client id or a token's subject; ``groups``: the groups its token would
    carry (``cognito:groups``: a group's quota applies to it when its own name has none);
    ``idempotency_key``: as the REST
    API's Idempotency-Key, the producer's: a repeat returns the first request's items (as
    stored now) and queues nothing, another request under the key is refused.
    ``list_unsubscribe``: each copy carries one-click unsubscribe headers (vdq.results.unsubscribe);
    ``list_name``: the mailing list it belongs to (the headers leave that list only);
    ``priority``: high, normal or bulk; ``send_at``: not before this time (aware datetime or
    RFC 3339 text)."""
    runtime = runtime or Runtime.default()
    body: dict[str, Any] = {
        "sender": {"email": sender} if isinstance(sender, str) else dict(sender),
        "to": _addresses(to),
        "cc": _addresses(cc),
        "bcc": _addresses(bcc),
        "reply_to": _addresses(reply_to),
        "subject": subject,
        "text": text,
    }
    if html is not None:
        body["html"] = html
    if attachments:
        body["attachments"] = list(attachments)
    if origin is not None:
        body["origin"] = _origin(origin)
    if list_unsubscribe:
        body["list_unsubscribe"] = True
    if list_name is not None:
        body["list"] = list_name
    _dispatch(body, priority, send_at)
    return _enqueue("email", body, producer, groups, idempotency_key, runtime)


def add_sms(
    sender: str,
    to: str | Mapping[str, str] | Iterable[str | Mapping[str, str]],
    body: str | None = None,
    *,
    media_urls: Iterable[str] | None = None,
    origin: tuple[str, str] | Mapping[str, str] | None = None,
    priority: str | None = None,
    send_at: str | datetime | None = None,
    producer: str = DEFAULT_PRODUCER,
    groups: str | Iterable[str] = (),
    idempotency_key: str | None = None,
    runtime: Runtime | None = None,
) -> Enqueued:
    """Queue an SMS: one item per receiver (E.164 numbers), from ``sender``, a number of the
    account or a Messaging Service SID (MG...). ``body`` may be left out beside ``media_urls``
    (an MMS of media alone); ``priority``, ``send_at``, ``producer``, ``groups`` and
    ``idempotency_key`` as for ``add_email``."""
    runtime = runtime or Runtime.default()
    data: dict[str, Any] = {
        "sender": {"messaging_service_sid" if sender[:2] == "MG" else "cell": sender},
        "to": [{"cell": v} if isinstance(v, str) else v for v in _listed(to)],
    }
    if body is not None:
        data["body"] = body
    if media_urls:
        data["media_urls"] = list(media_urls)
    if origin is not None:
        data["origin"] = _origin(origin)
    _dispatch(data, priority, send_at)
    return _enqueue("sms", data, producer, groups, idempotency_key, runtime)
