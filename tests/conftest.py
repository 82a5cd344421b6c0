"""Test-wide set-up: dummy AWS credentials and a region before anything makes a client."""

from __future__ import annotations

import os

os.environ.update(
    AWS_DEFAULT_REGION="us-east-1",
    AWS_REGION="us-east-1",
    AWS_ACCESS_KEY_ID="testing",
    AWS_SECRET_ACCESS_KEY="testing",
    AWS_SECURITY_TOKEN="testing",
    AWS_SESSION_TOKEN="testing",
    POWERTOOLS_TRACE_DISABLED="true",
    POWERTOOLS_METRICS_NAMESPACE="VDQ",
    POWERTOOLS_DEV="false",
    JSII_SILENCE_WARNING_END_OF_LIFE_NODE_VERSION="20",
)
for _name in ("AWS_PROFILE", "AWS_ENDPOINT_URL"):
    os.environ.pop(_name, None)

pytest_plugins = ["tests.support.aws", "tests.support.calls"]


def pytest_runtest_teardown(item, nextitem):
    """moto must still take back a cancelled transaction after every test: a test that left
    its table copy switched off (vdq.local.motolean) made unrelated tests fail later in CI."""
    import sys

    if "moto.dynamodb.models.table" not in sys.modules:
        return
    from vdq.local import motolean

    assert motolean.table_copies_on(), f"{item.nodeid} left moto's table copy switched off"
