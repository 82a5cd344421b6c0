"""Recorded AWS calls versus the IAM policies the synthesized template gives each function.

Three parts:

- ``requests_of``: the IAM authorization requests one API call makes (action, resource,
  condition keys), e.g. a TransactWriteItems is one request per contained action, each with the
  ``dynamodb:LeadingKeys`` of its item; a presigned GetObject (PutObject) is an ``s3:GetObject``
  (``s3:PutObject``); a CopyObject reads its source and writes its destination;
- ``function_policies``: each function's role statements, with ``Ref``/``Fn::GetAtt``/
  ``Fn::Join``/``Fn::Sub`` resolved to ARNs in the test account and region. A resource that a
  function's environment names (``VDQ_TABLE_NAME: {"Ref": table}``) gets the setting as its
  name (``table/{VDQ_TABLE_NAME}``); so do the recorded calls, through the bindings the recorder
  collects from every ``Settings`` built in tests. Both sides meet on the setting's name;
- ``check``: every recorded call evaluated (tests.support.iam), the calls not allowed, and the
  grants that no call used.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from tests.support import iam

ACCOUNT = "123456789012"  # moto's default account: the tests' ARNs
RESOURCE_SETTINGS = (
    "VDQ_TABLE_NAME",
    "VDQ_ATTACHMENTS_BUCKET",
    "VDQ_SEND_QUEUE_URL",
    "VDQ_HIGH_SEND_QUEUE_URL",
    "VDQ_BULK_SEND_QUEUE_URL",
    "VDQ_RESULTS_QUEUE_URL",
    "VDQ_SEND_DEAD_LETTER_QUEUE_URL",
    "VDQ_HIGH_SEND_DEAD_LETTER_QUEUE_URL",
    "VDQ_BULK_SEND_DEAD_LETTER_QUEUE_URL",
    "VDQ_RESULTS_DEAD_LETTER_QUEUE_URL",
    "VDQ_EVENT_BUS_NAME",
    "VDQ_SES_CONFIGURATION_SET",
    "VDQ_TWILIO_SECRET_NAME",
    "VDQ_UNSUBSCRIBE_SECRET_NAME",
)



def token(setting: str) -> str:
    """The name both sides give the resource a setting names: ``{VDQ_TABLE_NAME}``."""
    return "{" + setting + "}"


# ---- calls -> requests -----------------------------------------------------------------------

_DYNAMODB_ITEM = ("GetItem", "PutItem", "UpdateItem", "DeleteItem")
_TRANSACT = {"Put": "PutItem", "Update": "UpdateItem", "Delete": "DeleteItem",
             "ConditionCheck": "ConditionCheckItem", "Get": "GetItem"}  # fmt: skip
_S3_OBJECT = {"PutObject": "s3:PutObject", "GetObject": "s3:GetObject",
              "HeadObject": "s3:GetObject", "DeleteObject": "s3:DeleteObject",
              "CreateMultipartUpload": "s3:PutObject", "UploadPart": "s3:PutObject",
              "CompleteMultipartUpload": "s3:PutObject",
              "AbortMultipartUpload": "s3:AbortMultipartUpload"}  # fmt: skip
_S3_BUCKET = {"ListObjectsV2": "s3:ListBucket", "ListObjects": "s3:ListBucket",
              "HeadBucket": "s3:ListBucket", "ListObjectVersions": "s3:ListBucketVersions"}
_SQS = {"SendMessage": "SendMessage", "SendMessageBatch": "SendMessage",
        "ReceiveMessage": "ReceiveMessage", "DeleteMessage": "DeleteMessage",
        "DeleteMessageBatch": "DeleteMessage", "ChangeMessageVisibility":
        "ChangeMessageVisibility", "ChangeMessageVisibilityBatch": "ChangeMessageVisibility",
        "GetQueueAttributes": "GetQueueAttributes", "GetQueueUrl": "GetQueueUrl"}  # fmt: skip
NO_AUTHORIZATION = {("sts", "GetCallerIdentity")}  # answered for any credentials


def requests_of(service: str, operation: str, params: Mapping[str, Any]) -> list[dict]:
    """The IAM requests of one call: ``{"action", "resource": {...}, "context": {...}}``."""
    if (service, operation) in NO_AUTHORIZATION:
        return []
    if service == "dynamodb":
        return _dynamodb(operation, params)
    if service == "s3":
        return _s3(operation, params)
    if service == "sqs" and operation in _SQS:
        queue = {"kind": "queue", "url": params["QueueUrl"]} if "QueueUrl" in params else {
            "kind": "queue", "name": params["QueueName"]}  # fmt: skip
        return [_request(f"sqs:{_SQS[operation]}", queue)]
    if service == "events" and operation == "PutEvents":
        buses = {e.get("EventBusName") or "default" for e in params.get("Entries", [])}
        return [_request("events:PutEvents", {"kind": "bus", "name": b}) for b in sorted(buses)]
    if service in ("sesv2", "ses") and operation in ("SendEmail", "SendRawEmail"):
        action = "ses:SendEmail" if service == "sesv2" else f"ses:{operation}"
        sender = params.get("FromEmailAddress") or params.get("Source") or ""
        found = [_request(action, {"kind": "identity", "address": _address(sender)})]
        if params.get("ConfigurationSetName"):
            found.append(_request(action, {"kind": "configuration-set",
                                           "name": params["ConfigurationSetName"]}))  # fmt: skip
        return found
    if service == "sesv2" and operation == "GetAccount":  # the account's quotas: no resource
        return [_request("ses:GetAccount", {"kind": "arn", "arn": "*"})]
    if service == "cloudwatch" and operation == "GetMetricData":  # reads take no resource
        return [_request("cloudwatch:GetMetricData", {"kind": "arn", "arn": "*"})]
    if service == "secretsmanager" and operation in ("GetSecretValue", "DescribeSecret"):
        return [_request(f"secretsmanager:{operation}",
                         {"kind": "secret", "id": params["SecretId"]})]  # fmt: skip
    if service == "dynamodbstreams" and operation in ("DescribeStream", "GetShardIterator",
                                                      "GetRecords", "ListStreams"):
        # Lambda's DynamoDB event source mapping reads the stream with the function's role (the
        # local stack's stream poller stands in for it). GetRecords names the stream only
        # through its iterator, whose text (moto's, as AWS's) starts with the stream's ARN.
        stream = params.get("StreamArn") or str(params.get("ShardIterator", "")).split("|")[0]
        return [_request(f"dynamodb:{operation}", {"kind": "stream", "arn": stream})]
    if service == "sns" and operation == "Publish":
        return [_request("sns:Publish", {"kind": "arn", "arn": params["TopicArn"]})]
    return [_request(f"{service}:{operation}", {"kind": "unmodelled"})]


def _request(action: str, resource: dict, context: dict | None = None) -> dict:
    return {"action": action, "resource": resource, "context": context or {}}


def _dynamodb(operation: str, params: Mapping[str, Any]) -> list[dict]:
    def table(name: str, index: str | None = None) -> dict:
        return {"kind": "table", "table": name, "index": index}

    def keys(values: list[str]) -> dict:
        return {"dynamodb:LeadingKeys": sorted(set(values))}

    if operation in _DYNAMODB_ITEM:
        key = params.get("Key") or params.get("Item") or {}
        return [_request(f"dynamodb:{operation}", table(params["TableName"]),
                         keys([_partition(params["TableName"], None, key)]))]  # fmt: skip
    if operation in ("TransactWriteItems", "TransactGetItems"):
        found = []
        for entry in params["TransactItems"]:
            ((kind, body),) = entry.items()
            key = body.get("Key") or body.get("Item") or {}
            found.append(_request(f"dynamodb:{_TRANSACT[kind]}", table(body["TableName"]),
                                  keys([_partition(body["TableName"], None, key)])))  # fmt: skip
        return found
    if operation == "BatchWriteItem":
        found = []
        for name, writes in params["RequestItems"].items():
            written = [(w.get("PutRequest") or {}).get("Item") or w["DeleteRequest"]["Key"]
                       for w in writes]  # fmt: skip
            found.append(_request("dynamodb:BatchWriteItem", table(name),
                                  keys([_partition(name, None, k) for k in written])))  # fmt: skip
        return found
    if operation == "BatchGetItem":
        found = []
        for name, spec in params["RequestItems"].items():
            read = [_partition(name, None, k) for k in spec["Keys"]]
            found.append(_request("dynamodb:BatchGetItem", table(name), keys(read)))
        return found
    if operation == "Query":
        index = params.get("IndexName")
        value = _queried_partition(index, params)
        return [_request("dynamodb:Query", table(params["TableName"], index), keys([value]))]
    if operation == "Scan":
        return [_request("dynamodb:Scan", table(params["TableName"], params.get("IndexName")))]
    return [_request(f"dynamodb:{operation}", table(params.get("TableName", "")))]


def _partition_keys() -> dict[str | None, str]:
    from vdq.core import resources

    definition = resources.table_definition("any")
    out: dict[str | None, str] = {None: _hash(definition["KeySchema"])}
    for index in definition["GlobalSecondaryIndexes"]:
        out[index["IndexName"]] = _hash(index["KeySchema"])
    return out


def _hash(schema: list[dict]) -> str:
    return next(k["AttributeName"] for k in schema if k["KeyType"] == "HASH")


def _partition(table: str, index: str | None, key: Mapping[str, Any]) -> str:
    return _scalar(key[_partition_keys()[index]])


def _scalar(value: Any) -> str:
    if isinstance(value, Mapping) and len(value) == 1:
        ((_, inner),) = value.items()
        return str(inner)
    return str(value)


_EQUALS = re.compile(r"([#\w.]+)\s*=\s*(:\w+)")


def _queried_partition(index: str | None, params: Mapping[str, Any]) -> str:
    names = params.get("ExpressionAttributeNames") or {}
    values = params.get("ExpressionAttributeValues") or {}
    wanted = _partition_keys()[index]
    for name, placeholder in _EQUALS.findall(params.get("KeyConditionExpression", "")):
        if names.get(name, name) == wanted:
            return _scalar(values[placeholder])
    raise ValueError(f"no {wanted} = :value in {params.get('KeyConditionExpression')!r}")


def _s3(operation: str, params: Mapping[str, Any]) -> list[dict]:
    bucket = params.get("Bucket", "")
    if operation in _S3_OBJECT:
        action = _S3_OBJECT[operation]
        if params.get("VersionId") and action in ("s3:GetObject", "s3:DeleteObject"):
            action += "Version"
        return [_request(action, {"kind": "object", "bucket": bucket, "key": params["Key"]})]
    if operation == "CopyObject":  # reads the source, writes the destination
        source = params["CopySource"]
        if isinstance(source, str):
            source_bucket, _, source_key = source.lstrip("/").partition("/")
        else:
            source_bucket, source_key = source["Bucket"], source["Key"]
        return [_request("s3:GetObject", {"kind": "object", "bucket": source_bucket,
                                          "key": source_key}),
                _request("s3:PutObject", {"kind": "object", "bucket": bucket,
                                          "key": params["Key"]})]  # fmt: skip
    if operation == "DeleteObjects":
        return [_request("s3:DeleteObjectVersion" if o.get("VersionId") else "s3:DeleteObject",
                         {"kind": "object", "bucket": bucket, "key": o["Key"]})
                for o in params["Delete"]["Objects"]]  # fmt: skip
    if operation in _S3_BUCKET:
        return [_request(_S3_BUCKET[operation], {"kind": "bucket", "bucket": bucket})]
    return [_request(f"s3:{operation}", {"kind": "unmodelled"})]


def _address(sender: str) -> str:
    found = re.search(r"<([^>]+)>", sender)
    return (found.group(1) if found else sender).strip()


# ---- requests -> ARNs ------------------------------------------------------------------------


def resource_arns(resource: Mapping[str, Any], region: str, bindings: Mapping[str, str]) -> tuple:
    """The ARNs a request is about (alternatives), names mapped to their settings."""

    def named(value: str) -> str:
        return token(bindings[value]) if value in bindings else value

    arn = f"arn:aws:{{}}:{region}:{ACCOUNT}:"
    kind = resource["kind"]
    if kind == "table":
        out = arn.format("dynamodb") + f"table/{named(resource['table'])}"
        return (out + (f"/index/{resource['index']}" if resource["index"] else ""),)
    if kind == "object":
        return (f"arn:aws:s3:::{named(resource['bucket'])}/{resource['key']}",)
    if kind == "bucket":
        return (f"arn:aws:s3:::{named(resource['bucket'])}",)
    if kind == "queue":
        url = resource.get("url")
        name = named(url) if url in bindings else named(url.rstrip("/").rsplit("/", 1)[-1]) \
            if url else named(resource["name"])  # fmt: skip
        return (arn.format("sqs") + name,)
    if kind == "bus":
        name = resource["name"].rsplit("/", 1)[-1] if resource["name"].startswith("arn:") \
            else resource["name"]  # fmt: skip
        return (arn.format("events") + f"event-bus/{named(name)}",)
    if kind == "identity":
        address = resource["address"]
        domain = address.rpartition("@")[2]
        return tuple(arn.format("ses") + f"identity/{i}" for i in dict.fromkeys([address, domain]))
    if kind == "configuration-set":
        return (arn.format("ses") + f"configuration-set/{named(resource['name'])}",)
    if kind == "secret":
        secret = resource["id"]
        if secret.startswith("arn:"):
            secret = secret.split(":secret:", 1)[1][:-7]
        return (arn.format("secretsmanager") + f"secret:{named(secret)}-AbCdEf",)
    if kind == "stream":  # arn:aws:dynamodb:<region>:<account>:table/<name>/stream/<label>
        table_part = resource["arn"].split(":table/", 1)[-1]
        name, _, label = table_part.partition("/stream/")
        return (arn.format("dynamodb") + f"table/{named(name)}/stream/{label}",)
    if kind == "arn":
        return (resource["arn"],)
    raise KeyError(f"no ARN for a {kind} resource")


# ---- template -> policies --------------------------------------------------------------------


@dataclass
class Resolver:
    template: Mapping[str, Any]
    region: str
    names: dict[str, str] = field(default_factory=dict)  # logical id -> name in the ARNs

    def __post_init__(self) -> None:
        for function in _of_type(self.template, "AWS::Lambda::Function").values():
            env = function["Properties"].get("Environment", {}).get("Variables", {})
            for setting in RESOURCE_SETTINGS:
                value = env.get(setting)
                if isinstance(value, dict) and set(value) == {"Ref"}:
                    self.names[value["Ref"]] = token(setting)

    def resolve(self, value: Any) -> Any:
        if isinstance(value, list):
            return [self.resolve(v) for v in value]
        if not isinstance(value, dict):
            return value
        if set(value) == {"Ref"}:
            return self._ref(value["Ref"])
        if set(value) == {"Fn::GetAtt"}:
            logical, attribute = value["Fn::GetAtt"]
            return self._get_att(logical, attribute)
        if set(value) == {"Fn::Join"}:
            separator, parts = value["Fn::Join"]
            return separator.join(str(self.resolve(p)) for p in parts)
        if set(value) == {"Fn::Sub"} and isinstance(value["Fn::Sub"], str):
            return re.sub(r"\$\{([^}]+)\}", lambda m: str(self._sub(m.group(1))), value["Fn::Sub"])
        if len(value) == 1 and next(iter(value)).startswith("Fn::"):
            raise iam.Unsupported(f"template function {next(iter(value))}")
        return {k: self.resolve(v) for k, v in value.items()}

    def _sub(self, name: str) -> Any:
        if "." in name:
            logical, attribute = name.split(".", 1)
            return self._get_att(logical, attribute)
        return self._ref(name)

    def _name(self, logical: str) -> str:
        return self.names.get(logical, logical)

    def _ref(self, logical: str) -> str:
        pseudo = {"AWS::Partition": "aws", "AWS::Region": self.region, "AWS::AccountId": ACCOUNT,
                  "AWS::URLSuffix": "amazonaws.com"}  # fmt: skip
        if logical in pseudo:
            return pseudo[logical]
        if logical in self.template.get("Parameters", {}):
            return self._name(logical)
        kind = self.template["Resources"][logical]["Type"]
        if kind == "AWS::SQS::Queue":
            return f"https://sqs.{self.region}.amazonaws.com/{ACCOUNT}/{self._name(logical)}"
        if kind == "AWS::SNS::Topic":
            return self._get_att(logical, "TopicArn")
        if kind == "AWS::SecretsManager::Secret":  # its ARN: the name and 6 random characters
            secrets = f"arn:aws:secretsmanager:{self.region}:{ACCOUNT}:secret:"
            return f"{secrets}{self._name(logical)}-AbCdEf"
        return self._name(logical)

    def _get_att(self, logical: str, attribute: str) -> str:
        kind = self.template["Resources"][logical]["Type"]
        name, arn = self._name(logical), f":{self.region}:{ACCOUNT}:"
        formats = {
            "AWS::DynamoDB::Table": f"arn:aws:dynamodb{arn}table/{name}",
            "AWS::S3::Bucket": f"arn:aws:s3:::{name}",
            "AWS::SQS::Queue": f"arn:aws:sqs{arn}{name}",
            "AWS::Events::EventBus": f"arn:aws:events{arn}event-bus/{name}",
            "AWS::SNS::Topic": f"arn:aws:sns{arn}{name}",
            "AWS::Lambda::Function": f"arn:aws:lambda{arn}function:{name}",
            "AWS::KMS::Key": f"arn:aws:kms{arn}key/{name}",
            "AWS::IAM::Role": f"arn:aws:iam::{ACCOUNT}:role/{name}",
        }
        if kind == "AWS::DynamoDB::Table" and attribute == "StreamArn":
            # The stream's label is a creation time: any stream of the table.
            return f"{formats[kind]}/stream/*"
        if attribute not in ("Arn", "TopicArn") or kind not in formats:
            raise iam.Unsupported(f"Fn::GetAtt {kind}.{attribute}")
        return formats[kind]


def _of_type(template: Mapping[str, Any], kind: str) -> dict[str, dict]:
    return {k: v for k, v in template["Resources"].items() if v["Type"] == kind}


def function_policies(template: Mapping[str, Any], region: str) -> dict[str, list[dict]]:
    """Each function's (``functions.<name>.handler.handler``) role statements, resolved."""
    resolver = Resolver(template, region)
    policies = _of_type(template, "AWS::IAM::Policy")
    out: dict[str, list[dict]] = {}
    for function in _of_type(template, "AWS::Lambda::Function").values():
        handler = function["Properties"].get("Handler", "")
        match = re.fullmatch(r"functions\.(\w+)\.handler\.handler", handler)
        if not match:
            continue
        role = function["Properties"]["Role"]["Fn::GetAtt"][0]
        statements = []
        for policy in policies.values():
            if {"Ref": role} in policy["Properties"]["Roles"]:
                statements += policy["Properties"]["PolicyDocument"]["Statement"]
        for inline in template["Resources"][role]["Properties"].get("Policies", []):
            statements += inline["PolicyDocument"]["Statement"]
        out[match.group(1)] = [resolver.resolve(s) for s in statements]
    return out


# ---- the check -------------------------------------------------------------------------------


@dataclass
class Report:
    refused: list[str] = field(default_factory=list)  # calls not allowed, one line each
    unused: dict[str, list[str]] = field(default_factory=dict)  # function -> grants never used
    distinct: dict[str, int] = field(default_factory=dict)  # function -> distinct calls


def check(template: Mapping[str, Any], calls: list[dict], bindings: Mapping[str, str]) -> Report:
    report = Report()
    policies: dict[str, dict[str, list[dict]]] = {}
    used: set[tuple[str, int, str, str]] = set()
    for call in calls:
        function, region = call["function"], call["region"] or "us-east-1"
        report.distinct[function] = report.distinct.get(function, 0) + 1
        if region not in policies:
            policies[region] = function_policies(template, region)
        statements = policies[region].get(function)
        if statements is None:
            report.refused.append(f"{function}: no such function in the template ({call['call']})")
            continue
        for request in call["requests"]:
            line = f"{function}: {call['call']} -> {request['action']}"
            if request["resource"]["kind"] == "unmodelled":
                report.refused.append(f"{line}: no IAM model of this call (tests/support/grants)")
                continue
            arns = resource_arns(request["resource"], region, bindings)
            iam_request = iam.Request(request["action"], arns, request["context"])
            decision = iam.evaluate(statements, iam_request)
            if not decision.allowed:
                context = json.dumps(request["context"]) if request["context"] else ""
                report.refused.append(f"{line} on {' | '.join(arns)} {context}".rstrip())
            for index in decision.statements:
                statement = statements[index]
                for action in _listed(statement.get("Action")):
                    if not iam._glob(action, request["action"], fold=True):
                        continue
                    for resource in _listed(statement.get("Resource")):
                        if any(iam._glob(resource, a) for a in arns):
                            used.add((function, index, action, resource))
    for function, statements in policies.get("us-east-1", {}).items():
        for index, statement in enumerate(statements):
            for action in _listed(statement.get("Action")):
                for resource in _listed(statement.get("Resource")):
                    if (function, index, action, resource) not in used:
                        condition = statement.get("Condition")
                        text = f"{action} on {resource}" + (f" if {json.dumps(condition)}"
                                                            if condition else "")  # fmt: skip
                        report.unused.setdefault(function, []).append(text)
    return report


def _listed(value: Any) -> list[str]:
    return [] if value is None else [value] if isinstance(value, str) else list(value)
