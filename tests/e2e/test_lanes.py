"""Priority lanes on the local stack: each lane has its queue and its own poller, and an item
of each priority is sent through its lane. (How long a high item waits behind a bulk backlog is
a figure, not a test: ``python -m bench --only lanes``.)"""

from __future__ import annotations

import pytest

from tests.e2e.conftest import requires
from vdq.core import resources

pytestmark = [pytest.mark.e2e, requires("enqueue", "send", "webhook", "operator")]


def test_every_lane_has_its_queue_and_sends_its_items(stack):
    queues = stack.status()["queues"]
    assert set(resources.SEND_QUEUES.values()) <= set(queues)
    items = {p: stack.send_emails(f"{p}@example.org", priority=p)[0] for p in ("high", "normal",
                                                                               "bulk")}
    for priority, item in items.items():
        done = stack.wait(item["id"], "succeeded")
        assert done["priority"] == priority

