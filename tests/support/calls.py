"""Every AWS call each Lambda function makes under the test suite, checked against its grants.

``Recorder.install()`` wraps ``botocore.session.Session.create_client`` so that every client
made afterwards (boto3's, PynamoDB's own, Powertools idempotency's) gets a
``before-parameter-build`` handler: it sees each API call, presigned URLs included, with the
parameters the caller gave. Each call is turned into the IAM authorization requests it makes
(``tests.support.grants.requests_of``) and kept with the function it belongs to.

Which function: the outermost frame on the stack that belongs to one. In order of the stack,
from the thread's start inward, a frame belongs to

- ``functions/<name>/handler.py``: that function (tests that call a handler, the local stack's
  ``vdq.local.functions`` that invokes one by name);
- the local stack's SQS pollers (``vdq.local.pollers``): the function the poller feeds, whose
  role Lambda's event source mapping receives and deletes with;
- a domain entry point that only one function runs (``ENTRY_POINTS``): that function, for the
  tests that drive the domain without the handler (``vdq.add_sms`` is what enqueue runs).

A call made outside all of them (a test's own set-up and assertions, moto, the local stack's own
plumbing) belongs to no function and is not evaluated.

Resource names in tests differ from the deployed ones; each ``vdq.core.settings.Settings`` built
and each set of resources ``vdq.local.resources.create`` makes records which setting names which
resource (``bindings``), and the evaluation maps both the
template's references and the recorded names to the setting (``VDQ_TABLE_NAME`` ...).

The local stack of the e2e tests runs in its own process: ``python -m tests.support.calls
<module> <args...>`` runs a module under the recorder, which appends each new call to a file in
``$TESTS_CALLS_DIR`` as it is made.
"""

from __future__ import annotations

import functools
import json
import os
import re
import sys
import threading
from dataclasses import fields
from pathlib import Path
from typing import Any

import botocore.session

from tests.support import grants

REPO = Path(__file__).resolve().parents[2]
FUNCTIONS_DIR = str(REPO / "functions") + os.sep
CALLS_DIR_ENV = "TESTS_CALLS_DIR"  # not VDQ_*: the e2e stack passes it through
# Domain modules (or module:function) that only one function's handler calls into.
ENTRY_POINTS = {
    "vdq.intake.rest": "enqueue",
    "vdq.intake.enqueue": "enqueue",
    "vdq.dispatch.send": "send",
    "vdq.results.matching": "webhook",
    "vdq.schedules.sweeps": "schedule",
    "vdq.schedules.sms": "schedule",
    "vdq.schedules.leases": "schedule",
    "vdq.schedules.dead_letters": "schedule",
    "vdq.operations.listing": "operator",
    "vdq.operations.detail": "operator",
    "vdq.operations.actions": "operator",
    "vdq.operations.downloads:download_url": "operator",
}
POLLERS_FILE = str(REPO / "shared" / "vdq" / "local" / "pollers.py")
_LONG_RUN = re.compile(r"[0-9A-Za-z_-]{12,}")  # ids, hashes, accounts: one shape for dedupe


def function_of_stack(frame: Any) -> str | None:
    """The function the outermost recognised frame of ``frame``'s stack belongs to."""
    found = None
    while frame is not None:
        name = _function_of_frame(frame)
        if name is not None:
            found = name
        frame = frame.f_back
    return found


def _function_of_frame(frame: Any) -> str | None:
    filename = frame.f_code.co_filename
    if filename.startswith(FUNCTIONS_DIR) and filename.endswith(f"{os.sep}handler.py"):
        return filename[len(FUNCTIONS_DIR):].split(os.sep)[0]
    if filename == POLLERS_FILE:
        owner = frame.f_locals.get("self")
        function = getattr(owner, "function", None)
        return function if isinstance(function, str) else None
    module = frame.f_globals.get("__name__", "")
    if module in ENTRY_POINTS:
        return ENTRY_POINTS[module]
    return ENTRY_POINTS.get(f"{module}:{frame.f_code.co_name}")


def shape(call: dict[str, Any]) -> str:
    """The call with the ids in its keys blurred (DynamoDB partition keys, S3 object keys):
    calls of one shape are recorded once, with the keys of the first."""

    def blur(request: dict[str, Any]) -> dict[str, Any]:
        resource = dict(request["resource"])
        if "key" in resource:
            resource["key"] = _LONG_RUN.sub("*", resource["key"])
        context = {k: sorted({_LONG_RUN.sub("*", v) for v in vs})
                   for k, vs in request["context"].items()}  # fmt: skip
        return {**request, "resource": resource, "context": context}

    blurred = {**call, "requests": [blur(r) for r in call["requests"]]}
    return json.dumps(blurred, sort_keys=True)


class Recorder:
    def __init__(self) -> None:
        self.enabled = True
        self.calls: dict[str, dict[str, Any]] = {}  # shape -> the first call of that shape
        self.counts: dict[str, int] = {}
        self.bindings: dict[str, str] = {}  # resource name or URL in tests -> setting name
        self.conflicts: set[tuple[str, str, str]] = set()
        self.errors: list[str] = []
        self._lock = threading.Lock()
        self._sink: Any = None  # an open file: calls are appended as they are made
        self.drivers = 0  # tests of the session that drive handlers
        self.every_driver = False  # every module of the driving suites is in the session
        self.report: Any = None  # the check's grants.Report, for the terminal summary

    # ---- installation ------------------------------------------------------------------------

    def install(self) -> Recorder:
        original = botocore.session.Session.create_client
        if getattr(original, "_vdq_recorder", None) is self:
            return self
        recorder = self

        @functools.wraps(original)
        def create_client(session: Any, *args: Any, **kwargs: Any) -> Any:
            client = original(session, *args, **kwargs)
            region = client.meta.region_name
            service = client.meta.service_model.service_name

            def before_parameter_build(params: dict, model: Any, **_: Any) -> None:
                recorder.observe(service, model.name, params, region)

            client.meta.events.register("before-parameter-build", before_parameter_build)
            return client

        create_client._vdq_recorder = self  # type: ignore[attr-defined]
        botocore.session.Session.create_client = create_client  # type: ignore[method-assign]
        self._bind_settings()
        return self

    def _bind_settings(self) -> None:
        from vdq.core.settings import Settings

        original = Settings.__init__
        if getattr(original, "_vdq_recorder", None) is self:
            return
        envs = {f.name: f.metadata["env"] for f in fields(Settings)}
        recorder = self

        @functools.wraps(original)
        def init(settings: Any, *args: Any, **kwargs: Any) -> None:
            original(settings, *args, **kwargs)
            for name, env in envs.items():
                if env in grants.RESOURCE_SETTINGS:
                    recorder.bind(getattr(settings, name), env)

        init._vdq_recorder = self  # type: ignore[attr-defined]
        Settings.__init__ = init  # type: ignore[method-assign]

        # Resources made for a test or the local stack, before any Settings names them.
        from vdq.local import resources as local_resources

        create = local_resources.create

        @functools.wraps(create)
        def create_and_bind(*args: Any, **kwargs: Any) -> Any:
            made = create(*args, **kwargs)
            for env, value in made.env().items():
                recorder.bind(value, env)
            return made

        local_resources.create = create_and_bind  # type: ignore[assignment]

    def write_to(self, path: Path) -> None:
        """Append every call recorded from now on (and the bindings) to ``path`` as JSON lines."""
        self._sink = path.open("a", buffering=1)

    # ---- recording ---------------------------------------------------------------------------

    def bind(self, value: Any, setting: str) -> None:
        if not isinstance(value, str) or not value:
            return
        with self._lock:
            known = self.bindings.setdefault(value, setting)
            if known != setting:
                self.conflicts.add((value, known, setting))
            elif self._sink is not None:
                self._sink.write(json.dumps({"bind": [value, setting]}) + "\n")

    def observe(self, service: str, operation: str, params: dict, region: str | None) -> None:
        if not self.enabled:
            return
        function = function_of_stack(sys._getframe(1))
        if function is None:
            return
        try:
            requests = grants.requests_of(service, operation, params)
        except Exception as exc:  # a call the model cannot read must fail the check, not a test
            requests = []
            self.errors.append(f"{function}: {service}.{operation}: {exc!r}")
        call = {"function": function, "call": f"{service}.{operation}", "region": region,
                "requests": requests}  # fmt: skip
        key = shape(call)
        with self._lock:
            self.counts[key] = self.counts.get(key, 0) + 1
            if key in self.calls:
                return
            self.calls[key] = call
            if self._sink is not None:
                self._sink.write(json.dumps({"call": call}) + "\n")

    # ---- reading back ------------------------------------------------------------------------

    def load(self, directory: Path) -> None:
        """Merge what the recorders of other processes wrote into ``directory``."""
        for path in sorted(directory.glob("calls-*.jsonl")):
            for line in path.read_text().splitlines():
                if not line.strip():
                    continue
                entry = json.loads(line)
                if "bind" in entry:
                    self.bind(*entry["bind"])
                else:
                    key = shape(entry["call"])
                    self.counts[key] = self.counts.get(key, 0) + 1
                    self.calls.setdefault(key, entry["call"])


RECORDER = Recorder()
CHECK = "tests/infra/test_calls_vs_grants.py"  # runs last, on what the session recorded
DRIVERS = ("tests/integration/", "tests/e2e/")  # the suites that drive every handler


def python_module(module: str) -> list[str]:
    """``python`` arguments that run ``module`` as ``-m`` does, recorded when the session is."""
    if os.environ.get(CALLS_DIR_ENV):
        return ["-m", "tests.support.calls", module]
    return ["-m", module]


# ---- pytest plugin (tests/conftest.py loads this module) -------------------------------------


def pytest_collection_modifyitems(session: Any, config: Any, items: list[Any]) -> None:
    """Record only when the check runs, and run it after everything else."""
    check = [i for i in items if i.nodeid.startswith(CHECK)]
    if not check:
        return
    items[:] = [i for i in items if not i.nodeid.startswith(CHECK)] + check
    # Before any test runs (no module makes a client at import): no cost to sessions without it.
    RECORDER.install()
    RECORDER.drivers = sum(1 for i in items if i.nodeid.startswith(DRIVERS))
    ran = {i.nodeid.split("::")[0] for i in items}
    on_disk = {str(p.relative_to(REPO)) for d in DRIVERS for p in (REPO / d).glob("test_*.py")}
    RECORDER.every_driver = on_disk <= ran
    import tempfile

    os.environ[CALLS_DIR_ENV] = tempfile.mkdtemp(prefix="vdq-calls-")


def pytest_unconfigure(config: Any) -> None:
    import shutil

    directory = os.environ.pop(CALLS_DIR_ENV, None)
    if directory:
        shutil.rmtree(directory, ignore_errors=True)


def pytest_terminal_summary(terminalreporter: Any) -> None:
    report = RECORDER.report
    if report is None:
        return
    write = terminalreporter.write_line
    terminalreporter.section("calls versus grants")
    write("distinct calls recorded per function: " + ", ".join(
        f"{f} {n}" for f, n in sorted(report.distinct.items())))  # fmt: skip
    for function, grants_ in sorted(report.unused.items()):
        write(f"grants of {function} that no call used:")
        for grant in grants_:
            write(f"  {grant}")


def main(argv: list[str]) -> None:
    """``python -m tests.support.calls <module> [args...]``: run a module as __main__, recorded."""
    import runpy

    RECORDER.install()
    directory = os.environ.get(CALLS_DIR_ENV)
    if directory:
        RECORDER.write_to(Path(directory) / f"calls-{os.getpid()}.jsonl")
    module, *args = argv
    sys.argv = [module, *args]
    runpy.run_module(module, run_name="__main__", alter_sys=True)


if __name__ == "__main__":
    main(sys.argv[1:])
