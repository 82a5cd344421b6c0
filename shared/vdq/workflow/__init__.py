"""The workflow: the queue item's states and transitions, and what applying one does.

``table`` is the one declarative table (8 states, 8 transitions, their sources, ignored sources
and permissions; pure Python). ``transitions`` applies a transition to a stored item with one
conditional write and runs its side effects beside it: the send message of a new attempt in the
item's lane (``lanes``, ``sendqueue``), the retention of a done item (``retention``), the
release of its content's files (``attachments``). ``stateevents`` turns the table's stream into
state-change events. Every stage changes an item's state through here. Imports: core, store,
providers and the runtime; never a stage (intake, dispatch, results, schedules, operations).
"""

# the modules other parts may import
__all__ = [
    "attachments",
    "lanes",
    "retention",
    "sendqueue",
    "stateevents",
    "table",
    "transitions",
    "unpublished",
    "views",
]
