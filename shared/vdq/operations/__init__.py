"""What operators do through the REST API: list, search, count, read, transition, resend.

Each module is one concern; the operator function's handler only routes to them. Every change
of state goes through ``vdq.workflow.transitions.apply`` and every record through ``vdq.store``.
"""

# the modules other parts may import
__all__ = [
    "actions",
    "bodies",
    "detail",
    "docs",
    "downloads",
    "examples",
    "listing",
    "params",
    "producers",
    "schemas",
    "schemas_counts",
    "schemas_suppressions",
    "search",
    "spec",
    "stats",
    "suppressions",
]
