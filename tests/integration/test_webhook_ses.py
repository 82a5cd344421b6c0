"""SES events through the results queue (SNS raw delivery -> SQS -> functions/webhook)."""

from __future__ import annotations

import json
from datetime import timedelta

import pytest
from functions.webhook import handler as webhook

from tests.support.operator import dynamodb_requests
from tests.support.results import (
    LambdaContext,
    kinds,
    new_email,
    new_sms,
    ses_event,
    sqs_event,
    to_awaiting,
    to_sending,
)
from vdq.core.clock import iso, parse_iso
from vdq.results import matching as results
from vdq.store import ProviderRecord, provider_pk
from vdq.workflow import retention
from vdq.workflow.transitions import Step, apply

MSG = "010001927b2d6c1e-test-message-000000"


def deliver(*bodies):
    answer = webhook.handler(sqs_event(*bodies), LambdaContext())
    assert answer == {"batchItemFailures": []}, answer
    return answer


def mapping(provider_id: str) -> ProviderRecord | None:
    try:
        return ProviderRecord.get(provider_pk(provider_id), "MAP", consistent_read=True)
    except ProviderRecord.DoesNotExist:
        return None


def test_delivery_event_succeeds_the_item_in_two_dynamodb_requests(aws, runtime, monkeypatch):
    item = to_awaiting(new_email(runtime), runtime, MSG)
    with dynamodb_requests(monkeypatch) as counts:
        deliver(ses_event("delivery", message_id=MSG, item_id=item.id))
    assert counts == {"GetItem": 1, "UpdateItem": 1}  # its history entry on the state item
    stored = runtime.store.get_item(item.id)
    assert stored.state == "succeeded"
    assert "250 2.0.0 OK" in stored.result
    assert ("transition", "succeed") in kinds(runtime, item.id)


@pytest.mark.parametrize(
    ("sample", "state", "in_result"),
    [
        ("delivery", "succeeded", "250 2.0.0 OK"),
        ("bounce_permanent", "errored", "550 5.1.1 user unknown"),
        ("bounce_transient", "errored", "552 5.2.2 mailbox full"),
        ("reject", "errored", "Bad content"),
        ("rendering_failure", "errored", "Attribute 'name' is not present"),
        ("delivery_delay", "awaiting", "over quota"),
    ],
)
def test_each_ses_event_type_applies_its_status_to_an_awaiting_email(
    aws, runtime, sample, state, in_result
):
    item = to_awaiting(new_email(runtime), runtime, MSG)
    deliver(ses_event(sample, message_id=MSG, item_id=item.id))
    stored = runtime.store.get_item(item.id)
    assert stored.state == state
    assert in_result in stored.result


def test_a_send_event_after_the_worker_recorded_it_writes_nothing(aws, runtime, monkeypatch):
    """The worker's history entry already says SES accepted the message under this ID."""
    item = to_awaiting(new_email(runtime), runtime, MSG)
    before = (runtime.store.get_item(item.id).updated_at, kinds(runtime, item.id))
    with dynamodb_requests(monkeypatch) as counts:
        deliver(ses_event("send", message_id=MSG, item_id=item.id))
    assert counts == {"GetItem": 1}
    assert (runtime.store.get_item(item.id).updated_at, kinds(runtime, item.id)) == before
    deliver(ses_event("delivery", message_id=MSG, item_id=item.id))
    late = "010001927b2d6c1e-test-message-other"  # a Send naming an ID the item does not store
    deliver(ses_event("send", message_id=late, item_id=item.id))
    assert runtime.store.get_item(item.id).provider_id == MSG


def test_complaint_events_are_recorded_without_changing_state(aws, runtime):
    item = to_awaiting(new_email(runtime), runtime, MSG)
    deliver(ses_event("delivery", message_id=MSG, item_id=item.id))
    deliver(ses_event("complaint", message_id=MSG, item_id=item.id))
    stored = runtime.store.get_item(item.id)
    assert stored.state == "succeeded"
    assert ("event", "Complaint") in kinds(runtime, item.id)
    complaint = next(h for h in runtime.store.history(item.id) if h.name == "Complaint")
    assert "abuse" in complaint.text


def test_a_delivery_is_the_first_result_it_stores_the_id_and_the_acceptance_in_one_write(
        aws, runtime, monkeypatch, clock):  # fmt: skip
    # SES's acceptance writes nothing (vdq.dispatch.send): with no Send subscribed, the email's
    # Delivery is its first event, and its tags (item and attempt) find the item sending. One
    # read of the item and one write: no mapping read or written for a tagged email.
    item = to_sending(new_email(runtime), runtime)
    event = ses_event("delivery", message_id=MSG, item_id=item.id)
    sent_at = parse_iso(item.claimed_at) + timedelta(seconds=0.2)
    event["mail"]["timestamp"] = sent_at.isoformat(timespec="milliseconds").replace("+00:00", "Z")
    clock.advance(3)
    with dynamodb_requests(monkeypatch) as counts:
        deliver(event)
    assert counts == {"GetItem": 1, "UpdateItem": 1}
    stored = runtime.store.get_item(item.id)
    assert (stored.state, stored.provider_id) == ("succeeded", MSG)
    assert mapping(MSG) is None
    # History as when the worker wrote the acceptance: "accepted by SES as ..." at SES's time
    # (the event's mail.timestamp), then the Delivery from awaiting.
    assert kinds(runtime, item.id) == [("transition", "send"), ("transition", "await"),
                                       ("transition", "succeed")]  # fmt: skip
    _, accepted, done = runtime.store.history(item.id)
    assert (accepted.from_state, accepted.to_state, accepted.actor) == (
        "sending", "awaiting", "worker")
    assert accepted.text == f"accepted by SES as {MSG}"
    assert (accepted.at, done.at) == (iso(sent_at), iso(clock.now()))  # SES's time, then now
    assert (done.from_state, done.to_state) == ("awaiting", "succeeded")


def test_in_flight_event_moves_a_sending_item_to_awaiting_and_stores_the_message_id(aws, runtime):
    # The event came before the worker stored the ID: the tag finds the item. (Send is not
    # subscribed; one published before an upgrade, or by a set that subscribes it, does this.)
    item = to_sending(new_email(runtime), runtime)
    deliver(ses_event("send", message_id=MSG, item_id=item.id))
    stored = runtime.store.get_item(item.id)
    assert (stored.state, stored.provider_id) == ("awaiting", MSG)
    assert mapping(MSG) is None  # a tagged email's ID has none
    assert kinds(runtime, item.id) == [("transition", "send"), ("transition", "await"),
                                       ("event", "Send")]  # fmt: skip
    assert runtime.store.history(item.id)[1].text == f"accepted by SES as {MSG}"


def test_delivery_delay_applies_await_from_sending_and_writes_its_text(aws, runtime):
    item = to_sending(new_email(runtime), runtime)
    deliver(ses_event("delivery_delay", message_id=MSG, item_id=item.id))
    stored = runtime.store.get_item(item.id)
    assert stored.state == "awaiting"
    assert "MailboxFull" in stored.result and "over quota" in stored.result


def test_final_event_for_a_sending_item_found_by_its_tag_applies_and_stores_the_id(aws, runtime):
    item = to_sending(new_email(runtime), runtime)
    deliver(ses_event("bounce_permanent", message_id=MSG, item_id=item.id))
    stored = runtime.store.get_item(item.id)
    assert (stored.state, stored.provider_id) == ("errored", MSG)
    assert "user unknown" in stored.result


def test_event_without_tags_matches_by_message_id(aws, runtime):
    item = to_awaiting(new_email(runtime), runtime, MSG)
    deliver(ses_event("delivery", message_id=MSG, item_id=None))
    assert runtime.store.get_item(item.id).state == "succeeded"


def test_tag_of_an_item_that_stores_another_id_changes_nothing(aws, runtime):
    item = to_awaiting(new_email(runtime), runtime, "OTHER-MESSAGE")
    before = runtime.store.get_item(item.id)
    deliver(ses_event("bounce_permanent", message_id=MSG, item_id=item.id))
    after = runtime.store.get_item(item.id)
    assert (after.state, after.result, after.updated_at) == (
        before.state, before.result, before.updated_at)
    assert mapping(MSG) is None


def test_message_id_wins_over_a_tag_without_attempt_naming_another_item(aws, runtime):
    # A tag without the attempt (an email sent before attempts were tagged) is matched through
    # the ID's mapping first. (With its attempt, the tag is the provider's word for the very
    # attempt, and its item's first result needs no mapping read: the test above.)
    owner = to_awaiting(new_email(runtime, "a@example.org"), runtime, MSG)
    other = to_sending(new_email(runtime, "b@example.org"), runtime)
    deliver(ses_event("delivery", message_id=MSG, item_id=other.id, attempt=None))
    assert runtime.store.get_item(owner.id).state == "succeeded"
    assert runtime.store.get_item(other.id).state == "sending"


def test_event_of_an_older_attempt_is_history_only(aws, runtime, clock):
    item = to_awaiting(new_email(runtime), runtime, MSG)
    apply(item, Step("error", actor="test", result="x"), runtime)
    apply(item.id, Step("retry", actor="ops", source="operator"), runtime)  # attempt 2
    deliver(ses_event("delivery", message_id=MSG, item_id=item.id, attempt=1))
    stored = runtime.store.get_item(item.id)
    assert (stored.state, stored.attempt) == ("queued", 2)
    assert ("late", "Delivery") in kinds(runtime, item.id)


def test_final_event_for_a_cancelled_item_keeps_it_cancelled_and_writes_result(aws, runtime):
    item = new_email(runtime)
    apply(item, Step("cancel", actor="ops", source="operator"), runtime)
    deliver(ses_event("delivery", message_id=MSG, item_id=item.id, attempt=None))
    stored = runtime.store.get_item(item.id)
    assert stored.state == "cancelled"
    assert "250 2.0.0 OK" in stored.result
    assert ("ignored", "succeed") in kinds(runtime, item.id)


def test_a_cancelled_item_absorbs_an_earlier_attempts_result_though_it_stores_another_id(
        aws, runtime):  # fmt: skip
    """Found by the 20,000-schedule soak: attempt 1 (MSG) and attempt 2 (another ID) were both
    rejected, the operator cancelled; SES then reports attempt 1 delivered. The cancelled item
    takes the result (defect 5's rule) and keeps attempt 2's ID; it is not refused."""
    other = "010001927b2d6c1e-test-message-000002"
    item = to_awaiting(new_email(runtime), runtime, MSG)
    deliver(ses_event("reject", message_id=MSG, item_id=item.id, attempt=1))
    apply(runtime.store.get_item(item.id), Step("retry", actor="ops", source="operator"), runtime)
    second = to_awaiting(runtime.store.get_item(item.id), runtime, other)
    deliver(ses_event("reject", message_id=other, item_id=item.id, attempt=2))
    apply(runtime.store.get_item(second.id), Step("cancel", actor="ops", source="operator"),
          runtime)  # fmt: skip
    for provider_id in (MSG, other):  # a tagged email's worker writes no mapping record
        record = mapping(provider_id)
        if record is not None:
            record.delete()
    deliver(ses_event("delivery", message_id=MSG, item_id=item.id, attempt=1))
    stored = runtime.store.get_item(item.id)
    assert (stored.state, stored.provider_id) == ("cancelled", other)
    assert "250 2.0.0 OK" in stored.result


def test_late_failure_after_success_is_recorded_and_answered_without_failure(aws, runtime):
    item = to_awaiting(new_email(runtime), runtime, MSG)
    deliver(ses_event("delivery", message_id=MSG, item_id=item.id))
    result = runtime.store.get_item(item.id).result
    deliver(ses_event("bounce_permanent", message_id=MSG, item_id=item.id))
    stored = runtime.store.get_item(item.id)
    assert (stored.state, stored.result) == ("succeeded", result)
    late = [h for h in runtime.store.history(item.id) if h.kind == "late"]
    assert [h.name for h in late] == ["error"] and "user unknown" in late[0].text


def test_duplicate_and_out_of_order_deliveries_change_nothing_the_second_time(aws, runtime, clock):
    item = to_awaiting(new_email(runtime), runtime, MSG)
    delivery = ses_event("delivery", message_id=MSG, item_id=item.id)
    bounce = ses_event("bounce_transient", message_id=MSG, item_id=item.id)
    deliver(delivery)
    deliver(bounce)  # out of order: late, recorded once
    first = runtime.store.get_item(item.id)
    history = kinds(runtime, item.id)
    clock.advance(60)
    deliver(delivery, bounce, delivery)
    after = runtime.store.get_item(item.id)
    assert (after.state, after.result, after.updated_at) == (
        first.state, first.result, first.updated_at)
    assert kinds(runtime, item.id) == history


def test_duplicate_delivery_to_a_cancelled_item_writes_nothing_again(aws, runtime, clock):
    item = new_email(runtime)
    apply(item, Step("cancel", actor="ops", source="operator"), runtime)
    event = ses_event("bounce_permanent", message_id=MSG, item_id=item.id, attempt=None)
    deliver(event)
    history = kinds(runtime, item.id)
    clock.advance(5)
    deliver(event)
    assert kinds(runtime, item.id) == history


def test_unmatched_event_is_kept_as_an_orphan_with_a_ttl(aws, runtime, clock):
    deliver(ses_event("delivery", message_id=MSG, item_id=None))
    deliver(ses_event("delivery", message_id=MSG, item_id=None))  # duplicate: kept once
    record = mapping(MSG)
    assert record.item_id is None
    orphans = json.loads(record.orphans)
    assert [o["name"] for o in orphans] == ["Delivery"]
    assert record.expiration == int(clock.now().timestamp()) + results.ORPHAN_TTL_SECONDS


def test_orphans_are_applied_when_the_worker_stores_the_message_id(aws, runtime, clock):
    item = to_sending(new_email(runtime), runtime)
    deliver(ses_event("send", message_id=MSG, item_id=None))
    deliver(ses_event("delivery", message_id=MSG, item_id=None))
    clock.advance(1)
    from vdq.dispatch import record

    assert record.accepted(item, MSG, runtime) == record.ACCEPTED
    stored = runtime.store.get_item(item.id)
    assert (stored.state, stored.provider_id) == ("succeeded", MSG)
    record = mapping(MSG)
    # adopted, the mapping expires as a mapping does (after the item: vdq.workflow.retention)
    expires = retention.mapping_expiration(clock.now(), runtime.settings)
    assert (record.item_id, record.orphans, record.expiration) == (item.id, None, expires)
    # The early Send is applied too: as nothing, the worker having recorded the acceptance.
    assert ("event", "Send") not in kinds(runtime, item.id)


def test_orphans_are_applied_through_the_send_workers_record_step(aws, runtime, clock):
    from vdq.dispatch import record

    item = to_sending(new_email(runtime), runtime)
    deliver(ses_event("bounce_permanent", message_id=MSG, item_id=None))
    record.accepted(item, MSG, runtime)
    stored = runtime.store.get_item(item.id)
    assert (stored.state, stored.provider_id) == ("errored", MSG)
    assert mapping(MSG).item_id == item.id


def test_orphan_adopted_by_a_tagged_event_for_an_item_without_id(aws, runtime):
    # The tag names the item, not its attempt (an email sent before attempts were tagged):
    # the ID's mapping is read, and its orphans adopted.
    item = to_sending(new_email(runtime), runtime)
    deliver(ses_event("delivery_delay", message_id=MSG, item_id=None))  # orphan
    deliver(ses_event("delivery", message_id=MSG, item_id=item.id, attempt=None))  # stores it
    stored = runtime.store.get_item(item.id)
    assert (stored.state, stored.provider_id) == ("succeeded", MSG)
    assert mapping(MSG).orphans is None
    # In the order they arrived: the delay (adopted, applied first) moved the item to awaiting,
    # the delivery that adopted it then moved it on.
    assert kinds(runtime, item.id) == [("transition", "send"), ("transition", "await"),
                                       ("transition", "succeed")]  # fmt: skip
    waited = [h for h in runtime.store.history(item.id) if h.name == "await"]
    assert waited and "delay" in (waited[0].text or "").lower()


def test_sns_envelope_is_accepted_too(aws, runtime):
    item = to_awaiting(new_email(runtime), runtime, MSG)
    envelope = {"Type": "Notification", "MessageId": "sns-1", "TopicArn": "arn:aws:sns:x",
                "Message": json.dumps(ses_event("delivery", message_id=MSG, item_id=item.id))}
    deliver(envelope)
    assert runtime.store.get_item(item.id).state == "succeeded"


def test_malformed_message_is_dropped_without_a_retry(aws, runtime):
    deliver("not json", {"eventType": "Delivery", "mail": {}})


def test_a_failure_a_retry_can_fix_fails_only_its_record(aws, runtime):
    item = to_awaiting(new_email(runtime), runtime, MSG)

    class Broken:
        def __getattr__(self, name):
            raise RuntimeError("DynamoDB is unavailable")

    good = ses_event("delivery", message_id=MSG, item_id=item.id)
    real = runtime.store
    calls = {"n": 0}

    class FlakyStore:
        def __getattr__(self, name):
            calls["n"] += 1
            return getattr(Broken() if calls["n"] == 1 else real, name)

    runtime.__dict__["store"] = FlakyStore()
    answer = webhook.handler(sqs_event(good, good), LambdaContext())
    runtime.__dict__["store"] = real
    assert answer == {"batchItemFailures": [{"itemIdentifier": "msg-0"}]}
    assert runtime.store.get_item(item.id).state == "succeeded"


def _malformed(kind: str) -> dict:
    """A delivery event for MSG broken in one way (``kind``)."""
    body = ses_event("delivery", message_id=MSG)
    if kind == "detail_not_object":
        body["delivery"] = ["not", "an", "object"]
    elif kind == "recipients_not_objects":
        body = ses_event("bounce_permanent", message_id=MSG)
        body["bounce"]["bouncedRecipients"] = ["a@example.org", 7]
    elif kind == "message_id_not_text":
        body["mail"]["messageId"] = {"id": MSG}
    elif kind == "timestamp_not_text":
        body["delivery"]["timestamp"] = 1733212800
    elif kind == "attempt_unicode_digit":
        body["mail"]["tags"]["vdq_attempt"] = ["\u00b2"]
    elif kind == "attempt_of_twelve_digits":
        body["mail"]["tags"]["vdq_attempt"] = ["1" * 12]
    return body


@pytest.mark.parametrize("kind", ["detail_not_object", "recipients_not_objects",
                                  "message_id_not_text", "timestamp_not_text",
                                  "attempt_unicode_digit", "attempt_of_twelve_digits"])  # fmt: skip
def test_a_malformed_ses_event_is_logged_and_dropped_not_retried(aws, runtime, kind):
    """An event SES never sends is not retried into the dead-letter queue: it is dropped with
    a log line (BadEvent), or, where the oddity is harmless, read as far as it makes sense."""
    item = to_awaiting(new_email(runtime), runtime, MSG)
    deliver(json.dumps(_malformed(kind)))  # no batch item failure
    stored = runtime.store.get_item(item.id)
    if kind in ("detail_not_object", "message_id_not_text"):
        assert stored.state == "awaiting"  # dropped: nothing changed
    else:
        assert stored.state in ("succeeded", "errored")  # applied, the odd field ignored


def _forged_lookup(item_id: str) -> dict:
    """A deferred Twilio lookup, the message VDQ itself puts on the results queue, saying the
    item's SMS was delivered."""
    update = results.twilio_update("SM" + "7" * 32, "delivered", item_hint=item_id)
    return results.lookup_message(update, 1, "2026-01-01T00:00:00.000000Z")


def test_a_batch_of_hostile_records_is_dropped_and_the_good_one_applied_once(aws, runtime):
    """Records that no retry can fix (a body nested past the parser, a lookup without its
    update or with fields of the wrong type, VDQ's own lookup smuggled in an SNS envelope, an
    attempt tag of 5,000 digits, an eventType that is no word) are dropped, not retried into
    the dead-letter queue; the good record beside them is applied once and nothing else changes."""
    item = to_awaiting(new_email(runtime), runtime, MSG)
    sms = to_awaiting(new_sms(runtime), runtime, "SM" + "7" * 32)
    lookup = _forged_lookup(sms.id)
    huge_attempt = ses_event("delivery", message_id="0100-other", item_id=item.id)
    huge_attempt["mail"]["tags"]["vdq_attempt"] = ["1" * 5000]
    odd_type = ses_event("delivery", message_id=MSG, item_id=item.id)
    odd_type["eventType"] = ["Delivery"]
    bodies = [
        "[" * 100_000,
        json.dumps({"Type": "Notification", "Message": "[" * 100_000}),
        json.dumps({"kind": results.LOOKUP_KIND}),
        json.dumps({**_forged_lookup(sms.id), "update": ["not", "an", "update"]}),
        json.dumps({**_forged_lookup(sms.id), "first_seen": "yesterday"}),
        json.dumps(dict(lookup, update={**lookup["update"], "item_hint": [sms.id]})),
        json.dumps({"Type": "Notification", "MessageId": "sns-1",
                    "Message": json.dumps(_forged_lookup(sms.id))}),
        json.dumps(huge_attempt),
        json.dumps({"Type": "SubscriptionConfirmation", "Message": "You have chosen to subscribe",
                    "SubscribeURL": "https://sns.us-east-1.amazonaws.com/?Action=Confirm"}),
        json.dumps({"Type": "UnsubscribeConfirmation", "Message": "unsubscribed"}),
        json.dumps({"Type": "Notification", "MessageId": "sns-2"}),  # no Message
        json.dumps({"Type": "Notification", "Message": "not json"}),
        json.dumps(odd_type),
        json.dumps(ses_event("delivery", message_id=MSG, item_id=item.id)),
    ]
    before = len(runtime.store.history(item.id))
    assert webhook.handler(sqs_event(*bodies), LambdaContext()) == {"batchItemFailures": []}
    assert runtime.store.get_item(item.id).state == "succeeded"
    assert len(runtime.store.history(item.id)) == before + 1  # the delivery, once
    assert runtime.store.get_item(sms.id).state == "awaiting"  # no forged lookup applied
    assert mapping("0100-other") is None


def test_an_earlier_attempts_delivery_after_a_retry_is_late_under_that_attempt(aws, runtime):
    """Found in use: attempt 1 bounced, an operator retried, and attempt 1's Delivery came
    late. Its entry said attempt 2 with nothing marking it late, so the runbook's "if its
    history shows a delivery, cancel it" led to cancelling a retry still being sent."""
    item = to_awaiting(new_email(runtime), runtime, MSG)
    deliver(ses_event("bounce_permanent", message_id=MSG, item_id=item.id, attempt=1))
    apply(item.id, Step("retry", actor="ops", source="operator"), runtime)
    to_sending(runtime.store.get_item(item.id), runtime)
    deliver(ses_event("delivery", message_id=MSG, item_id=item.id, attempt=1))
    stored = runtime.store.get_item(item.id)
    assert (stored.state, int(stored.attempt), stored.provider_id) == ("sending", 2, None)
    [entry] = [h for h in runtime.store.history(item.id) if h.name == "Delivery"]
    assert (entry.kind, int(entry.attempt)) == ("late", 1)


def test_a_send_ses_refused_for_its_accounts_list_is_marked_suppressed_in_lists(aws, runtime):
    """Found in use: SES reports a send it refused for its account-level list as a Complaint;
    the item errored and its receiver was suppressed, but lists showed no signal."""
    from vdq.workflow.views import item_json

    item = to_awaiting(new_email(runtime), runtime, MSG)
    deliver(ses_event("complaint_suppression_list", message_id=MSG, item_id=item.id))
    stored = runtime.store.get_item(item.id)
    assert stored.state == "errored"
    assert item_json(stored)["signals"] == ["suppressed"], runtime.store.history(item.id)


def test_an_event_of_a_type_ses_does_not_publish_is_dropped_not_kept_as_an_orphan(aws, runtime):
    """Found in use: an unknown eventType was kept as an orphan (a write, and a week's wait
    for an item), where the results stage says what is not an SES event is logged and
    dropped."""
    deliver({"eventType": "Bogus", "mail": {"messageId": MSG}})
    assert mapping(MSG) is None


def _between_read_and_write(monkeypatch, action):
    """Run ``action`` once, after the results stage read the item for an event that moves no
    state and before it writes the event."""
    from vdq.results import updates

    real, done = updates.item_now, []

    def hooked(current, runtime):
        if not done:
            done.append(1)
            action()
        return real(current, runtime)

    monkeypatch.setattr(updates, "item_now", hooked)


def test_an_id_stored_between_an_events_read_and_its_write_is_not_replaced(
        aws, runtime, monkeypatch):  # fmt: skip
    # Two SES messages for one attempt (a SendEmail retried after a lost answer): the worker's
    # ID is stored while an event of the other is being recorded. It keeps the worker's.
    other = "010001927b2d6c1e-test-message-000009"
    item = to_sending(new_email(runtime), runtime)
    apply(item, Step("error", actor="test", result="timed out"), runtime)
    _between_read_and_write(monkeypatch, lambda: runtime.store.store_provider_id(
        item.id, MSG, attempt=1, map_provider_id=False))
    deliver(ses_event("open", message_id=other, item_id=item.id, attempt=1))
    assert runtime.store.get_item(item.id).provider_id == MSG


def test_orphans_replayed_after_a_retry_stay_the_results_of_the_attempt_they_were_for(
        aws, runtime):  # fmt: skip
    # Untagged events wait as orphans of attempt 1's ID; the item is retried and claimed again
    # while they are adopted. Attempt 1's Delivery is late in attempt 2's history, never its
    # success.
    from vdq.dispatch import record

    item = to_sending(new_email(runtime), runtime)
    deliver(ses_event("delivery", message_id=MSG, item_id=None))  # an orphan
    apply(item.id, Step("error", actor="test", result="timed out"), runtime)
    adopt = runtime.store.adopt_orphans

    def adopt_then_retry(*args, **kwargs):
        orphans = adopt(*args, **kwargs)
        apply(item.id, Step("retry", actor="ops", source="operator"), runtime)
        to_sending(runtime.store.get_item(item.id), runtime)
        return orphans

    runtime.store.adopt_orphans = adopt_then_retry
    record.adopt_orphans(runtime.store.get_item(item.id), MSG, runtime, state="errored")
    stored = runtime.store.get_item(item.id)
    assert (stored.state, int(stored.attempt)) == ("sending", 2)
    [entry] = [h for h in runtime.store.history(item.id) if h.name == "Delivery"]
    assert (entry.kind, int(entry.attempt)) == ("late", 1)


def test_a_workers_failure_after_a_result_moved_the_item_on_is_late_not_a_retry(aws, runtime):
    """Found in review: SES took the message but its answer was lost and the SDK's retry was
    throttled; the message's Send moved the item to awaiting first. The worker's delay then
    started attempt 2 (a second send) keeping attempt 1's ID, which refused attempt 2's own:
    the item stayed sending. The worker's failure applies only while its claim holds the
    item."""
    from vdq.dispatch import record
    from vdq.providers import TransientProviderError

    item = to_sending(new_email(runtime), runtime)
    deliver(ses_event("send", message_id=MSG, item_id=item.id, attempt=1))
    assert record.failed(item, TransientProviderError("ses", "Throttling"), runtime) == "kept"
    stored = runtime.store.get_item(item.id)
    assert (stored.state, int(stored.attempt), stored.provider_id) == ("awaiting", 1, MSG)
    assert ("late", "delay") in kinds(runtime, item.id)


def test_a_cancel_between_a_late_events_read_and_its_write_takes_the_events_result(
        aws, runtime, monkeypatch):  # fmt: skip
    """Found in review: attempt 1's Delivery is read as late (the item is queued for attempt
    2), then an operator cancels it before the entry is written. The cancelled item absorbs
    the results of its earlier attempts (its result says delivered), as it does when the
    Delivery comes after the cancel; the entry was written late, unconditioned, and the
    cancelled item's result never said the email went out."""
    item = to_awaiting(new_email(runtime), runtime, MSG)
    deliver(ses_event("bounce_transient", message_id=MSG, item_id=item.id, attempt=1))
    apply(item.id, Step("retry", actor="ops", source="operator"), runtime)
    _between_read_and_write(monkeypatch, lambda: apply(
        item.id, Step("cancel", actor="ops", source="operator"), runtime))
    deliver(ses_event("delivery", message_id=MSG, item_id=item.id, attempt=1))
    stored = runtime.store.get_item(item.id)
    assert stored.state == "cancelled"
    assert "250 2.0.0 OK" in stored.result
    assert ("ignored", "succeed") in kinds(runtime, item.id)
    assert ("late", "Delivery") not in kinds(runtime, item.id)


def test_an_open_read_before_a_delivery_is_written_as_an_event_of_the_state_it_finds(
        aws, runtime, monkeypatch):  # fmt: skip
    # An Open moves no state; the Delivery lands between its read and its write. The Open's
    # entry says the item was succeeded, not awaiting (a history that reads as a move back).
    item = to_awaiting(new_email(runtime), runtime, MSG)
    _between_read_and_write(monkeypatch, lambda: apply(
        item.id, Step("succeed", actor="ses", source="provider", result="delivered"), runtime))
    deliver(ses_event("open", message_id=MSG, item_id=item.id, attempt=1))
    [entry] = [h for h in runtime.store.history(item.id) if h.name == "Open"]
    assert (entry.from_state, entry.to_state) == ("succeeded", "succeeded")


def _errored_without_id(runtime):
    # Attempt 1 timed out before SES answered: errored, no provider ID stored.
    item = to_sending(new_email(runtime), runtime)
    apply(item, Step("error", actor="test", result="timed out"), runtime)
    return item


def _cancel_between(monkeypatch, runtime, item_id, module):
    from vdq.results import updates
    from vdq.workflow import transitions

    hooked = {"results": updates, "transitions": transitions}[module]
    real, done = hooked.item_now, []

    def item_now(current, runtime_):
        if not done:
            done.append(1)
            apply(item_id, Step("cancel", actor="ops", source="operator"), runtime)
        return real(current, runtime_)

    monkeypatch.setattr(hooked, "item_now", item_now)


@pytest.mark.parametrize(("event", "module"), [("open", "results"),
                                               ("delivery", "transitions")])  # fmt: skip
def test_a_cancel_between_an_events_read_and_write_keeps_the_id_the_event_brings(
        aws, runtime, monkeypatch, event, module):  # fmt: skip
    # As when the cancel comes first: the cancelled item stores the ID of the attempt's event
    # (its mapping, its orphans), whichever path (results' event, apply's late entry) lost
    # the race and decided again.
    item = _errored_without_id(runtime)
    _cancel_between(monkeypatch, runtime, item.id, module)
    deliver(ses_event(event, message_id=MSG, item_id=item.id, attempt=1))
    stored = runtime.store.get_item(item.id)
    assert (stored.state, stored.provider_id) == ("cancelled", MSG)
    assert ("late", "succeed") not in kinds(runtime, item.id)
    if event == "delivery":
        assert "250 2.0.0 OK" in stored.result
