"""POST /emails and POST /sms, and the Python API's requests: validate, enqueue, answer with
the new items.

An ``Idempotency-Key`` makes the request safe to repeat: the same key and body return the items
of the first request and create nothing; the same key with another body is refused (422). A
first request that stored only some of its items (503 ``partially_enqueued``) is answered the
same way again: its stored items are sent once, and the rejected receivers need a new request.
"""

from __future__ import annotations

import base64
import json
import re
import zlib
from collections.abc import Callable
from dataclasses import dataclass
from functools import lru_cache
from typing import TYPE_CHECKING, Any

from vdq.api import Caller
from vdq.core.errors import BadRequest, Conflict, PartiallyEnqueued, ValidationError
from vdq.core.observability import logger
from vdq.intake import messages, quotas
from vdq.intake.enqueue import enqueue_email, enqueue_sms
from vdq.results import guard, suppression
from vdq.store import QueueItemRecord
from vdq.workflow.views import item_json

if TYPE_CHECKING:
    from vdq.runtime import Runtime

ADD_PERMISSION = "vdq.add_queueitem"
MAX_IDEMPOTENCY_KEY = 255
KEY_HEADER = "Idempotency-Key"  # what its refusals name (the Python API: its argument)
IDEMPOTENCY_KEY_PATTERN = "^[\\x21-\\x7e](?:[\\x20-\\x7e]*[\\x21-\\x7e])?$"
_KEY = re.compile(IDEMPOTENCY_KEY_PATTERN)
PARTIAL = "partially_enqueued"  # how a partial answer is kept under its Idempotency-Key
# How an answer is kept under its key: compressed, as the answer of a request of
# VDQ_MAX_RECEIVERS receivers is larger as JSON than a DynamoDB item takes (400 KB).
PACKED = "zlib_base64"
IN_PROGRESS_RETRY_AFTER_SECONDS = 2  # the Retry-After of a repeat while the first runs


class InProgress(Conflict):
    """A repeat of a request under its Idempotency-Key while the first still runs: 409 with
    Retry-After, after which the repeat gets the first request's answer."""

    def __init__(self, key: str = KEY_HEADER) -> None:  # key: how the caller gave it
        seconds = IN_PROGRESS_RETRY_AFTER_SECONDS
        super().__init__(f"a request with this {key} is still in progress: repeat it "
                         f"after Retry-After ({seconds} s) to get its answer")  # fmt: skip
        self.headers = {"Retry-After": str(seconds)}


def submit(
    method: str,
    body: Any,
    who: Caller,
    runtime: Runtime,
    *,
    idempotency_key: str | None = None,
) -> dict[str, Any]:
    """Enqueue one request; returns the response body ``{"items": [...]}``."""
    who.require(ADD_PERMISSION)
    return accept(method, body, who, runtime, idempotency_key=idempotency_key).answer


@dataclass(frozen=True)
class Accepted:
    """An enqueued request: its answer (the REST response body) and the items this call stored,
    None for a repeat answered under its Idempotency-Key (the first request stored them)."""

    answer: dict[str, Any]
    items: list[QueueItemRecord] | None


def accept(
    method: str,
    body: Any,
    who: Caller,
    runtime: Runtime,
    *,
    idempotency_key: str | None = None,
) -> Accepted:
    """Enqueue one request of the producer ``who`` ("email" or "sms"), as both doors take it
    (REST: ``submit``; vdq.python_api): checked whole, charged to its quota, told of a
    reputation guard's hold and of its suppressed receivers, once per Idempotency-Key."""
    stored: list[list[QueueItemRecord]] = []

    def work() -> dict[str, Any]:
        items, answer = _enqueue(method, body, who, runtime)
        stored.append(items)
        return answer

    if idempotency_key is None:
        answer = work()
    else:
        check_key(idempotency_key)
        # Validate before the idempotency record exists, so bad input never occupies a key.
        _parse(method, body, runtime)
        answer = once(method, who, idempotency_key, body, runtime, work)
    return Accepted(answer, stored[-1] if stored else None)


def check_key(idempotency_key: str) -> None:
    """A 400 naming the header unless the key is what the document promises: printable ASCII
    (what HTTP carries), with no space at either end (HTTP drops it); text, as the header is
    (the Python API's key may be anything)."""
    if (not isinstance(idempotency_key, str) or len(idempotency_key) > MAX_IDEMPOTENCY_KEY
            or not _KEY.fullmatch(idempotency_key)):  # fmt: skip
        raise BadRequest(f"{KEY_HEADER} must be 1 to {MAX_IDEMPOTENCY_KEY} printable ASCII "
                         "characters, with no space at either end",
                         details={"field": KEY_HEADER})  # fmt: skip


def once(kind: str, who: Caller, idempotency_key: str, body: Any, runtime: Runtime,
         work: Callable[[], dict[str, Any]]) -> dict[str, Any]:  # fmt: skip
    """Run ``work`` once per (caller, kind, key): a repeat with the same ``body`` returns the
    first answer (also a partial enqueue's 503), another body is a 422, a repeat while the
    first runs is a 409. ``kind`` is "email", "sms" or a resend's operation id."""
    check_key(idempotency_key)
    request = {"caller": who.subject, "method": kind, "key": idempotency_key, "body": body}
    return _idempotent(runtime.settings.table_name, runtime.settings.idempotency_seconds)(
        request=request, work=work
    )


def _parse(method: str, body: Any, runtime: Runtime) -> messages.Email | messages.Sms:
    s = runtime.settings
    now, days = runtime.clock.now(), s.max_schedule_days
    if method == "email":
        return messages.parse_email(
            body, max_receivers=s.max_receivers, max_attachment_bytes=s.max_attachment_bytes,
            sender_identities=s.sender_identities, now=now, max_schedule_days=days,
        )
    return messages.parse_sms(body, max_receivers=s.max_receivers,
                              max_segments=s.sms_max_segments, now=now,
                              max_schedule_days=days)  # fmt: skip


def _enqueue(method: str, body: Any, who: Caller,
             runtime: Runtime) -> tuple[list[QueueItemRecord], dict[str, Any]]:  # fmt: skip
    parsed = _parse(method, body, runtime)
    receivers = _receivers(parsed)
    # Read before anything is stored: a failed read fails the request with nothing queued
    # (and frees its Idempotency-Key), so repeating it cannot queue the receivers twice.
    suppressed = suppression.flags(receivers, runtime, getattr(parsed, "list_name", None))
    held = (guard.notice(who.subject, runtime, parsed.priority)  # wait for a release
            if isinstance(parsed, messages.Email) else None)  # fmt: skip

    def store() -> list[QueueItemRecord]:
        if isinstance(parsed, messages.Email):
            return enqueue_email(parsed, runtime, created_by=who.subject)
        return enqueue_sms(parsed, runtime, created_by=who.subject)

    # One item per distinct receiver counts against the producer's quota, all or nothing; the
    # items of a partial enqueue that were stored will be sent and stay counted.
    items = quotas.charged(who.subject, who.groups, len(receivers), runtime, store,
                           log=logger.warning,
                           field=lambda limit: _passing(parsed, limit))  # fmt: skip
    answer: dict[str, Any] = {"items": [item_json(i) for i in items], "suppressed": suppressed}
    if held is not None:
        answer["held"] = held
    return items, answer


def _receivers(parsed: messages.Email | messages.Sms) -> list[str]:
    """The request's distinct receivers, in order."""
    if isinstance(parsed, messages.Email):
        return [a.email for a in parsed.receivers()]
    return [r.cell for r in parsed.receivers()]


def _passing(parsed: messages.Email | messages.Sms, limit: int) -> str:
    """The list whose receivers take the count of distinct receivers (to, then cc, then bcc)
    past ``limit``: what a request too large for a quota names."""
    if isinstance(parsed, messages.Sms):
        return "to"
    seen: set[str] = set()
    for name in ("to", "cc", "bcc"):
        seen.update(a.email.lower() for a in getattr(parsed, name))
        if len(seen) > limit:
            return name
    return "to"


@lru_cache(maxsize=4)
def idempotency_config(seconds: int) -> Any:
    """The Powertools IdempotencyConfig of enqueue, one per process (and record lifetime).

    The handler registers each invocation's Lambda context on it (``register_lambda_context``):
    a record left "in progress" by an invocation that timed out then expires at that
    invocation's deadline, instead of answering 409 until the record's ``seconds`` pass.
    """
    from aws_lambda_powertools.utilities.idempotency import IdempotencyConfig

    return IdempotencyConfig(
        event_key_jmespath="[caller, method, key]",
        payload_validation_jmespath="body",
        expires_after_seconds=seconds,
        raise_on_no_idempotency_key=True,
    )


def _packed(answer: dict[str, Any]) -> dict[str, Any]:
    data = json.dumps(answer, separators=(",", ":")).encode()
    return {PACKED: base64.b64encode(zlib.compress(data, 9)).decode("ascii")}


def _unpacked(kept: dict[str, Any]) -> dict[str, Any]:
    if PACKED not in kept:  # an answer kept before answers were packed
        return kept
    answer: dict[str, Any] = json.loads(zlib.decompress(base64.b64decode(kept[PACKED])))
    return answer


# What a key used before with another request names, where that is not a body: a resend of
# one item takes none, its item is in the path.
REUSED_KEY = {
    "resendSentItem": "was already used to resend another item",
    "resendSentItems": "was already used to resend other ids",
}


@lru_cache(maxsize=4)
def _idempotent(table_name: str, seconds: int) -> Any:
    from aws_lambda_powertools.utilities.idempotency import (
        DynamoDBPersistenceLayer,
        idempotent_function,
    )
    from aws_lambda_powertools.utilities.idempotency.serialization.custom_dict import (
        CustomDictSerializer,
    )

    persistence = DynamoDBPersistenceLayer(table_name=table_name, key_attr="pk",
                                           sort_key_attr="sk")  # fmt: skip
    config = idempotency_config(seconds)

    @idempotent_function(data_keyword_argument="request", persistence_store=persistence,
                         config=config,
                         output_serializer=CustomDictSerializer(_packed, _unpacked))  # fmt: skip
    def run_once(*, request: dict[str, Any], work: Callable[[], dict[str, Any]]) -> dict[str, Any]:
        return work()

    def call(*, request: dict[str, Any], work: Callable[[], dict[str, Any]]) -> dict[str, Any]:
        from aws_lambda_powertools.utilities.idempotency.exceptions import (
            IdempotencyAlreadyInProgressError,
            IdempotencyPersistenceLayerError,
            IdempotencyValidationError,
        )

        done: list[dict[str, Any]] = []

        def recorded() -> dict[str, Any]:
            try:
                done.append(work())
            except PartiallyEnqueued as exc:
                # Kept as the key's answer: a retry must not store the stored items again.
                done.append({PARTIAL: {"message": exc.message, "details": exc.details}})
            return done[-1]

        try:
            answer = run_once(request=request, work=recorded)
        except IdempotencyPersistenceLayerError:
            if not done:
                raise
            # The work is done and its items queued, but the key could not keep the answer:
            # answer it all the same (a 5xx would invite a repeat that queues them again).
            logger.exception("the answer of Idempotency-Key %r was not kept", request["key"])
            answer = done[-1]
        except IdempotencyValidationError:
            raise ValidationError(KEY_HEADER, REUSED_KEY.get(
                request["method"], "was already used with a different request body")) from None
        except IdempotencyAlreadyInProgressError:
            raise InProgress from None
        if PARTIAL in answer:
            raise PartiallyEnqueued(answer[PARTIAL]["message"], details=answer[PARTIAL]["details"])
        return answer

    return call
