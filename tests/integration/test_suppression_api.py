"""The suppression list through the API: operators (list, add, remove, history), the inbound
SMS webhook (STOP, START, HELP) and one-click unsubscribe, against moto."""

from __future__ import annotations

import email
import json
from dataclasses import replace
from email import policy
from urllib.parse import urlencode

import boto3
import pytest
from functions.webhook import handler as webhook
from moto.core import DEFAULT_ACCOUNT_ID
from moto.ses.models import ses_backends

from tests.support.aws import drain
from tests.support.events import load_event
from tests.support.operator import call
from tests.support.results import (
    SAMPLE_ACCOUNT_SID,
    SAMPLE_AUTH_TOKEN,
    SAMPLE_WEBHOOK_URL,
    LambdaContext,
)
from vdq.api import Caller
from vdq.dispatch import send
from vdq.intake import rest as intake
from vdq.results import suppression, unsubscribe
from vdq.runtime import Runtime

SENDER = "shop@example.com"
INBOUND_URL = SAMPLE_WEBHOOK_URL.replace("status-callback", "inbound")
KEY = "unsubscribe-test-key"
UNSUBSCRIBE_URL = "https://api.example.com/v1/unsubscribe/"


@pytest.fixture
def rt(aws, settings, clock):
    boto3.client("ses").verify_email_identity(EmailAddress=SENDER)
    rt = Runtime(settings=replace(settings, twilio_account_sid=SAMPLE_ACCOUNT_SID,
                                  twilio_auth_token=SAMPLE_AUTH_TOKEN,
                                  twilio_webhook_url=SAMPLE_WEBHOOK_URL, unsubscribe_key=KEY,
                                  unsubscribe_url=UNSUBSCRIBE_URL), clock=clock)  # fmt: skip
    import vdq.runtime as runtime_module

    runtime_module._DEFAULT = rt
    yield rt
    Runtime.reset_default()


OPS = ("vdq-suppressions",)


# ---- operators ----------------------------------------------------------------------------


def test_an_operator_adds_lists_and_removes_a_suppression_with_who_and_when(aws, rt):
    added = call("add_suppression", body={"receiver": "Ada@Example.org", "text": "ticket 77"},
                 groups=OPS)  # fmt: skip
    assert added.status == 200 and added.body["added"] is True
    held = added.body["suppression"]
    assert (held["receiver"], held["channel"], held["reason"], held["text"]) == (
        "ada@example.org", "email", "operator", "ticket 77")
    actor = held["actor"]
    assert actor and actor not in ("ses", "twilio", "receiver")  # the token's subject
    again = call("add_suppression", body={"receiver": "ada@example.org"}, groups=OPS)
    assert again.body["added"] is False
    listed = call("list_suppressions", query={"limit": "20"}, groups=OPS)
    assert [s["receiver"] for s in listed.body["suppressions"]] == ["ada@example.org"]
    rt.clock.advance(5)
    removed = call("remove_suppression", params={"receiver": "ada%40example.org"}, groups=OPS)
    assert removed.status == 200 and removed.body["suppression"]["receiver"] == "ada@example.org"
    assert rt.store.get_suppression("ada@example.org") is None
    history = call("suppression_history", params={"receiver": "ada@example.org"}, groups=OPS)
    assert history.body["suppression"] is None
    assert [(e["action"], e["actor"]) for e in history.body["history"]] == [
        ("added", actor), ("removed", actor)]
    assert history.body["history"][0]["at"] == "2026-01-01T00:00:00.000000Z"


def test_the_list_pages_in_receiver_order_across_partitions(aws, rt):
    receivers = sorted(f"user{n:02d}@example.org" for n in range(23))
    for r in receivers:
        suppression.suppress(r, "operator", actor="op", text=None, runtime=rt)
    seen, cursor = [], None
    while True:
        query = {"limit": "5", **({"cursor": cursor} if cursor else {})}
        page = call("list_suppressions", query=query, groups=OPS).body
        assert len(page["suppressions"]) <= 5
        seen += [s["receiver"] for s in page["suppressions"]]
        cursor = page["cursor"]
        if not cursor:
            break
    assert seen == receivers


def test_the_list_filters_by_channel_and_looks_up_one_receiver(aws, rt):
    suppression.suppress("ada@example.org", "bounce", actor="ses", text=None, runtime=rt)
    suppression.suppress("+15552230001", "sms_opt_out", actor="twilio", text=None, runtime=rt)
    sms = call("list_suppressions", query={"channel": "sms"}, groups=OPS).body
    assert [s["receiver"] for s in sms["suppressions"]] == ["+15552230001"]
    one = call("list_suppressions", query={"receiver": "ADA@example.org"}, groups=OPS).body
    assert [s["reason"] for s in one["suppressions"]] == ["bounce"]


def test_suppressions_need_their_own_permission(aws, rt):
    for name, kwargs in (("list_suppressions", {}),
                         ("add_suppression", {"body": {"receiver": "ada@example.org"}})):
        assert call(name, groups=("vdq-operators",), **kwargs).status == 403
    assert rt.store.get_suppression("ada@example.org") is None


def test_a_bad_receiver_is_a_422_naming_the_field_and_changes_nothing(aws, rt):
    answer = call("add_suppression", body={"receiver": "not an address"}, groups=OPS)
    assert answer.status == 422 and answer.body["error"]["details"]["field"] == "receiver"
    assert call("list_suppressions", groups=OPS).body["suppressions"] == []


def test_a_removals_reason_is_one_line_of_any_text_as_an_additions_is(aws, rt):
    call("add_suppression", body={"receiver": "ada@example.org"}, groups=OPS)
    broken = call("remove_suppression", params={"receiver": "ada%40example.org"},
                  query={"text": "two\nlines"}, groups=OPS)  # fmt: skip
    assert broken.status == 422 and broken.body["error"]["details"]["field"] == "text"
    assert rt.store.get_suppression("ada@example.org") is not None  # nothing changed
    # Text an addition takes (a private-use character, an accent) is a removal's reason too.
    removed = call("remove_suppression", params={"receiver": "ada%40example.org"},
                   query={"text": "\U000f3a26 ticket \u00ec"}, groups=OPS)  # fmt: skip
    assert removed.status == 200, removed.body


def test_removing_a_receiver_not_on_the_list_is_a_404(aws, rt):
    answer = call("remove_suppression", params={"receiver": "%2B15552230001"}, groups=OPS)
    assert answer.status == 404


# ---- inbound SMS --------------------------------------------------------------------------


def inbound(body: str, number: str = "+15552230001", token: str = SAMPLE_AUTH_TOKEN,
            **extra: str):  # fmt: skip
    from twilio.request_validator import RequestValidator

    event = load_event("twilio_status_delivered")
    inbound.n = getattr(inbound, "n", 0) + 1  # each message its own SID, as Twilio's
    form = {"MessageSid": f"SM{inbound.n:032x}", "From": number, "To": "+15005550006",
            "Body": body, "AccountSid": SAMPLE_ACCOUNT_SID, **extra}  # fmt: skip
    event.update(resource="/twilio/inbound", path="/twilio/inbound", body=urlencode(form),
                 queryStringParameters=None, multiValueQueryStringParameters=None)
    headers = dict(event["headers"])
    headers["X-Twilio-Signature"] = RequestValidator(token).compute_signature(INBOUND_URL, form)
    event["headers"] = headers
    return webhook.handler(event, LambdaContext("webhook"))


@pytest.mark.parametrize("word", ["STOP", "stop", " StopAll ", "UNSUBSCRIBE", "CANCEL", "END",
                                  "QUIT"])
def test_stop_and_its_synonyms_suppress_the_number(aws, rt, word):
    answer = inbound(word)
    assert answer["statusCode"] == 200 and "<Response>" in answer["body"]
    record = rt.store.get_suppression("+15552230001")
    assert (record.reason, record.actor) == ("sms_opt_out", "twilio")


def test_start_removes_the_opt_out_and_help_is_only_recorded(aws, rt):
    inbound("HELP")
    assert rt.store.get_suppression("+15552230001") is None
    rt.clock.advance(1)
    inbound("STOP")
    rt.clock.advance(1)
    inbound("start")
    assert rt.store.get_suppression("+15552230001") is None
    actions = [e.action for e in rt.store.suppression_history("+15552230001")]
    assert actions == ["noted", "added", "removed"]


def test_an_inbound_stop_posted_again_after_a_start_suppresses_no_one(aws, rt):
    # Twilio may post the same incoming message again (its webhook's retry): the START the
    # number sent since holds. Another STOP is news.
    number = "+15552230001"
    inbound("STOP", MessageSid="SM" + "1" * 32)
    rt.clock.advance(1)
    inbound("START", MessageSid="SM" + "2" * 32)
    rt.clock.advance(1)
    assert inbound("STOP", MessageSid="SM" + "1" * 32)["statusCode"] == 200  # the same again
    assert rt.store.get_suppression(number) is None
    assert [e.action for e in rt.store.suppression_history(number)] == ["added", "removed"]
    inbound("STOP", MessageSid="SM" + "3" * 32)
    assert rt.store.get_suppression(number).reason == "sms_opt_out"


@pytest.mark.parametrize("suppressed_before", [True, False])
def test_an_inbound_start_posted_again_after_a_stop_lifts_nothing(aws, rt, suppressed_before):
    # The mirror of the STOP's case: the number texted START, then STOP; Twilio posts the
    # START again. The STOP since holds, whether or not the START found an opt-out to lift.
    number = "+15552230001"
    if suppressed_before:
        inbound("STOP", MessageSid="SM" + "1" * 32)
        rt.clock.advance(1)
    inbound("START", MessageSid="SM" + "2" * 32)
    rt.clock.advance(1)
    inbound("STOP", MessageSid="SM" + "3" * 32)
    rt.clock.advance(1)
    assert inbound("START", MessageSid="SM" + "2" * 32)["statusCode"] == 200  # the same again
    assert rt.store.get_suppression(number).reason == "sms_opt_out"
    rt.clock.advance(1)
    inbound("START", MessageSid="SM" + "4" * 32)  # a new START is news
    assert rt.store.get_suppression(number) is None


def test_start_does_not_lift_an_operators_suppression(aws, rt):
    suppression.suppress("+15552230001", "operator", actor="op", text=None, runtime=rt)
    inbound("YES")
    assert rt.store.get_suppression("+15552230001").reason == "operator"


def test_an_unsigned_inbound_stop_is_refused_and_changes_nothing(aws, rt):
    assert inbound("STOP", token="forged")["statusCode"] == 403
    assert rt.store.get_suppression("+15552230001") is None


def test_twilios_opt_out_type_wins_over_the_body(aws, rt):
    inbound("Arrêt", OptOutType="STOP")  # Advanced Opt-Out: a keyword of the account's own
    assert rt.store.get_suppression("+15552230001").reason == "sms_opt_out"


def test_other_texts_change_nothing(aws, rt):
    assert inbound("please stop texting me")["statusCode"] == 200
    assert rt.store.get_suppression("+15552230001") is None


def throttled_once(monkeypatch, name: str) -> list[str]:
    """``suppression.<name>`` fails once as DynamoDB does when throttled, then works."""
    from botocore.exceptions import ClientError

    real, calls = getattr(suppression, name), []

    def flaky(*args, **kwargs):
        calls.append(name)
        if len(calls) == 1:
            raise ClientError({"Error": {"Code": "ProvisionedThroughputExceededException",
                                         "Message": "Rate exceeded"}}, "UpdateItem")  # fmt: skip
        return real(*args, **kwargs)

    monkeypatch.setattr(suppression, name, flaky)
    return calls


class Sqs:
    """The results queue's client as the webhook uses it: each send recorded (moto holds a
    delayed message for its real delay), or refused as by an SQS outage (``refuse``)."""

    def __init__(self, refuse: bool = False) -> None:
        self.sent: list[dict] = []
        self.refuse = refuse
        self._client = boto3.client("sqs")

    def send_message(self, **kwargs):
        from botocore.exceptions import ClientError

        if self.refuse:
            raise ClientError({"Error": {"Code": "InternalError", "Message": "boom"}},
                              "SendMessage")  # fmt: skip
        self.sent.append(kwargs)
        return self._client.send_message(**kwargs)

    def __getattr__(self, name):
        return getattr(self._client, name)


def test_an_inbound_stop_the_table_refuses_is_kept_and_applied_from_the_results_queue(
    aws, rt, monkeypatch
):
    """Found by real use: a STOP that met a throttled table was a 502, and Twilio does not post
    an incoming message again: the opt-out was lost until a send to the number failed 21610."""
    from tests.support.results import sqs_event

    throttled_once(monkeypatch, "suppress_once")
    rt.overrides["sqs"] = sqs = Sqs()
    answer = inbound("STOP")
    assert answer["statusCode"] == 200 and "<Response>" in answer["body"]
    assert rt.store.get_suppression("+15552230001") is None  # not yet: it waits on the queue
    [kept] = sqs.sent
    assert kept["QueueUrl"] == rt.settings.results_queue_url and kept["DelaySeconds"] > 0
    event = sqs_event(kept["MessageBody"])
    assert webhook.handler(event, LambdaContext("webhook")) == {"batchItemFailures": []}
    record = rt.store.get_suppression("+15552230001")
    assert (record.reason, record.actor) == ("sms_opt_out", "twilio")
    # Applied once: the same message again (SQS delivers one twice at times) changes nothing.
    webhook.handler(event, LambdaContext("webhook"))
    assert [e.action for e in rt.store.suppression_history("+15552230001")] == ["added"]


def test_an_inbound_stop_neither_the_table_nor_the_queue_takes_is_an_error_twilio_sees(
    aws, rt, monkeypatch
):
    from botocore.exceptions import ClientError

    throttled_once(monkeypatch, "suppress_once")
    rt.overrides["sqs"] = Sqs(refuse=True)
    with pytest.raises(ClientError):
        inbound("STOP")
    assert rt.store.get_suppression("+15552230001") is None


def test_an_inbound_start_the_table_refuses_is_an_error_never_kept(aws, rt, monkeypatch):
    # Applied late from the queue, a START would lift a STOP the number sent after it.
    from botocore.exceptions import ClientError

    suppression.suppress("+15552230001", "sms_opt_out", actor="twilio", text=None, runtime=rt)
    throttled_once(monkeypatch, "unsuppress")
    rt.overrides["sqs"] = sqs = Sqs()
    with pytest.raises(ClientError):
        inbound("START")
    assert sqs.sent == [] and rt.store.get_suppression("+15552230001") is not None


def test_an_inbound_message_on_the_queue_that_is_not_a_form_is_dropped(aws, rt):
    from tests.support.results import sqs_event

    for body in ({"kind": "vdq.inbound_sms"}, {"kind": "vdq.inbound_sms", "form": [1]},
                 {"kind": "vdq.inbound_sms", "form": {"From": 7}}):  # fmt: skip
        assert webhook.handler(sqs_event(body), LambdaContext("webhook")) == \
            {"batchItemFailures": []}  # fmt: skip
    assert rt.store.get_suppression("+15552230001") is None


def test_a_kept_inbound_message_that_is_no_stop_is_dropped_never_applied_late(aws, rt):
    # The webhook keeps only a STOP: a START applied late could lift a STOP the number sent
    # after it. One on the queue (a release that kept it, a redrive of the wrong queue) is
    # dropped, and the opt-out stays.
    from tests.support.results import sqs_event

    suppression.suppress("+15552230001", "sms_opt_out", actor="twilio", text=None, runtime=rt)
    form = {"MessageSid": "SM" + "7" * 32, "From": "+15552230001", "To": "+15005550006"}
    for words in ({"Body": "START"}, {"Body": "STOP", "OptOutType": "START"}, {"Body": "HELP"}):
        body = {"kind": "vdq.inbound_sms", "form": {**form, **words}}
        assert webhook.handler(sqs_event(body), LambdaContext("webhook")) == \
            {"batchItemFailures": []}  # fmt: skip
    assert rt.store.get_suppression("+15552230001") is not None
    assert [e.action for e in rt.store.suppression_history("+15552230001")] == ["added"]


# ---- one-click unsubscribe ----------------------------------------------------------------


def unsubscribe_event(method: str, token: str):
    event = load_event("twilio_status_delivered")
    event.update(resource="/unsubscribe/{token}", path=f"/unsubscribe/{token}",
                 httpMethod=method, pathParameters={"token": token},
                 body="List-Unsubscribe=One-Click" if method == "POST" else None,
                 queryStringParameters=None, multiValueQueryStringParameters=None)
    return event


def enqueue_bulk(rt, **extra):
    who = Caller("producer", ("vdq-senders",), frozenset({"vdq.add_queueitem"}))
    body = {"sender": {"email": SENDER}, "to": [{"email": "Ada@Example.org"}],
            "subject": "News", "text": "Hello", **extra}  # fmt: skip
    return intake.submit("email", body, who, rt)["items"]


def sent_raw():
    return [email.message_from_string(m.raw_data, policy=policy.default)
            for m in ses_backends[DEFAULT_ACCOUNT_ID]["us-east-1"].sent_messages]


def test_a_bulk_email_carries_one_click_headers_and_their_link_unsubscribes(aws, rt):
    enqueue_bulk(rt, list_unsubscribe=True)
    [message] = drain(aws)
    assert send.process_body(json.dumps(message), rt) == send.ACCEPTED
    [sent] = sent_raw()
    assert sent["List-Unsubscribe-Post"] == "List-Unsubscribe=One-Click"
    link = sent["List-Unsubscribe"]
    assert link.startswith(f"<{UNSUBSCRIBE_URL}") and link.endswith(">")
    token = link[1:-1].rsplit("/", 1)[1]

    page = webhook.handler(unsubscribe_event("GET", token), LambdaContext("webhook"))
    assert page["statusCode"] == 200 and 'method="post"' in page["body"]
    assert rt.store.get_suppression("ada@example.org") is None  # a GET (a scanner) changes nothing

    done = webhook.handler(unsubscribe_event("POST", token), LambdaContext("webhook"))
    assert done["statusCode"] == 200 and "Unsubscribed" in done["body"]
    # The list is the deployment's, whoever sends its mail: not "from this sender" (found in use:
    # another producer's email of the list, from another address, was stopped too).
    assert "of the list \u201cgeneral\u201d from any of its senders" in done["body"], done["body"]
    # From the list the email belonged to (none named: "general"), not from every email.
    assert rt.store.get_suppression("ada@example.org") is None
    record = rt.store.get_suppression("ada@example.org", "general")
    assert (record.reason, record.actor) == ("unsubscribe", "receiver")
    again = webhook.handler(unsubscribe_event("POST", token), LambdaContext("webhook"))
    assert again["statusCode"] == 200  # a replay: still suppressed once
    assert len(rt.store.suppression_history("ada@example.org")) == 1


def test_the_python_api_marks_an_email_for_one_click_unsubscribe(aws, rt):
    import vdq

    vdq.add_email(SENDER, ["ada@example.org"], "News", "Hello", list_unsubscribe=True,
                  runtime=rt)  # fmt: skip
    [message] = drain(aws)
    send.process_body(json.dumps(message), rt)
    [sent] = sent_raw()
    assert sent["List-Unsubscribe"].startswith(f"<{UNSUBSCRIBE_URL}")


def test_an_email_not_marked_bulk_carries_no_unsubscribe_headers(aws, rt):
    enqueue_bulk(rt)
    [message] = drain(aws)
    send.process_body(json.dumps(message), rt)
    [sent] = sent_raw()
    assert sent["List-Unsubscribe"] is None and sent["List-Unsubscribe-Post"] is None


def test_list_unsubscribe_must_be_a_boolean(aws, rt):
    from vdq.core.errors import ValidationError

    with pytest.raises(ValidationError) as err:
        enqueue_bulk(rt, list_unsubscribe="yes")
    assert err.value.field == "list_unsubscribe"
    assert drain(aws) == []


def test_a_forged_token_is_a_404_and_suppresses_nothing(aws, rt):
    forged = unsubscribe.make_token("ada@example.org", "general", b"another key",
                                    rt.settings.table_name)  # fmt: skip
    answer = webhook.handler(unsubscribe_event("POST", forged), LambdaContext("webhook"))
    assert answer["statusCode"] == 404
    assert rt.store.get_suppression("ada@example.org") is None
    assert rt.store.get_suppression("ada@example.org", "general") is None


def test_the_page_escapes_the_address(aws, rt):
    secret = unsubscribe.key(rt.settings)
    token = unsubscribe.make_token("x@<b>example</b>.org", "general", secret,
                                   rt.settings.table_name)  # fmt: skip
    page = webhook.handler(unsubscribe_event("GET", token), LambdaContext("webhook"))
    assert "<b>" not in page["body"] and "x***@&lt;b&gt;example&lt;/b&gt;.org" in page["body"]


def test_a_number_is_looked_up_however_it_is_typed_as_search_finds_it(aws, runtime):
    """Found in review: search took a number typed with spaces or dashes, the suppression
    lookup refused it; and a + a query string decoded as a space is told how to write it."""
    call("add_suppression", body={"receiver": "+14155550100", "text": "t"}, groups=OPS)
    for typed in ("+1 415 555 0100", "+1 (415) 555-0100"):
        found = call("list_suppressions", query={"receiver": typed}, groups=OPS)
        assert found.status == 200 and len(found.body["suppressions"]) == 1, found.body
    decoded = call("list_suppressions", query={"receiver": " 1 415 555 0100"}, groups=OPS)
    assert decoded.status == 422 and "%2B" in decoded.body["error"]["message"]
    bare = call("add_suppression", body={"receiver": "14155550100"}, groups=OPS)
    assert bare.status == 422 and bare.body["error"]["details"]["field"] == "receiver"
    assert "country code" in bare.body["error"]["message"]


def test_a_path_is_not_told_about_query_strings_and_long_input_is_not_echoed(aws, runtime):
    # A path never decodes + as a space: no query-string hint there; and a receiver of any
    # length is answered briefly. Digits of another script are not told to add a +.
    spaced = call("suppression_history", params={"receiver": " 1 415 555 0100"}, groups=OPS)
    assert spaced.status == 422 and "query string" not in spaced.body["error"]["message"]
    long = call("list_suppressions", query={"receiver": " " + "1" * 250}, groups=OPS)
    assert long.status == 422 and len(long.body["error"]["message"]) < 400, long.body
    path = call("suppression_history", params={"receiver": " " + "1" * 5000}, groups=OPS)
    assert path.status == 422 and len(path.body["error"]["message"]) < 400
    arabic = call("add_suppression", body={"receiver": "\u0661\u0664\u0661\u0665\u0665\u0665"},
                  groups=OPS)  # fmt: skip
    assert arabic.status == 422 and "country code" not in arabic.body["error"]["message"]


def test_a_number_stored_before_the_north_american_rule_is_still_found_and_removed(aws, rt):
    # Enqueue and additions took any +1 number before they required the plan's form: an entry
    # of such a number must still be looked up, searched for and removed, not a 422.
    old = "+15551230001"  # its exchange starts with 1: enqueue refuses it now
    suppression.suppress(old, "operator", actor="ops", text=None, runtime=rt)
    found = call("list_suppressions", query={"receiver": old}, groups=OPS)
    assert found.status == 200 and len(found.body["suppressions"]) == 1, found.body
    history = call("suppression_history", params={"receiver": "%2B15551230001"}, groups=OPS)
    assert history.status == 200 and history.body["suppression"] is not None, history.body
    removed = call("remove_suppression", params={"receiver": "%2B15551230001"}, groups=OPS)
    assert removed.status == 200, removed.body
    assert rt.store.get_suppression(old) is None
    added = call("add_suppression", body={"receiver": old}, groups=OPS)
    assert added.status == 422 and "10 digits" in added.body["error"]["message"]


@pytest.mark.parametrize("typed, stored", [
    ("+1 (415) 555-0100", "+14155550100"),
    ("+1 415 555 0100", "+14155550100"),
    ("+44 (0)7700 900123", "+447700900123"),
    (" Ada@Example.org ", "ada@example.org"),
    ("Ada Lovelace <Ada@Example.org>", "ada@example.org"),
    ("ada@b\u00fccher.example", "ada@xn--bcher-kva.example"),
])  # fmt: skip
def test_an_addition_takes_a_receiver_as_typed_as_its_lookup_and_removal_do(aws, rt, typed,
                                                                           stored):  # fmt: skip
    # The console's "Add a receiver" sits beside its lookup, and `vdq suppressions add` beside
    # `remove`: a number copied as printed, or an address with its name or an internationalised
    # domain, is added under the key the lookup, the removal and every send compare.
    added = call("add_suppression", body={"receiver": typed, "text": "asked"}, groups=OPS)
    assert added.status == 200, added.body
    assert added.body["suppression"]["receiver"] == stored and added.body["added"]
    assert rt.store.get_suppression(stored).reason == "operator"
    found = call("list_suppressions", query={"receiver": typed}, groups=OPS)
    assert [s["receiver"] for s in found.body["suppressions"]] == [stored]


def test_an_addition_still_refuses_a_number_off_the_plan_and_text_that_is_no_receiver(aws, rt):
    for bad, words in (("+1 (555) 123-0001", "10 digits"), ("call me", "not an E.164"),
                       ("Ada <ada@>", "not a valid email address")):
        answer = call("add_suppression", body={"receiver": bad}, groups=OPS)
        assert answer.status == 422, (bad, answer.body)
        assert answer.body["error"]["details"]["field"] == "receiver"
        assert words in answer.body["error"]["message"], (bad, answer.body)
    assert call("list_suppressions", groups=OPS).body["suppressions"] == []
