"""``vdq smoke``: a deployment end to end, via the SES mailbox simulator and Twilio magic numbers.

It reads the stack's CloudFormation outputs (or takes ``--api-url``), gets a machine token,
queues one email to each simulator address (and, with ``--sms``, SMS to Twilio's magic numbers)
under an Idempotency-Key of the run, waits for each item's final state, prints a pass/fail table
and cancels what the API lets it cancel. Exit 0 when every check passed, 1 when one failed or
the deployment answered with an error, 2 when the command line or the stack cannot be used.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
import uuid
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

from vdq.cli import render
from vdq.cli.client import EXIT_FAILED, EXIT_OK, ApiError, Client, UsageError
from vdq.cli.deployment import connect, default_sender
from vdq.core import resources

SIM = "simulator.amazonses.com"
SMS_ACCEPTED_TO = "+14155550100"
SETTLED = ("succeeded", "errored", "cancelled", "unconfirmed")  # states no server step leaves
CANCELLABLE = ("queued", "delayed", "errored")
SEND_ATTEMPTS = 4  # a POST repeated after a network error, a 409 (in progress) or a 5xx

HELP = f"""Send email to SES's mailbox simulator (success@, bounce@, complaint@{SIM}) and, with
--sms, SMS to Twilio's magic numbers; wait for each item's final state; print a pass/fail table.

where and who:
  --stack NAME (default: cdk.json's vdq:stackName, else {resources.STACK_NAME}) reads the outputs
  ApiUrl, TokenUrl, UserPoolId and MachineClientId with cloudformation:DescribeStacks. The
  machine client's secret is not an output: it is read with cognito-idp:DescribeUserPoolClient,
  so the AWS credentials need both permissions. The token (client credentials, every scope of the
  client) must be allowed to send and to read items: deploy with
  -c vdq:machineScopes='["vdq-senders","vdq-operators"]', or pass --token (an operator's access
  token; with a stack, $VDQ_TOKEN is not used). --api-url (or $VDQ_API_URL) without --stack
  skips the stack: the token is then --token or $VDQ_TOKEN, or, for the local stack, one made
  with $VDQ_LOCAL_JWT_SECRET.
  --sender (default: the first of $VDQ_SENDER_IDENTITIES or cdk.json's vdq:sesIdentities, a
  domain as vdq-smoke@DOMAIN) must be a verified SES identity of the account.

what each check expects (each address with the run's +label: a bounce or complaint suppresses
the address it reached, and a +label variant is an address of its own):
  success@  succeeded, with a delivery in its history
  bounce@   errored, with the bounce in its history
  complaint@  succeeded, with the complaint in its history (history only: the state stays)
  --sms FROM  (the stack's Twilio secret must hold Twilio's TEST credentials and FROM be
            +15005550006: magic numbers only work so, and live credentials deliver and charge)
  +15005550001  errored, 21211 (invalid number)      +15005550004  errored, 21610 (blocked;
            from the second run on: cancelled unsent, the number being suppressed)
  --sms-to (default {SMS_ACCEPTED_TO})  accepted by Twilio: awaiting with a message SID, or
            succeeded (test credentials send no status callback, so on AWS it stays awaiting)

what stays afterwards: there is no delete. Items that end errored (the bounce, the refused SMS)
or are still queued or delayed are cancelled (that needs vdq-operators); the others stay as sent
items, and an SMS still awaiting becomes unconfirmed after VDQ_TWILIO_SMS_TIMEOUT_HOURS. The
bounce (and each refused SMS) errors an item on purpose: the ErroredItems alarm counts them.

re-running: every run has an id (printed first). After a network error, --run-id ID sends
nothing twice: the same Idempotency-Keys (kept VDQ_IDEMPOTENCY_SECONDS) return the items run ID
queued, and smoke checks those (a run that finished has cancelled its errored ones)."""

EXIT_HELP = """exit codes:
  0  every check passed
  1  a check failed, or the deployment (API, token endpoint) answered with an error
  2  bad command line, no sender, no API URL, the stack or an output missing, or a token
     that may not send or read items"""


def add_parser(command: Callable[..., Any]) -> None:
    p = command("smoke", "check a deployment end to end (SES mailbox simulator, Twilio magic "
                "numbers) and print a pass/fail table", run)  # fmt: skip
    p.description = HELP
    p.epilog = EXIT_HELP
    p.add_argument("--stack", help="CloudFormation stack to read the outputs of")
    p.add_argument("--region", help="AWS region of the stack (default: $AWS_REGION, else boto3's: "
                   "$AWS_DEFAULT_REGION or the profile's)")
    p.add_argument("--sender", help="From address (a verified SES identity)")
    p.add_argument("--sms", metavar="FROM", help="also check SMS, from this number")
    p.add_argument("--sms-to", default=SMS_ACCEPTED_TO, help="the number Twilio accepts")
    p.add_argument("--timeout", type=float, default=300.0,
                   help="seconds to wait for every final state (300)")  # fmt: skip
    p.add_argument("--interval", type=float, default=2.0, help="seconds between looks (2)")
    p.add_argument("--run-id", help="check the items of this earlier run again")


# The checks.
@dataclass(frozen=True)
class Check:
    name: str
    method: str  # email or sms
    receiver: str
    states: tuple[str, ...]  # any of them passes
    evidence: str = ""  # a word the result or history must hold (lower case)
    provider_id: bool = True  # the provider's message id must be stored

    @property
    def expected(self) -> str:
        return " or ".join(self.states) + (f" + {self.evidence}" if self.evidence else "")


def label(run_id: str) -> str:
    """The run's ``+label`` of the simulator addresses: a bounce or complaint puts its address
    on the suppression list, and each ``+label`` variant is an address of its own, so every
    run reaches SES again (the simulator ignores the label)."""
    kept = "".join(c for c in run_id if c.isascii() and (c.isalnum() or c in "-_"))[:32]
    return f"+smoke-{kept}" if kept else "+smoke"


def checks(sms_to: str | None, tag: str = "") -> list[Check]:
    out = [Check("email success", "email", f"success{tag}@{SIM}", ("succeeded",), "deliver"),
           Check("email bounce", "email", f"bounce{tag}@{SIM}", ("errored",), "bounce"),
           Check("email complaint", "email", f"complaint{tag}@{SIM}", ("succeeded",),
                 "complain")]
    if sms_to:
        # +15005550004 answers 21610 (opted out): the first run suppresses it, later runs find
        # it suppressed and cancel the item unsent (its result names 21610 all the same).
        out += [Check("sms invalid number", "sms", "+15005550001", ("errored",), "21211", False),
                Check("sms blocked number", "sms", "+15005550004", ("errored", "cancelled"),
                      "21610", False),
                Check("sms accepted", "sms", sms_to, ("awaiting", "succeeded"))]
    return out  # fmt: skip


@dataclass
class Outcome:
    check: Check
    item_id: str = ""
    state: str = "-"
    seconds: float = 0.0
    passed: bool = False
    note: str = ""
    item: dict[str, Any] = field(default_factory=dict)

    @property
    def got(self) -> str:
        return self.state + (f" ({self.note})" if self.note else "")


def _text(item: dict[str, Any]) -> str:
    parts = [item.get("result") or ""]
    for entry in item.get("history") or []:
        parts += [entry.get("name") or "", entry.get("kind") or "", entry.get("text") or ""]
    return " ".join(str(p) for p in parts).lower()


def judge(check: Check, item: dict[str, Any]) -> tuple[bool | None, str]:
    """True (passed), False (failed: settled elsewhere) or None (not yet), and a note. An
    item an earlier run's clean-up cancelled (``--run-id``) is judged by the state it was
    cancelled in."""
    state = str(item.get("state"))
    if state == "cancelled" and state not in check.states:
        cancels = [e for e in item.get("history") or []
                   if isinstance(e, dict) and e.get("to_state") == "cancelled"]  # fmt: skip
        state = str(cancels[-1].get("from_state")) if cancels else state
    if state in check.states:
        missing = []
        if check.evidence and check.evidence not in _text(item):
            missing.append(f"no {check.evidence} yet")
        if check.provider_id and not item.get("provider_id"):
            missing.append("no provider id yet")
        return (None, ", ".join(missing)) if missing else (True, "")
    if state in SETTLED:
        return False, render.clip(render.safe(item.get("result") or ""), 40)
    return None, ""


def _post(api: Client, path: str, body: dict[str, Any], key: str,
          sleep: Callable[[float], None]) -> dict[str, Any]:  # fmt: skip
    """POST with the run's Idempotency-Key, repeated after a network error, 409 or 5xx: the key
    makes the repeat return the first request's items instead of queueing them twice."""
    for attempt in range(SEND_ATTEMPTS):
        try:
            answer = api.call("POST", path, body, headers={"Idempotency-Key": key})
            return answer if isinstance(answer, dict) else {}
        except ApiError as exc:
            if attempt + 1 == SEND_ATTEMPTS or not (exc.status in (0, 409) or exc.status >= 500):
                raise
            sleep(2.0**attempt)
    raise AssertionError("unreachable")


def enqueue(api: Client, todo: list[Check], sender: str, sms_from: str | None, run_id: str,
            sleep: Callable[[float], None]) -> list[Outcome]:  # fmt: skip
    """One request per method (one item per receiver), each under the run's Idempotency-Key.
    A request refused after an earlier one queued items fails its own checks only: the items
    queued are still waited for and cleaned up (the bounce is cancelled)."""
    outcomes = [Outcome(c) for c in todo]
    emails = [o for o in outcomes if o.check.method == "email"]
    sms = [o for o in outcomes if o.check.method == "sms"]
    batches: list[tuple[list[Outcome], str, dict[str, Any]]] = [(emails, "/emails", {
        "sender": {"email": sender, "name": "VDQ smoke"},
        "to": [{"email": o.check.receiver} for o in emails],
        "subject": f"VDQ smoke {run_id}", "text": f"VDQ smoke test, run {run_id}.",
        "origin": {"type": "vdq-smoke", "id": run_id}})]  # fmt: skip
    if sms:
        batches.append((sms, "/sms", {"sender": {"cell": sms_from},
                                      "to": [{"cell": o.check.receiver} for o in sms],
                                      "body": f"VDQ smoke {run_id}",
                                      "origin": {"type": "vdq-smoke", "id": run_id}}))
    for group, path, body in batches:
        try:
            answer = _post(api, path, body, f"vdq-smoke-{run_id}-{path.strip('/')}", sleep)
        except ApiError as exc:
            if any(o.item_id for o in outcomes):
                # What an earlier request queued is still waited for and cleaned up.
                for o in group:
                    o.state, o.note = "refused", render.clip(render.safe(exc.message), 60)
                continue
            if exc.status in (401, 403):
                raise UsageError(f"this token may not send ({exc.message}): smoke needs a "
                                 "token that may send and read (see vdq smoke --help)") from None
            raise
        items = answer.get("items") or []
        by_receiver = {str((i.get("receiver") or {}).get("email") or
                           (i.get("receiver") or {}).get("cell")).lower(): i for i in items}
        for o in group:
            item = by_receiver.get(o.check.receiver.lower())
            if item is None:
                o.note = "not queued"
                o.state = "missing"
            else:
                o.item_id, o.state, o.item = str(item.get("id")), str(item.get("state")), item
    return outcomes


def wait(api: Client, outcomes: list[Outcome], timeout: float, interval: float,
         clock: Callable[[], float], sleep: Callable[[float], None],
         progress: Callable[[str], None]) -> None:  # fmt: skip
    """Look at each item until it passes or settles elsewhere, or ``timeout`` passes."""
    start = clock()
    pending = [o for o in outcomes if o.item_id]
    while pending:
        for o in list(pending):
            try:
                item = api.call("GET", f"/queue-items/{o.item_id}")
            except ApiError as exc:
                if not (exc.status in (0, 429) or exc.status >= 500):
                    raise
                progress(f"{clock() - start:6.1f}s  {o.check.name:<20} look failed, "
                         f"trying again: {render.safe(exc)}")  # fmt: skip
                continue
            item = item if isinstance(item, dict) else {}
            verdict, note = judge(o.check, item)
            state = str(item.get("state"))
            if state != o.state:
                progress(f"{clock() - start:6.1f}s  {o.check.name:<20} {o.state} -> "
                         f"{render.safe(state)}")  # fmt: skip
            o.state, o.note, o.item, o.seconds = render.safe(state), note, item, clock() - start
            if verdict is not None:
                o.passed = verdict
                pending.remove(o)
        if not pending:
            return
        if clock() - start >= timeout:
            for o in pending:
                o.note = (o.note + ", " if o.note else "") + f"timed out after {timeout:g} s"
            return
        sleep(interval)


def cleanup(api: Client, outcomes: Iterable[Outcome]) -> list[str]:
    """Cancel what may be cancelled; say what stays."""
    lines, stays = [], []
    for o in outcomes:
        if not o.item_id:
            continue
        if o.state in CANCELLABLE:
            try:
                api.call("POST", f"/queue-items/{o.item_id}/transitions/cancel")
                lines.append(f"cancelled {o.item_id} ({o.check.name}, was {o.state})")
                continue
            except ApiError as exc:
                stays.append(f"{o.item_id} ({o.check.name}) stays {o.state}: not cancelled "
                             f"({render.safe(exc.message)})")  # fmt: skip
                continue
        stays.append(f"{o.item_id} ({o.check.name}) stays {o.state}")
    return lines + stays


def table(outcomes: list[Outcome]) -> str:
    rows = [[o.check.name, render.safe(o.check.receiver), o.check.expected, render.safe(o.got),
             f"{o.seconds:.1f}", "pass" if o.passed else "FAIL", o.item_id or "-"]
            for o in outcomes]  # fmt: skip
    return render.table(rows, ["CHECK", "RECEIVER", "EXPECTED", "GOT", "SECONDS", "RESULT", "ITEM"])


def smoke(api: Client, args: argparse.Namespace, sender: str,
          run_id: str) -> tuple[list[Outcome], list[str]]:  # fmt: skip
    """Queue, wait, clean up: the outcomes and the clean-up lines."""
    clock, sleep = time.monotonic, time.sleep  # module lookups: a test's fake clock replaces them
    progress = (lambda text: print(text, file=sys.stderr, flush=True))  # noqa: E731
    try:
        api.call("GET", "/queue-items", params={"limit": 1})
    except ApiError as exc:
        if exc.status in (401, 403):
            raise UsageError(f"this token may not read items ({exc.message}): smoke needs a token "
                             "that may send and read (see vdq smoke --help)") from None  # fmt: skip
        raise
    outcomes = enqueue(api, checks(args.sms_to if args.sms else None, label(run_id)), sender,
                       args.sms, run_id, sleep)  # fmt: skip
    progress(f"queued {sum(1 for o in outcomes if o.item_id)} items; waiting up to "
             f"{args.timeout:g} s for their final states")  # fmt: skip
    try:
        wait(api, outcomes, args.timeout, args.interval, clock, sleep, progress)
    finally:
        done = cleanup(api, outcomes)
    return outcomes, done


def run(args: argparse.Namespace) -> int:
    sender = args.sender or default_sender(os.environ)
    if not sender:
        raise UsageError("no sender: pass --sender ADDRESS (a verified SES identity), or set "
                         "VDQ_SENDER_IDENTITIES")  # fmt: skip
    if args.timeout <= 0 or args.interval <= 0:
        raise UsageError("--timeout and --interval take a positive number of seconds")
    run_id = args.run_id or uuid.uuid4().hex[:12]
    if not (0 < len(run_id) <= 64 and run_id.isascii() and run_id.isprintable()):
        raise UsageError("--run-id takes 1 to 64 printable ASCII characters (a run's id)")
    try:
        api, where = connect(args)
        print(f"vdq smoke: run {run_id} against {where or api.url} (re-run: --run-id {run_id})",
              file=sys.stderr)  # fmt: skip
        outcomes, done = smoke(api, args, sender, run_id)
    except ApiError as exc:
        print(f"vdq smoke: {render.safe(exc)}", file=sys.stderr)
        return EXIT_FAILED
    passed = all(o.passed for o in outcomes)
    if getattr(args, "json", False):
        print(json.dumps({"run_id": run_id, "passed": passed, "cleanup": done, "checks": [
            {"check": o.check.name, "receiver": o.check.receiver, "expected": o.check.expected,
             "got": o.got, "seconds": round(o.seconds, 1), "passed": o.passed,
             "item": o.item_id or None} for o in outcomes]}, indent=2))  # fmt: skip
    else:
        print(table(outcomes))
        failed = sum(1 for o in outcomes if not o.passed)
        print(f"\n{len(outcomes) - failed} of {len(outcomes)} checks passed"
              + (f", {failed} failed" if failed else ""))  # fmt: skip
        for line in done:
            print(f"clean-up: {line}", file=sys.stderr)
    return EXIT_OK if passed else EXIT_FAILED
