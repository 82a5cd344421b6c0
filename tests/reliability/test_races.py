"""Real threads racing on the same items: workers processing duplicate send messages, SES
result events and operators (retry, cancel) at once.

In-process ``mock_aws`` with threads (not ThreadedMotoServer: its werkzeug app, like the
in-process mock, runs a request's check and write without a lock, which DynamoDB never does).
Each AWS request is made atomic with one lock around moto's dispatch, as DynamoDB makes each
request atomic; the VDQ code of every thread interleaves freely between requests.
"""

from __future__ import annotations

import random
import threading
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from datetime import datetime, timedelta

import pytest

import vdq
from tests.reliability.support import (
    FIGURES,
    FakeSes,
    RecordingQueue,
    TickingClock,
    check_history,
    make_settings,
    moto_aws,
    runtime_for,
)
from tests.support.results import ses_event
from vdq.core.errors import ContentionError, InvalidTransition
from vdq.dispatch import send
from vdq.results import matching as results
from vdq.workflow.sendqueue import SendMessage
from vdq.workflow.transitions import Step, apply

ITEMS = 24
DUPLICATES = 4  # deliveries of every send message
WORKERS = 8


class LockedClock(TickingClock):
    def __init__(self) -> None:
        super().__init__()
        self._lock = threading.Lock()

    def now(self) -> datetime:
        with self._lock:
            return super().now()

    def advance(self, seconds: float) -> None:
        with self._lock:
            self._now += timedelta(seconds=seconds)


class ThreadSafeSes(FakeSes):
    def __init__(self) -> None:
        super().__init__()
        self._lock = threading.Lock()

    def send_raw(self, **kwargs):  # type: ignore[no-untyped-def]
        with self._lock:
            return super().send_raw(**kwargs)


class ThreadSafeQueue(RecordingQueue):
    def __init__(self) -> None:
        super().__init__()
        self._lock = threading.Lock()

    def publish(self, messages):  # type: ignore[no-untyped-def]
        with self._lock:
            return super().publish(messages)


@pytest.fixture
def race_runtime(atomic_requests):
    with moto_aws() as urls:
        ses, queue = ThreadSafeSes(), ThreadSafeQueue()
        rt = runtime_for(make_settings(urls, index_shards=2), LockedClock(), ses_provider=ses,
                         send_queue=queue)  # fmt: skip
        rt.store  # noqa: B018 - build the store (a cached property) before threads race on it
        rt.send_queue  # noqa: B018
        yield rt, ses, queue


def test_workers_callbacks_and_operators_racing_lose_no_update(race_runtime):
    rt, ses, queue = race_runtime
    items = [i.id for i in vdq.add_email({"email": "shop@example.com"},
                                         [f"r{n}@example.org" for n in range(ITEMS)], "Hi",
                                         "Text", runtime=rt)]  # fmt: skip
    rng = random.Random(9)
    outcomes: Counter[str] = Counter()
    count_lock = threading.Lock()

    def count(name: str) -> None:
        with count_lock:
            outcomes[name] += 1

    def worker(body: str) -> None:
        count(f"send {send.process(SendMessage.parse(body), rt)}")

    def callback(message_id: str, kind: str) -> None:
        item_id, attempt = ses.accepted[message_id]
        event = ses_event(kind, message_id=message_id, item_id=item_id, attempt=attempt)
        count(f"event {results.handle_ses_event(event, rt)}")

    def operator(item_id: str, name: str) -> None:
        try:
            apply(item_id, Step(name, actor="op", source="operator"), rt)
            count(f"operator {name} moved")
        except InvalidTransition:
            count(f"operator {name} refused")

    races = 0
    for _round in range(3):
        bodies = list(queue.bodies)
        tasks: list = [(worker, b) for b in bodies for _ in range(DUPLICATES)]  # type: ignore[type-arg]
        tasks += [(operator, rng.choice(items), rng.choice(["retry", "cancel"]))
                  for _ in range(ITEMS)]  # fmt: skip
        tasks += [(callback, m, rng.choice(["delivery", "bounce_permanent", "delivery_delay"]))
                  for m in list(ses.accepted)]  # fmt: skip
        races += len(tasks)
        errors: list[BaseException] = []

        def run(fn, *args, errors=errors):  # type: ignore[no-untyped-def]
            try:
                fn(*args)
            except ContentionError:
                count("contention (retried by SQS)")
            except BaseException as exc:
                errors.append(exc)

        rng.shuffle(tasks)
        with ThreadPoolExecutor(WORKERS) as pool:
            list(pool.map(lambda t: run(*t), tasks))
        assert not errors, errors[:3]
        rt.clock.advance(5)

    doubles = ses.double_calls()
    problems = {}
    for item_id in items:
        item = rt.store.get_item(item_id)
        found = check_history(item, rt.store.history(item_id))
        if found:
            problems[item_id] = found
    FIGURES["races run"] += races
    FIGURES["violations"] += len(doubles) + len(problems)
    print(f"\nraces: {races} tasks on {ITEMS} items by {WORKERS} threads; {dict(outcomes)}; "
          f"SES calls {sum(ses.calls.values())} for {len(ses.calls)} attempts")  # fmt: skip
    assert not doubles, f"SES called twice for one attempt: {doubles}"
    assert not problems, problems
    assert outcomes["send accepted"] == len(ses.calls)
