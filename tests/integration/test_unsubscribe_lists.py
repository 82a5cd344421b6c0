"""One-click unsubscribe is scoped to a list (RFC 8058): the link of a newsletter stops that list's
mail to the address, not its password resets. Producers name a list on the email (`list`); list
mail without one belongs to the list `general`. Bounces and complaints still stop everything.
Against moto, through the API and the webhook as a mail client and operators use them."""

from __future__ import annotations

import base64
import email
import json
from dataclasses import replace
from email import policy

import boto3
import pytest
from functions.webhook import handler as webhook
from moto.core import DEFAULT_ACCOUNT_ID
from moto.ses.models import ses_backends

from tests.support.aws import drain
from tests.support.events import load_event
from tests.support.operator import call
from tests.support.results import LambdaContext
from vdq.api import Caller
from vdq.core import resources
from vdq.dispatch import send
from vdq.intake import rest as intake
from vdq.results import suppression, unsubscribe
from vdq.runtime import Runtime
from vdq.workflow.sendqueue import SendMessage

SENDER = "shop@example.com"
ADA = "ada@example.org"
OPS = ("vdq-suppressions",)
PRODUCER = Caller("producer", ("vdq-senders",), frozenset({"vdq.add_queueitem"}))


@pytest.fixture
def rt(aws, settings, clock):
    boto3.client("ses").verify_email_identity(EmailAddress=SENDER)
    rt = Runtime(settings=replace(settings, unsubscribe_key="list-test-key",
                                  unsubscribe_url="https://api.example.com/v1/unsubscribe/"),
                 clock=clock)  # fmt: skip
    import vdq.runtime as runtime_module

    runtime_module._DEFAULT = rt
    yield rt
    Runtime.reset_default()


def enqueue(rt, **extra):
    body = {"sender": {"email": SENDER}, "to": [{"email": ADA}], "subject": "Hi", "text": "Hello",
            **extra}  # fmt: skip
    return intake.submit("email", body, PRODUCER, rt)


def send_all(aws, rt) -> list[str]:
    """Run the worker on every send message waiting in any lane; what each did."""
    done = []
    for queue in resources.SEND_QUEUES.values():
        for message in drain(aws, queue):
            done.append(send.process_body(json.dumps(message), rt))
    return done


def sent():
    return [email.message_from_string(m.raw_data, policy=policy.default)
            for m in ses_backends[DEFAULT_ACCOUNT_ID]["us-east-1"].sent_messages]


def token_of(message) -> str:
    return message["List-Unsubscribe"][1:-1].rsplit("/", 1)[1]


def unsubscribe_event(method: str, token: str):
    event = load_event("twilio_status_delivered")
    event.update(resource="/unsubscribe/{token}", path=f"/unsubscribe/{token}",
                 httpMethod=method, pathParameters={"token": token},
                 body="List-Unsubscribe=One-Click" if method == "POST" else None,
                 queryStringParameters=None, multiValueQueryStringParameters=None)
    return event


def click(token: str, method: str = "POST"):
    return webhook.handler(unsubscribe_event(method, token), LambdaContext("webhook"))


def newsletter_token(aws, rt, **extra) -> str:
    enqueue(rt, **extra)
    assert send_all(aws, rt) == [send.ACCEPTED]
    return token_of(sent()[-1])


def test_an_unsubscribe_stops_its_lists_mail_but_not_a_password_reset(aws, rt):
    token = newsletter_token(aws, rt, list="news", priority="bulk")
    assert click(token)["statusCode"] == 200
    assert rt.store.get_suppression(ADA) is None  # not the deployment-wide list

    [news] = enqueue(rt, list="news", priority="bulk")["items"]
    [reset] = enqueue(rt, subject="Reset your password", priority="high")["items"]
    assert sorted(send_all(aws, rt)) == sorted([send.SUPPRESSED, send.ACCEPTED])
    stopped = rt.store.get_item(news["id"])
    assert stopped.state == "cancelled" and stopped.provider_id is None
    assert '"news"' in stopped.result and "unsubscribed" in stopped.result
    cancel = rt.store.history(news["id"])[-1]
    assert (cancel.name, cancel.to_state) == ("cancel", "cancelled") and '"news"' in cancel.text
    # The reset went out: SES accepted it (the item waits for its first event in sending).
    assert rt.store.get_item(reset["id"]).state == "sending"


def test_mail_of_another_list_still_goes_out(aws, rt):
    assert click(newsletter_token(aws, rt, list="news"))["statusCode"] == 200
    enqueue(rt, list="offers")
    assert send_all(aws, rt) == [send.ACCEPTED]
    assert token_of(sent()[-1]) != token_of(sent()[0])


def test_list_mail_without_a_list_is_the_general_list(aws, rt):
    token = newsletter_token(aws, rt, list_unsubscribe=True)
    assert click(token)["statusCode"] == 200
    [entry] = call("list_suppressions", query={"receiver": ADA}, groups=OPS).body["suppressions"]
    assert (entry["list"], entry["reason"], entry["actor"]) == ("general", "unsubscribe",
                                                                "receiver")
    enqueue(rt, priority="bulk")  # bulk mail carries the link: the general list too
    enqueue(rt, list_unsubscribe=True)
    enqueue(rt)  # not list mail: no link, and no list stops it
    assert sorted(send_all(aws, rt)) == [send.ACCEPTED, send.SUPPRESSED, send.SUPPRESSED]


def test_the_answer_flags_a_receiver_unsubscribed_from_the_requests_list_only(aws, rt):
    click(newsletter_token(aws, rt, list="news"))
    flagged = enqueue(rt, list="news")["suppressed"]
    assert [(f["receiver"], f["reason"], f["list"]) for f in flagged] == [
        (ADA, "unsubscribe", "news")]
    assert enqueue(rt, list="offers")["suppressed"] == []
    assert enqueue(rt)["suppressed"] == []


def test_a_retrys_dry_run_says_the_receiver_left_the_items_list(aws, rt):
    # The worker cancels a retried list email whose receiver unsubscribed from that list, as
    # it does one whose receiver is suppressed: the preview says so before anyone confirms.
    from tests.support.operator import move

    [news] = enqueue(rt, list="news")["items"]
    [other] = enqueue(rt, list="offers")["items"]
    for item in (news, other):
        move(rt, item["id"], "send", "error")
    suppression.suppress(ADA, "unsubscribe", actor="recipient", text=None, runtime=rt,
                         list_name="news")  # fmt: skip
    answer = call("transition", params={"id": news["id"], "name": "retry"},
                  query={"dry_run": "true"})  # fmt: skip
    assert answer.status == 200, answer.body
    held = answer.body["suppressed"]
    assert (held["receiver"], held["reason"], held["list"]) == (ADA, "unsubscribe", "news")
    answer = call("transition", params={"id": other["id"], "name": "retry"},
                  query={"dry_run": "true"})  # fmt: skip
    assert answer.body["suppressed"] is None  # the offers still go to her


def test_a_bounce_still_stops_every_email(aws, rt):
    suppression.suppress(ADA, "bounce", actor="ses", text=None, runtime=rt)
    enqueue(rt, list="news")
    enqueue(rt, priority="high")
    assert send_all(aws, rt) == [send.SUPPRESSED, send.SUPPRESSED]


def test_a_message_that_names_no_receiver_is_checked_against_its_items_list(aws, rt):
    # A scheduled send's release publishes only the item id: the worker reads the item.
    click(newsletter_token(aws, rt, list="news"))
    [item] = enqueue(rt, list="news")["items"]
    drain(aws, resources.SEND_QUEUE)
    assert send.process(SendMessage(item["id"], 1), rt) == send.SUPPRESSED
    assert rt.store.get_item(item["id"]).state == "cancelled"


@pytest.mark.parametrize("extra", [{"list_unsubscribe": True}, {"priority": "bulk"}])
def test_a_message_published_before_lists_is_list_mail_of_the_general_list(aws, rt, extra):
    # Published before messages named their list: a bulk one, or one whose inline content
    # asked for the headers, is list mail of the default list, as its headers say.
    click(newsletter_token(aws, rt, list_unsubscribe=True))
    enqueue(rt, **extra)
    [body] = [m for q in resources.SEND_QUEUES.values() for m in drain(aws, q)]
    body.pop("list")
    assert send.process_body(json.dumps(body), rt) == send.SUPPRESSED


def test_the_token_is_opaque(aws, rt):
    token = newsletter_token(aws, rt, list="news")
    assert ADA not in token and "news" not in token
    for text in (ADA, "news"):
        for coded in (base64.urlsafe_b64encode(text.encode()).decode().rstrip("="),
                      base64.b64encode(text.encode()).decode().rstrip("=")):  # fmt: skip
            assert coded[:8] not in token


def test_a_link_sent_before_lists_unsubscribes_from_the_general_list(aws, rt):
    # The address in base64 and its HMAC, as emails carried it before: still honoured, and
    # scoped as list mail without a list is now.
    secret = unsubscribe.key(rt.settings)
    old = unsubscribe.legacy_token(ADA, secret, rt.settings.table_name)
    assert click(old)["statusCode"] == 200
    assert rt.store.get_suppression(ADA) is None
    assert rt.store.get_suppression(ADA, "general").reason == "unsubscribe"


@pytest.mark.parametrize("method", ["GET", "POST"])
def test_the_page_shows_the_address_masked(aws, rt, method):
    # Whoever holds the URL (a link scanner, a proxy's log) sees the page: enough of the
    # address for its reader to recognise it, not the address.
    page = click(newsletter_token(aws, rt, list="news"), method)
    assert page["statusCode"] == 200
    assert ADA not in page["body"] and "ada@" not in page["body"]
    assert "a***@example.org" in page["body"]


@pytest.mark.parametrize("method", ["GET", "POST"])
def test_the_page_may_not_be_framed_and_keeps_its_other_headers(aws, rt, method):
    page = click(newsletter_token(aws, rt, list="news"), method)
    headers = page["headers"]
    policy_ = headers["Content-Security-Policy"]
    assert "frame-ancestors 'none'" in policy_ and "default-src 'none'" in policy_
    assert "form-action 'self'" in policy_
    assert headers["Referrer-Policy"] == "no-referrer" and headers["Cache-Control"] == "no-store"
    assert headers["X-Robots-Tag"] == "noindex"


def test_operators_see_history_and_remove_a_list_entry(aws, rt):
    click(newsletter_token(aws, rt, list="news"))
    rt.clock.advance(1)  # history is in time order
    suppression.suppress(ADA, "complaint", actor="ses", text=None, runtime=rt)
    rt.clock.advance(1)
    listed = call("list_suppressions", query={"receiver": ADA}, groups=OPS).body
    assert sorted((s["list"] or "", s["reason"]) for s in listed["suppressions"]) == [
        ("", "complaint"), ("news", "unsubscribe")]
    everything = call("list_suppressions", groups=OPS).body["suppressions"]
    assert len(everything) == 2

    removed = call("remove_suppression", params={"receiver": ADA}, query={"list": "news"},
                   groups=OPS)  # fmt: skip
    assert removed.status == 200 and removed.body["suppression"]["list"] == "news"
    assert rt.store.get_suppression(ADA, "news") is None
    assert rt.store.get_suppression(ADA).reason == "complaint"  # the other entry stays
    again = call("remove_suppression", params={"receiver": ADA}, query={"list": "news"},
                 groups=OPS)  # fmt: skip
    assert again.status == 404

    history = call("suppression_history", params={"receiver": ADA}, groups=OPS).body
    assert history["suppression"]["reason"] == "complaint" and history["lists"] == []
    assert [(e["action"], e["list"]) for e in history["history"]] == [
        ("added", "news"), ("added", None), ("removed", "news")]


def test_an_operator_adds_a_list_entry_and_a_bad_list_name_is_a_422(aws, rt):
    added = call("add_suppression", body={"receiver": ADA, "list": "news", "text": "asked"},
                 groups=OPS)  # fmt: skip
    assert added.status == 200 and added.body["suppression"]["list"] == "news"
    assert rt.store.get_suppression(ADA) is None
    for bad in ("News Letter", "", "a" * 65, "-x"):
        answer = call("add_suppression", body={"receiver": ADA, "list": bad}, groups=OPS)
        assert answer.status == 422 and answer.body["error"]["details"]["field"] == "list"
    with pytest.raises(Exception) as refused:
        enqueue(rt, list="Not A List")
    assert getattr(refused.value, "field", None) == "list"


def stored_before_lists(item_id: str) -> None:
    """Make an item (and its content) as the release before lists stored it: no list on
    either; the content only asks for the headers."""
    from vdq.store import ContentRecord, QueueItemRecord
    from vdq.store.contents import decode_content, encode_content
    from vdq.store.models import CONTENT_SK, STATE_SK, content_pk, item_pk

    record = QueueItemRecord.get(item_pk(item_id), STATE_SK, consistent_read=True)
    record.update(actions=[QueueItemRecord.list_name.remove()])
    content = ContentRecord.get(content_pk(record.content_id), CONTENT_SK, consistent_read=True)
    data = decode_content(content.data)
    data.pop("list", None)
    content.update(actions=[ContentRecord.data.set(encode_content(data))])


def old_list_mail(aws, rt) -> str:
    """A receiver unsubscribed from the general list, and an item of that list stored before
    lists, its first message gone: the id of that item."""
    click(newsletter_token(aws, rt, list_unsubscribe=True))
    [item] = enqueue(rt, list_unsubscribe=True)["items"]
    drain(aws, resources.SEND_QUEUE)
    stored_before_lists(item["id"])
    assert rt.store.get_item(item["id"]).list_name is None
    return item["id"]


def test_an_item_stored_before_lists_is_checked_against_the_list_its_link_leaves(aws, rt):
    # Published again after the upgrade (the re-publish sweep, a give-back, an operator's
    # retry): the message names no list and carries no content, yet the email would carry
    # the general list's link; an unsubscribe from that list must stop it.
    from vdq.workflow.lanes import message_for

    item_id = old_list_mail(aws, rt)
    message = message_for(rt.store.get_item(item_id))
    assert message.list_name is None and message.content is None
    assert send.process(message, rt) == send.SUPPRESSED
    assert sent()[1:] == []
    # Back on the queue with its list named: the next delivery cancels it before any claim.
    again = [SendMessage.parse(json.dumps(m)) for m in drain(aws, resources.SEND_QUEUE)]
    assert [m.list_name for m in again] == ["general"]
    assert send.process(again[0], rt) == send.SUPPRESSED
    stopped = rt.store.get_item(item_id)
    assert stopped.state == "cancelled" and '"general"' in stopped.result


def test_a_release_message_of_an_item_stored_before_lists_is_checked_too(aws, rt):
    # A scheduled send's release names neither receiver nor list: the item is read, and it
    # names no list either.
    item_id = old_list_mail(aws, rt)
    assert send.process(SendMessage(item_id, 1), rt) == send.SUPPRESSED
    assert sent()[1:] == []
    again = [SendMessage.parse(json.dumps(m)) for m in drain(aws, resources.SEND_QUEUE)]
    assert send.process(again[0], rt) == send.SUPPRESSED
    assert rt.store.get_item(item_id).state == "cancelled"


# ---- unsubscribes stored by the release before lists ------------------------------------------


def unsubscribed_before_lists(rt, receiver: str = ADA) -> None:
    """The entry the release before lists stored for a one-click unsubscribe: one of all mail
    (no list), reason unsubscribe."""
    from vdq.core import clock
    from vdq.store import SuppressionEventRecord, SuppressionRecord, suppression_history_pk
    from vdq.store.models import suppression_pk, suppression_sk

    at = clock.iso(rt.clock.now())
    SuppressionRecord(suppression_pk(receiver), suppression_sk(receiver), receiver=receiver,
                      channel="email", reason="unsubscribe", since=at, actor="receiver",
                      text="one-click unsubscribe").save()  # fmt: skip
    SuppressionEventRecord(suppression_history_pk(receiver), f"H#{at}#000000", at=at,
                           actor="receiver", action="added", reason="unsubscribe",
                           text="one-click unsubscribe").save()  # fmt: skip
    rt.clock.advance(1)


def test_an_unsubscribe_stored_before_lists_stops_the_general_list_only(aws, rt):
    unsubscribed_before_lists(rt)
    [reset] = enqueue(rt, subject="Reset your password", priority="high")["items"]
    assert send_all(aws, rt) == [send.ACCEPTED]
    assert rt.store.get_item(reset["id"]).state == "sending"  # accepted: its event to come
    assert enqueue(rt, list="news")["suppressed"] == []
    assert send_all(aws, rt) == [send.ACCEPTED]  # another list's mail goes out too

    answer = enqueue(rt, list_unsubscribe=True)  # list mail of the list "general"
    assert [(f["receiver"], f["reason"], f["list"]) for f in answer["suppressed"]] == [
        (ADA, "unsubscribe", "general")]
    assert send_all(aws, rt) == [send.SUPPRESSED]
    stopped = rt.store.get_item(answer["items"][0]["id"])
    assert stopped.state == "cancelled" and '"general"' in stopped.result
    assert enqueue(rt)["suppressed"] == []  # mail of no list is not flagged


def test_an_item_stored_before_lists_is_stopped_by_an_unsubscribe_stored_before_lists(aws, rt):
    from vdq.workflow.lanes import message_for

    unsubscribed_before_lists(rt)
    [item] = enqueue(rt, list_unsubscribe=True)["items"]
    drain(aws, resources.SEND_QUEUE)
    stored_before_lists(item["id"])
    assert send.process(message_for(rt.store.get_item(item["id"])), rt) == send.SUPPRESSED
    assert sent() == []


def test_a_bounce_after_an_unsubscribe_stored_before_lists_stops_everything(aws, rt):
    # The bounce takes the entry of all mail; the unsubscribe it replaces stays, as one from
    # the list "general", when an operator later lifts the bounce.
    unsubscribed_before_lists(rt)
    held, added = suppression.suppress(ADA, "bounce", actor="ses", text="hard", runtime=rt)
    assert added and held.reason == "bounce"
    assert rt.store.get_suppression(ADA).reason == "bounce"
    kept = rt.store.get_suppression(ADA, "general")
    assert (kept.reason, kept.actor) == ("unsubscribe", "receiver")
    enqueue(rt, priority="high")
    assert send_all(aws, rt) == [send.SUPPRESSED]

    rt.clock.advance(1)
    suppression.unsuppress(ADA, actor="ops", text=None, runtime=rt)
    enqueue(rt, priority="high")
    enqueue(rt, list_unsubscribe=True)
    assert sorted(send_all(aws, rt)) == [send.ACCEPTED, send.SUPPRESSED]
    history = [(e.action, e.reason, e.list_name) for e in rt.store.suppression_history(ADA)]
    assert history[:2] == [("added", "unsubscribe", None), ("added", "bounce", None)]


def test_an_operator_entry_after_an_unsubscribe_stored_before_lists_stops_everything(aws, rt):
    unsubscribed_before_lists(rt)
    added = call("add_suppression", body={"receiver": ADA, "text": "asked"}, groups=OPS)
    assert added.status == 200 and added.body["added"] is True
    assert added.body["suppression"]["reason"] == "operator"
    enqueue(rt, priority="high")
    assert send_all(aws, rt) == [send.SUPPRESSED]


def test_a_bounce_keeps_a_newer_unsubscribe_from_the_general_list_as_it_is(aws, rt):
    unsubscribed_before_lists(rt)
    suppression.suppress(ADA, "unsubscribe", actor="receiver", text="again", runtime=rt,
                         list_name="general")  # fmt: skip
    newer = rt.store.get_suppression(ADA, "general")
    rt.clock.advance(1)
    assert suppression.suppress(ADA, "complaint", actor="ses", text=None, runtime=rt)[1]
    assert rt.store.get_suppression(ADA).reason == "complaint"
    kept = rt.store.get_suppression(ADA, "general")
    assert (kept.since, kept.text) == (newer.since, "again")


def test_the_result_of_an_item_stopped_by_an_unsubscribe_says_why_once(aws, rt):
    # The entry's text ("one-click unsubscribe") is what its reason says: the result read
    # "(one-click unsubscribe: one-click unsubscribe)".
    assert click(newsletter_token(aws, rt, list="news"))["statusCode"] == 200
    [news] = enqueue(rt, list="news")["items"]
    assert send_all(aws, rt) == [send.SUPPRESSED]
    result = rt.store.get_item(news["id"]).result
    assert result.count("one-click unsubscribe") == 1, result
    assert "(one-click unsubscribe)" in result
    # An entry whose text adds something keeps it.
    suppression.suppress(ADA, "operator", actor="ops", text="ticket 77", runtime=rt)
    [reset] = enqueue(rt)["items"]
    assert send_all(aws, rt) == [send.SUPPRESSED]
    assert "(an operator: ticket 77)" in rt.store.get_item(reset["id"]).result
