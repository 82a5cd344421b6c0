"""The IAM evaluator and the call model of the calls-versus-grants check (tests/support)."""

from __future__ import annotations

import pytest

from tests.support import grants
from tests.support.calls import function_of_stack, shape
from tests.support.iam import Request, Unsupported, evaluate

TABLE = "arn:aws:dynamodb:us-east-1:123456789012:table/t"


def allow(actions, resources, condition=None, effect="Allow"):
    statement = {"Effect": effect, "Action": actions, "Resource": resources}
    if condition:
        statement["Condition"] = condition
    return statement


def allowed(statements, action, resource, **context):
    return evaluate(statements, Request(action, (resource,), context)).allowed


# ---- actions and resources -------------------------------------------------------------------


def test_nothing_is_allowed_without_a_statement_that_matches():
    assert not allowed([], "dynamodb:GetItem", TABLE)
    assert not allowed([allow("dynamodb:PutItem", TABLE)], "dynamodb:GetItem", TABLE)
    assert not allowed([allow("dynamodb:GetItem", TABLE + "2")], "dynamodb:GetItem", TABLE)


def test_actions_match_case_insensitively_with_wildcards():
    assert allowed([allow("DynamoDB:getitem", TABLE)], "dynamodb:GetItem", TABLE)
    assert allowed([allow("dynamodb:Get*", TABLE)], "dynamodb:GetItem", TABLE)
    assert allowed([allow("dynamodb:?etItem", TABLE)], "dynamodb:GetItem", TABLE)
    assert not allowed([allow("dynamodb:Get*", TABLE)], "dynamodb:BatchGetItem", TABLE)


def test_resources_match_case_sensitively_and_wildcards_cross_slashes():
    objects = "arn:aws:s3:::bucket/*"
    assert allowed([allow("s3:GetObject", objects)], "s3:GetObject", "arn:aws:s3:::bucket/a/b")
    assert not allowed([allow("s3:GetObject", objects)], "s3:GetObject", "arn:aws:s3:::Bucket/a")
    assert not allowed([allow("s3:GetObject", objects)], "s3:GetObject", "arn:aws:s3:::bucket")
    secret = "arn:aws:secretsmanager:us-east-1:1:secret:vdq/twilio-??????"
    assert allowed([allow("secretsmanager:GetSecretValue", secret)],
                   "secretsmanager:GetSecretValue", secret.replace("??????", "AbCdEf"))
    assert not allowed([allow("secretsmanager:GetSecretValue", secret)],
                       "secretsmanager:GetSecretValue", secret.replace("??????", "AbCdE"))


def test_an_index_is_a_resource_of_its_own():
    statements = [allow("dynamodb:Query", TABLE)]
    assert not allowed(statements, "dynamodb:Query", TABLE + "/index/active")
    assert allowed([allow("dynamodb:Query", TABLE + "/index/*")], "dynamodb:Query",
                   TABLE + "/index/active")


def test_an_explicit_deny_wins_and_not_action_excludes():
    statements = [allow("dynamodb:*", TABLE), allow("dynamodb:DeleteItem", TABLE, effect="Deny")]
    assert allowed(statements, "dynamodb:GetItem", TABLE)
    assert not allowed(statements, "dynamodb:DeleteItem", TABLE)
    not_action = [{"Effect": "Allow", "NotAction": "dynamodb:DeleteItem", "Resource": "*"}]
    assert allowed(not_action, "dynamodb:GetItem", TABLE)
    assert not allowed(not_action, "dynamodb:DeleteItem", TABLE)


def test_alternative_resources_are_allowed_when_any_is():
    identity = "arn:aws:ses:us-east-1:1:identity/"
    request = Request("ses:SendEmail", (identity + "shop@example.com", identity + "example.com"))
    assert evaluate([allow("ses:SendEmail", identity + "example.com")], request).allowed
    assert not evaluate([allow("ses:SendEmail", identity + "other.com")], request).allowed


# ---- conditions ------------------------------------------------------------------------------

LEADING = {"ForAllValues:StringLike": {"dynamodb:LeadingKeys": ["idempotency#*"]}}


def test_leading_keys_allow_only_keys_of_the_prefix():
    statements = [allow("dynamodb:UpdateItem", TABLE, LEADING)]
    assert allowed(statements, "dynamodb:UpdateItem", TABLE,
                   **{"dynamodb:LeadingKeys": ["idempotency#fn#abc"]})
    assert not allowed(statements, "dynamodb:UpdateItem", TABLE,
                       **{"dynamodb:LeadingKeys": ["QI#01ABC"]})
    # ForAllValues: one key outside the prefix in a batch refuses the whole request.
    assert not allowed(statements, "dynamodb:UpdateItem", TABLE,
                       **{"dynamodb:LeadingKeys": ["idempotency#a", "QI#b"]})


def test_for_all_values_passes_a_request_without_the_key_and_for_any_value_does_not():
    assert allowed([allow("dynamodb:Scan", TABLE, LEADING)], "dynamodb:Scan", TABLE)
    any_value = {"ForAnyValue:StringLike": {"dynamodb:LeadingKeys": ["idempotency#*"]}}
    assert not allowed([allow("dynamodb:Scan", TABLE, any_value)], "dynamodb:Scan", TABLE)


def test_plain_operators_fail_an_absent_key_unless_if_exists_or_negated():
    source = "arn:aws:ses:us-east-1:1:configuration-set/vdq"
    equals = {"ArnLike": {"aws:SourceArn": source}}
    assert not allowed([allow("sns:Publish", "*", equals)], "sns:Publish", "arn:t")
    assert allowed([allow("sns:Publish", "*", equals)], "sns:Publish", "arn:t",
                   **{"aws:SourceArn": source})
    if_exists = {"ArnLikeIfExists": {"aws:SourceArn": source}}
    assert allowed([allow("sns:Publish", "*", if_exists)], "sns:Publish", "arn:t")
    negated = {"StringNotEquals": {"aws:SourceAccount": "999"}}
    assert allowed([allow("sns:Publish", "*", negated)], "sns:Publish", "arn:t")
    assert not allowed([allow("sns:Publish", "*", negated)], "sns:Publish", "arn:t",
                       **{"aws:SourceAccount": "999"})


def test_condition_keys_are_case_insensitive_and_every_block_must_match():
    both = {"StringEquals": {"AWS:SourceAccount": "1"}, "Bool": {"aws:SecureTransport": "true"}}
    assert allowed([allow("s3:GetObject", "*", both)], "s3:GetObject", "arn:o",
                   **{"aws:sourceaccount": "1", "aws:SecureTransport": "true"})
    assert not allowed([allow("s3:GetObject", "*", both)], "s3:GetObject", "arn:o",
                       **{"aws:sourceaccount": "1", "aws:SecureTransport": "false"})


def test_what_is_not_modelled_is_refused_loudly():
    with pytest.raises(Unsupported):
        allowed([allow("s3:GetObject", "arn:aws:s3:::b/${aws:username}/*")], "s3:GetObject",
                "arn:aws:s3:::b/x")
    with pytest.raises(Unsupported):
        allowed([allow("s3:GetObject", "*", {"NumericLessThan": {"s3:max-keys": "10"}})],
                "s3:GetObject", "arn:o", **{"s3:max-keys": "5"})


# ---- calls -> requests -----------------------------------------------------------------------


def test_a_transaction_is_one_request_per_contained_action_with_its_leading_key():
    found = grants.requests_of("dynamodb", "TransactWriteItems", {"TransactItems": [
        {"Put": {"TableName": "t", "Item": {"pk": {"S": "QI#1"}, "sk": {"S": "H#1"}}}},
        {"Update": {"TableName": "t", "Key": {"pk": {"S": "QI#1"}, "sk": {"S": "STATE"}}}},
        {"ConditionCheck": {"TableName": "t", "Key": {"pk": {"S": "C#2"}, "sk": {"S": "X"}}}},
    ]})  # fmt: skip
    assert [(r["action"], r["context"]["dynamodb:LeadingKeys"]) for r in found] == [
        ("dynamodb:PutItem", ["QI#1"]),
        ("dynamodb:UpdateItem", ["QI#1"]),
        ("dynamodb:ConditionCheckItem", ["C#2"]),
    ]


def test_a_query_of_an_index_is_about_the_index_and_its_partition_value():
    from vdq.core import resources

    index = resources.INDEXES[0]
    (found,) = grants.requests_of("dynamodb", "Query", {
        "TableName": "t", "IndexName": index.name,
        "KeyConditionExpression": "#0 = :0 AND #1 < :1",
        "ExpressionAttributeNames": {"#0": index.partition_key, "#1": index.sort_key},
        "ExpressionAttributeValues": {":0": {"S": "A#3"}, ":1": {"S": "2026"}},
    })  # fmt: skip
    assert found["resource"] == {"kind": "table", "table": "t", "index": index.name}
    assert found["context"] == {"dynamodb:LeadingKeys": ["A#3"]}
    arns = grants.resource_arns(found["resource"], "eu-west-1", {"t": "VDQ_TABLE_NAME"})
    assert arns == (f"arn:aws:dynamodb:eu-west-1:123456789012:table/{{VDQ_TABLE_NAME}}"
                    f"/index/{index.name}",)  # fmt: skip


def test_ses_v2_send_is_authorised_on_the_identity_and_the_configuration_set():
    found = grants.requests_of("sesv2", "SendEmail", {
        "FromEmailAddress": "Shop <shop@example.com>", "ConfigurationSetName": "events",
        "Content": {"Raw": {"Data": b"..."}},
    })  # fmt: skip
    assert [r["action"] for r in found] == ["ses:SendEmail", "ses:SendEmail"]
    identity = grants.resource_arns(found[0]["resource"], "us-east-1", {})
    assert identity == ("arn:aws:ses:us-east-1:123456789012:identity/shop@example.com",
                        "arn:aws:ses:us-east-1:123456789012:identity/example.com")  # fmt: skip


def test_queue_urls_and_secret_names_map_to_their_settings():
    url = "https://sqs.us-east-1.amazonaws.com/123456789012/vdq-test-send"
    (send,) = grants.requests_of("sqs", "SendMessageBatch", {"QueueUrl": url, "Entries": []})
    assert send["action"] == "sqs:SendMessage"
    assert grants.resource_arns(send["resource"], "us-east-1", {url: "VDQ_SEND_QUEUE_URL"}) == (
        "arn:aws:sqs:us-east-1:123456789012:{VDQ_SEND_QUEUE_URL}",)
    (secret,) = grants.requests_of("secretsmanager", "GetSecretValue", {"SecretId": "vdq/t"})
    bindings = {"vdq/t": "VDQ_TWILIO_SECRET_NAME"}
    (arn,) = grants.resource_arns(secret["resource"], "us-east-1", bindings)
    assert arn.endswith(":secret:{VDQ_TWILIO_SECRET_NAME}-AbCdEf")


def test_a_copy_reads_its_source_and_writes_its_destination_and_a_presigned_put_writes():
    read, write = grants.requests_of("s3", "CopyObject", {
        "Bucket": "b", "Key": "files/c/a", "CopySource": {"Bucket": "b", "Key": "uploads/h/u"}})
    assert (read["action"], read["resource"]["key"]) == ("s3:GetObject", "uploads/h/u")
    assert (write["action"], write["resource"]["key"]) == ("s3:PutObject", "files/c/a")
    (text,) = grants.requests_of("s3", "CopyObject", {"Bucket": "b", "Key": "k",
                                                     "CopySource": "b/uploads/x"})[:1]
    assert text["resource"]["key"] == "uploads/x"
    # generate_presigned_url("put_object") passes through before-parameter-build as PutObject.
    (put,) = grants.requests_of("s3", "PutObject", {"Bucket": "b", "Key": "uploads/h/u",
                                                    "ContentType": "a/b", "ContentLength": 3})
    assert put["action"] == "s3:PutObject"


def test_an_unknown_call_is_not_modelled_rather_than_allowed():
    (found,) = grants.requests_of("kms", "Decrypt", {})
    assert found["resource"] == {"kind": "unmodelled"}


# ---- the template side -----------------------------------------------------------------------


def test_template_references_resolve_to_setting_names_in_the_test_account():
    template = {
        "Parameters": {"Secret": {"Type": "String"}},
        "Resources": {
            "Tbl": {"Type": "AWS::DynamoDB::Table"},
            "Q": {"Type": "AWS::SQS::Queue"},
            "Role": {"Type": "AWS::IAM::Role", "Properties": {}},
            "Fn": {"Type": "AWS::Lambda::Function", "Properties": {
                "Handler": "functions.send.handler.handler",
                "Role": {"Fn::GetAtt": ["Role", "Arn"]},
                "Environment": {"Variables": {"VDQ_TABLE_NAME": {"Ref": "Tbl"},
                                              "VDQ_SEND_QUEUE_URL": {"Ref": "Q"},
                                              "VDQ_TWILIO_SECRET_NAME": {"Ref": "Secret"}}}}},
            "Policy": {"Type": "AWS::IAM::Policy", "Properties": {
                "Roles": [{"Ref": "Role"}],
                "PolicyDocument": {"Statement": [allow("dynamodb:GetItem", [
                    {"Fn::GetAtt": ["Tbl", "Arn"]},
                    {"Fn::Join": ["", [{"Fn::GetAtt": ["Tbl", "Arn"]}, "/index/*"]]},
                    {"Fn::GetAtt": ["Q", "Arn"]},
                    {"Fn::Join": ["", ["arn:", {"Ref": "AWS::Partition"}, ":secretsmanager:",
                                       {"Ref": "AWS::Region"}, ":", {"Ref": "AWS::AccountId"},
                                       ":secret:", {"Ref": "Secret"}, "-??????"]]},
                ])]}}},
        },
    }  # fmt: skip
    (statement,) = grants.function_policies(template, "us-east-1")["send"]
    assert statement["Resource"] == [
        "arn:aws:dynamodb:us-east-1:123456789012:table/{VDQ_TABLE_NAME}",
        "arn:aws:dynamodb:us-east-1:123456789012:table/{VDQ_TABLE_NAME}/index/*",
        "arn:aws:sqs:us-east-1:123456789012:{VDQ_SEND_QUEUE_URL}",
        "arn:aws:secretsmanager:us-east-1:123456789012:secret:{VDQ_TWILIO_SECRET_NAME}-??????",
    ]
    calls = [
        {"function": "send", "call": "dynamodb.GetItem", "region": "us-east-1", "requests":
         grants.requests_of("dynamodb", "GetItem", {"TableName": "vdq-test",
                                                    "Key": {"pk": {"S": "QI#1"}}})},
        {"function": "send", "call": "dynamodb.DeleteItem", "region": "us-east-1", "requests":
         grants.requests_of("dynamodb", "DeleteItem", {"TableName": "vdq-test",
                                                       "Key": {"pk": {"S": "QI#1"}}})},
    ]  # fmt: skip
    report = grants.check(template, calls, {"vdq-test": "VDQ_TABLE_NAME"})
    assert report.distinct == {"send": 2}
    assert len(report.refused) == 1 and "dynamodb:DeleteItem" in report.refused[0]
    assert "dynamodb:GetItem on arn:aws:sqs:us-east-1:123456789012:{VDQ_SEND_QUEUE_URL}" in (
        report.unused["send"])
    assert not any("table/{VDQ_TABLE_NAME}\"" in u or u.endswith("table/{VDQ_TABLE_NAME}")
                   for u in report.unused["send"])  # the table grant was used


# ---- attribution -----------------------------------------------------------------------------


def test_a_call_belongs_to_the_outermost_handler_or_entry_point_on_the_stack():
    import sys

    assert function_of_stack(sys._getframe()) is None  # a test's own call
    namespace = {"__name__": "vdq.operations.actions", "sys": sys}
    exec("def resend(inner):\n    return inner()", namespace)
    inner = {"__name__": "vdq.intake.enqueue", "sys": sys}
    exec("def add():\n    return sys._getframe()", inner)
    assert function_of_stack(namespace["resend"](inner["add"])) == "operator"
    assert function_of_stack(inner["add"]()) == "enqueue"


def test_calls_of_one_shape_are_recorded_once():
    def call(operation, key):
        requests = grants.requests_of("dynamodb", operation, {
            "TableName": "vdq-test", "Key": {"pk": {"S": key}}})  # fmt: skip
        return {"function": "send", "call": f"dynamodb.{operation}", "region": "us-east-1",
                "requests": requests}  # fmt: skip

    one = call("GetItem", "QI#01KDVDNA00AK16Q4TADB8DHEXH")
    assert shape(one) == shape(call("GetItem", "QI#01KDVDNA00AK16Q4TADB8ZZZZZ"))
    assert shape(one) != shape(call("GetItem", "idempotency#01KDVDNA00AK16Q4"))
    assert shape(one) != shape(call("UpdateItem", "QI#01KDVDNA00AK16Q4TADB8DHEXH"))
    sqs = [{"function": "send", "call": f"sqs.{op}", "region": "us-east-1",
            "requests": grants.requests_of("sqs", op, {"QueueUrl": "https://q/123456789012/a"})}
           for op in ("ReceiveMessage", "GetQueueAttributes")]  # fmt: skip
    assert shape(sqs[0]) != shape(sqs[1])
