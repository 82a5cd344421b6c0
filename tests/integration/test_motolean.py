"""The local stack's moto transactions (vdq.local.motolean): all or nothing as DynamoDB's, a
stream record only for what committed, and no copy of the table kept per transaction."""

from __future__ import annotations

import boto3
import pytest
from moto import mock_aws

from vdq.local import motolean


@pytest.fixture
def table():
    with mock_aws():
        original = motolean.install()
        try:
            client = boto3.client("dynamodb", region_name="us-east-1")
            client.create_table(
                TableName="t",
                KeySchema=[{"AttributeName": "pk", "KeyType": "HASH"},
                           {"AttributeName": "sk", "KeyType": "RANGE"}],
                AttributeDefinitions=[{"AttributeName": "pk", "AttributeType": "S"},
                                      {"AttributeName": "sk", "AttributeType": "S"}],
                BillingMode="PAY_PER_REQUEST",
                StreamSpecification={"StreamEnabled": True,
                                     "StreamViewType": "NEW_AND_OLD_IMAGES"},
            )  # fmt: skip
            yield client
        finally:
            motolean.uninstall(original)


def put(pk: str, value: str, *, new: bool = False) -> dict:
    action = {"TableName": "t", "Item": {"pk": {"S": pk}, "sk": {"S": "s"}, "v": {"S": value}}}
    if new:
        action["ConditionExpression"] = "attribute_not_exists(pk)"
    return {"Put": action}


def stream_records() -> int:
    from moto.core import DEFAULT_ACCOUNT_ID
    from moto.dynamodb.models import dynamodb_backends

    return len(dynamodb_backends[DEFAULT_ACCOUNT_ID]["us-east-1"].tables["t"].stream_shard.items)


def values(client) -> dict[str, str]:
    items = client.scan(TableName="t", ConsistentRead=True)["Items"]
    return {i["pk"]["S"]: i["v"]["S"] for i in items}


def test_a_cancelled_transaction_changes_nothing_and_leaves_no_stream_record(table):
    table.transact_write_items(TransactItems=[put("a", "1"), put("b", "1")])
    before = stream_records()
    # "c" is new and "a" changes, then "b" fails its condition: all is taken back.
    with pytest.raises(table.exceptions.TransactionCanceledException):
        table.transact_write_items(TransactItems=[put("c", "2"), put("a", "2"),
                                                  put("b", "2", new=True)])  # fmt: skip
    assert values(table) == {"a": "1", "b": "1"}
    assert stream_records() == before


def test_a_committed_transaction_writes_every_item_and_its_stream_records(table):
    before = stream_records()
    table.transact_write_items(TransactItems=[put("a", "1"), put("b", "1", new=True)])
    assert values(table) == {"a": "1", "b": "1"}
    assert stream_records() == before + 2


def test_transactions_keep_no_copy_of_the_table(table):
    from moto.core.model_instances import model_data

    for n in range(50):
        table.transact_write_items(TransactItems=[put(f"k{n}", "1"), put("a", str(n))])
    tracked = sum(len(m.instances_tracked) for m in model_data["dynamodb"].values())
    # Plain moto keeps a copy of every item per transaction: about 50 * 50 / 2 here.
    assert tracked < 50, tracked
    assert len(values(table)) == 51


def test_installing_twice_keeps_one_original():
    from moto.dynamodb.models import DynamoDBBackend

    plain = DynamoDBBackend.transact_write_items
    first = motolean.install()
    try:
        assert motolean.install() is first is plain
    finally:
        motolean.uninstall(first)
    assert DynamoDBBackend.transact_write_items is plain


def test_overlapping_transactions_from_threads_leave_moto_all_or_nothing_once_uninstalled():
    """Two threads' lean transactions, the second starting while the first runs: neither may
    leave the table's copy switched off, or plain moto (once uninstalled) stops taking back
    a cancelled transaction (CI: a stopped local stack's last request overlapped the next's)."""
    import threading

    from moto.dynamodb.models import DynamoDBBackend
    from moto.dynamodb.models.table import Table

    plain = DynamoDBBackend.transact_write_items
    first_inside, first_done = threading.Event(), threading.Event()
    second_inside = threading.Event()

    def slow_original(self, transact_items):  # the first waits for the second to come in
        if threading.current_thread().name == "first":
            first_inside.set()
            second_inside.wait(timeout=1)
        else:
            second_inside.set()
            first_done.wait(timeout=1)

    DynamoDBBackend.transact_write_items = slow_original
    try:
        original = motolean.install()
        try:
            backend = object.__new__(DynamoDBBackend)
            backend.tables = {}

            def first():
                backend.transact_write_items([])
                first_done.set()

            threads = [threading.Thread(target=first, name="first")]
            threads[0].start()
            first_inside.wait(timeout=1)
            threads.append(threading.Thread(target=backend.transact_write_items, args=([],),
                                            name="second"))  # fmt: skip
            threads[1].start()
            for t in threads:
                t.join()
        finally:
            motolean.uninstall(original)
    finally:
        DynamoDBBackend.transact_write_items = plain
        leaked = Table.__dict__.get("__deepcopy__")
        if leaked is not None:  # keep the rest of the session's moto whole
            delattr(Table, "__deepcopy__")
    assert leaked is None
