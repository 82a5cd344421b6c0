"""Each function's role allows only what that function does."""

from __future__ import annotations

from typing import Any

import pytest

pytestmark = pytest.mark.infra

TRANSITION_WRITES = {"dynamodb:UpdateItem", "dynamodb:TransactWriteItems"}


def test_public_webhook_cannot_read_attachments(synth):
    actions = synth.role_actions(synth.stack.functions.webhook)
    assert "s3:GetObject" not in actions
    assert not any(a in ("s3:*", "s3:Get*") for a in actions)


def test_enqueue_writes_new_records_and_touches_only_idempotency_and_item_keys(synth):
    table_arn = {"Fn::GetAtt": [synth.logical_id(synth.stack.data.table), "Arn"]}
    dynamodb = [
        s
        for s in synth.role_statements(synth.stack.functions.enqueue)
        if any(a.startswith("dynamodb:") for a in _actions(s))
    ]
    unconditioned = {a for s in dynamodb if "Condition" not in s for a in _actions(s)}
    assert unconditioned == {"dynamodb:BatchWriteItem"}
    by_prefix = {}
    for statement in dynamodb:
        assert statement["Resource"] == table_arn  # never an index: no listing either
        if "Condition" in statement:
            (prefixes,) = statement["Condition"]["ForAllValues:StringLike"].values()
            assert list(statement["Condition"]) == ["ForAllValues:StringLike"]
            by_prefix[tuple(prefixes)] = set(_actions(statement))
    assert by_prefix == {
        # Powertools idempotency records.
        ("idempotency#*",): {"dynamodb:GetItem", "dynamodb:PutItem", "dynamodb:UpdateItem",
                             "dynamodb:DeleteItem"},
        # A refused publish moves the new item to errored: its Update and its history's Put in
        # one transaction, a GetItem when the item moved; never a delete of an item.
        ("QI#*",): {"dynamodb:GetItem", "dynamodb:PutItem", "dynamodb:UpdateItem"},
        # The content's reference count (confirmed, or counted off for items not stored), in
        # the content's partition or its origin's.
        ("CT#*", "CO#*"): {"dynamodb:GetItem", "dynamodb:UpdateItem"},
        # The receivers' suppressions, read to flag them in the answer (vdq.results.suppression).
        ("SUP*",): {"dynamodb:BatchGetItem"},
        # Producer quotas: the producer's record charged (one conditional Update), read (and
        # an earlier release's records of one a window, once), refunded.
        ("QUOTA#*",): {"dynamodb:BatchGetItem", "dynamodb:GetItem", "dynamodb:UpdateItem"},
        # The reputation guard's held producers, to tell a held producer's request so.
        ("GUARD*",): {"dynamodb:Query"},
        # The index shards' count, read and raised before the first write (vdq.store.shards).
        ("CFG#shards*",): {"dynamodb:GetItem", "dynamodb:UpdateItem"},
    }  # fmt: skip


def test_enqueue_reads_only_presigned_uploads_never_the_stored_files(synth):
    # It stores files, and deletes those of a request that stored no item; it reads (HEAD, the
    # source of a CopyObject) only uploads, under their prefix, never a queued email's files.
    actions = synth.role_actions(synth.stack.functions.enqueue)
    assert {"s3:PutObject", "s3:DeleteObject", "s3:GetObject"} <= actions
    assert not {"s3:GetObjectVersion", "s3:DeleteObjectVersion"} & actions
    reads = [s for s in synth.role_statements(synth.stack.functions.enqueue)
             if "s3:GetObject" in _actions(s)]  # fmt: skip
    bucket = synth.logical_id(synth.stack.data.bucket)
    uploads = {"Fn::Join": ["", [{"Fn::GetAtt": [bucket, "Arn"]}, "/uploads/*"]]}
    assert [s["Resource"] for s in reads] == [uploads]
    assert _actions(reads[0]) == ["s3:GetObject"]


def test_no_function_deletes_records_outside_the_idempotency_and_suppression_keys(synth):
    # Records expire by TTL; only enqueue and the operator's resend delete, their own
    # idempotency records; an operator's removal and an inbound START (the webhook) delete a
    # suppression; a parked item's entry and a watch's guard level are taken off their lists;
    # nothing else. (The due-time buckets of scheduled sends expire by TTL.)
    for name, function in synth.stack.functions.by_name.items():
        for statement in synth.role_statements(function):
            if not {"dynamodb:DeleteItem", "dynamodb:BatchWriteItem"} & set(_actions(statement)):
                continue
            if "dynamodb:DeleteItem" in _actions(statement):
                keys = statement["Condition"]["ForAllValues:StringLike"]["dynamodb:LeadingKeys"]
                if keys == ["SUP*"]:
                    assert name in ("operator", "webhook"), name
                    assert _actions(statement) == ["dynamodb:DeleteItem"]
                    continue
                if keys == ["HELD#*"]:  # a release or cancel takes a parked item off its list
                    # (the operator's), and so does the minute sweep's for a producer no
                    # longer held (the schedule's)
                    assert name in ("operator", "schedule"), name
                    assert _actions(statement) == ["dynamodb:DeleteItem"]
                    continue
                if keys == ["GUARD*"]:  # a guard level kept only for a watch that ended (the
                    # minute sweep's and the stream consumer's judgements: the schedule's)
                    assert name == "schedule", name
                    assert _actions(statement) == ["dynamodb:DeleteItem"]
                    continue
                assert name in ("enqueue", "operator"), name
                assert statement["Condition"] == {
                    "ForAllValues:StringLike": {"dynamodb:LeadingKeys": ["idempotency#*"]}
                }
            else:  # BatchWriteItem creates records: enqueue, and the notes of a bulk resend
                assert name in ("enqueue", "operator"), name


def test_only_the_functions_that_apply_provider_events_hold_condition_check_item(synth):
    # A provider event's mark is checked in its transaction (vdq.results.matching, run by the
    # webhook, the send worker's orphan replay and the schedule's polls and timeouts). The
    # operator checks a content's expiration in a resend's transaction: contents only.
    for name, function in synth.stack.functions.by_name.items():
        holds = "dynamodb:ConditionCheckItem" in synth.role_actions(function)
        assert holds == (name in ("send", "webhook", "schedule", "operator")), name
    [check] = [s for s in synth.role_statements(synth.stack.functions.operator)
               if "dynamodb:ConditionCheckItem" in _actions(s)]  # fmt: skip
    assert _actions(check) == ["dynamodb:ConditionCheckItem"]
    assert check["Condition"] == {"ForAllValues:StringLike": {
        "dynamodb:LeadingKeys": ["CT#*", "CO#*"]}}


def test_the_indexes_are_only_queried_and_only_the_operator_and_schedule_query_the_table(synth):
    table_arn = {"Fn::GetAtt": [synth.logical_id(synth.stack.data.table), "Arn"]}
    index_arn = {"Fn::Join": ["", [table_arn, "/index/*"]]}
    for name, function in synth.stack.functions.by_name.items():
        for statement in synth.role_statements(function):
            resources = _resources(statement)
            if index_arn in resources:
                assert _actions(statement) == ["dynamodb:Query"], name
            if "dynamodb:Query" in _actions(statement) and table_arn in resources:
                # the operator: the history of one item; the schedule: the records of one item
                # that became done, to stamp their expiration (vdq.workflow.retention), and the
                # due-time buckets of scheduled sends (vdq.intake.scheduling), the guard's
                # levels and parked items (vdq.results.guard.resume_releases), nothing else;
                # enqueue and send: the reputation guard's held producers, nothing else
                if name in ("enqueue", "send"):
                    assert statement["Condition"] == {"ForAllValues:StringLike": {
                        "dynamodb:LeadingKeys": ["GUARD*"]}}, name
                    assert _actions(statement) == ["dynamodb:Query"], name
                    continue
                assert name in ("operator", "schedule"), name
                if name == "schedule":
                    (keys,) = statement["Condition"]["ForAllValues:StringLike"].values()
                    if keys == ["SCHED#*"]:  # the buckets, and the cursor it reads and moves
                        assert set(_actions(statement)) <= {"dynamodb:Query", "dynamodb:GetItem",
                                                            "dynamodb:PutItem"}
                    elif keys == ["GUARD*", "HELD#*"]:  # the minute sweep: levels, parked items
                        assert _actions(statement) == ["dynamodb:Query"]
                    else:
                        assert keys == ["QI#*"] and _actions(statement) == ["dynamodb:Query"]


def test_only_sms_paths_and_the_search_by_sid_read_the_twilio_secret(synth):
    for name, function in synth.stack.functions.by_name.items():
        reads = "secretsmanager:GetSecretValue" in synth.role_actions(function)
        assert reads == (name in ("send", "webhook", "schedule", "operator")), name


def test_only_the_send_function_may_send_email(synth):
    for name, function in synth.stack.functions.by_name.items():
        sends = bool({"ses:SendEmail", "ses:SendRawEmail"} & synth.role_actions(function))
        assert sends == (name == "send"), name


def test_send_uses_sesv2_send_email_from_the_configured_identities_only(synth):
    ses = [
        s
        for s in synth.role_statements(synth.stack.functions.send)
        if any(a.startswith("ses:") for a in _actions(s))
    ]
    # Besides sending, only GetAccount (the account's sending rate for pacing), which has no
    # resource to scope it to.
    others = [a for s in ses if "ses:SendEmail" not in _actions(s) for a in _actions(s)
              if a.startswith("ses:")]  # fmt: skip
    assert others == ["ses:GetAccount"]
    statements = [s for s in ses if "ses:SendEmail" in _actions(s)]
    assert [_actions(s) for s in statements] == [["ses:SendEmail"]]  # SES v2: no SendRawEmail
    identities = [
        r["Fn::Join"][1][-1]
        for r in _resources(statements[0])
        if isinstance(r, dict) and str(r["Fn::Join"][1][-1]).startswith(":identity/")
    ]
    assert identities == [":identity/example.com"]  # TEST_CONTEXT's; never identity/*
    config_set = synth.logical_id(synth.stack.email_events.configuration_set)
    assert any({"Ref": config_set} in r["Fn::Join"][1] for r in _resources(statements[0]))


def test_producers_may_only_send_messages_to_the_queues_they_publish_to(synth):
    # Every publisher may publish in each of the three priority lanes, and nowhere else.
    send_queue = [{"Fn::GetAtt": [synth.logical_id(lane.queue), "Arn"]}
                  for lane in synth.stack.messaging.send_lanes.values()]  # fmt: skip
    assert len(send_queue) == 3
    # The schedule's re-publish sweep reads the lanes' backlogs first.
    expected = {"enqueue": ["sqs:SendMessage"], "operator": ["sqs:SendMessage"],
                "schedule": ["sqs:GetQueueAttributes", "sqs:SendMessage"]}  # fmt: skip
    # The schedule also consumes the table's stream: a batch it cannot publish goes, after its
    # retries, to the schedules' dead-letter queue (the mapping's on-failure destination).
    schedule_dlq = {"Fn::GetAtt": [synth.logical_id(synth.stack.schedules.dead_letters), "Arn"]}
    # Its dead-letter sweep receives and deletes the send lanes' dead letters and the results
    # queue's, giving back at once what it leaves (vdq.schedules.dead_letters): only those.
    messaging = synth.stack.messaging
    dead = [{"Fn::GetAtt": [synth.logical_id(q.dead_letters), "Arn"]}
            for q in (*messaging.send_lanes.values(), messaging.results)]  # fmt: skip
    also = {"schedule": [(["sqs:GetQueueAttributes", "sqs:GetQueueUrl", "sqs:SendMessage"],
                          schedule_dlq),
                         (["sqs:ChangeMessageVisibility", "sqs:DeleteMessage",
                           "sqs:ReceiveMessage"], _sorted(dead))]}  # fmt: skip
    for name, actions in expected.items():
        function = synth.stack.functions.by_name[name]
        sqs = [s for s in synth.role_statements(function)
               if any(a.startswith("sqs:") for a in _actions(s))]  # fmt: skip
        found = sorted((sorted(_actions(s)), _sorted(s["Resource"])) for s in sqs)
        assert found == sorted([(actions, _sorted(send_queue)), *also.get(name, [])]), name


def test_the_send_function_hands_back_only_send_messages_and_checks_on_the_results_queue(synth):
    """A send message whose attempt is claimed waits for the lease: the send function changes
    the visibility of the send lanes' messages only; it publishes to the lanes (a given-back
    send) and its batch's check to the results queue, nowhere else."""
    messaging = synth.stack.messaging
    lanes = _sorted([{"Fn::GetAtt": [synth.logical_id(lane.queue), "Arn"]}
                     for lane in messaging.send_lanes.values()])  # fmt: skip
    results = {"Fn::GetAtt": [synth.logical_id(messaging.results.queue), "Arn"]}
    sqs = [s for s in synth.role_statements(synth.stack.functions.send)
           if any(a.startswith("sqs:") for a in _actions(s))]  # fmt: skip
    consume = ["sqs:ChangeMessageVisibility", "sqs:DeleteMessage", "sqs:GetQueueAttributes",
               "sqs:GetQueueUrl", "sqs:ReceiveMessage"]  # its event sources' (CDK's grant)
    # Each queue with the actions it is granted (CDK may merge statements of one resource set).
    found: dict[str, set[str]] = {}
    for statement in sqs:
        resources = statement["Resource"]
        for resource in resources if isinstance(resources, list) else [resources]:
            found.setdefault(str(resource), set()).update(_actions(statement))
    expected = {str(lane): {*consume, "sqs:SendMessage"} for lane in lanes}
    expected[str(results)] = {"sqs:SendMessage"}
    assert found == expected, found


def test_no_function_holds_a_service_wide_wildcard_action(synth):
    for function in synth.stack.functions.by_name.values():
        assert not [a for a in synth.role_actions(function) if a.endswith(":*") or a == "*"]


def _sorted(resource: Any) -> Any:
    return sorted(resource, key=str) if isinstance(resource, list) else resource


def _actions(statement: dict) -> list[str]:
    found = statement["Action"]
    return [found] if isinstance(found, str) else list(found)


def _resources(statement: dict) -> list:
    found = statement["Resource"]
    return found if isinstance(found, list) else [found]


def test_every_function_reads_and_raises_only_the_index_shards_count_under_its_key(synth):
    for name, function in synth.stack.functions.by_name.items():
        granted = [set(_actions(s)) for s in synth.role_statements(function)
                   if s.get("Condition") == {"ForAllValues:StringLike": {
                       "dynamodb:LeadingKeys": ["CFG#shards*"]}}]  # fmt: skip
        assert granted == [{"dynamodb:GetItem", "dynamodb:UpdateItem"}], name
