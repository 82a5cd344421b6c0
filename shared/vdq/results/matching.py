"""Provider results: SES events and Twilio statuses, matched to their queue item and applied.

Every result becomes a ``ProviderUpdate`` (``vdq.results.events``: provider, message ID,
normalised status, text, a deterministic event id). Matching, cheapest first:

1. the item the provider returned the key of (SES tag, Twilio ``queue_item``) when it stores
   this provider ID: the mapping would name the same item (ID and mapping are written in one
   transaction), so this costs one GetItem; or when it stores no ID yet and the update names
   its current attempt, and the item is one whose IDs get no mapping (a keyed email, an SMS):
   the attempt's first result, which stores the ID and the acceptance (the send worker
   leaves them to it: vdq.dispatch.send);
2. the provider-ID mapping (strongly consistent);
3. the keyed item when it stores no provider ID yet: the ID is stored with the result; an item
   that stores another ID is logged and left alone;
4. nothing: an SES event is kept as an orphan on the mapping record (TTL) and applied when an
   item stores that ID; a Twilio status becomes a deferred lookup on the results queue.

Each update is written with an event mark in the same transaction, so a duplicate or replayed
delivery changes nothing the second time and costs no extra request.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Mapping
from dataclasses import replace
from datetime import timedelta
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

from vdq.core.clock import iso, parse_iso
from vdq.core.errors import VdqError
from vdq.core.observability import logger
from vdq.results import checks, suppression, tracking
from vdq.results.events import (
    BadEvent,
    ProviderUpdate,
    parse_lookup,
    parse_ses_event,
    parse_twilio_callback,
)
from vdq.results.events import twilio_update as twilio_update  # re-exported (vdq.schedules.sms)
from vdq.results.updates import (  # noqa: F401  (TRANSITION_FOR, replay_*: re-exported)
    TRANSITION_FOR,
    apply_update,
    replay_orphans,
    replay_waiting_orphans,
)
from vdq.store import ProviderIdTaken, ProviderRecord
from vdq.workflow.table import State
from vdq.workflow.transitions import MAX_TRIES

if TYPE_CHECKING:
    from vdq.runtime import Runtime

ORPHAN_TTL_SECONDS = 7 * 86_400
MAX_ORPHANS = 25
LOOKUP_FIRST_DELAY = 30
LOOKUP_MAX_DELAY = 900  # SQS's longest DelaySeconds
LOOKUP_KIND = "vdq.deferred_lookup"


# ---- matching --------------------------------------------------------------------------------

Miss = Callable[[ProviderUpdate, ProviderRecord | None], "str | None"]


def match_and_apply(update: ProviderUpdate, runtime: Runtime, on_miss: Miss) -> str:
    """Find the update's item (see the module docstring) and apply it; ``on_miss`` handles an
    update no item matches and returns None when it lost a race (then matching runs again)."""
    store = runtime.store
    for _ in range(MAX_TRIES):
        keyed = store.get_item(update.item_hint) if update.item_hint else None
        if keyed is not None and keyed.provider_id == update.provider_id:
            return apply_update(keyed, update, runtime)
        if (keyed is not None and keyed.provider_id is None
                and update.attempt_hint == int(keyed.attempt)
                and not tracking.maps_provider_id(keyed, runtime)):  # fmt: skip
            # The attempt's first result (its worker left the acceptance to it): the key and
            # attempt are the provider's own (tags, the signed callback URL), and no mapping
            # can name another item (none is written for such an item's ID): no read of it.
            return apply_update(keyed, update, runtime, store_id=True)
        mapping = store.find_by_provider_id(update.provider_id)
        if mapping is not None and mapping.item_id:
            item = keyed if keyed is not None and keyed.id == mapping.item_id else (
                store.get_item(mapping.item_id)
            )
            if item is None:
                logger.error("provider ID %s maps to missing item %s", update.provider_id,
                             mapping.item_id)  # fmt: skip
                return "dropped"
            mapped_attempt = int(mapping.attempt) if mapping.attempt is not None else None
            if (mapped_attempt is None and item.provider_id != update.provider_id
                    and item.state != State.CANCELLED.value):  # fmt: skip
                # A mapping from before attempts were recorded, whose item has moved on to
                # another ID: it belongs to an attempt the item has left.
                mapped_attempt = 0
            return apply_update(item, update, runtime, attempt=mapped_attempt)
        if (keyed is not None and update.attempt_hint is None and int(keyed.attempt) > 1
                and keyed.state != State.CANCELLED.value):  # fmt: skip
            # The update cannot say which attempt it belongs to (a status callback URL from
            # before attempts were signed): never give its ID to a later attempt. (A cancelled
            # item absorbs the results of every attempt before its cancel.)
            keyed = None
        if keyed is not None:
            if keyed.provider_id is not None and keyed.state == State.CANCELLED.value:
                # A result of an attempt before the cancel: the cancelled item absorbs it
                # (state kept, result written) and keeps the ID it stores.
                return apply_update(keyed, update, runtime, attempt=int(keyed.attempt))
            if (keyed.provider_id is not None and update.attempt_hint is not None
                    and update.attempt_hint < int(keyed.attempt)):  # fmt: skip
                # A result of an attempt the item has left (its tags or signed callback URL
                # say which; its ID has no mapping to say it): late, in the item's history.
                return apply_update(keyed, update, runtime, attempt=update.attempt_hint)
            if keyed.provider_id is not None:
                logger.warning(
                    "%s %s names item %s, which stores provider ID %s: not applied",
                    update.provider, update.provider_id, keyed.id, keyed.provider_id,
                )
                return "refused"
            try:
                # An ID with a record of early events (orphans) gets its mapping, which
                # adopts them (vdq.results.updates).
                return apply_update(keyed, update, runtime, store_id=True,
                                    adopt=mapping is not None)  # fmt: skip
            except ProviderIdTaken:
                continue  # another item stored the ID meanwhile: match again
        outcome = on_miss(update, mapping)
        if outcome is not None:
            return outcome
    raise VdqError(f"{update.provider} update {update.event_id}: matching kept losing races")


def handle_ses_event(event: dict[str, Any], runtime: Runtime) -> str:
    """One SES event (the JSON SNS delivers raw to the results queue)."""
    if event.get("notificationType") == SES_SUBSCRIPTION_SUCCEEDED:
        logger.info("SES %s (identity notifications reach the results queue): %s",
                    SES_SUBSCRIPTION_SUCCEEDED, _text(event.get("message")))  # fmt: skip
        return "ses_subscription_succeeded"
    update = parse_ses_event(event)
    if suppression.learn_from_ses_event(event, runtime, event_id=update.event_id):  # also orphans
        update = replace(update, suppresses=None)  # its receivers are suppressed already
    found = tracking.strategy_for(runtime).find_queue_item(event)
    if found:
        item_id, attempt = found
        update = replace(update, item_hint=item_id,
                         attempt_hint=int(attempt) if attempt is not None else None)  # fmt: skip
    return match_and_apply(update, runtime, lambda u, seen: keep_orphan(u, seen, runtime))


def keep_orphan(update: ProviderUpdate, seen: ProviderRecord | None,
                runtime: Runtime) -> str | None:  # fmt: skip
    expiration = int(runtime.clock.now().timestamp()) + ORPHAN_TTL_SECONDS
    if not runtime.store.add_orphan(update.provider_id, seen, update.to_json(), expiration,
                                    MAX_ORPHANS):  # fmt: skip
        return None
    logger.warning("%s %s for %s matches no item yet: kept as an orphan", update.provider,
                   update.name, update.provider_id)  # fmt: skip
    return "orphan"


# ---- Twilio: callbacks and deferred lookups --------------------------------------------------


def handle_twilio_callback(params: dict[str, str], item_key: str | None, runtime: Runtime, *,
                           attempt: str | None = None) -> str:  # fmt: skip
    """One authentic Twilio status callback (the signature was checked by the caller, and
    covers ``item_key`` and ``attempt``, the status callback URL's query)."""
    update = parse_twilio_callback(params, item_key)
    if suppression.learn_from_twilio_error(params.get("To"), params.get("ErrorCode"), runtime,
                                           where="in a status callback",
                                           event_id=update.event_id):  # fmt: skip
        # The number is suppressed already; a callback without To (Twilio's documented one
        # has none) suppresses the receiver of the item it matches instead.
        update = replace(update, suppresses=None)
    if item_key and attempt is not None and tracking.is_attempt(attempt):
        update = replace(update, attempt_hint=int(attempt))
    now = iso(runtime.clock.now())
    return match_and_apply(update, runtime,
                           lambda u, _seen: defer_lookup(u, runtime, 0, now))  # fmt: skip


def lookup_message(update: ProviderUpdate, tries: int, first_seen: str) -> dict[str, Any]:
    return {"kind": LOOKUP_KIND, "update": update.to_json(), "tries": tries,
            "first_seen": first_seen}  # fmt: skip


def defer_lookup(update: ProviderUpdate, runtime: Runtime, tries: int, first_seen: str) -> str:
    """Look again later (a delayed message on the results queue), until the SMS timeout window
    has passed; then give up with an error in the log."""
    s = runtime.settings
    deadline = parse_iso(first_seen) + timedelta(hours=s.twilio_sms_timeout_hours)
    if runtime.clock.now() >= deadline:
        logger.error("Twilio %s %s matched no queue item within %s hours: dropped",
                     update.provider_id, update.name, s.twilio_sms_timeout_hours)  # fmt: skip
        return "dropped"
    # The exponent is capped: 2 to the power of a huge count would compute for ever.
    delay = min(LOOKUP_MAX_DELAY, LOOKUP_FIRST_DELAY * 2 ** min(tries, 16))
    runtime.client("sqs").send_message(
        QueueUrl=s.results_queue_url,
        MessageBody=json.dumps(lookup_message(update, tries + 1, first_seen)),
        DelaySeconds=delay,
    )
    logger.info("Twilio %s %s matches no item yet: lookup %d in %d s", update.provider_id,
                update.name, tries + 1, delay)  # fmt: skip
    return "deferred"


def handle_deferred_lookup(message: dict[str, Any], runtime: Runtime) -> str:
    update, tries, first_seen = parse_lookup(message)
    def again(u: ProviderUpdate, _seen: ProviderRecord | None) -> str | None:
        return defer_lookup(u, runtime, tries, first_seen)

    return match_and_apply(update, runtime, again)


# An inbound SMS the table could not take when Twilio posted it (throttled, an AWS error): its
# form, kept on the results queue and applied from there, since Twilio does not post an
# incoming message again after an error answer. Applying it twice changes nothing (its SID).
INBOUND_KIND = "vdq.inbound_sms"
INBOUND_DELAY = 5  # seconds: past a moment's throttling


def defer_inbound(params: Mapping[str, str], runtime: Runtime) -> None:
    runtime.client("sqs").send_message(
        QueueUrl=runtime.settings.results_queue_url,
        MessageBody=json.dumps({"kind": INBOUND_KIND, "form": dict(params)}),
        DelaySeconds=INBOUND_DELAY,
    )


def handle_deferred_inbound(message: dict[str, Any], runtime: Runtime) -> str:
    form = message.get("form")
    if not isinstance(form, dict) or not all(
        isinstance(k, str) and isinstance(v, str) for k, v in form.items()
    ):
        raise BadEvent("a kept inbound SMS without its form")
    if suppression.inbound_word(form) not in suppression.STOP_WORDS:
        # Only a STOP is kept (functions/webhook): a START applied late could lift a STOP the
        # number sent after it, so one found here is never applied.
        raise BadEvent("a kept inbound SMS that is no STOP")
    return suppression.handle_inbound_sms(form, runtime)


def _json_object(body: str, what: str) -> dict[str, Any]:
    try:
        data = json.loads(body)
    except (ValueError, RecursionError):  # not JSON, nested past the parser, a huge number
        raise BadEvent(f"the {what} is not JSON") from None
    if not isinstance(data, dict):
        raise BadEvent(f"the {what} is not a JSON object")
    return data


def handle_results_message(body: str, runtime: Runtime) -> str:
    """One message of the results queue: an SES event (raw or in an SNS envelope), a
    deferred lookup, a kept inbound SMS or a send's check (which VDQ sends to the queue itself,
    never through SNS: vdq.results.checks), or a message of SNS or SES about the subscription
    itself (logged as what it is)."""
    if body.strip() == SES_TOPIC_VALIDATION:  # raw message delivery: the text alone
        return topic_validated(None)
    data = _json_object(body, "message")
    if data.get("kind") == LOOKUP_KIND:
        return handle_deferred_lookup(data, runtime)
    if data.get("kind") == INBOUND_KIND:
        return handle_deferred_inbound(data, runtime)
    if data.get("kind") == checks.KIND:
        try:
            return checks.handle(data, runtime)
        except ValueError as exc:
            raise BadEvent(str(exc)) from None
    if data.get("Type") in SNS_SUBSCRIPTION_MESSAGES:
        return sns_subscription_message(data)
    if data.get("Type") == "Notification" and isinstance(data.get("Message"), str):
        if data["Message"].strip() == SES_TOPIC_VALIDATION:
            return topic_validated(data.get("TopicArn"))
        return handle_ses_event(_json_object(data["Message"], "SNS message"), runtime)
    return handle_ses_event(data, runtime)


# ---- messages about the subscription, not SES events ------------------------------------------

# SES publishes this to a topic when an event destination is set up on it (no JSON).
SES_TOPIC_VALIDATION = "Successfully validated SNS topic for Amazon SES event publishing."
# SES's identity notifications (the older format) announce their topic with this type.
SES_SUBSCRIPTION_SUCCEEDED = "AmazonSnsSubscriptionSucceeded"
SNS_SUBSCRIPTION_MESSAGES = ("SubscriptionConfirmation", "UnsubscribeConfirmation")
MAX_LOGGED_TEXT = 2048


def sns_subscription_message(data: dict[str, Any]) -> str:
    """SNS asks to confirm a subscription of the results queue (one the stack did not make
    itself: its own is confirmed when it is created), or says one was deleted. Logged for the
    operator with its SubscribeURL, which VDQ never visits: confirming is the operator's
    decision."""
    kind, topic = data["Type"], _text(data.get("TopicArn"))
    url = _sns_url(data.get("SubscribeURL"))
    visit = (f"visit its SubscribeURL: {url}" if url
             else "its SubscribeURL is not an SNS address: do not visit it")  # fmt: skip
    if kind == "SubscriptionConfirmation":
        logger.warning("SNS SubscriptionConfirmation of topic %s reached the results queue: no "
                       "SES event, nothing applied. VDQ does not confirm subscriptions; to "
                       "confirm this one, if it is wanted, %s", topic, visit)  # fmt: skip
        return "sns_subscription_confirmation"
    logger.warning("SNS UnsubscribeConfirmation of topic %s: the results queue no longer gets "
                   "that topic's messages (SES events from it stop). To subscribe it again, "
                   "%s", topic, visit)  # fmt: skip
    return "sns_unsubscribe_confirmation"


def topic_validated(topic: Any) -> str:
    logger.info("SES validated the SNS topic %s for event publishing: no SES event",
                _text(topic) if topic is not None else "(raw message delivery)")  # fmt: skip
    return "ses_topic_validated"


def _text(value: Any) -> str:
    return value[:MAX_LOGGED_TEXT] if isinstance(value, str) else "(none)"


# SNS's regional endpoint, the only host of a SubscribeURL: ``sns.<region>.amazonaws.com``
# (``.cn`` in China). A looser test ("sns." ... ".amazonaws.com") takes S3's virtual hosts,
# where anyone may name a bucket "sns.<anything>" and serve a page.
_SNS_HOST = re.compile(r"sns\.[a-z0-9-]+\.amazonaws\.com(?:\.cn)?")


def _sns_url(value: Any) -> str | None:
    """``value`` when it is an https URL of SNS's (an operator may be asked to open it)."""
    if not isinstance(value, str) or len(value) > MAX_LOGGED_TEXT:
        return None
    try:
        parts = urlsplit(value)
        port = parts.port
    except ValueError:
        return None
    trusted = (parts.netloc == parts.hostname and port is None
               and _SNS_HOST.fullmatch(parts.hostname or "") is not None)  # fmt: skip
    return value if parts.scheme == "https" and trusted else None

