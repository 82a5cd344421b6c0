"""Every AWS call a function made in this session is allowed by the role the template gives it.

tests/support/calls.py records the calls (it moves this module to the end of the session and
records only when this module runs); tests/support/grants.py evaluates them against the
synthesized template. The grants no call used are printed in the session summary.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from infra.config import FUNCTIONS

from tests.infra.conftest import TEST_CONTEXT
from tests.support import calls, grants
from vdq.core import resources

pytestmark = pytest.mark.infra


def test_every_recorded_call_is_allowed_by_its_functions_role(synth):
    recorder = calls.RECORDER
    recorder.enabled = False  # what the check itself does is not a function's call
    directory = os.environ.get(calls.CALLS_DIR_ENV)
    if directory:
        recorder.load(Path(directory))
    if not recorder.drivers:
        pytest.skip("no integration or e2e test ran in this session: nothing to evaluate")
    assert not recorder.errors, "calls the recorder could not read:\n" + "\n".join(recorder.errors)
    assert not recorder.conflicts, f"one test resource bound to two settings: {recorder.conflicts}"
    recorded = list(recorder.calls.values())
    report = grants.check(synth.template_json, recorded, recorder.bindings)
    recorder.report = report
    missing = sorted(set(FUNCTIONS) - set(report.distinct))
    broken = f"no call recorded for {missing}: the attribution is broken"
    assert not (missing and recorder.every_driver), broken
    refused = sorted(set(report.refused))
    # Generated requests (Schemathesis) send from any address. The deployed role refuses a
    # sender outside vdq:sesIdentities, as SES refuses an unverified identity: that refusal is
    # the deployment's rule, not a missing grant. Sends from the configured identities (every
    # other test) must be allowed.
    foreign = [line for line in refused if _foreign_sender(line)]
    if foreign:
        print(f"\n{len(foreign)} SES sends from identities outside vdq:sesIdentities "
              "(refused as deployed)")  # fmt: skip
    missing_grants = [line for line in refused if line not in foreign]
    # The archive's writes (VDQ_ARCHIVE=s3, off by default) are made only by a deployment with
    # the archive on: they are checked against that deployment's template.
    archive = [line for line in missing_grants if f"/{resources.ARCHIVE_PREFIX}" in line]
    if archive:
        with_archive = grants.check(_archive_template(), recorded, recorder.bindings)
        still = set(with_archive.refused)
        missing_grants = [line for line in missing_grants
                          if line not in archive or line in still]  # fmt: skip
    assert not missing_grants, "calls the deployed roles would refuse:\n" + "\n".join(
        missing_grants
    )


def _archive_template() -> dict:
    import json

    import aws_cdk as cdk
    from aws_cdk.assertions import Template
    from infra.app import build

    from tests.infra.conftest import ROOT

    context = {**json.loads((ROOT / "cdk.json").read_text())["context"], **TEST_CONTEXT,
               "VDQ_ARCHIVE": "s3"}  # fmt: skip
    return Template.from_stack(build(cdk.App(context=context))).to_json()


def _foreign_sender(line: str) -> bool:
    if "-> ses:SendEmail on " not in line or ":identity/" not in line:
        return False
    domain = line.rsplit(":identity/", 1)[1].strip().lower()
    configured = [d.lower() for d in TEST_CONTEXT["vdq:sesIdentities"]]
    return not any(domain == d or domain.endswith("." + d) for d in configured)
