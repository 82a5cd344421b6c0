"""``vdq smoke`` without a deployment: the stack's outputs as describe_stacks answers them, the
machine token, and the checks, table, clean-up and exit codes against a scripted API on a fake
clock."""

from __future__ import annotations

import json
from typing import Any

import pytest

from tests.support.tables import parse as rows
from vdq.cli import main
from vdq.cli import smoke as smoke_module
from vdq.cli.client import ApiError, UsageError
from vdq.cli.deployment import (
    StackOutputs,
    default_sender,
    machine_secret,
    machine_token,
    outputs_of,
    read_stack,
)
from vdq.cli.smoke import SIM

DESCRIBE_STACKS = {"Stacks": [{
    "StackName": "Vdq", "StackStatus": "UPDATE_COMPLETE",
    "Outputs": [
        {"OutputKey": "ApiUrl", "OutputValue": "https://abc.execute-api.eu-west-1.amazonaws.com/v1/",
         "Description": "REST API base URL"},
        {"OutputKey": "UserPoolId", "OutputValue": "eu-west-1_AbCdEf"},
        {"OutputKey": "MachineClientId", "OutputValue": "3n4machine"},
        {"OutputKey": "OperatorClientId", "OutputValue": "7operator"},
        {"OutputKey": "TokenUrl",
         "OutputValue": "https://vdq-123456789012.auth.eu-west-1.amazoncognito.com/oauth2/token"},
        {"OutputKey": "TableName", "OutputValue": "Vdq-Table"},
    ]}]}  # fmt: skip


def test_the_outputs_smoke_needs_are_read_from_a_describe_stacks_answer():
    out = outputs_of(DESCRIBE_STACKS, "Vdq")
    assert out == StackOutputs(
        api_url="https://abc.execute-api.eu-west-1.amazonaws.com/v1/",
        token_url="https://vdq-123456789012.auth.eu-west-1.amazoncognito.com/oauth2/token",
        user_pool_id="eu-west-1_AbCdEf", client_id="3n4machine")  # fmt: skip


def test_a_stack_without_the_outputs_is_refused_naming_each_missing_one():
    answer = json.loads(json.dumps(DESCRIBE_STACKS))
    answer["Stacks"][0]["Outputs"] = [o for o in answer["Stacks"][0]["Outputs"]
                                      if o["OutputKey"] not in ("TokenUrl", "MachineClientId")]
    with pytest.raises(UsageError, match="no output TokenUrl, MachineClientId:") as caught:
        outputs_of(answer, "Vdq")
    assert "UPDATE_COMPLETE" in str(caught.value)
    with pytest.raises(UsageError, match="'Other' not found"):
        outputs_of({"Stacks": []}, "Other")


class Cfn:
    def __init__(self, error: Exception | None = None) -> None:
        self.error, self.asked = error, []

    def describe_stacks(self, **kwargs: Any) -> dict[str, Any]:
        self.asked.append(kwargs)
        if self.error:
            raise self.error
        return DESCRIBE_STACKS


def test_reading_the_stack_asks_cloudformation_for_it_by_name():
    cfn = Cfn()
    assert read_stack("Vdq", None, cfn).client_id == "3n4machine"
    assert cfn.asked == [{"StackName": "Vdq"}]


def test_a_stack_cloudformation_does_not_know_is_a_usage_error_with_its_message():
    from botocore.exceptions import ClientError

    error = ClientError({"Error": {"Code": "ValidationError",
                                   "Message": "Stack with id Nope does not exist"}},
                        "DescribeStacks")  # fmt: skip
    with pytest.raises(UsageError, match="cannot read stack 'Nope': Stack with id Nope does not "
                       "exist; or pass --api-url and --token"):  # fmt: skip
        read_stack("Nope", None, Cfn(error))


OUTPUTS = outputs_of(DESCRIBE_STACKS, "Vdq")


def test_the_machine_secret_comes_from_describe_user_pool_client():
    class Cognito:
        def describe_user_pool_client(self, **kwargs: Any) -> dict[str, Any]:
            assert kwargs == {"UserPoolId": "eu-west-1_AbCdEf", "ClientId": "3n4machine"}
            return {"UserPoolClient": {"ClientId": "3n4machine", "ClientSecret": "s3cr3t"}}

    assert machine_secret(OUTPUTS, None, Cognito()) == "s3cr3t"


class Answer:
    def __init__(self, status: int, body: Any) -> None:
        self.status_code, self.body = status, body

    def json(self) -> Any:
        return self.body


class Session:
    def __init__(self, answer: Answer) -> None:
        self.answer, self.posts = answer, []

    def post(self, url: str, **kwargs: Any) -> Answer:
        self.posts.append((url, kwargs))
        return self.answer


def test_the_machine_token_is_a_client_credentials_grant_at_the_token_url():
    session = Session(Answer(200, {"access_token": "eyJ.a.b", "expires_in": 3600}))
    assert machine_token(OUTPUTS, "s3cr3t", session) == "eyJ.a.b"
    [(url, kwargs)] = session.posts
    assert url == OUTPUTS.token_url
    assert kwargs["data"] == {"grant_type": "client_credentials"}  # every scope of the client
    assert kwargs["auth"] == ("3n4machine", "s3cr3t")


def test_a_refused_client_credentials_grant_is_an_api_error_naming_cognitos_reason():
    with pytest.raises(ApiError, match="invalid_client") as caught:
        machine_token(OUTPUTS, "wrong", Session(Answer(400, {"error": "invalid_client"})))
    assert caught.value.status == 400


def test_the_default_sender_is_the_first_identity_and_a_domain_gets_a_local_part(tmp_path,
                                                                                 monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert default_sender({"VDQ_SENDER_IDENTITIES": "shop@example.com,example.org"}) == \
        "shop@example.com"  # fmt: skip
    assert default_sender({"VDQ_SENDER_IDENTITIES": "example.org"}) == "vdq-smoke@example.org"
    assert default_sender({}) is None
    (tmp_path / "cdk.json").write_text(json.dumps({"context": {
        "vdq:sesIdentities": ["mail.example.net"]}}))  # fmt: skip
    assert default_sender({}) == "vdq-smoke@mail.example.net"


# The run against a scripted API.
class FakeTime:
    def __init__(self) -> None:
        self.now = 0.0

    def monotonic(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.now += seconds


def snap(state: str, *history: str, result: str | None = None,
         provider_id: str | None = "0100-ses") -> dict[str, Any]:  # fmt: skip
    return {"state": state, "result": result, "provider_id": provider_id,
            "history": [{"name": h, "text": None} for h in history]}  # fmt: skip


GOOD = {
    f"success@{SIM}": [snap("sending"), snap("awaiting"), snap("succeeded", "delivered")],
    f"bounce@{SIM}": [snap("awaiting"), snap("errored", "bounced", result="bounce: Permanent")],
    f"complaint@{SIM}": [snap("succeeded", "delivered"),
                         snap("succeeded", "delivered", "complained")],
    "+15005550001": [snap("errored", result="Twilio 21211: not a valid number", provider_id=None)],
    "+15005550004": [snap("errored", result="Twilio 21610: unsubscribed", provider_id=None)],
    "+14155550100": [snap("sending", provider_id=None), snap("awaiting", provider_id="SM1")],
}


def _bare(receiver: str) -> str:
    """The simulator address without the run's +label (the scripts are keyed so)."""
    local, at, domain = receiver.partition("@")
    return local.split("+", 1)[0] + at + domain if at else receiver


class FakeApi:
    """Items by receiver, each GET the next snapshot of its script (the last one repeats)."""

    def __init__(self, scripts: dict[str, list[dict[str, Any]]], *,
                 fail_first_post: bool = False, read: int = 200) -> None:  # fmt: skip
        self.scripts, self.calls, self.items = scripts, [], {}
        self.fail_first_post, self.read = fail_first_post, read
        self.url = "http://fake"

    def call(self, method: str, path: str, body: Any = None, params: dict | None = None,
             headers: dict | None = None) -> Any:  # fmt: skip
        self.calls.append((method, path, body, headers))
        if method == "GET" and path == "/queue-items":
            if self.read != 200:
                raise ApiError(self.read, "forbidden", "needs vdq.list_queueitem")
            return {"items": []}
        if method == "POST" and path in ("/emails", "/sms"):
            if self.fail_first_post:
                self.fail_first_post = False
                raise ApiError(0, "unreachable", "cannot reach the API")
            items = []
            for r in body["to"]:
                receiver = _bare(r.get("email") or r.get("cell"))
                item_id = self.items.setdefault(receiver, f"01SMOKE{len(self.items):019d}")
                items.append({"id": item_id, "state": "queued", "receiver": r})
            return {"items": items}
        if method == "GET":
            receiver = next(r for r, i in self.items.items() if path.endswith(i))
            script = self.scripts[receiver]
            return {"id": self.items[receiver], **(script.pop(0) if len(script) > 1 else script[0])}
        if path.endswith("/transitions/cancel"):
            return {"from_state": "errored", "to_state": "cancelled"}
        raise AssertionError(f"unexpected {method} {path}")

    def posts(self, path: str) -> list[tuple]:
        return [c for c in self.calls if c[0] == "POST" and c[1] == path]

    def cancelled(self) -> list[str]:
        return sorted(next(r for r, i in self.items.items() if i in c[1])
                      for c in self.calls if c[1].endswith("/cancel"))  # fmt: skip


def run(monkeypatch, api: FakeApi, *args: str) -> int:
    clock = FakeTime()
    monkeypatch.setattr(smoke_module, "time", clock)
    monkeypatch.setattr(smoke_module, "connect", lambda a: (api, "the fake API"))
    return main(["smoke", "--sender", "shop@example.com", "--interval", "1", *args])


def scripts(changes: dict[str, list[dict[str, Any]]] | None = None) -> dict[str, list[Any]]:
    """GOOD's scripts (copies: a look consumes them), some receivers' replaced by ``changes``."""
    return {k: list(v) for k, v in {**GOOD, **(changes or {})}.items()}


def test_every_check_passing_prints_a_table_of_passes_with_timings_and_exits_0(monkeypatch,
                                                                               capsys):
    api = FakeApi(scripts())
    assert run(monkeypatch, api, "--sms", "+15005550006") == 0
    out, err = capsys.readouterr()
    table = rows(out)
    assert set(table) == {"email success", "email bounce", "email complaint",
                          "sms invalid number", "sms blocked number", "sms accepted"}
    assert all(r["RESULT"] == "pass" for r in table.values()), out
    assert list(table["email success"]) == ["CHECK", "RECEIVER", "EXPECTED", "GOT", "SECONDS",
                                            "RESULT", "ITEM"]  # fmt: skip
    success = table["email success"]
    assert (success["EXPECTED"], success["GOT"]) == ("succeeded + deliver", "succeeded")
    # Each run's own +label: the last run's bounce and complaint suppressed their addresses.
    assert success["RECEIVER"].startswith("success+smoke-")
    assert success["RECEIVER"].endswith(f"@{SIM}")
    assert success["SECONDS"] == "2.0"  # succeeded at the third look, a second apart (fake clock)
    assert success["ITEM"] == api.items[f"success@{SIM}"]
    assert table["sms accepted"]["EXPECTED"] == "awaiting or succeeded"
    assert table["sms invalid number"]["EXPECTED"] == "errored + 21211"
    assert "6 of 6 checks passed" in out
    assert "queued -> sending" in err  # the progress
    # The errored items it made on purpose are cancelled; the others stay.
    assert api.cancelled() == ["+15005550001", "+15005550004", f"bounce@{SIM}"]
    assert "stays succeeded" in err


def test_one_request_per_method_each_under_the_runs_idempotency_key(monkeypatch, capsys):
    api = FakeApi(scripts(), fail_first_post=True)  # the first POST meets a network error
    assert run(monkeypatch, api, "--sms", "+15005550006", "--run-id", "r42") == 0
    emails, sms = api.posts("/emails"), api.posts("/sms")
    assert len(emails) == 2 and emails[0][2] == emails[1][2], "the same request, repeated"
    assert {e[3]["Idempotency-Key"] for e in emails} == {"vdq-smoke-r42-emails"}
    assert [s[3]["Idempotency-Key"] for s in sms] == ["vdq-smoke-r42-sms"]
    assert [t["email"] for t in emails[0][2]["to"]] == [
        f"success+smoke-r42@{SIM}", f"bounce+smoke-r42@{SIM}", f"complaint+smoke-r42@{SIM}"]
    assert sms[0][2]["sender"] == {"cell": "+15005550006"}
    assert "run r42" in capsys.readouterr().err


def test_a_bounce_that_succeeds_fails_its_check_and_the_run_exits_1(monkeypatch, capsys):
    api = FakeApi(scripts({f"bounce@{SIM}": [snap("succeeded", "delivered")]}))
    assert run(monkeypatch, api) == 1
    out = capsys.readouterr().out
    bounce = rows(out)["email bounce"]
    assert (bounce["EXPECTED"], bounce["GOT"], bounce["RESULT"]) == \
        ("errored + bounce", "succeeded", "FAIL")  # fmt: skip
    assert "2 of 3 checks passed, 1 failed" in out
    assert api.cancelled() == []  # nothing errored, nothing queued: nothing to cancel


def test_a_complaint_never_recorded_fails_at_the_timeout_and_says_so(monkeypatch, capsys):
    api = FakeApi(scripts({f"complaint@{SIM}": [snap("succeeded", "delivered")]}))
    assert run(monkeypatch, api, "--timeout", "10") == 1
    out = capsys.readouterr().out
    assert "succeeded (no complain yet, timed out after 10 s)" in out
    assert rows(out)["email complaint"]["RESULT"] == "FAIL"


def test_an_item_still_queued_at_the_timeout_fails_and_is_cancelled(monkeypatch, capsys):
    api = FakeApi(scripts({f"success@{SIM}": [snap("queued", provider_id=None)]}))
    assert run(monkeypatch, api, "--timeout", "5") == 1
    out, err = capsys.readouterr()
    assert "queued (timed out after 5 s)" in out
    assert api.cancelled() == [f"bounce@{SIM}", f"success@{SIM}"]
    assert "clean-up: cancelled" in err and "was queued" in err


def test_json_output_holds_each_check_with_expected_got_and_seconds(monkeypatch, capsys):
    assert run(monkeypatch, FakeApi(scripts()), "--json", "--run-id", "j1") == 0
    data = json.loads(capsys.readouterr().out)
    assert data["run_id"] == "j1" and data["passed"] is True
    assert [c["check"] for c in data["checks"]] == ["email success", "email bounce",
                                                    "email complaint"]  # fmt: skip
    assert data["checks"][1]["got"] == "errored" and data["checks"][1]["seconds"] == 1.0


def test_a_token_that_may_not_read_items_is_refused_before_anything_is_sent(monkeypatch,
                                                                            capsys):
    api = FakeApi(scripts(), read=403)
    assert run(monkeypatch, api) == 2
    assert "this token may not read items" in capsys.readouterr().err
    assert not api.posts("/emails")


def test_it_refuses_without_a_sender_with_exit_2(monkeypatch, tmp_path, capsys):
    monkeypatch.chdir(tmp_path)  # no cdk.json
    monkeypatch.delenv("VDQ_SENDER_IDENTITIES", raising=False)
    assert main(["smoke", "--api-url", "http://127.0.0.1:9", "--token", "t"]) == 2
    assert "vdq smoke: no sender: pass --sender ADDRESS" in capsys.readouterr().err


def _no_aws(monkeypatch, tmp_path) -> None:
    import os

    monkeypatch.chdir(tmp_path)
    for name in [n for n in os.environ if n.startswith(("AWS_", "VDQ_"))]:
        monkeypatch.delenv(name)
    monkeypatch.setenv("AWS_CONFIG_FILE", str(tmp_path / "none"))
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(tmp_path / "none"))
    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")  # no instance metadata look-up
    monkeypatch.setenv("AWS_ENDPOINT_URL", "http://127.0.0.1:9")  # never AWS, whatever happens


def test_without_an_api_url_it_reads_the_default_stack_and_says_what_is_missing(monkeypatch,
                                                                                tmp_path, capsys):
    _no_aws(monkeypatch, tmp_path)
    assert main(["smoke", "--sender", "shop@example.com"]) == 2
    err = capsys.readouterr().err
    assert "cannot read stack 'Vdq': no AWS region" in err and "or pass --api-url" in err
    monkeypatch.setenv("AWS_DEFAULT_REGION", "eu-west-1")
    assert main(["smoke", "--sender", "shop@example.com", "--stack", "Mine"]) == 2
    assert "cannot read stack 'Mine': no AWS credentials" in capsys.readouterr().err


def test_the_stack_is_read_in_aws_region_as_the_deploy_checklist_exports_it(monkeypatch,
                                                                           tmp_path, capsys):
    _no_aws(monkeypatch, tmp_path)
    monkeypatch.setenv("AWS_REGION", "eu-west-1")  # boto3 itself reads AWS_DEFAULT_REGION only
    assert main(["smoke", "--sender", "shop@example.com"]) == 2
    assert "cannot read stack 'Vdq': no AWS credentials" in capsys.readouterr().err


def test_an_api_url_without_a_token_is_refused_with_exit_2(monkeypatch, tmp_path, capsys):
    _no_aws(monkeypatch, tmp_path)
    assert main(["smoke", "--sender", "shop@example.com", "--api-url", "http://127.0.0.1:9"]) == 2
    assert "no token: set VDQ_TOKEN or pass --token" in capsys.readouterr().err


def test_a_bad_timeout_or_run_id_is_a_usage_error(monkeypatch, capsys):
    assert main(["smoke", "--sender", "a@example.com", "--timeout", "0"]) == 2
    assert "--timeout and --interval take a positive number" in capsys.readouterr().err
    assert main(["smoke", "--sender", "a@example.com", "--run-id", "x" * 65]) == 2
    assert "--run-id takes 1 to 64 printable ASCII" in capsys.readouterr().err


class RefusingApi(FakeApi):
    """FakeApi whose POST to ``path`` is refused with ``status``."""

    def __init__(self, scripts_: dict[str, list[dict[str, Any]]], path: str, status: int) -> None:
        super().__init__(scripts_)
        self.refused_path, self.status = path, status

    def call(self, method: str, path: str, body: Any = None, params: dict | None = None,
             headers: dict | None = None) -> Any:  # fmt: skip
        if method == "POST" and path == self.refused_path:
            self.calls.append((method, path, body, headers))
            raise ApiError(self.status, "invalid", "sender.cell: not a phone number")
        return super().call(method, path, body, params, headers)


def test_a_refused_sms_request_still_waits_for_and_cleans_up_the_emails_it_queued(monkeypatch,
                                                                                   capsys):
    api = RefusingApi(scripts(), "/sms", 422)
    assert run(monkeypatch, api, "--sms", "+15005550006") == 1
    out, err = capsys.readouterr()
    table = rows(out)
    assert {n: r["RESULT"] for n, r in table.items()} == {
        "email success": "pass", "email bounce": "pass", "email complaint": "pass",
        "sms invalid number": "FAIL", "sms blocked number": "FAIL", "sms accepted": "FAIL"}
    assert "sender.cell: not a phone number" in table["sms accepted"]["GOT"]
    assert "3 of 6 checks passed, 3 failed" in out
    assert api.cancelled() == [f"bounce@{SIM}"], "the bounce it errored on purpose is cancelled"
    assert f"clean-up: cancelled {api.items[f'bounce@{SIM}']}" in err


def test_a_token_that_may_not_send_is_a_usage_error_and_nothing_is_left(monkeypatch, capsys):
    api = RefusingApi(scripts(), "/emails", 403)
    assert run(monkeypatch, api, "--sms", "+15005550006") == 2
    assert "this token may not send" in capsys.readouterr().err
    assert not api.posts("/sms") and api.cancelled() == []


def test_a_rerun_after_the_first_run_cleaned_up_passes_the_items_it_cancelled(monkeypatch,
                                                                             capsys):
    """Found in use: `--run-id` of a run that finished found the bounce and the refused SMS
    cancelled by that run's clean-up and failed them, on a healthy deployment. An item that
    reached the expected state before its cancel passes; one cancelled before it did not."""
    def cleaned(state: str, name: str, result: str, provider_id: str | None) -> dict[str, Any]:
        item = snap("cancelled", result=result, provider_id=provider_id)
        item["history"] = [{"name": name, "text": None, "to_state": state},
                           {"name": "cancel", "text": None, "from_state": state,
                            "to_state": "cancelled"}]
        return item

    api = FakeApi(scripts({
        f"bounce@{SIM}": [cleaned("errored", "bounced", "bounce: Permanent", "0100-ses")],
        "+15005550001": [cleaned("errored", "fail", "Twilio 21211: not a valid number", None)],
    }))  # fmt: skip
    assert run(monkeypatch, api, "--sms", "+15005550006", "--run-id", "r42") == 0
    out, _ = capsys.readouterr()
    table = rows(out)
    assert table["email bounce"]["RESULT"] == "pass", out
    assert table["sms invalid number"]["RESULT"] == "pass", out
    assert api.cancelled() == ["+15005550004"]  # the cancelled ones are not cancelled again
    early = FakeApi(scripts({f"bounce@{SIM}": [cleaned("queued", "queued", "", "0100-ses")]}))
    assert run(monkeypatch, early) == 1


def test_a_rerun_does_not_pass_an_sms_that_failed_after_it_was_accepted(monkeypatch,
                                                                               capsys):
    """The accepted SMS reached `awaiting`, then Twilio reported it undelivered: `errored`, a
    failure the first run failed and its clean-up cancelled. A re-run judges it by the state
    it was cancelled in, not by the `awaiting` it left for the failure."""
    failed = snap("cancelled", result="Twilio 30003: unreachable handset", provider_id="SM1")
    failed["history"] = [
        {"name": "send", "text": None, "from_state": "queued", "to_state": "sending"},
        {"name": "await", "text": None, "from_state": "sending", "to_state": "awaiting"},
        {"name": "undelivered", "text": "Twilio 30003: unreachable handset",
         "from_state": "awaiting", "to_state": "errored"},
        {"name": "cancel", "text": None, "from_state": "errored", "to_state": "cancelled"}]
    api = FakeApi(scripts({"+14155550100": [failed]}))
    assert run(monkeypatch, api, "--sms", "+15005550006", "--run-id", "r42") == 1
    out, _ = capsys.readouterr()
    assert rows(out)["sms accepted"]["RESULT"] == "FAIL", out
