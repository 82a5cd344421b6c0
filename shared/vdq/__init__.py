"""VDQ: an outbound email and SMS dispatch queue.

The Python API for producing services is ``vdq.add_email`` and ``vdq.add_sms``. Imports are lazy
so that a Lambda function loads only the modules it uses.
"""

from __future__ import annotations

from typing import Any

__all__ = ["add_email", "add_sms"]


def __getattr__(name: str) -> Any:
    if name in __all__:
        from vdq import python_api

        return getattr(python_api, name)
    raise AttributeError(name)
