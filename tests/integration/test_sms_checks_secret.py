"""A default deploy runs the SMS checks: the Twilio account comes from the secret alone.

A deploy sets ``VDQ_TWILIO_SECRET_NAME`` and never ``TWILIO_ACCOUNT_SID`` (the README keeps the
SID in the secret), so the schedule's checks must find the account there.
"""

from __future__ import annotations

import json
from dataclasses import replace

import boto3
from aws_lambda_powertools.utilities import parameters

from tests.support.fake_twilio import FakeTwilioHttp
from tests.support.results import new_sms, to_awaiting
from vdq.core.settings import Settings
from vdq.providers.twilio import TwilioProvider
from vdq.runtime import Runtime
from vdq.schedules import sweeps as schedules

SECRET = "vdq/twilio-of-the-deploy"
ACCOUNT = "AC" + "7" * 32
TOKEN = "token-from-the-secret"
HOUR = 3600


def test_a_deploys_settings_enable_the_sms_checks_through_the_secret():
    deployed = Settings.from_env({"VDQ_TWILIO_SECRET_NAME": SECRET})
    assert deployed.twilio_account_sid is None
    assert deployed.sms_checks_enabled


def test_sms_checks_fetch_with_the_account_and_token_of_the_secret(aws, settings, clock):
    parameters.clear_caches()
    boto3.client("secretsmanager").create_secret(
        Name=SECRET, SecretString=json.dumps({"account_sid": ACCOUNT, "auth_token": TOKEN})
    )
    runtime = Runtime(settings=replace(settings, twilio_secret_name=SECRET,
                                       twilio_webhook_url=None), clock=clock)  # fmt: skip
    assert runtime.settings.twilio_account_sid is None
    http = FakeTwilioHttp(clock)
    runtime.overrides["twilio"] = TwilioProvider.from_settings(runtime.settings, http_client=http)
    item = to_awaiting(new_sms(runtime), runtime, "SM" + "5" * 32)
    clock.advance(60)

    schedules.run(["sms"], runtime)

    [request] = http.requests
    assert request.method == "GET"
    assert request.url.endswith(f"/Accounts/{ACCOUNT}/Messages/{item.provider_id}.json")
    assert request.auth == (ACCOUNT, TOKEN)
    assert runtime.store.get_item(item.id).state == "succeeded"  # the fake answers delivered
    parameters.clear_caches()


def test_without_any_twilio_account_the_checks_stay_off(aws, settings, clock):
    runtime = Runtime(settings=replace(settings, twilio_secret_name=None,
                                       twilio_account_sid=None), clock=clock)  # fmt: skip
    http = FakeTwilioHttp(clock)
    runtime.overrides["twilio"] = TwilioProvider(lambda: ("x", "y"), http_client=http)
    to_awaiting(new_sms(runtime), runtime, "SM" + "6" * 32)
    clock.advance(3 * HOUR)
    schedules.run(["sms"], runtime)
    assert http.requests == []
