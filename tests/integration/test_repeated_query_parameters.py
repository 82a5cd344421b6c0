"""A query parameter given more than once (`?state=a&state=b`) is a 422 naming it, on every
operation that takes query parameters: never the first or the last value, silently. API Gateway
passes every value in `multiValueQueryStringParameters` and only the last in
`queryStringParameters`; the operation table's one reader of query strings decides. What an
operation does not take at all (a query parameter, a body) is refused, never ignored."""

from __future__ import annotations

import pytest

from tests.support.operator import call
from vdq.core import ids
from vdq.operations import spec

ITEM = ids.new_id()
# Each operation that takes query parameters: its sample, path parameters, a parameter given
# twice (two values it would take once each), and the groups that may call it.
CASES = {
    "listQueueItems": ("list_queue_items", None, "state", ["queued", "delayed"]),
    "listSentItems": ("list_sent_items", None, "state", ["succeeded", "cancelled"]),
    "getItemHistory": ("get_item_history", {"id": ITEM}, "limit", ["5", "10"]),
    "runTransition": ("transition", {"id": ITEM, "name": "cancel"}, "dry_run",
                      ["true", "false"]),
    "listSuppressions": ("list_suppressions", None, "channel", ["email", "sms"]),
    "removeSuppression": ("remove_suppression", {"receiver": "ada%40example.org"}, "list",
                          ["news", "offers"]),
    "getAttachment": ("attachment", {"id": ITEM}, "redirect", ["false", "true"]),
    "searchItems": ("search", None, "receiver", ["ada@example.org", "bob@example.org"]),
    "getStats": ("stats", None, "period", ["hours", "days"]),
    "listHeldItems": ("held_items", {"producer": "shop"}, "limit", ["5", "10"]),
}
GROUPS = ("vdq-admins",)


def test_every_operation_of_the_operator_function_with_query_parameters_is_covered():
    taking = {op.id for op in spec.OPERATIONS
              if op.function == "operator" and any(p.where == "query" for p in op.params)}
    assert taking == set(CASES)


@pytest.mark.parametrize("operation", sorted(CASES))
@pytest.mark.parametrize("same", [False, True], ids=["different", "same"])
def test_a_repeated_query_parameter_is_a_422_naming_it(runtime, operation, same):
    sample, params, name, values = CASES[operation]
    twice = [values[0], values[0]] if same else values
    answer = call(sample, params=params, query={name: twice}, groups=GROUPS)
    assert answer.status == 422, (operation, answer.body)
    assert answer.code == "invalid"
    assert answer.body["error"]["details"]["field"] == name
    assert "more than once" in answer.body["error"]["message"]


@pytest.mark.parametrize("operation", sorted(CASES))
def test_each_value_given_once_is_not_refused_for_repetition(runtime, operation):
    sample, params, name, values = CASES[operation]
    for value in values:
        answer = call(sample, params=params, query={name: value}, groups=GROUPS)
        assert answer.status != 422 or answer.body["error"]["details"]["field"] != name, (
            operation, value, answer.body)


# Each operation that changes something and takes no query parameter: its sample and path
# parameters. A parameter it would ignore is refused before it acts: `?dry_run=true` on a
# release would release for real.
ACTING = {
    "releaseHold": ("release_hold", {"producer": "shop"}),
    "cancelHeldItems": ("cancel_held", {"producer": "shop"}),
    "resendSentItem": ("resend", {"id": ITEM}),
    "resendSentItems": ("bulk_resend", None),
    "addSuppression": ("add_suppression", None),
}


def test_every_change_of_the_operator_function_without_query_parameters_is_covered():
    acting = {op.id for op in spec.OPERATIONS if op.function == "operator"
              and op.method != "GET" and not any(p.where == "query" for p in op.params)}
    assert acting == set(ACTING)


@pytest.mark.parametrize("operation", sorted(ACTING))
def test_a_change_refuses_a_query_parameter_it_does_not_take(runtime, operation):
    sample, params = ACTING[operation]
    answer = call(sample, params=params, query={"dry_run": "true"}, groups=GROUPS)
    assert answer.status == 422, (operation, answer.body)
    assert answer.body["error"]["details"]["field"] == "dry_run"
    assert "not a known query parameter" in answer.body["error"]["message"]


# Each read of the operator function that takes no query parameter and a token: its sample and
# path parameters. A parameter it would ignore is refused: `?limit=500` on an item's view would
# answer its first 100 history entries, `?window_hours=1` on the producers their 24 hours, as if
# taken. (The public health check and document answer whatever a probe appends.)
READING = {
    "getQueueItem": ("get_queue_item", {"id": ITEM}),
    "getSentItem": ("get_sent_item", {"id": ITEM}),
    "getProducerUsage": ("producer_usage", {"producer": "shop"}),
    "listProducers": ("producers", None),
    "getSuppressionHistory": ("suppression_history", {"receiver": "ada%40example.org"}),
}


def test_every_read_of_the_operator_function_without_query_parameters_is_covered():
    reading = {op.id for op in spec.OPERATIONS if op.function == "operator"
               and op.method == "GET" and op.permissions
               and not any(p.where == "query" for p in op.params)}  # fmt: skip
    assert reading == set(READING)


@pytest.mark.parametrize("operation", sorted(READING))
def test_a_read_refuses_a_query_parameter_it_does_not_take(runtime, operation):
    sample, params = READING[operation]
    answer = call(sample, params=params, query={"limit": "500"}, groups=GROUPS)
    assert answer.status == 422, (operation, answer.body)
    assert answer.body["error"]["details"]["field"] == "limit"
    assert "not a known query parameter" in answer.body["error"]["message"]


# Each operation of the operator function that takes no body: its sample and path parameters.
BODILESS = {
    "runTransition": ("transition", {"id": ITEM, "name": "cancel"}),
    "resendSentItem": ("resend", {"id": ITEM}),
    "releaseHold": ("release_hold", {"producer": "shop"}),
    "cancelHeldItems": ("cancel_held", {"producer": "shop"}),
    "removeSuppression": ("remove_suppression", {"receiver": "ada%40example.org"}),
}


def test_every_operation_of_the_operator_function_without_a_body_is_covered():
    bodiless = {op.id for op in spec.OPERATIONS
                if op.function == "operator" and op.method != "GET" and op.body is None}
    assert bodiless == set(BODILESS)


@pytest.mark.parametrize("operation", sorted(BODILESS))
def test_an_operation_without_a_body_refuses_one_it_would_ignore(runtime, operation):
    sample, params = BODILESS[operation]
    answer = call(sample, params=params, body={"dry_run": True}, groups=GROUPS)
    assert answer.status == 422, (operation, answer.body)
    assert answer.body["error"]["details"]["field"] == "dry_run"
    assert "not a known field" in answer.body["error"]["message"]
    for other in ("[1]", "not json"):
        answer = call(sample, params=params, body=other, groups=GROUPS)
        assert answer.status == 422 and answer.body["error"]["details"]["field"] == "body"


@pytest.mark.parametrize("operation", sorted(BODILESS))
def test_an_operation_without_a_body_takes_a_body_of_only_white_space(runtime, operation):
    # A newline a shell or a file leaves, or spaces, hold no field that could be ignored: taken
    # as no body is, as " {} " and " null " are, not refused as a body.
    sample, params = BODILESS[operation]
    for blank in (" ", "\n", "\r\n", "\t "):
        answer = call(sample, params=params, body=blank, groups=GROUPS)
        assert answer.status != 422, (operation, blank, answer.body)
