"""Test-wide set-up: dummy AWS credentials and a region before anything makes a client, and
no name resolved but loopback's: a test that reaches for AWS, Twilio or any other host fails."""

from __future__ import annotations

import os
import socket

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


def _share_botocore_models() -> None:
    """One botocore loader for the whole test process. A loader parses each service's JSON
    model once and keeps it for the clients of its session; moto starts every test with a new
    default session, and each Runtime makes its own, so the same few MB of JSON were parsed
    again for nearly every client: about half the time of an integration test. The models are
    read-only to botocore (one session's clients share them already), so sharing them across
    sessions changes nothing a test can see."""
    import botocore.loaders
    import botocore.session

    loaders: dict[str | None, botocore.loaders.Loader] = {}
    create = botocore.loaders.create_loader

    def shared(search_path_string: str | None = None) -> botocore.loaders.Loader:
        if search_path_string not in loaders:
            loaders[search_path_string] = create(search_path_string)
        return loaders[search_path_string]

    botocore.session.create_loader = shared  # type: ignore[assignment]


_share_botocore_models()

# Tests send traffic only to loopback (moto, the local stack, the sandboxes). Any other name a
# test's process asks for is refused as a failed lookup would be, and noted: the test then
# fails at its teardown, even where the code under test takes the failure for an outage.
_RESOLVE = socket.getaddrinfo
_ASKED: list[str] = []
_LOCAL_NAMES = frozenset({"localhost", "::1", "::", "0.0.0.0", socket.gethostname().lower()})


def _local(host: object) -> bool:
    if host is None:
        return True
    name = (host.decode() if isinstance(host, bytes) else str(host)).strip("[]").lower()
    return name in _LOCAL_NAMES or name.startswith("127.") or name.endswith(".localhost")


def _loopback_only(host, *args, **kwargs):  # type: ignore[no-untyped-def]
    if not _local(host):
        _ASKED.append(str(host))
        raise socket.gaierror(socket.EAI_NONAME, f"a test may reach only loopback, not {host}")
    return _RESOLVE(host, *args, **kwargs)


socket.getaddrinfo = _loopback_only


def pytest_runtest_teardown(item, nextitem):
    """moto must still take back a cancelled transaction after every test: a test that left
    its table copy switched off (vdq.local.motolean) made unrelated tests fail later in CI.
    And no test may have asked for a host beyond loopback."""
    import sys

    if _ASKED:
        asked = sorted(set(_ASKED))
        _ASKED.clear()
        raise AssertionError(f"{item.nodeid} tried to reach {asked}: tests reach only loopback")

    if "moto.dynamodb.models.table" not in sys.modules:
        return
    from vdq.local import motolean

    assert motolean.table_copies_on(), f"{item.nodeid} left moto's table copy switched off"
