"""Throughput: emails from enqueue to a terminal state through the handlers, against moto.

2,000 single-receiver POST /emails in rounds of 10: the posts, the send function on what the
send queue holds (batches of 10), then the round's SES Delivery events through the webhook in
one results batch. Only the handler calls are timed; the harness's own work (receiving from SQS
for the event source mapping, building events, reading states) is outside the timed spans.

Where the time goes is sampled, not traced: a thread looks at the main thread's stack every few
milliseconds and charges the sample to the innermost frame that is not the standard library,
so ``json.dumps`` called by vdq counts as vdq and ``copy.deepcopy`` called by moto as moto.
Tracing profilers (cProfile) would inflate the many small Python calls and blur the split.
"""

from __future__ import annotations

import sys
import sysconfig
import threading
import time
from collections import Counter
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from bench import env
from bench import requests as rq

EMAILS = 2_000
BLOCK = 10  # emails posted, then sent, then delivered, per round (queues stay short)
ROOT = Path(__file__).resolve().parents[1]
_STDLIB = (sysconfig.get_paths()["stdlib"], "<frozen")
_PACKAGES = {
    "botocore": "botocore", "boto3": "botocore", "s3transfer": "botocore", "urllib3": "botocore",
    "moto": "moto", "responses": "moto", "werkzeug": "moto", "jinja2": "moto",
    "xmltodict": "moto", "pynamodb": "pynamodb", "aws_lambda_powertools": "powertools",
    "aws_xray_sdk": "powertools", "jmespath": "powertools",
}  # fmt: skip
CATEGORIES = ("vdq", "botocore", "moto", "pynamodb", "powertools", "harness", "other")


def where(filename: str) -> str | None:
    """The category of a frame's file; None for the standard library (charge the caller)."""
    if filename.startswith(_STDLIB):
        return None
    if filename.startswith((str(ROOT / "shared" / "vdq"), str(ROOT / "functions"))):
        return "vdq"
    if filename.startswith((str(ROOT / "bench"), str(ROOT / "tests"))):
        return "harness"
    marker = "/site-packages/"
    if marker in filename:
        top = filename.split(marker, 1)[1].split("/", 1)[0]
        return _PACKAGES.get(top, "other")
    return "other"


class Sampler:
    """Samples the main thread's stack while a timed span is open."""

    def __init__(self, interval: float = 0.002) -> None:
        self.interval = interval
        self.samples: Counter = Counter()
        self.seconds = 0.0
        self.cpu_seconds = 0.0
        self._open = False
        self._stop = threading.Event()
        self._main = threading.main_thread().ident
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._cache: dict[str, str | None] = {}

    def __enter__(self) -> Sampler:
        self._thread.start()
        return self

    def __exit__(self, *_: Any) -> None:
        self._stop.set()
        self._thread.join()

    def _run(self) -> None:
        while not self._stop.wait(self.interval):
            if not self._open:
                continue
            frame = sys._current_frames().get(self._main)
            while frame is not None:
                name = frame.f_code.co_filename
                if name not in self._cache:
                    self._cache[name] = where(name)
                category = self._cache[name]
                if category is not None:
                    self.samples[category] += 1
                    break
                frame = frame.f_back

    @contextmanager
    def span(self) -> Any:
        started, cpu = time.perf_counter(), time.process_time()
        self._open = True
        try:
            yield
        finally:
            self._open = False
            self.seconds += time.perf_counter() - started
            self.cpu_seconds += time.process_time() - cpu

    def split(self) -> dict[str, float]:
        whole = sum(self.samples.values()) or 1
        return {k: round(self.samples.get(k, 0) / whole, 3) for k in CATEGORIES}


def measure(emails: int = EMAILS) -> dict[str, Any]:
    send_handler = env.need("functions.send.handler", "handler")
    webhook = env.need("functions.webhook.handler", "handler")
    with env.stack() as stack, Sampler() as timer:
        send_url = stack.queues["send"]
        ids: list[str] = []
        for start in range(0, emails, BLOCK):
            block: list[str] = []
            for _ in range(min(BLOCK, emails - start)):
                body = rq.email_body(1)
                with timer.span():
                    block += [i["id"] for i in rq.post("apigw_post_emails", body)["items"]]
            while messages := env.receive(stack.sqs, send_url, 10):
                event = env.sqs_event(messages, env.queue_arn(send_url))
                with timer.span():
                    send_handler(event, env.LambdaContext("vdq-send"))
            event = {"Records": [rq.ses_event_record(stack, i)["Records"][0] for i in block]}
            with timer.span():
                webhook(event, env.LambdaContext("vdq-webhook"))
            ids += block
        states = Counter(stack.runtime.store.get_item(i).state for i in ids)
    return {
        "emails": emails,
        "seconds": round(timer.seconds, 2),
        "cpu_seconds": round(timer.cpu_seconds, 2),
        "messages_per_second": round(emails / timer.seconds, 1),
        "messages_per_cpu_second": round(emails / max(timer.cpu_seconds, 1e-9), 1),
        "states": dict(states),
        "samples": sum(timer.samples.values()),
        "split": timer.split(),
    }


if __name__ == "__main__":
    import json

    env.prepare_process()
    rq.COUNTER.install()
    print(json.dumps(measure(int(sys.argv[1]) if len(sys.argv) > 1 else 200), indent=2))
