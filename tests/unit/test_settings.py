from __future__ import annotations

import json

import pytest

from vdq.core.errors import SettingsError
from vdq.core.settings import DEFAULT_GROUP_PERMISSIONS, Settings


def test_defaults_match_the_seed():
    s = Settings.from_env({})
    assert s.twilio_sms_timeout_hours == 2.0
    assert s.max_retries == 12
    assert s.retry_backoff_seconds == 16
    assert s.retry_backoff_max_seconds == 600
    assert s.max_files_age_seconds is None
    assert s.email_tracking_strategy == "vdq.results.tracking.TagEmailTrackingStrategy"
    assert s.group_permissions == DEFAULT_GROUP_PERMISSIONS
    assert not s.sms_checks_enabled and s.twilio_polling


def test_values_are_parsed_and_typed():
    s = Settings.from_env(
        {
            "VDQ_TWILIO_SMS_TIMEOUT_HOURS": "0.25",
            "VDQ_MAX_FILES_AGE_IN_SECONDS": "0",
            "TWILIO_ACCOUNT_SID": "AC123",
            "TWILIO_WEBHOOK_URL": "https://example.com/twilio",
            "VDQ_GROUP_PERMISSIONS": json.dumps({"ops": ["vdq.can_retry"]}),
            "VDQ_STATE_EVENTS": "ALL",
        }
    )
    assert s.twilio_sms_timeout_hours == 0.25
    assert s.max_files_age_seconds == 0
    assert s.sms_checks_enabled and not s.twilio_polling
    assert s.permissions_for(["ops", "nobody"]) == {"vdq.can_retry"}
    assert s.state_events == "all"


@pytest.mark.parametrize("value,mode", [("", "errored"), ("default", "errored"),
                                        ("Outcomes", "outcomes"), ("none", "none")])
def test_state_events_default_to_errored_only(value, mode):
    env = {"VDQ_STATE_EVENTS": value} if value else {}
    assert Settings.from_env(env).state_events == mode


def test_an_empty_webhook_url_selects_polling():
    assert Settings.from_env({"TWILIO_WEBHOOK_URL": ""}).twilio_polling


@pytest.mark.parametrize(
    "name,value",
    [
        ("VDQ_TWILIO_SMS_TIMEOUT_HOURS", "soon"),
        ("VDQ_TWILIO_SMS_TIMEOUT_HOURS", "-1"),
        ("VDQ_MAX_FILES_AGE_IN_SECONDS", "-5"),
        ("VDQ_MAX_RETRIES", "many"),
        ("VDQ_GROUP_PERMISSIONS", "not json"),
        ("VDQ_GROUP_PERMISSIONS", json.dumps({"ops": ["vdq.fly"]})),
        ("VDQ_GROUP_PERMISSIONS", json.dumps(["ops"])),
        ("VDQ_STATE_EVENTS", "some"),
        ("VDQ_INDEX_SHARDS", "0"),
        # S3 refuses a SigV4 presigned URL valid longer than 7 days: every URL would fail.
        ("VDQ_UPLOAD_URL_SECONDS", "604801"),
        ("VDQ_ATTACHMENT_URL_SECONDS", "1209600"),
        # SES v2 refuses a message over 40 MB after base64 (files grow by 1.37): every email
        # with this much in files would be accepted and then fail at send.
        ("VDQ_MAX_ATTACHMENT_BYTES", "30000000"),
        # Found in use: a send_at this far ahead overflowed the date arithmetic (every request
        # with a send_at answered 500).
        ("VDQ_MAX_SCHEDULE_DAYS", "3000000"),
        # The 201 of 1,000 receivers with the longest names and origin is 5 MB of the 6 MB
        # Lambda returns, kept under its key in 358 KB of a 400 KB item: a request of more
        # could be stored and sent and its answer not fit.
        ("VDQ_MAX_RECEIVERS", "1001"),
    ],
)
def test_a_bad_value_fails_naming_the_setting(name, value):
    with pytest.raises(SettingsError) as err:
        Settings.from_env({name: value})
    assert name in str(err.value)


def test_every_setting_is_documented_with_its_meaning():
    """The settings page is generated from these rows (tests/infra/test_docs.py checks it is
    current and lists them all)."""
    rows = Settings.documented()
    assert len({env for env, _, _ in rows}) == len(rows)
    for env, _default, doc in rows:
        assert doc.strip(), env


def test_sender_identities_are_a_lower_case_list_without_wildcards():
    from vdq.core.setting_values import identities as _identities

    assert _identities(" Example.com, alerts@Ops.example.net,example.com ,") == (
        "example.com", "alerts@ops.example.net")
    assert _identities("") == ()
    for bad in ("*.example.com", "@example.com", "a b.com"):
        with pytest.raises(ValueError):
            _identities(bad)


def test_the_most_receivers_a_request_may_take_is_a_thousand():
    assert Settings.from_env({"VDQ_MAX_RECEIVERS": "1000"}).max_receivers == 1000


def test_presigned_url_lifetimes_go_up_to_s3s_seven_days():
    week = Settings.from_env({"VDQ_UPLOAD_URL_SECONDS": "604800",
                              "VDQ_ATTACHMENT_URL_SECONDS": "604800"})  # fmt: skip
    assert (week.upload_url_seconds, week.attachment_url_seconds) == (604_800, 604_800)


def test_the_send_timeout_s_help_names_the_lease_s_margin_as_it_is():
    """An operator reads on the settings page how long a stuck send waits before it is errored
    "outcome unknown" (the StuckSending alarm): the send function's timeout, the check's delay
    and the lease's margin, which is five minutes, not one."""
    from vdq.core.settings import LEASE_MARGIN_SECONDS, Settings

    [doc] = [doc for env, _default, doc in Settings.documented()
             if env == "VDQ_SEND_TIMEOUT_SECONDS"]  # fmt: skip
    assert LEASE_MARGIN_SECONDS == 300
    assert "five minutes" in doc and "a minute" not in doc


def test_the_largest_files_allowed_still_make_a_message_ses_takes():
    """SES v2's limit is 40 MB per message after base64: files at the setting's maximum, with
    the largest bodies enqueue takes (not ASCII, so base64 too), stay within it."""
    from vdq.core.setting_values import MAX_ATTACHMENT_BYTES
    from vdq.dispatch.mime import File, build_email
    from vdq.intake.messages import MAX_TEXT

    assert Settings.from_env({"VDQ_MAX_ATTACHMENT_BYTES": str(MAX_ATTACHMENT_BYTES)})
    body = "\U0001f4e7" * MAX_TEXT  # four bytes a character in UTF-8
    raw = build_email(sender="shop@example.com", sender_name=None,
                      content={"subject": "s", "text": body, "html": body,
                               "to": [{"email": "a@example.org"}]},
                      files=[File("a.bin", "application/octet-stream",
                                  bytes(MAX_ATTACHMENT_BYTES))])  # fmt: skip
    assert len(raw) < 40_000_000


@pytest.mark.parametrize("value", ["-1", "30d", "36501", "1000000"])
def test_a_retention_out_of_its_bounds_fails_naming_the_setting_and_the_bound(value):
    # A retention of a million days was taken, and every list of sent items then answered 500
    # (its oldest month is before the year 1); 0 is how a deployment keeps items forever.
    with pytest.raises(SettingsError) as err:
        Settings.from_env({"VDQ_RETENTION_DAYS": value})
    assert "VDQ_RETENTION_DAYS" in str(err.value)
    if value.isdigit():
        assert "at most 36500" in str(err.value) and "0 keeps" in str(err.value)


@pytest.mark.parametrize("value,days", [("0", 0), ("1", 1), ("36500", 36_500)])
def test_a_retention_within_its_bounds_is_taken(value, days):
    assert Settings.from_env({"VDQ_RETENTION_DAYS": value}).retention_days == days


def test_a_files_age_past_a_hundred_years_fails_naming_the_setting():
    # 10**12 s was taken, and with VDQ_RETENTION_DAYS=0 every daily purge then failed on it
    # (its cut-off fell before the year 1).
    with pytest.raises(SettingsError) as err:
        Settings.from_env({"VDQ_MAX_FILES_AGE_IN_SECONDS": str(10**12)})
    assert "VDQ_MAX_FILES_AGE_IN_SECONDS" in str(err.value)
    assert "at most 3153600000" in str(err.value)
    age = Settings.from_env({"VDQ_MAX_FILES_AGE_IN_SECONDS": "3153600000"}).max_files_age_seconds
    assert age == 36_500 * 86_400
