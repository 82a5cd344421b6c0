"""Provider rate control: a backlog sent by several concurrent workers against throttling sandboxes.

In-process: moto for DynamoDB (the items and the shared pace record; one lock around its
dispatch, as DynamoDB makes each request atomic), the SES and Twilio sandboxes on loopback with
a sending rate (as VDQ_LOCAL_SES_RATE / VDQ_LOCAL_TWILIO_RATE set it), and ``WORKERS`` threads,
each one send function: its own Runtime, pacer and provider clients, running the real
``vdq.dispatch.send`` on batches of ten taken off an in-memory send queue (delays included). Printed
per scenario: achieved rate against the limit, the throttling answers the sandbox gave, DynamoDB
requests per sent message (those made for pacing, and all the send functions made: claims,
give-backs and records included), and how many items went back on the queue; per Twilio sender,
its sends, achieved rate and throttling answers. The workers take each batch in the order the
send function's handler does (``vdq.dispatch.batchplan.plan``).

Scenarios: SES with its rate read from the account (GetAccount on the sandbox); SES with
VDQ_SES_MAX_SEND_RATE set 50% above the sandbox's true rate (AIMD finds it); Twilio senders
paced at their per-sender rate. ``--priority bulk`` enqueues the backlog in the bulk lane, which
books the schedule only a horizon ahead (vdq.dispatch.pacing, ``HORIZONS``); default: normal.
"""

from __future__ import annotations

import heapq
import threading
import time
from dataclasses import dataclass, field
from typing import Any

from bench import env

WORKERS = 4
BATCH = 10
# Well below what four workers on moto send unpaced (5 to 11/s on two shared cores), so that
# the pacer, not the harness, sets the pace.
SES_RATE = 3.0
TWILIO_RATE = 1.0  # VDQ_TWILIO_SENDER_RATE's default: a US long code


class MemoryQueue:
    """The send queue: publishes (with their delay) and batches of due messages."""

    def __init__(self) -> None:
        self._heap: list[tuple[float, int, str]] = []
        self._lock = threading.Lock()
        self._n = 0
        self.republished = 0

    def publish(self, messages: Any) -> dict[str, str]:
        with self._lock:
            for m in messages:
                self._n += 1
                if m.delay_seconds:
                    self.republished += 1
                heapq.heappush(self._heap, (time.time() + m.delay_seconds, self._n, m.body()))
        return {}

    def take(self, limit: int) -> list[str]:
        now = time.time()
        with self._lock:
            out = []
            while self._heap and self._heap[0][0] <= now and len(out) < limit:
                out.append(heapq.heappop(self._heap)[2])
            return out

    def waiting(self) -> int:  # not __len__: an empty queue must not be falsy (Runtime's ``or``)
        with self._lock:
            return len(self._heap)


class NoTopic:
    def publish(self, **_: Any) -> dict[str, Any]:
        return {}


class Requests:
    """DynamoDB requests made while ``counting`` (every one passes moto's stubber)."""

    def __init__(self) -> None:
        self.counting = False
        self.dynamodb = 0


def atomic_moto(requests: Requests) -> Any:
    from moto.core.botocore_stubber import BotocoreStubber

    lock = threading.RLock()
    original = BotocoreStubber.__call__

    def atomic(self: Any, event_name: str, request: Any, **kwargs: Any) -> Any:
        with lock:
            if requests.counting and event_name.startswith("before-send.dynamodb."):
                requests.dynamodb += 1
            return original(self, event_name, request, **kwargs)

    BotocoreStubber.__call__ = atomic  # type: ignore[method-assign]
    return original


@dataclass
class Result:
    scenario: str
    limit: float
    sent: int
    seconds: float
    throttled: int
    given_back: int
    pacing_requests: int
    dynamodb_requests: int = 0
    senders: dict[str, tuple[int, int]] = field(default_factory=dict)  # (accepted, refused)

    @property
    def rate(self) -> float:
        return self.sent / self.seconds if self.seconds else 0.0

    def row(self) -> str:
        return (f"{self.scenario:<44} {self.limit:>6.1f}/s {self.rate:>7.2f}/s "
                f"{self.rate / self.limit:>6.1%} {self.throttled:>9} {self.given_back:>10} "
                f"{self.pacing_requests / max(1, self.sent):>9.3f} "
                f"{self.dynamodb_requests / max(1, self.sent):>9.2f}")  # fmt: skip

    def sender_rows(self, rate: float) -> list[str]:
        return [f"  sender {sender}: {accepted} sent, {accepted / self.seconds:.2f}/s of "
                f"{rate:g}/s ({accepted / self.seconds / rate:.1%}), {refused} throttled"
                for sender, (accepted, refused) in sorted(self.senders.items())]  # fmt: skip


HEADER = (f"{'scenario':<44} {'limit':>8} {'achieved':>9} {'share':>6} {'throttled':>9} "
          f"{'given back':>10} {'pace/msg':>9} {'DDB/msg':>9}")  # fmt: skip


def run(scenario: str, *, method: str, count: int, true_rate: float,
        settings_changes: dict[str, Any], senders: int = 1,
        priority: str = "normal") -> Result:  # fmt: skip
    import boto3

    import vdq
    from vdq.dispatch import batchplan, send
    from vdq.dispatch.pacing import Pacer
    from vdq.local.faults import Faults
    from vdq.local.ses_sandbox import SesSandbox
    from vdq.local.twilio_sandbox import TwilioSandbox
    from vdq.providers.ses import _CLIENT_CONFIG, SesProvider
    from vdq.providers.twilio import TwilioProvider
    from vdq.runtime import Runtime
    from vdq.store.pacing import PaceRecords

    with env.stack(**settings_changes) as stack:
        requests = Requests()
        plain = atomic_moto(requests)
        ses_box = SesSandbox(NoTopic(), "arn:aws:sns:us-east-1:123456789012:ses", Faults(),
                             rate=true_rate).start()  # fmt: skip
        twilio_box = TwilioSandbox(env.TWILIO_SID, env.TWILIO_TOKEN, Faults(),
                                   rate=true_rate).start()  # fmt: skip
        queue = MemoryQueue()
        try:
            settings = stack.runtime.settings
            runtimes = []
            for _ in range(WORKERS):
                rt = Runtime(settings=settings, clock=stack.runtime.clock)
                rt.overrides["send_queue"] = queue
                client = boto3.client("sesv2", endpoint_url=ses_box.url, config=_CLIENT_CONFIG)
                rt.overrides["ses_provider"] = SesProvider(client)
                rt.overrides["twilio"] = TwilioProvider(
                    lambda: (env.TWILIO_SID, env.TWILIO_TOKEN), api_url=twilio_box.url)
                records = PaceRecords(boto3.client("dynamodb"), settings.table_name)
                rt.overrides["pacer"] = Pacer(records, settings.pacing_max_wait_seconds)
                runtimes.append(rt)
            stack.runtime.overrides["send_queue"] = queue
            stack.runtime.__dict__.pop("send_queue", None)
            per_sender = count // senders
            for n in range(senders):
                receivers = [f"r{i}@example.org" for i in range(per_sender)]
                if method == "email":
                    vdq.add_email(env.SENDER, receivers, "Hi", "Hello", priority=priority,
                                  runtime=stack.runtime)  # fmt: skip
                else:
                    cells = [f"+1555{n:03d}{i:04d}" for i in range(per_sender)]
                    vdq.add_sms(f"+1500555{n:04d}", cells, "Your code is 1234",
                                priority=priority, runtime=stack.runtime)  # fmt: skip
            total = per_sender * senders
            outcomes: list[str] = []
            lock = threading.Lock()

            def worker(rt: Runtime) -> None:
                while True:
                    with lock:
                        if sum(o in (send.ACCEPTED, send.ERRORED) for o in outcomes) >= total:
                            return
                    batch = queue.take(BATCH)
                    if not batch:
                        time.sleep(0.02)  # the event source mapping's poll
                        continue
                    for index, upcoming in batchplan.plan(batch, rt)[0]:  # as the handler does
                        outcome = send.process_body(batch[index], rt, upcoming=upcoming)
                        with lock:
                            outcomes.append(outcome)

            requests.counting = True
            started = time.time()
            threads = [threading.Thread(target=worker, args=(rt,)) for rt in runtimes]
            for t in threads:
                t.start()
            for t in threads:
                t.join()
            box = ses_box if method == "email" else twilio_box
            seconds = time.time() - started
            requests.counting = False
            limit = true_rate * (senders if method == "sms" else 1)
            errored = sum(o == send.ERRORED for o in outcomes)
            if errored:
                print(f"[bench] {scenario}: {errored} items errored", flush=True)
            return Result(scenario, limit, box.rate.accepted, seconds, box.rate.refused,
                          sum(o == send.PACED for o in outcomes),
                          sum(rt.overrides["pacer"].requests for rt in runtimes),
                          requests.dynamodb,
                          dict(box.rate.by_sender) if method == "sms" else {})  # fmt: skip
        finally:
            ses_box.stop()
            twilio_box.stop()
            from moto.core.botocore_stubber import BotocoreStubber

            BotocoreStubber.__call__ = plain  # type: ignore[method-assign]


def measure(count: int = 120, priority: str = "normal") -> list[Result]:
    lane = "" if priority == "normal" else f" ({priority})"
    return [
        run(f"SES, rate read from the account{lane}", method="email", count=count,
            true_rate=SES_RATE, settings_changes={"ses_max_send_rate": None}, priority=priority),
        run(f"SES, VDQ_SES_MAX_SEND_RATE 50% over{lane}", method="email", count=count,
            true_rate=SES_RATE, settings_changes={"ses_max_send_rate": SES_RATE * 1.5},
            priority=priority),
        run(f"Twilio, 3 senders at their rate{lane}", method="sms", count=count // 2,
            true_rate=TWILIO_RATE, senders=3, priority=priority,
            # No status callbacks: the sandbox would post them to the bench's fake API URL.
            settings_changes={"twilio_sender_rate": TWILIO_RATE, "twilio_webhook_url": None}),
    ]  # fmt: skip


def main() -> None:
    import argparse
    import logging

    parser = argparse.ArgumentParser(prog="python -m bench.pacing", description=__doc__)
    parser.add_argument("--count", type=int, default=120, help="emails per SES scenario")
    parser.add_argument("--priority", choices=["high", "normal", "bulk"], default="normal",
                        help="the lane the backlog is enqueued in")  # fmt: skip
    args = parser.parse_args()
    env.prepare_process()
    logging.disable(logging.WARNING)
    results = measure(args.count, args.priority)
    print(HEADER)
    for r in results:
        print(r.row())
    for r in results:
        print(f"{r.scenario}: {r.sent} sent in {r.seconds:.1f} s")
        for line in r.sender_rows(TWILIO_RATE):
            print(line)


if __name__ == "__main__":
    main()

