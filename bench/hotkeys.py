"""DynamoDB units by partition at a send rate: the hottest keys at 1,000 emails a second.

Counts the requests of delivered emails with the request counter (``bench.requests``), keyed
by partition (the table's, or an index partition's for an index entry), and says what the
partitions emails share take at the rate, against a partition's limits.
"""

from __future__ import annotations

import math
import re
from typing import Any

from bench import env
from bench.requests import (
    COUNTER,
    Tally,
    email_body,
    post,
    run_send,
    run_webhook,
    ses_event_record,
    state_of,
    stream_phases,
)

HOT_RATE = 1_000.0  # emails a second the hottest key is shown at
PARTITION_WRITE_UNITS, PARTITION_READ_UNITS = 1_000, 3_000  # a partition's limits, a second
HOT_SHARE = 0.30  # of a partition's limits, the most any one key may take
# Receivers of a bulk request here: each email's To header names them all, and moto's SES
# refuses a raw message whose headers name more than 50.
BULK_RECEIVERS = 40


def hot_keys(count: int = 100, bulk: bool = False, rate: float = HOT_RATE,
             quota: bool = False) -> dict[str, Any]:  # fmt: skip
    """The DynamoDB units of ``count`` delivered emails of the bench's message by partition (the
    table's and each index's), with SES's rate at ``rate``: 1:1 requests (each its own POST
    and receiver) at normal priority, or with ``bulk`` POSTs of ``BULK_RECEIVERS`` receivers
    each at bulk priority (paced as bulk sends are); ``by_partition`` says which partitions are
    an email's own and what the shared ones take at the rate. The sparse indexes have the
    shards the rate needs (VDQ_INDEX_SHARDS as its description says: index_shards_for).
    ``quota``: the one producer has a limit a second, a minute and a day (VDQ_PRODUCER_QUOTAS,
    each well above what it sends), so every request charges its counters, split over the
    shards the rate needs (VDQ_QUOTA_SHARDS as its description says: quota_shards_for, one a
    request at 1:1)."""
    from vdq.core.settings import QuotaLimits, index_shards_for, quota_shards_for

    total = Tally()
    shards = index_shards_for(rate)
    limits = {"*": QuotaLimits(per_second=int(rate) * 10, per_minute=int(rate) * 600,
                               per_day=int(rate) * 864_000)} if quota else {}  # fmt: skip
    quota_shards = quota_shards_for(rate if quota and not bulk else rate / BULK_RECEIVERS)
    with env.stack(ses_max_send_rate=rate, index_shards=shards, producer_quotas=limits,
                   quota_shards=quota_shards) as stack:  # fmt: skip
        with COUNTER.measure(units=True) as tally:
            if bulk:
                ids = []
                for first in range(0, count, BULK_RECEIVERS):
                    body = dict(email_body(min(BULK_RECEIVERS, count - first), first=first),
                                priority="bulk")  # fmt: skip
                    ids += [i["id"] for i in post("apigw_post_emails", body)["items"]]
            else:
                ids = [post("apigw_post_emails", email_body(1, first=n))["items"][0]["id"]
                       for n in range(count)]  # fmt: skip
        total.add(tally)
        while True:  # the bench's stack has one send queue for every lane
            with COUNTER.measure(units=True) as tally:
                sent = run_send(stack, limit=10)
            total.add(tally)
            if not sent:
                break
        for item_id in ids:
            event = ses_event_record(stack, item_id)
            with COUNTER.measure(units=True) as tally:
                run_webhook(event)
            total.add(tally)
        for _, phase, _, _ in stream_phases(stack):  # the batch, and its window's last call
            total.add(phase)
        items = [state_of(stack, i) for i in ids]
    undone = [i.id for i in items if i.state != "succeeded"]
    if undone:
        raise RuntimeError(f"{len(undone)} of {count} emails not delivered, e.g. {undone[0]}")
    owners: dict[str, set[str]] = {}
    for i in items:
        for token in (i.id, i.content_id, i.provider_id, i.content_id.partition(".")[0]):
            if token:
                owners.setdefault(str(token), set()).add(i.id)
    return {**by_partition(total.keys, owners, count, rate), "index_shards": shards,
            "quota_shards": quota_shards if quota else None}


# The day limit of the producer past it: 2 items a shard (with a share of 0 a shard is never
# charged first).
REFUSED_DAY = 8


def refused_keys(count: int = 200, rate: float = HOT_RATE) -> dict[str, Any]:
    """A producer past its day limit sending ``count`` one-receiver requests into one container
    (each a 429), its counters split over the shards ``rate`` requests a second need: the
    units each counters record takes. ``memo``: as VDQ runs, the container refusing from the
    records a refusal read for a second (the ``count`` requests within that second: the clock
    the memo reads stands still), so the figure is a container's a second; ``each``: with
    nothing remembered (every request its own charge and read, as before the memo), the figure
    is a request's: at ``rate`` refused requests a second, and how many containers refusing
    at once keep a record within ``HOT_SHARE`` of its partition."""
    from vdq.core.settings import QuotaLimits, quota_shards_for
    from vdq.store.counters import Counters
    from vdq.store.quota_records import QUOTA_KEY
    from vdq.store.refusals import Refusals

    shards = quota_shards_for(rate)
    out: dict[str, Any] = {"requests": count, "rate": rate, "quota_shards": shards}
    for name, refusals in (("memo", lambda: Refusals(monotonic=lambda: 0.0)),
                           ("each", lambda: Refusals(seconds=0))):  # fmt: skip
        with env.stack(producer_quotas={"*": QuotaLimits(per_day=REFUSED_DAY)},
                       quota_shards=shards) as stack:  # fmt: skip
            post("apigw_post_emails", email_body(REFUSED_DAY))  # the day's items: full
            rt = stack.runtime
            rt.overrides["counters"] = Counters(rt.client("dynamodb"), rt.settings.table_name,
                                                shards=shards, refusals=refusals())  # fmt: skip
            with COUNTER.measure(units=True) as tally:
                for n in range(count):
                    post("apigw_post_emails", email_body(1, first=REFUSED_DAY + n), expect=429)
        # The shards at their mean, as ``by_partition`` counts them: across containers, the
        # shard a refusal writes is picked at random.
        counters = [v for k, v in tally.keys.items() if QUOTA_KEY.match(k.split("|", 1)[1])]
        writes = sum(w for w, _ in counters) / shards
        reads = sum(r for _, r in counters) / shards
        out[name] = {"writes": writes, "reads": reads}
    memo = out["memo"]
    worst = max(memo["writes"] / PARTITION_WRITE_UNITS, memo["reads"] / PARTITION_READ_UNITS)
    out["containers"] = math.floor(HOT_SHARE / worst) if worst else None
    each = out["each"]
    out["each_at_rate"] = {"writes": each["writes"] / count * rate,
                           "reads": each["reads"] / count * rate}
    return out


ORIGIN_SHARD = re.compile(r"^(CO#[a-z2-7]+)-[0-9a-f]$")  # vdq.store.models.origin_content_id


def by_partition(keys: dict[str, list[float]], owners: dict[str, set[str]], count: int,
                 rate: float) -> dict[str, Any]:  # fmt: skip
    """The hottest shared partitions at ``rate`` emails a second (units of ``count`` emails:
    units / count x rate), and the most an email's own partition takes in its life.
    ``owners``: the ids an email's keys are made of (its own, its content's, its provider
    ID) -> the emails they belong to; a partition of one email only is that email's own, one
    of a group of them (a bulk request's content) takes the group's units per email times the
    rate (at the rate, one request's emails are what is being sent). Shards of one key (``A#0``
    .. ``A#3``, an origin's ``CO#<o>-0`` .. ``-f``, a producer's quota counters ``QUOTA#<p>``,
    ``QUOTA1#<p>`` ..: the same key but its number) count as
    their mean: the sample spreads ``count`` emails over them unevenly, the rate would not (an
    origin's over all its ORIGIN_SHARDS: a bulk sample of a few requests meets only some)."""
    from vdq.store.models import ORIGIN_SHARDS
    from vdq.store.quota_records import QUOTA_KEY

    shards: dict[tuple[str, str], list[tuple[float, float]]] = {}
    spread: dict[tuple[str, str], int] = {}
    mine, shared = [], []
    for key, (wru, rru) in keys.items():
        space, partition = key.split("|", 1)
        emails = set().union(*(ids for token, ids in owners.items() if token in partition))
        if len(emails) == 1:
            mine.append((wru, rru, space, partition))
        elif emails:
            shared.append((wru / len(emails) * rate, rru / len(emails) * rate, space,
                           f"{partition} (of {len(emails)} emails)"))  # fmt: skip
        else:
            family = re.sub(r"#\d+$", "#*", re.sub(ORIGIN_SHARD, r"\1#*", partition))
            family = QUOTA_KEY.sub("QUOTA*#", family)
            shards.setdefault((space, family), []).append((wru, rru))
            if ORIGIN_SHARD.match(partition):
                spread[(space, family)] = ORIGIN_SHARDS
    for (space, family), units in shards.items():
        n = spread.get((space, family), len(units))
        shared.append((sum(w for w, _ in units) / n / count * rate,
                       sum(r for _, r in units) / n / count * rate, space,
                       family if n == 1 else f"{family} ({n} shards)"))  # fmt: skip

    def top(rows: list[tuple[float, float, str, str]], i: int) -> dict[str, Any]:
        if not rows:
            return {}
        row = max(rows, key=lambda r: r[i])
        return {"key": f"{row[2]}:{row[3]}", "writes": round(row[0], 2), "reads": round(row[1], 2)}

    return {"emails": count, "rate": rate, "writes": top(shared, 0), "reads": top(shared, 1),
            "own_writes": top(mine, 0), "own_reads": top(mine, 1),
            "shared": sorted(([f"{s}:{p}", round(w, 2), round(r, 2)] for w, r, s, p in shared),
                             key=lambda row: -max(row[1] / PARTITION_WRITE_UNITS,
                                                  row[2] / PARTITION_READ_UNITS))[:12]}
