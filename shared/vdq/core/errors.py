"""Domain errors. Each maps to one HTTP status at the API edge (vdq.api.responses)."""

from __future__ import annotations


class VdqError(Exception):
    """Base of every error VDQ raises on purpose."""

    status = 500
    code = "internal_error"

    def __init__(self, message: str, *, details: dict | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.details = details or {}


class SettingsError(VdqError):
    code = "bad_setting"


class ValidationError(VdqError):
    """Bad input; ``field`` names the offending field in dotted/indexed form (``to[2].email``)."""

    status = 422
    code = "invalid"

    def __init__(self, field: str, message: str) -> None:
        super().__init__(f"{field}: {message}", details={"field": field})
        self.field = field


class BadValue(ValidationError):
    """A value of a known field that is not one it may take (a priority, a send time): 400."""

    status = 400


class TooManySegments(ValidationError):
    """An SMS body over VDQ_SMS_MAX_SEGMENTS: a 400 naming the field, the count and the limit."""

    status = 400
    code = "too_many_segments"

    def __init__(self, field: str, message: str, *, segments: int, limit: int,
                 encoding: str) -> None:  # fmt: skip
        super().__init__(field, message)
        self.details.update(segments=segments, limit=limit, encoding=encoding)


class BadRequest(VdqError):
    status = 400
    code = "bad_request"


class PayloadTooLarge(VdqError):
    status = 413
    code = "too_large"


class Unauthorized(VdqError):
    status = 401
    code = "unauthorized"


class Forbidden(VdqError):
    status = 403
    code = "forbidden"


class NotFound(VdqError):
    status = 404
    code = "not_found"


class Conflict(VdqError):
    status = 409
    code = "conflict"


class InvalidTransition(Conflict):
    """The transition has no source in the item's current state."""

    code = "invalid_transition"

    def __init__(self, item_id: str, transition: str, state: str, *, hint: str = "") -> None:
        message = (f"queue item {item_id}: transition {transition!r} is not possible from "
                   f"state {state!r}")  # fmt: skip
        super().__init__(
            f"{message}; {hint}" if hint else message,
            details={"id": item_id, "transition": transition, "state": state},
        )
        self.item_id = item_id
        self.transition = transition
        self.state = state


class ContentionError(VdqError):
    """Others kept moving the item first; the step gave up after its bounded attempts."""

    status = 503
    code = "contention"

    def __init__(self, item_id: str, attempts: int) -> None:
        super().__init__(
            f"queue item {item_id}: changed by others {attempts} times in a row; try again",
            details={"id": item_id},
        )
        self.item_id = item_id


class PartiallyEnqueued(VdqError):
    """A multi-receiver enqueue stored some items and then failed: those items will be sent."""

    status = 503
    code = "partially_enqueued"
