"""Provider payloads to updates, statuses to transitions, the signed URL: pure, offline."""

from __future__ import annotations

import pytest

from tests.support.events import load_event
from tests.support.results import SAMPLE_ITEM, SAMPLE_WEBHOOK_URL, ses_body
from vdq.results import matching as results
from vdq.results.events import parse_lookup, twilio_update
from vdq.results.matching import TRANSITION_FOR, BadEvent, parse_ses_event, parse_twilio_callback
from vdq.results.twilio_signature import form_params, public_url


@pytest.mark.parametrize(("sample", "status", "transition", "in_text"), [
    ("send", "sent", "await", "accepted"),
    ("delivery", "delivered", "succeed", "250 2.0.0 OK"),
    ("bounce_permanent", "bounced", "error", "Permanent/General"),
    ("bounce_transient", "bounced", "error", "Transient/MailboxFull"),
    ("complaint", "complained", None, "abuse"),
    ("reject", "rejected", "error", "Bad content"),
    ("delivery_delay", "deferred", "await", "4.2.2"),
    ("rendering_failure", "failed", "error", "not present in the rendering data"),
])  # fmt: skip
def test_each_ses_event_type_maps_to_the_seeds_status(sample, status, transition, in_text):
    update = parse_ses_event(ses_body(sample))
    assert update.provider == "ses"
    assert update.provider_id.endswith("-000000")
    assert (update.status, TRANSITION_FOR.get(update.status)) == (status, transition)
    assert in_text in update.text


def test_ses_event_ids_tell_events_apart_and_repeat_for_a_redelivery():
    ids = {parse_ses_event(ses_body(s)).event_id
           for s in ("send", "delivery", "bounce_permanent", "bounce_transient", "complaint",
                     "reject", "delivery_delay", "rendering_failure")}  # fmt: skip
    assert len(ids) == 8
    assert parse_ses_event(ses_body("delivery")).event_id == (
        parse_ses_event(ses_body("delivery")).event_id)
    body = ses_body("delivery_delay")
    later = ses_body("delivery_delay")
    later["deliveryDelay"]["timestamp"] = "2026-12-02T15:00:00.000Z"
    assert parse_ses_event(body).event_id != parse_ses_event(later).event_id


def test_ses_event_without_a_message_id_is_refused():
    with pytest.raises(BadEvent):
        parse_ses_event({"eventType": "Delivery", "mail": {}})


@pytest.mark.parametrize(("status", "transition"), [
    ("delivered", "succeed"), ("undelivered", "error"), ("failed", "error"),
    ("queued", "await"), ("sending", "await"), ("sent", "await"),
    # Beyond the seed: every value of Twilio's MessageStatus enum has a meaning.
    ("accepted", "await"), ("scheduled", "await"), ("read", "succeed"),
    ("canceled", "error"), ("partially_delivered", "error"),
    ("receiving", None), ("received", None), ("something_new", None),
])  # fmt: skip
def test_twilio_statuses_map_as_the_seed_says(status, transition):
    update = results.twilio_update("SM1", status)
    assert TRANSITION_FOR.get(update.status) == transition
    assert update.event_id == f"twilio:SM1:{status}"


def test_twilio_callback_carries_the_error_code_and_key():
    params = form_params(load_event("twilio_status_undelivered"))
    update = parse_twilio_callback(params, SAMPLE_ITEM)
    assert (update.status, update.item_hint) == ("undelivered", SAMPLE_ITEM)
    assert "error 30003" in update.text
    with pytest.raises(BadEvent):
        parse_twilio_callback({"MessageStatus": "sent"}, None)


@pytest.mark.parametrize(("code", "meaning"), [
    ("30003", "unreachable destination handset"), ("30005", "unknown destination handset"),
    ("30006", "landline or unreachable carrier"), ("30007", "filtered by the carrier"),
    ("30008", "unknown error"), ("30036", "validity period expired"),
    ("21610", "the receiver replied STOP"), ("21614", "To is not a mobile number"),
])  # fmt: skip
def test_a_twilio_error_code_without_a_message_is_shown_with_its_meaning(code, meaning):
    # Twilio's status callbacks carry ErrorCode alone: the operator reads what it means.
    update = parse_twilio_callback({"MessageSid": "SM1", "MessageStatus": "undelivered",
                                    "ErrorCode": code}, None)  # fmt: skip
    assert update.text == f"Twilio reported undelivered, error {code} ({meaning})"
    fetched = twilio_update("SM1", "failed", int(code), "Twilio's own words")
    assert fetched.text == f"Twilio reported failed, error {code}: Twilio's own words"
    unknown = twilio_update("SM1", "failed", "39999")
    assert unknown.text == "Twilio reported failed, error 39999"


def test_update_round_trips_through_json():
    update = parse_ses_event(ses_body("bounce_permanent"))
    assert results.ProviderUpdate.from_json(update.to_json()) == update


def test_public_url_is_the_webhook_url_with_the_query_twilio_was_given():
    event = load_event("twilio_status_delivered")
    assert public_url(SAMPLE_WEBHOOK_URL, event) == f"{SAMPLE_WEBHOOK_URL}?queue_item={SAMPLE_ITEM}"
    own = SAMPLE_WEBHOOK_URL + "?env=prod"
    event["multiValueQueryStringParameters"] = {"env": ["prod"], "queue_item": ["X"]}
    assert public_url(own, event) == own + "&queue_item=X"
    event["multiValueQueryStringParameters"] = None
    event["queryStringParameters"] = None
    assert public_url(SAMPLE_WEBHOOK_URL, event) == SAMPLE_WEBHOOK_URL


def test_public_url_is_the_url_the_send_worker_gives_twilio():
    outbound = pytest.importorskip("vdq.dispatch.outbound")
    for webhook in (SAMPLE_WEBHOOK_URL, SAMPLE_WEBHOOK_URL + "?env=prod&x=a%20b"):
        given = outbound.status_callback_url(webhook, SAMPLE_ITEM)
        event = {"multiValueQueryStringParameters": {}}
        from urllib.parse import parse_qsl, urlsplit

        for k, v in parse_qsl(urlsplit(given).query):
            event["multiValueQueryStringParameters"].setdefault(k, []).append(v)
        assert public_url(webhook, event) == given


@pytest.mark.parametrize("tries", [-1, 10**400, "3", True, None, 2.0])
def test_a_deferred_lookup_with_tries_vdq_never_writes_is_a_bad_event(tries):
    """A count of 10**400 would make the back-off 2**tries (computing until the function
    times out, then retried into the dead-letter queue); a negative one a fractional delay
    SQS refuses."""
    update = twilio_update("SM" + "1" * 32, "delivered")
    message = {"kind": "vdq.deferred_lookup", "update": update.to_json(), "tries": tries,
               "first_seen": "2026-01-01T00:00:00.000000Z"}  # fmt: skip
    if tries is None:
        message.pop("tries")  # absent: a first lookup (0)
        assert parse_lookup(message)[1] == 0
        return
    with pytest.raises(BadEvent):
        parse_lookup(message)
