"""Results: what the providers report about a sent message, and what VDQ does about it.

``checks`` looks at the emails a send function sent, minutes later; ``events`` parses SES
events and Twilio statuses into provider updates (pure); ``matching``
finds each update's queue item (tracking tags, provider-ID mappings, orphans) and ``updates``
applies it (a transition, or an event kept in history). ``tracking`` decides how an email
carries its item's key to SES's events, ``twilio_signature`` authenticates Twilio's callbacks,
and ``suppression`` and ``unsubscribe`` keep the receivers VDQ no longer sends to.
``reputation`` rates each producer's email by its bounces and complaints, ``judging`` decides
the level those rates reach (warn, hold), and ``guard`` holds a producer at hold (parks its
email until a release). Imports:
core, store, providers, the workflow, the runtime and the REST edge; never intake, dispatch,
schedules or operations.
"""

# the modules other parts may import
__all__ = [
    "checks",
    "guard",
    "judging",
    "matching",
    "reputation",
    "suppression",
    "tracking",
    "unsubscribe",
]
