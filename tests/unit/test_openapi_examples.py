"""The document's examples are usable as they stand on the local stack: each example cursor is
one the server accepts for its list and filters (a made-up one is a 400 by design), and the
example email names no file that does not exist."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from vdq.core.settings import Settings
from vdq.operations import cursor, done_list, examples, search, spec
from vdq.operations.examples import LOCAL_TABLE
from vdq.store.models import SUPPRESSION_SHARDS


def list_key(operation_id: str, params: dict) -> cursor.ListKey:
    """The key the server signs a page of this operation with, for these parameters (as
    vdq.operations.listing, detail, suppressions and search build it)."""
    shards = Settings().index_shards
    if operation_id in ("listQueueItems", "listSentItems"):
        if operation_id == "listSentItems":  # one position: the done postings' (done_list)
            index, shards = done_list.LIST_NAME, 1
        else:
            index = "active"
        filters: tuple = (params.get("method"), params.get("state"))
        if params.get("priority") is not None or params.get("scheduled") is not None:
            scheduled = params.get("scheduled")
            filters += (params.get("priority"), None if scheduled is None else str(scheduled))
        return cursor.ListKey(index, filters, shards)
    if operation_id == "listSuppressions":
        return cursor.ListKey("suppressions", (params.get("channel"),), SUPPRESSION_SHARDS)
    if operation_id == "searchItems":
        # The example names every key; its cursor is the receiver search's, with the window
        # and the filters beside it (a request names one key: vdq.operations.search.parse).
        keys = ("origin_type", "origin_id", "provider_id", "sender", "id")
        one = {k: v for k, v in params.items() if k not in keys}
        return search.parse(one, datetime.now(UTC)).key()
    assert operation_id == "getItemHistory"
    return cursor.ListKey("history", (params["id"],), 1)


WITH_CURSORS = [op.id for op in spec.OPERATIONS if any(p.name == "cursor" for p in op.params)]


@pytest.mark.parametrize("operation_id", WITH_CURSORS)
def test_each_example_cursor_is_one_the_local_stack_accepts(operation_id):
    params = examples.PARAMETERS[operation_id]
    positions = cursor.decode(params["cursor"], list_key(operation_id, params), LOCAL_TABLE)
    assert any(p is not None for p in positions)


def test_the_example_page_of_queue_items_goes_on_with_its_own_filters():
    answer, params = examples.RESPONSES["listQueueItems"], examples.PARAMETERS["listQueueItems"]
    cursor.decode(answer["cursor"], list_key("listQueueItems", params), LOCAL_TABLE)


def test_the_example_email_names_no_upload():
    for attachment in examples.REQUESTS["postEmails"].get("attachments", []):
        assert "upload_id" not in attachment


def test_the_example_cursors_are_signed_for_the_table_the_local_stack_creates():
    from vdq.local import resources

    assert f"{resources.PREFIX}-items" == LOCAL_TABLE
