"""A stand-in for the Lambda context object the handlers receive."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass
class LambdaContext:
    function_name: str = "vdq-test"
    memory_limit_in_mb: int = 256
    aws_request_id: str = "req-1"
    remaining_ms: int = 60_000  # the send function's timeout (SEND_FUNCTION_TIMEOUT_SECONDS)

    @property
    def invoked_function_arn(self) -> str:
        return f"arn:aws:lambda:us-east-1:123456789012:function:{self.function_name}"

    def get_remaining_time_in_millis(self) -> int:
        return self.remaining_ms
