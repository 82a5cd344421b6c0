"""Intake: how a message enters VDQ, from a request body to stored, published queue items.

The request bodies declared once (``fields``, ``messages``) and checked (``validation``,
``encoded_words``, ``segments`` for SMS), scheduled sends (``scheduling``), attachments too
large for a request (``uploads``), producer quotas (``quotas``), the enqueue itself
(``enqueue``: one queue item per receiver, written before it is published), and its two doors:
the REST API (``rest``: POST /emails and /sms) and the Python API (``python_api``). Imports:
core, store, the workflow, the runtime and the REST edge (``vdq.api``); of the other stages only
results' suppression list (a request to a suppressed receiver is refused up front) and its
reputation guard (a held producer's request is told so).
"""

# the modules other parts may import
__all__ = [
    "encoded_words",
    "enqueue",
    "fields",
    "messages",
    "quotas",
    "rest",
    "scheduling",
    "segments",
    "uploads",
    "validation",
]
