"""What the domain needs from the outside world, built once per process and passed in.

Handlers use ``Runtime.default()``; tests build a Runtime with fakes (a FakeClock, a fake
provider) without patching modules. AWS clients are made on first use, so a function pays only
for the clients it touches.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import cached_property
from typing import Any

import boto3
from botocore.config import Config

from vdq import store as store_module
from vdq.clock import SYSTEM_CLOCK, Clock
from vdq.settings import Settings, get_settings

_BOTO_CONFIG = Config(retries={"mode": "standard", "max_attempts": 4}, connect_timeout=3,
                      read_timeout=10)  # fmt: skip


@dataclass
class Runtime:
    settings: Settings = field(default_factory=get_settings)
    clock: Clock = SYSTEM_CLOCK
    overrides: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        store_module.bind(self.settings.table_name)

    def client(self, service: str) -> Any:
        if service not in self.overrides:
            config = _BOTO_CONFIG
            if service == "s3":
                # Presigned download URLs must be SigV4: SigV2 is refused in newer regions.
                config = config.merge(Config(signature_version="s3v4"))
            self.overrides[service] = boto3.client(service, config=config)
        return self.overrides[service]

    @cached_property
    def store(self) -> store_module.Store:
        return self.overrides.get("store") or store_module.Store()

    @cached_property
    def send_queue(self) -> Any:
        from vdq.sendqueue import SendQueue

        return self.overrides.get("send_queue") or SendQueue(
            self.client("sqs"), self.settings.send_queue_url
        )

    @cached_property
    def files(self) -> Any:
        from vdq.files import FileStore

        return self.overrides.get("files") or FileStore(
            self.client("s3"), self.settings.attachments_bucket
        )

    @cached_property
    def state_events(self) -> Any:
        from vdq.stateevents import StateEvents

        return self.overrides.get("state_events") or StateEvents(
            self.client("events"), self.settings.event_bus_name, self.settings.state_events
        )

    @classmethod
    def default(cls) -> Runtime:
        global _DEFAULT
        if _DEFAULT is None:
            _DEFAULT = cls()
        return _DEFAULT

    @classmethod
    def reset_default(cls) -> None:
        global _DEFAULT
        _DEFAULT = None


_DEFAULT: Runtime | None = None
