"""Pace records: one per provider rate (the SES account, each Twilio sender), shared by every
send function.

A record holds the fleet's schedule of sends as one time, ``tat`` (the start of the next free
slot, epoch seconds: the generic cell rate algorithm), and the rate the last throttling answer
cut to (``rate``, ``cut_at``). Reserving slots is one conditional UpdateItem that adds their
length to ``tat``; it never reads first, and a failed condition returns the record as it is
(ReturnValuesOnConditionCheckFailure), so a refusal costs no second request.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from botocore.exceptions import ClientError

PACE_SK = "PACE"
# A record nobody paced on for this long expires (a sender number no longer used).
KEEP_SECONDS = 7 * 86_400
_NAMES = {"#tat": "tat", "#rate": "rate", "#cut": "cut_at", "#exp": "expiration"}


SES_KEY = "ses"


def key_of(method: str, sender: str) -> str:
    """The rate an item's send is paced at: SES's account rate for every email, the sender
    number's for an SMS."""
    return SES_KEY if method == "email" else f"twilio#{sender}"


def pace_pk(key: str) -> str:
    return f"PACE#{key}"


@dataclass(frozen=True)
class PaceState:
    """A pace record as last seen: ``tat`` None when nothing was reserved yet, ``rate`` None
    when no throttling answer cut it."""

    tat: float | None = None
    rate: float | None = None
    cut_at: float | None = None


@dataclass(frozen=True)
class Reservation:
    """``start`` of the first reserved slot, or None when the schedule is full past ``latest``
    (``state.tat`` says until when)."""

    start: float | None
    state: PaceState
    requests: int


def _n(value: float) -> dict[str, str]:
    return {"N": f"{value:.6f}"}


def _state(item: dict[str, Any] | None) -> PaceState:
    item = item or {}

    def number(name: str) -> float | None:
        return float(item[name]["N"]) if name in item else None

    return PaceState(number("tat"), number("rate"), number("cut_at"))


class PaceRecords:
    """Reservations and rate cuts on the pace records (a boto3 DynamoDB client's calls)."""

    def __init__(self, client: Any, table_name: str) -> None:
        self._client = client
        self._table = table_name

    def _update(self, key: str, expression: str, condition: str,
                values: dict[str, Any]) -> tuple[bool, PaceState]:  # fmt: skip
        """One conditional UpdateItem: (applied, the record after it or as it was)."""
        try:
            answer = self._client.update_item(
                TableName=self._table,
                Key={"pk": {"S": pace_pk(key)}, "sk": {"S": PACE_SK}},
                UpdateExpression=expression,
                ConditionExpression=condition,
                ExpressionAttributeNames={k: v for k, v in _NAMES.items()
                                          if k in expression or k in condition},
                ExpressionAttributeValues=values,
                ReturnValues="ALL_NEW",
                ReturnValuesOnConditionCheckFailure="ALL_OLD",
            )  # fmt: skip
        except ClientError as exc:
            if exc.response.get("Error", {}).get("Code") != "ConditionalCheckFailedException":
                raise
            return False, _state(exc.response.get("Item"))
        return True, _state(answer.get("Attributes"))

    def reserve(self, key: str, seconds: float, now: float, latest: float, *,
                busy: bool) -> Reservation:  # fmt: skip
        """Reserve ``seconds`` of the schedule, starting no later than ``latest``.

        Busy (the schedule runs ahead of ``now``): the slots follow the last reserved ones.
        Idle: they start now. ``busy`` is the caller's guess of which; a wrong guess costs one
        more request, never a wrong answer.
        """
        expiration = {"N": str(int(now + KEEP_SECONDS))}
        requests = 0
        for _ in range(3):
            requests += 1
            if busy:
                done, state = self._update(
                    key, "SET #tat = #tat + :len, #exp = :exp", "#tat BETWEEN :now AND :latest",
                    {":len": _n(seconds), ":now": _n(now), ":latest": _n(latest),
                     ":exp": expiration})  # fmt: skip
                if done:
                    return Reservation((state.tat or 0) - seconds, state, requests)
            else:
                done, state = self._update(
                    key, "SET #tat = :end, #exp = :exp",
                    "attribute_not_exists(#tat) OR #tat < :now",
                    {":end": _n(now + seconds), ":now": _n(now), ":exp": expiration})  # fmt: skip
                if done:
                    return Reservation(now, state, requests)
            if state.tat is not None and state.tat > latest:
                return Reservation(None, state, requests)
            busy = state.tat is not None and state.tat >= now
        return Reservation(None, state, requests)

    def cut(self, key: str, rate: float, now: float, since: float) -> tuple[bool, PaceState]:
        """Set the shared rate to ``rate`` unless another cut came after ``since`` (one cut per
        burst of throttling answers). (cut, the record)."""
        return self._update(
            key, "SET #rate = :rate, #cut = :now, #exp = :exp",
            "attribute_not_exists(#cut) OR #cut < :since",
            {":rate": _n(rate), ":now": _n(now), ":since": _n(since),
             ":exp": {"N": str(int(now + KEEP_SECONDS))}})  # fmt: skip

    def read(self, key: str) -> PaceState:
        answer = self._client.get_item(
            TableName=self._table,
            ConsistentRead=True,
            Key={"pk": {"S": pace_pk(key)}, "sk": {"S": PACE_SK}},
        )
        return _state(answer.get("Item"))
