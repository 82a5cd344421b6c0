"""The local stack's sign-in form offers the groups the deployment defines (VDQ_GROUP_PERMISSIONS),
starts with the operators' group ticked, and signs in with a group of the deployment's own."""

from __future__ import annotations

import base64
import hashlib
import json
import re
from urllib.parse import parse_qs, urlsplit

import pytest

import requests
from tests.e2e.conftest import Stack, patient, requires

pytestmark = [pytest.mark.e2e, requires("operator")]

GROUPS = {"ops-team": ["vdq.list_queueitem", "vdq.read_queueitem", "vdq.read_workflow",
                       "vdq.can_retry", "vdq.can_cancel", "vdq.can_resend"],
          "mailers": ["vdq.add_queueitem"]}  # fmt: skip
VERIFIER = "v" * 43
CHALLENGE = base64.urlsafe_b64encode(hashlib.sha256(VERIFIER.encode()).digest()).rstrip(
    b"=").decode()


@pytest.fixture(scope="module")
def own_groups(tmp_path_factory: pytest.TempPathFactory):
    s = Stack(tmp_path_factory.mktemp("groups") / "vdq-local.log",
              VDQ_GROUP_PERMISSIONS=json.dumps(GROUPS))  # fmt: skip
    yield s
    s.stop()


def authorize_query(stack: Stack) -> dict[str, str]:
    return {"client_id": "vdq-console", "redirect_uri": f"{stack.url}/console/",
            "response_type": "code", "code_challenge": CHALLENGE,
            "code_challenge_method": "S256", "state": "s1"}  # fmt: skip


def boxes(stack: Stack) -> dict[str, bool]:
    """The sign-in form's group checkboxes: value -> ticked."""
    page = requests.get(f"{stack.url}/_local/oauth2/authorize", params=authorize_query(stack),
                        timeout=patient(10))  # fmt: skip
    assert page.status_code == 200, page.text
    found = re.findall(r'<input type="checkbox" name="group" value="([^"]+)"( checked)?>',
                       page.text)  # fmt: skip
    return {value: bool(checked) for value, checked in found}


def test_the_form_offers_the_deployments_own_groups_with_the_operators_ticked(own_groups):
    assert boxes(own_groups) == {"ops-team": True, "mailers": False}


def test_a_user_signs_in_with_a_group_of_the_deployment_and_may_act_as_it(own_groups):
    url = own_groups.url
    form = {**authorize_query(own_groups), "username": "kim", "group": "ops-team"}
    answer = requests.post(f"{url}/_local/oauth2/authorize", data=form,
                           headers={"Origin": url},
                           allow_redirects=False, timeout=patient(10))  # fmt: skip
    assert answer.status_code == 302, answer.text
    code = parse_qs(urlsplit(answer.headers["Location"]).query)["code"][0]
    tokens = requests.post(f"{url}/_local/oauth2/token", timeout=patient(10), data={
        "grant_type": "authorization_code", "client_id": "vdq-console", "code": code,
        "redirect_uri": f"{url}/console/", "code_verifier": VERIFIER}).json()  # fmt: skip
    listed = own_groups.api("GET", "/queue-items", token=tokens["access_token"])
    assert listed.status_code == 200, listed.text


def test_the_default_groups_start_with_vdq_operators_ticked(stack):
    ticked = boxes(stack)
    assert set(ticked) == {"vdq-senders", "vdq-viewers", "vdq-operators", "vdq-suppressions",
                           "vdq-admins"}  # fmt: skip
    assert [g for g, on in ticked.items() if on] == ["vdq-operators"]
