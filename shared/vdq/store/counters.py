"""Quota counters: queue items a producer enqueued per fixed window (second, minute, UTC day).

Each producer's windows are counted in one record (``vdq.store.quota_records``: its format).
Charging a request is one conditional UpdateItem of one write unit, whatever the number of
limits: every window has room for all of the request's items and each counts them, or nothing
changes. A transaction of a conditional ADD per window record took two units a window and was
cancelled whenever two requests of one producer met (TransactionConflict).

The write first assumes the record holds the current windows. When it does not (the first
request of a second, or of a producer), DynamoDB's answer carries the record as it was
(ReturnValuesOnConditionCheckFailure) and the write is made again from it: a window that turned
starts at this request's count, conditional on the old window's key being still there, so two
requests that both see a window turn count once each. A window already newer than the caller's
(another function's clock runs ahead) is charged as it is, and the charge names the windows it
counted in, so that its refund takes back from them; reads count such a newer window as the
caller's. The TTL is two days past the start of the caller's UTC day, whatever its limits: no
write can bring it before the end of a window the record holds, and a record that outlived its
windows counts nothing.

The record takes one write unit a request of a producer (three limits took six): about 300
requests a second is 30% of a partition's 1,000 units, whatever the receivers per request.
Past that, VDQ_QUOTA_SHARDS splits the counters over records of their own partitions (shard 0
is ``QUOTA#<producer>``, shard i ``QUOTA<i>#<producer>``), each with a share of every limit:
``Counters`` says how a charge stays exact across them.

Throttling and a write that met a transaction are tried again with jittered back-off as every
store write is (``vdq.store.tx.retried``) and become ``StoreBusy`` (503, nothing changed) when
DynamoDB keeps refusing, as do windows turning under the write more than ``TURNS`` times.
"""

from __future__ import annotations

import random
import uuid
from collections.abc import Callable, Sequence
from dataclasses import replace
from typing import Any

from botocore.exceptions import ClientError

from vdq.store.quota_records import (
    KINDS,
    SK,
    Update,
    Window,
    caller_second,
    count_in,
    expiration_of,
    held_key,
    key_end,
    member_digest,
    members_window,
    order,
    quota_pk,
    share,
    window_key,
)
from vdq.store.refusals import CLOCK_SKEW_SECONDS, Carried, Refusals, Seen
from vdq.store.tx import (
    UPDATE_TRIES,
    StoreBusy,
    batch_get,
    cancellation_codes,
    client_code,
    client_refused,
    retried,
)

TRIES = UPDATE_TRIES  # as a state write's: about 5 s of jittered back-off at most
# Writes made again from the record as it was, before a charge gives up (503): each one found
# a window turned by another request in the moment since the last.
TURNS = 8


class Counters:
    """Charges and reads of the quota counters (a boto3 DynamoDB client's calls).

    ``shards`` (VDQ_QUOTA_SHARDS): the records a producer's counters are split over. Each
    holds a share of every limit (``share``: they sum to the limit); a charge counts in one
    shard picked at random, one UpdateItem as with one record, and when that shard has no
    room it reads every shard and, if the producer as a whole has room, counts the request
    across the shards that have some in one transaction. A request is refused only when the
    shards together are full.

    A refusal's records are remembered for a second (``Refusals``): a charge they cannot hold
    is refused without a request meanwhile, and ``read(recent=True)`` answers from them, so
    that a producer sending past its limit costs a write (and with shards a read of each) a
    container a second, not one a request (but in a minute's or day's last second: there a
    clock ahead may have turned it)."""

    def __init__(self, client: Any, table_name: str, shards: int = 1,
                 pick: Callable[[int], int] = random.randrange,
                 refusals: Refusals | None = None) -> None:  # fmt: skip
        self._client = client
        self._table = table_name
        self.shards = shards
        self._pick = pick
        self._refusals = Refusals() if refusals is None else refusals

    def _key(self, producer: str, shard: int = 0) -> dict[str, Any]:
        return {"pk": {"S": quota_pk(producer, shard)}, "sk": {"S": SK}}

    def charge(self, producer: str, windows: Sequence[Window], count: int,
               member: str | None = None, now: float | None = None,
               ) -> tuple[Window, ...] | None:  # fmt: skip
        """Count ``count`` items in every window if each has room: the windows counted in
        (the caller's, or a newer one the record holds; with shards, each names its shard
        and the part of ``count`` it holds); None (nothing counted) when any would pass its
        limit, or when the records the last refusal read (``Refusals``) cannot hold it.
        ``member``: the client charged through a group's counters, named in the longest
        window in the same write (so the usage view finds the counters a client is charged
        to at no extra request). ``now``: the caller's time (epoch seconds), so that a minute
        or day is not refused from what a refusal read in its last ``CLOCK_SKEW_SECONDS``
        (None: taken as the end of the caller's shortest window, so that only a second is)."""
        if not windows:
            return ()
        since = self._refusals.mark()
        remembered = self._refusals.recall(producer)
        if remembered is not None:
            seen = self._tally(*remembered, windows)
            at = caller_second(windows) + 1 if now is None else now
            if any(seen[w.name][0] + count > w.limit
                   and (w.kind == "s" or seen[w.name][1] - at > CLOCK_SKEW_SECONDS)
                   for w in windows):  # fmt: skip
                return None
        if self.shards == 1:
            return self._charge_shard(producer, windows, count, member, 0, since)
        shard = self._pick(self.shards)
        shared = [replace(w, limit=share(w.limit, shard, self.shards)) for w in windows]
        if all(count <= w.limit for w in shared):
            charged = self._charge_shard(producer, shared, count, member, shard, since)
            if charged is not None:
                return tuple(replace(c, limit=w.limit, shard=shard)
                             for c, w in zip(charged, windows, strict=True))  # fmt: skip
        return self._spread(producer, windows, count, member, shard, since)

    def _charge_shard(self, producer: str, windows: Sequence[Window], count: int,
                      member: str | None, shard: int,
                      since: int) -> tuple[Window, ...] | None:  # fmt: skip
        """``charge`` in one record (``windows``' limits are its shares; ``since``: as
        ``_remember`` says)."""
        digest = member_digest(member) if member is not None else None
        longest = members_window(windows)
        old: dict[str, Any] | None = None  # the record as last seen; None: not yet read
        for _ in range(TURNS):
            update = Update(count, digest, expiration_of(windows))
            carried = self._legacy(producer, windows) if old == {} and shard == 0 else {}
            charged = []
            for w in windows:
                held = None if old is None else old.get(f"{w.kind}w", {}).get("S")
                if old is None or (held and order(held) >= order(w.sk)):
                    # The window the record holds (assumed, the first time): count into it.
                    key = w.sk if old is None or held is None else held
                    if old is not None and count_in(old, w) + count > w.limit:
                        self._remember(producer, Seen([old], carried), since, shard)
                        return None
                    update.count_into(w, key, members=w is longest)
                    charged.append(replace(w, sk=key))
                else:  # the record holds an older window of this limit, or none: it turns
                    start, members = carried.get(w.sk, (0, ()))
                    if start + count > w.limit:
                        self._remember(producer, Seen([old or None], carried), since, shard)
                        return None
                    update.turn(w, held, start, members if w is longest else None)
                    charged.append(w)
            applied, old = self._update(producer, update, shard)
            if applied:
                return tuple(charged)
            if old == {} and shard != 0:  # a new shard: the charge that writes it spreads, so
                return None  # that an earlier release's count is read (``_spread``)
        raise StoreBusy("the quota counters' windows kept turning under the write; nothing "
                        "was counted, try again")  # fmt: skip

    def _spread(self, producer: str, windows: Sequence[Window], count: int, member: str | None,
                prefer: int, since: int) -> tuple[Window, ...] | None:  # fmt: skip
        """Count ``count`` items across the shards that have room, in one transaction
        conditional on each shard's room, when all of them together have room for it in every
        window; None when they have not. Read again and planned again when another charge
        took the room meanwhile. The items go to ``prefer`` (the shard picked: new, or full) as
        far as it has room, then to the shards with the most room.

        Each limit counts in the newest of its windows any shard holds (a shard still holding
        an older one turns to it), as one record counts a caller whose clock is behind in the
        newer window it holds. The first charge that writes shard 0 spreads what the records
        of an earlier release counted (``_legacy``) over the shards' room and writes shard 0
        in every window, so that no later charge needs those records."""
        digest = member_digest(member) if member is not None else None
        longest = members_window(windows).kind
        for _ in range(TURNS):
            rows = self._shard_rows(producer)
            carried = self._legacy(producer, windows) if rows[0] is None else {}
            # shard -> (the window counted in, the earlier release's count put there and the
            # clients it names, items)
            plan: dict[int, list[tuple[Window, int, tuple[str, ...], int]]] = {}
            for caller in windows:
                helds = [None if row is None else held_key(row, caller) for row in rows]
                w = replace(caller, sk=max((h for h in helds if h), key=order, default=caller.sk))
                counts = [count_in(row, w) if row is not None and helds[i] == w.sk else 0
                          for i, row in enumerate(rows)]  # fmt: skip
                # What an earlier release counted is of the caller's window, not a newer one.
                earlier, named = carried.get(caller.sk, (0, ())) if w.sk == caller.sk else (0, ())
                if sum(counts) + earlier + count > w.limit:
                    self._remember(producer, Seen(rows, carried), since)
                    return None
                rooms = [share(w.limit, i, self.shards) - counts[i] for i in range(self.shards)]
                starts = [0] * self.shards
                for i in range(self.shards):  # the earlier release's count, where there is room
                    starts[i] = max(0, min(earlier - sum(starts), rooms[i]))
                    rooms[i] -= starts[i]
                takes = [0] * self.shards
                for i in sorted(range(self.shards), key=lambda i: (i != prefer, -rooms[i])):
                    takes[i] = max(0, min(count - sum(takes), rooms[i]))
                for i in range(self.shards):  # (the rooms, summed, hold both: checked above)
                    if takes[i] or starts[i] or (carried and i == 0):
                        plan.setdefault(i, []).append((w, starts[i], named, takes[i]))
            charged: list[Window] = []
            actions = []
            for shard, parts in sorted(plan.items()):
                row = rows[shard]
                update = Update(count, digest, expiration_of(windows))
                for w, start, named, take in parts:
                    mine = replace(w, limit=share(w.limit, shard, self.shards))
                    held = None if row is None else row.get(f"{w.kind}w", {}).get("S")
                    names = w.kind == longest
                    if held == w.sk:
                        update.count_into(mine, held, members=names, amount=start + take)
                    else:
                        members = named if shard == 0 else ()
                        update.turn(mine, held, start, members if names else None, take)
                    if take:
                        charged.append(replace(w, shard=shard, amount=take))
                actions.append({"Update": {"TableName": self._table,
                                           "Key": self._key(producer, shard),
                                           **update.request()}})  # fmt: skip
            if self._transact(actions):
                return tuple(charged)
        raise StoreBusy("the quota counters' shards kept changing under the charge; nothing "
                        "was counted, try again")  # fmt: skip

    def _transact(self, actions: list[dict[str, Any]]) -> bool:
        """One TransactWriteItems of the shards' updates: False when a condition failed
        (another charge took the room, or a window turned, since the read). Each try has a
        token of its own, which botocore's retries of a lost answer keep: DynamoDB applies
        them once (a try sent again after a cancellation is a new request)."""
        outcome: list[bool] = []

        def write() -> None:
            try:
                self._client.transact_write_items(TransactItems=actions,
                                                  ClientRequestToken=uuid.uuid4().hex)  # fmt: skip
            except ClientError as exc:
                if "ConditionalCheckFailed" not in cancellation_codes(exc):
                    raise
                outcome.append(False)
                return
            outcome.append(True)

        retried(write, client_refused, TRIES)
        return outcome[-1]

    def _remember(self, producer: str, seen: Seen, since: int,
                  shard: int | None = None) -> None:  # fmt: skip
        """What refused a charge of ``producer`` (``Refusals``); ``shard``: the one record a
        charge read before it spreads over the shards (not what the producer as a whole
        counts: not remembered)."""
        if shard is None or self.shards == 1:
            self._refusals.remember(producer, seen, since)

    def _shard_rows(self, producer: str) -> list[dict[str, Any] | None]:
        """Every shard record of ``producer`` (strongly consistent; None: none yet)."""
        keys = [self._key(producer, i) for i in range(self.shards)]
        rows = batch_get(self._client, self._table, {"Keys": keys, "ConsistentRead": True})
        by_pk = {row["pk"]["S"]: row for row in rows}
        return [by_pk.get(key["pk"]["S"]) for key in keys]

    def _legacy(self, producer: str, windows: Sequence[Window]) -> Carried:
        """What the records of a release before this one (one a window, sk the window's key)
        counted in ``windows``, and the clients they name (as digests), by window key (a count
        is of the window it was read for, not of a later one of the same limit): read when a
        producer's record is first written, so the day of an upgrade keeps the day's count.
        Those records expire a minute after their window."""
        rows = batch_get(self._client, self._table, {
            "Keys": [{"pk": {"S": quota_pk(producer)}, "sk": {"S": w.sk}} for w in windows],
            "ConsistentRead": True})  # fmt: skip
        by_sk = {row["sk"]["S"]: row for row in rows}
        out = {}
        for w in windows:
            row = by_sk.get(w.sk)
            if row is not None:
                named = row.get("members", {}).get("SS", [])
                out[w.sk] = (int(row.get("used", {}).get("N", "0")),
                               tuple(member_digest(m) for m in named))  # fmt: skip
        return out

    def _update(self, producer: str, update: Update,
                shard: int = 0) -> tuple[bool, dict[str, Any]]:  # fmt: skip
        """One conditional UpdateItem of the record: (applied, the record as it was when the
        condition failed: {} when there was none)."""
        outcome: list[tuple[bool, dict[str, Any]]] = []

        def write() -> None:
            try:
                self._client.update_item(TableName=self._table, Key=self._key(producer, shard),
                                         ReturnValuesOnConditionCheckFailure="ALL_OLD",
                                         **update.request())  # fmt: skip
            except ClientError as exc:
                if client_code(exc) != "ConditionalCheckFailedException":
                    raise
                outcome.append((False, exc.response.get("Item") or {}))
                return
            outcome.append((True, {}))

        retried(write, client_refused, TRIES)
        return outcome[-1]

    def refund(self, producer: str, windows: Sequence[Window], count: int) -> None:
        """Take back ``count`` items of a charge whose items were not stored, from the
        windows it counted in (``charge``'s answer: with shards, a window's parts, each taken
        back up to what it holds). Each ADD is tried again as a charge is; a window that
        turned meanwhile has nothing to take back."""
        try:
            self._take_back(producer, windows, count)
        finally:  # the room it made is this container's to use: what refusals read is stale
            self._refusals.refunded()

    def _take_back(self, producer: str, windows: Sequence[Window], count: int) -> None:
        left = {w.kind: count for w in windows}
        for w in windows:
            take = min(left[w.kind], count if w.amount is None else w.amount)
            if take <= 0:
                continue
            left[w.kind] -= take

            def write(w: Window = w, take: int = take) -> None:
                try:
                    self._client.update_item(
                        TableName=self._table, Key=self._key(producer, w.shard),
                        UpdateExpression="ADD #n :n",
                        ConditionExpression="#w = :w AND #n >= :count",
                        ExpressionAttributeNames={"#w": f"{w.kind}w", "#n": f"{w.kind}n"},
                        ExpressionAttributeValues={":n": {"N": str(-take)},
                                                   ":w": {"S": w.sk},
                                                   ":count": {"N": str(take)}})  # fmt: skip
                except ClientError as exc:
                    if client_code(exc) != "ConditionalCheckFailedException":
                        raise

            retried(write, client_refused, TRIES)

    def _record(self, producer: str) -> dict[str, Any] | None:
        """The producer's record (strongly consistent); ``StoreBusy`` when DynamoDB keeps
        refusing the read."""
        found: list[dict[str, Any] | None] = []

        def read() -> None:  # throttling outlasting botocore's retries: tried again, then 503
            found.append(self._client.get_item(TableName=self._table, Key=self._key(producer),
                                               ConsistentRead=True).get("Item"))  # fmt: skip

        retried(read, client_refused, TRIES)
        return found[-1]

    def used(self, producer: str, windows: Sequence[Window]) -> dict[str, int]:
        """Each window's count (strongly consistent), by window name; a newer window the
        record holds counts as the caller's. ``StoreBusy`` when DynamoDB keeps refusing."""
        return {name: count for name, (count, _) in self.read(producer, windows).items()}

    def read(self, producer: str, windows: Sequence[Window],
             recent: bool = False) -> dict[str, tuple[int, int]]:  # fmt: skip
        """Each window's count and the end of the window it is counted in (the caller's, or
        a newer one a record holds: another function's clock is ahead), by window name; with
        shards, their counts summed. ``recent``: from what a refusal in this container read
        while it is fresh (``Refusals``: no request); else read."""
        if not windows:
            return {}
        remembered = self._refusals.recall(producer) if recent else None
        if remembered is not None:
            return self._tally(*remembered, windows)
        rows = [self._record(producer)] if self.shards == 1 else self._shard_rows(producer)
        return self._tally(rows, self._legacy(producer, windows) if rows[0] is None else {},
                           windows)  # fmt: skip

    def _tally(self, rows: Sequence[dict[str, Any] | None], carried: Carried,
               windows: Sequence[Window]) -> dict[str, tuple[int, int]]:  # fmt: skip
        """``read``'s answer from the records ``rows`` (one a shard; None: none) and what an
        earlier release counted (``_legacy``: read when shard 0 has no record)."""
        out = {}
        for w in windows:  # the newest window a record holds (shards still on an older count 0)
            helds = [None if row is None else held_key(row, w) for row in rows]
            newest = max((h for h in helds if h), key=order, default=None)
            # What an earlier release counted is of the caller's window, not a newer one.
            earlier = carried.get(w.sk, (0, ()))[0] if newest in (None, w.sk) else 0
            count = earlier + sum(
                count_in(row, w) for row, held in zip(rows, helds, strict=True)
                if row is not None and held is not None and held == newest)  # fmt: skip
            out[w.name] = (count, key_end(newest) if newest else w.ends_at)
        return out

    def charged_as(self, client: str,
                   candidates: Sequence[tuple[str, Sequence[Window]]]) -> str | None:  # fmt: skip
        """The first of ``candidates`` (group producers, each with its current windows) whose
        counters name ``client`` as charged in a window current now, of any kind (a function
        with other limits may have named it in another; strongly consistent, one
        BatchGetItem a hundred records; for a producer without a record, the records of an
        earlier release); None when none does."""
        digest = member_digest(client)
        found: set[str] = set()
        windows_of = {p: windows for p, windows in candidates if windows}
        producers = list(windows_of)
        keys = [(p, i) for p in producers for i in range(self.shards)]
        seen: set[str] = set()
        for start in range(0, len(keys), 100):
            chunk = keys[start : start + 100]
            by_pk = {quota_pk(p, i): p for p, i in chunk}
            rows = batch_get(self._client, self._table, {
                "Keys": [self._key(p, i) for p, i in chunk], "ConsistentRead": True})  # fmt: skip
            for item in rows:
                producer = by_pk[item["pk"]["S"]]
                if item["pk"]["S"] == quota_pk(producer):
                    seen.add(producer)
                now = caller_second(windows_of[producer])
                current = [Window(kind, window_key(kind, now)[0], 0, 0) for kind in KINDS]
                if any(held_key(item, w) and digest in item.get(f"{w.kind}c", {}).get("SS", [])
                       for w in current):  # fmt: skip
                    found.add(producer)
        for producer in set(producers) - seen - found:  # no record of this release's
            carried = self._legacy(producer, windows_of[producer])
            if any(digest in members for _, members in carried.values()):
                found.add(producer)
        return next((p for p in producers if p in found), None)
