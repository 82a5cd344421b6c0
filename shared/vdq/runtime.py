"""What the domain needs from the outside world, built once per process and passed in.

Handlers use ``Runtime.default()``; tests build a Runtime with fakes (a FakeClock, a fake
provider) without patching modules. AWS clients are made on first use, so a function pays only
for the clients it touches.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from functools import cached_property
from typing import Any

import boto3
from botocore.config import Config

from vdq import store as store_module
from vdq.core.clock import SYSTEM_CLOCK, Clock
from vdq.core.settings import Settings, get_settings

_BOTO_CONFIG = Config(retries={"mode": "standard", "max_attempts": 4}, connect_timeout=3,
                      read_timeout=10)  # fmt: skip
# Variables that point boto3's S3 client at another endpoint (the local stack's moto server).
_S3_ENDPOINT_VARIABLES = ("AWS_ENDPOINT_URL_S3", "AWS_ENDPOINT_URL")


def s3_config(environ: Mapping[str, str] | None = None) -> Config:
    """The S3 client's config: SigV4 URLs on the bucket's regional endpoint.

    Presigned download URLs must be SigV4 (SigV2 is refused in newer regions) and name the
    region's endpoint (``<bucket>.s3.<region>.amazonaws.com``): on the global endpoint, which
    botocore otherwise uses for them, a new bucket outside us-east-1 answers with a redirect and
    a signature error for up to a day, and opt-in regions never answer. us-east-1 takes its
    regional endpoint too, so every region is alike. With a custom endpoint (the local stack)
    botocore's own addressing stays: a virtual host under ``localhost`` does not resolve.
    """
    environ = os.environ if environ is None else environ
    if any(environ.get(name) for name in _S3_ENDPOINT_VARIABLES):
        return _BOTO_CONFIG.merge(Config(signature_version="s3v4"))
    regional = {"addressing_style": "virtual", "us_east_1_regional_endpoint": "regional"}
    return _BOTO_CONFIG.merge(Config(signature_version="s3v4", s3=regional))


_CLIENTS_LOCK = threading.Lock()


@dataclass
class Runtime:
    settings: Settings = field(default_factory=get_settings)
    clock: Clock = SYSTEM_CLOCK
    overrides: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        store_module.bind(self.settings.table_name)

    def client(self, service: str) -> Any:
        """The service's client, made once. Clients are thread-safe; making one from boto3's
        default session is not (the send function's sending threads may ask at once)."""
        with _CLIENTS_LOCK:
            if service not in self.overrides:
                config = s3_config() if service == "s3" else _BOTO_CONFIG
                self.overrides[service] = boto3.client(service, config=config)
            return self.overrides[service]

    @cached_property
    def store(self) -> store_module.Store:
        return self.overrides.get("store") or store_module.Store(self.clock)

    @cached_property
    def send_queue(self) -> Any:
        from vdq.workflow.lanes import lane_urls
        from vdq.workflow.sendqueue import SendQueue

        return self.overrides.get("send_queue") or SendQueue(
            self.client("sqs"), self.settings.send_queue_url, lane_urls(self.settings)
        )

    @cached_property
    def files(self) -> Any:
        from vdq.store.files import FileStore

        return self.overrides.get("files") or FileStore(
            self.client("s3"), self.settings.attachments_bucket
        )

    @cached_property
    def state_events(self) -> Any:
        from vdq.workflow.stateevents import StateEvents

        return self.overrides.get("state_events") or StateEvents(
            self.client("events"), self.settings.event_bus_name, self.settings.state_events
        )

    @classmethod
    def default(cls) -> Runtime:
        """The process's runtime, made at first use. Threads asking at once (the local stack's
        pollers, a producer's requests) wait for one: its making reads the table."""
        global _DEFAULT
        if _DEFAULT is None:
            with _DEFAULT_LOCK:
                if _DEFAULT is None:
                    runtime = cls()
                    runtime.keep_index_shards()
                    _DEFAULT = runtime
        return _DEFAULT

    def keep_index_shards(self) -> None:
        """Run with the table's count of index shards when ``VDQ_INDEX_SHARDS`` is lower, and
        store this one when it is higher, before anything is written (vdq.store.shards): a
        count never falls, so no entry is left in a shard that readers no longer read."""
        configured = self.settings.index_shards
        kept = self.store.kept_index_shards(configured)
        if kept != configured:
            from vdq.core.observability import logger

            logger.warning("VDQ_INDEX_SHARDS is %d, below the %d shards the table's indexes "
                           "have used: running with %d (the count never falls)", configured,
                           kept, kept)  # fmt: skip
            self.settings = replace(self.settings, index_shards=kept)

    @classmethod
    def reset_default(cls) -> None:
        global _DEFAULT
        _DEFAULT = None


_DEFAULT: Runtime | None = None
_DEFAULT_LOCK = threading.Lock()
