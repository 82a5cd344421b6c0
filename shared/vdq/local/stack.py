"""The local stack: moto as AWS, the front, the pollers, the schedules and both sandboxes.

Everything runs in this one process (threads), so one Ctrl-C stops all of it. The environment is
composed before any AWS client or ``get_settings()`` exists: AWS_ENDPOINT_URL points every client
at moto, AWS_ENDPOINT_URL_SESV2 points SES at the SES sandbox, and the VDQ settings name the
resources created here and the Twilio sandbox.
"""

from __future__ import annotations

import errno
import faulthandler
import logging
import os
import secrets
import shlex
import shutil
import signal
import sys
import threading
import time
import warnings
from dataclasses import dataclass
from pathlib import Path
from typing import Any, NoReturn

from vdq.core import resources as definitions
from vdq.core.settings import Settings

DEFAULT_PORT = definitions.LOCAL_PORT
STOP_SECONDS = 15  # from Ctrl-C to the last loop joined; servers then close in a few seconds
EXIT_SECONDS = 15  # after that budget, for the servers and the exit: then the process is ended
_AWS_ENV = {
    "AWS_ACCESS_KEY_ID": "local", "AWS_SECRET_ACCESS_KEY": "local", "AWS_SESSION_TOKEN": "local",
    "AWS_DEFAULT_REGION": "us-east-1", "AWS_REGION": "us-east-1",
    "POWERTOOLS_TRACE_DISABLED": "true", "POWERTOOLS_METRICS_NAMESPACE": "VDQ",
    "POWERTOOLS_SERVICE_NAME": "vdq", "POWERTOOLS_DEV": "false",
    "POWERTOOLS_METRICS_DISABLED": "true",
}  # fmt: skip


@dataclass
class Options:
    port: int = DEFAULT_PORT
    polling: bool = False  # empty TWILIO_WEBHOOK_URL: the schedules poll Twilio
    visibility_seconds: int = definitions.SEND_FUNCTION_TIMEOUT_SECONDS
    faults: str | None = None  # None: VDQ_LOCAL_FAULTS
    log_level: str = "WARNING"


class LocalStack:
    def __init__(self, options: Options, env: dict[str, str] | None = None) -> None:
        self.options = options
        self.env = os.environ if env is None else env
        self.local = Settings.from_env(self.env)  # the local-stack settings, read before the rest
        self.secret = self.local.local_jwt_secret or secrets.token_urlsafe(32)
        self.secret_generated = self.local.local_jwt_secret is None
        self.ready = threading.Event()
        self._parts: list[Any] = []
        self.pollers: list[Any] = []

    # Start and stop.
    def start(self) -> LocalStack:
        from vdq.local.faults import Faults
        from vdq.local.serving import free_port

        level = getattr(logging, self.options.log_level.upper(), logging.WARNING)
        logging.basicConfig(level=level, format="%(asctime)s %(levelname)s %(name)s %(message)s")
        self.env.update(_AWS_ENV, POWERTOOLS_LOG_LEVEL=logging.getLevelName(level))
        warnings.filterwarnings("ignore", module="aws_lambda_powertools")
        logging.getLogger("werkzeug").setLevel(max(level, logging.WARNING))
        fault_text = self.options.faults if self.options.faults is not None else (
            self.local.local_faults)  # fmt: skip
        self.faults = Faults.parse(fault_text, self.local.local_fault_rate,
                                   self.local.local_fault_delay_seconds)  # fmt: skip

        from vdq.local.aws import LocalAws

        self.moto = LocalAws(free_port()).start()  # moto, closed to web pages (no CORS)
        self._parts.append(self.moto)
        self.moto_url = self.moto.url
        self.env["AWS_ENDPOINT_URL"] = self.moto_url

        import boto3

        session = boto3.session.Session()
        self.session = session
        from vdq.local import resources

        self.resources = resources.create(session, self.options.visibility_seconds)
        self.sqs = session.client("sqs")

        from vdq.local.ses_sandbox import SesSandbox
        from vdq.local.twilio_sandbox import TwilioSandbox

        self.ses = SesSandbox(session.client("sns"), self.resources.topic_arn, self.faults,
                              rate=self.local.local_ses_rate).start()  # fmt: skip
        self._parts.append(self.ses)
        account = self.env.get("TWILIO_ACCOUNT_SID") or "AC" + secrets.token_hex(16)
        token = self.env.get("TWILIO_AUTH_TOKEN") or secrets.token_hex(16)
        self.twilio = TwilioSandbox(account, token, self.faults,
                                    rate=self.local.local_twilio_rate).start()  # fmt: skip
        self._parts.append(self.twilio)

        from vdq.local.front import Front
        from vdq.local.functions import Functions

        self.functions = Functions()
        self.front = Front(self.functions, self.secret, self.options.port, self.status)
        from vdq.local import oauth

        # The groups this stack's settings define (VDQ_GROUP_PERMISSIONS), not the defaults.
        permissions = self.local.group_permissions
        operators = oauth.operators_group(permissions)
        self.front.issuer = oauth.Issuer(self.secret, f"{self.front.url}/console/",
                                         tuple(permissions), ticked=(operators,) if operators
                                         else ())  # fmt: skip
        polling = self.options.polling or self.env.get("TWILIO_WEBHOOK_URL", None) == ""
        self.env.update(
            self.resources.env(),
            AWS_ENDPOINT_URL_SESV2=self.ses.url,
            TWILIO_ACCOUNT_SID=account,
            TWILIO_AUTH_TOKEN=token,
            TWILIO_WEBHOOK_URL="" if polling else f"{self.front.url}/twilio/status-callback",
            TWILIO_INBOUND_URL=f"{self.front.url}/twilio/inbound",
            VDQ_TWILIO_API_URL=self.twilio.url,
            VDQ_CONSOLE_AUTH_URL=f"{self.front.url}/_local",
            VDQ_CONSOLE_CLIENT_ID=oauth.CLIENT_ID,
            VDQ_UNSUBSCRIBE_URL=f"{self.front.url}/unsubscribe/",
            VDQ_UNSUBSCRIBE_KEY=self.env.get("VDQ_UNSUBSCRIBE_KEY") or secrets.token_urlsafe(32),
        )
        self.twilio.inbound_url = f"{self.front.url}/twilio/inbound"
        self.env.pop("VDQ_TWILIO_SECRET_NAME", None)
        self.env.pop("VDQ_UNSUBSCRIBE_SECRET_NAME", None)
        from vdq.core import settings

        settings.get_settings.cache_clear()
        self.settings = settings.get_settings()
        self.front.start()
        self._parts.append(self.front)

        from vdq.local.pollers import Poller, StreamPoller
        from vdq.local.schedules import Schedules

        # One send poller per priority lane, each its own event source (vdq.workflow.lanes).
        self.pollers = [
            *(Poller(self.sqs, self.resources.queues[queue], "send", self.functions,
                     definitions.SEND_BATCH_SIZE, lane=priority).start()
              for priority, queue in definitions.SEND_QUEUES.items()),
            Poller(self.sqs, self.resources.queues[definitions.RESULTS_QUEUE], "webhook",
                   self.functions, definitions.RESULTS_BATCH_SIZE).start(),
        ]  # fmt: skip
        self._parts.extend(self.pollers)
        stream_arn = self.session.client("dynamodb").describe_table(
            TableName=self.resources.table)["Table"]["LatestStreamArn"]  # fmt: skip
        # The deployed mapping's batches and tumbling window, on a shorter clock: its counts
        # and postings are written when a window ends (VDQ_LOCAL_STREAM_SECONDS).
        window = self.local.local_stream_seconds
        self.stream = StreamPoller(self.session.client("dynamodbstreams"), stream_arn,
                                   "schedule", self.functions, window_seconds=window,
                                   batching_seconds=min(1.0, window)).start()  # fmt: skip
        self._parts.append(self.stream)
        self.schedules = Schedules(self.functions, self.local.schedule_seconds).start()
        self._parts.append(self.schedules)
        self.front.ready = True
        self.ready.set()
        return self

    def stop(self) -> None:
        self.ready.clear()
        if hasattr(self, "front"):
            self.front.ready = False
        # Every loop is told first, so they wind down together; then each is waited for, all
        # within one budget (their threads are daemons: a handler stuck past it dies with us).
        deadline = time.monotonic() + STOP_SECONDS
        for part in self._parts:
            if hasattr(part, "halt"):
                part.halt()
        for part in reversed(self._parts):
            try:
                if hasattr(part, "halt"):
                    part.stop(timeout=max(0.0, deadline - time.monotonic()))
                else:
                    part.stop()
            except Exception as exc:
                logging.getLogger("vdq.local").warning("stopping %s: %s", part, exc)
        self._parts.clear()

    # What the front's /_local/status and /health report.
    def status(self) -> dict[str, Any]:
        queues = {}
        for name, url in self.resources.queues.items():
            attrs = self.sqs.get_queue_attributes(QueueUrl=url, AttributeNames=[
                "ApproximateNumberOfMessages", "ApproximateNumberOfMessagesNotVisible",
                "ApproximateNumberOfMessagesDelayed"])["Attributes"]  # fmt: skip
            queues[name] = {
                "visible": int(attrs.get("ApproximateNumberOfMessages", 0)),
                "in_flight": int(attrs.get("ApproximateNumberOfMessagesNotVisible", 0)),
                "delayed": int(attrs.get("ApproximateNumberOfMessagesDelayed", 0)),
            }
        return {
            "functions": self.functions.status(),
            "queues": queues,
            "busy": any(p.busy for p in self.pollers),
            "state_events_published": self.stream.published if hasattr(self, "stream") else 0,
            "stream": ({"records": self.stream.records, "delivered": self.stream.delivered,
                        "invocations": self.stream.invocations, "failures": self.stream.failures,
                        "windows": self.stream.windows, "dropped": self.stream.dropped,
                        "window_seconds": self.stream.window_seconds}
                       if hasattr(self, "stream") else {}),
            "schedule_runs": self.schedules.runs if hasattr(self, "schedules") else 0,
            "twilio_mode": "polling" if self.settings.twilio_polling else "webhook",
            "faults": self.faults.describe(),
            "sandboxes": {
                "ses": {"sent": len(self.ses.sent), "events_published": self.ses.events_published,
                        "pending": self.ses.pending()},
                "twilio": {"messages": len(self.twilio.messages),
                           "callbacks_posted": self.twilio.callbacks_posted,
                           "pending": self.twilio.pending()},
            },
        }  # fmt: skip

    # The banner.
    def banner(self) -> str:
        from vdq.local.front import make_token

        groups = list(self.local.group_permissions)
        tokens = {g: make_token(self.secret, [g]) for g in groups}
        # The commands below send and list: the admins' group, or every group there is.
        admin = make_token(self.secret, ["vdq-admins"] if "vdq-admins" in groups else groups)
        width = max(map(len, groups), default=0) + 1
        lines = [
            "VDQ local stack is up (Ctrl-C stops everything)",
            "",
            f"  API            {self.front.url}   (GET /health, /openapi.json, /_local/status)",
            f"  Console        {self.front.url}/console/   (sign in as any user and groups)",
            f"  AWS (moto)     {self.moto_url}",
            f"  SES sandbox    {self.ses.url}/_sandbox/emails",
            f"  Twilio sandbox {self.twilio.url}/_sandbox/messages",
            f"  Inbound SMS    POST {self.twilio.url}/_sandbox/inbound "
            '{"from": "+1...", "body": "STOP"}',
            f"  Twilio mode    {'polling' if self.settings.twilio_polling else 'status callbacks'}",
            f"  schedules      every {self.local.schedule_seconds:g} s;  faults: "
            f"{self.faults.describe()}",
            "",
            "JWT secret" + (" (random; set VDQ_LOCAL_JWT_SECRET to keep one)"
                            if self.secret_generated else "") + ":",
            f"  export VDQ_LOCAL_JWT_SECRET={self.secret}",
            "",
            "Tokens (12 h; `vdq token --groups a,b` makes more):",
            *(f"  {g:<{width}} {t}" for g, t in tokens.items()),
            "",
            "In another shell, paste this line (the API, an admin token, the secret vdq token "
            "signs with, and vdq on the PATH):",
            f"  export VDQ_API_URL={self.front.url} VDQ_TOKEN={admin} "
            f"VDQ_LOCAL_JWT_SECRET={shlex.quote(self.secret)} "
            f'PATH={shlex.quote(str(cli_directory()))}:"$PATH"',
            "then try:",
            "  vdq send-email --from shop@example.com --to success@simulator.amazonses.com "
            "--subject Hello --text 'Hello from VDQ'",
            "  vdq send-sms --from +15005550006 --to +14155550100 --body 'Your code is 493021'",
            "  vdq find --to success@simulator.amazonses.com",
            "  vdq show ID   (an id from above: the item, its state and its history)",
        ]  # fmt: skip
        return "\n".join(lines)


def cli_directory() -> Path:
    """The directory of the ``vdq`` command that runs this stack: beside this Python (a venv's
    bin, where ``make run`` installs it), else the first on PATH."""
    beside = Path(sys.executable).with_name("vdq")
    if beside.exists():
        return beside.parent
    found = shutil.which("vdq")
    return Path(found).parent if found else beside.parent


def run(options: Options) -> int:
    """``vdq local``: start, print the banner, serve until Ctrl-C (or SIGTERM), stop."""
    stack = LocalStack(options)

    def terminate(signum: int, frame: Any) -> None:
        raise KeyboardInterrupt

    # Install both explicitly: a shell starting us in the background leaves SIGINT ignored.
    signal.signal(signal.SIGINT, signal.default_int_handler)
    signal.signal(signal.SIGTERM, terminate)
    try:
        stack.start()
        print(stack.banner(), flush=True)
        # Waits that end every half second: the kernel may give Ctrl-C to any of the threads,
        # and Python's handler then runs in this one at its next step, which a wait without
        # end never takes (found in CI: the process went on serving past Ctrl-C).
        while True:
            time.sleep(0.5)
    except KeyboardInterrupt:
        _bound_the_stop()
        print("\nstopping the local stack ...", flush=True)
    except OSError as exc:
        if exc.errno == errno.EADDRINUSE:
            print(f"vdq local: port {options.port} is in use (another vdq local?); "
                  f"choose another with --port", file=sys.stderr)  # fmt: skip
        else:
            print(f"vdq local: cannot start: {exc.strerror or exc}", file=sys.stderr)
        stack.stop()
        return 3
    stack.stop()
    print("stopped", flush=True)
    return 0


def _bound_the_stop() -> None:
    """From Ctrl-C (or SIGTERM) on, the process ends within the stop's budget whatever holds
    it: a second signal ends it at once, and past ``STOP_SECONDS + EXIT_SECONDS`` the stack of
    every thread is printed (what held it) and it exits with 1. ``vdq local`` ends without
    waiting for the handlers still running (``leave``)."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    budget = STOP_SECONDS + EXIT_SECONDS
    watchdog = threading.Timer(budget, _give_up, args=(budget,))
    watchdog.daemon = True
    watchdog.start()
    # Should even the watchdog not run (a thread holding stdout's lock): the stacks, then out.
    faulthandler.dump_traceback_later(budget + 5, exit=True)


def _give_up(budget: float) -> None:
    """What the handlers logged (stdout is buffered when it is a file), then every thread's
    stack, then the end, with 1."""
    sys.stdout.flush()
    print(f"vdq local: still stopping after {budget:g} s; the threads that hold it:",
          file=sys.stderr, flush=True)  # fmt: skip
    faulthandler.dump_traceback(all_threads=True)
    leave(1)


def leave(code: int) -> NoReturn:
    """End the process now, with ``code``: a handler still running past the stop's budget is
    left behind, as Lambda leaves an invocation past its timeout. Python would wait at exit for
    the threads of its pool (a send in flight), however long they take."""
    logging.shutdown()
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)
