"""Deployment context: product settings pass through checked; secrets never enter a template."""

from __future__ import annotations

import pytest

from tests.infra.conftest import TEST_CONTEXT

pytestmark = pytest.mark.infra


def _config(context: dict):
    import aws_cdk as cdk
    from infra.config import DeployConfig

    return DeployConfig.from_context(cdk.App(context={**TEST_CONTEXT, **context}).node)


def test_a_product_setting_in_context_reaches_the_functions_unchanged():
    config = _config({"VDQ_MAX_RETRIES": "5", "VDQ_STATE_EVENTS": "all"})
    assert config.settings == {"VDQ_MAX_RETRIES": "5", "VDQ_STATE_EVENTS": "all"}


def test_a_bad_setting_value_fails_the_synth_naming_it():
    from vdq.core.errors import SettingsError

    with pytest.raises(SettingsError, match="VDQ_MAX_RETRIES"):
        _config({"VDQ_MAX_RETRIES": "-1"})


@pytest.mark.parametrize("name", ["TWILIO_AUTH_TOKEN", "VDQ_UNSUBSCRIBE_KEY",
                                  "VDQ_UNSUBSCRIBE_PREVIOUS_KEY"])
def test_a_secret_is_refused_as_a_template_value(name):
    from infra.config import ConfigError

    with pytest.raises(ConfigError, match="it is a secret"):
        _config({name: "shh"})


def test_resource_settings_are_the_stacks_own():
    from infra.config import ConfigError

    with pytest.raises(ConfigError, match="set by the stack"):
        _config({"VDQ_TABLE_NAME": "other"})


def test_every_setting_the_stack_sets_itself_is_refused_as_a_context_value(synth):
    """A context value of a setting the stack also sets would be overridden without a word, while
    the settings page offered `-c NAME=...` for it: each is refused, and the page says "set by
    the stack". TWILIO_WEBHOOK_URL is the deployer's when given (a custom domain)."""
    from infra.config import SETTING_NAMES, STACK_SETTINGS

    set_here = set()
    for function in synth.resources("AWS::Lambda::Function").values():
        set_here |= set(function["Properties"]["Environment"]["Variables"]) & set(SETTING_NAMES)
    assert "VDQ_TABLE_NAME" in set_here  # the functions' environments were read
    assert sorted(set_here - {"TWILIO_WEBHOOK_URL"} - STACK_SETTINGS) == []


def test_webhook_url_unset_derives_empty_selects_polling():
    assert _config({}).twilio_webhook_url is None
    assert _config({"TWILIO_WEBHOOK_URL": ""}).twilio_webhook_url == ""
    assert "TWILIO_WEBHOOK_URL" not in _config({"TWILIO_WEBHOOK_URL": "https://x/y"}).settings


@pytest.mark.parametrize(
    "value,expected",
    [
        (["example.com"], ("example.com",)),
        ('["example.com", "shop@example.org"]', ("example.com", "shop@example.org")),
        ("example.com, mail.example.org", ("example.com", "mail.example.org")),
    ],
)
def test_ses_identities_are_read_from_a_list_json_or_commas(value, expected):
    assert _config({"vdq:sesIdentities": value}).ses_identities == expected


@pytest.mark.parametrize("value", [[], "*", "arn:aws:ses:*", ["example.com", "*.com/x"]])
def test_ses_identities_are_never_a_wildcard(value):
    from infra.config import ConfigError

    with pytest.raises(ConfigError, match="vdq:sesIdentities"):
        _config({"vdq:sesIdentities": value})


def test_the_app_is_not_built_without_ses_identities():
    import aws_cdk as cdk
    from infra.app import build
    from infra.config import ConfigError

    with pytest.raises(ConfigError, match="vdq:sesIdentities is required"):
        build(cdk.App(context={}))


@pytest.mark.parametrize("seconds", [10, 30, 35])
def test_a_send_timeout_within_the_send_margin_is_refused(seconds):
    # A send function claims nothing once its remaining time is under pacing.TIMEOUT_MARGIN
    # (the longest provider call plus its record): with a timeout that short every invocation
    # would publish its whole batch again unclaimed, for ever, and nothing would be sent.
    from infra.config import ConfigError

    with pytest.raises(ConfigError, match="send"):
        _config({"vdq:timeoutSeconds": {"send": seconds}})


def test_a_send_timeout_past_the_send_margin_is_kept():
    assert _config({"vdq:timeoutSeconds": {"send": 45}}).timeout_seconds["send"] == 45


def test_a_peak_send_rate_sizes_the_lanes_the_results_consumer_and_the_index_shards():
    config = _config({"vdq:peakSendRate": "1000"})
    assert config.peak_send_rate == 1000.0
    assert (config.send_max_concurrency, config.bulk_send_max_concurrency) == (50, 50)
    assert config.high_send_max_concurrency == 4 and config.results_max_concurrency == 20
    assert config.settings == {"VDQ_INDEX_SHARDS": "8"}
    # Without it, or at a new account's rate: the defaults, and no index setting of its own.
    for context in ({}, {"vdq:peakSendRate": 14}):
        plain = _config(context)
        assert (plain.send_max_concurrency, plain.bulk_send_max_concurrency,
                plain.high_send_max_concurrency, plain.results_max_concurrency) == (2, 2, 4, 2)
    assert _config({}).settings == {} and _config({}).peak_send_rate is None


def test_what_is_set_beside_a_peak_send_rate_is_kept_and_too_few_shards_fail_the_synth():
    from infra.config import ConfigError

    config = _config({"vdq:peakSendRate": 1000, "vdq:bulkSendMaxConcurrency": 80,
                      "VDQ_INDEX_SHARDS": "16"})  # fmt: skip
    assert config.bulk_send_max_concurrency == 80 and config.send_max_concurrency == 50
    assert config.settings == {"VDQ_INDEX_SHARDS": "16"}
    with pytest.raises(ConfigError, match="VDQ_INDEX_SHARDS is 4: vdq:peakSendRate 1000 needs"):
        _config({"vdq:peakSendRate": 1000, "VDQ_INDEX_SHARDS": "4"})
    assert _config({"vdq:peakSendRate": 20_000}).send_max_concurrency == 1000  # Lambda's most


@pytest.mark.parametrize("value", ["fast", 0, -5, 20_001, "nan"])
def test_a_peak_send_rate_that_is_not_a_positive_rate_fails_the_synth_naming_it(value):
    from infra.config import ConfigError

    with pytest.raises(ConfigError, match="vdq:peakSendRate"):
        _config({"vdq:peakSendRate": value})


@pytest.mark.parametrize("value", [True, False, "true"])
def test_a_peak_send_rate_of_true_or_false_fails_the_synth_naming_it(value):
    # cdk.json's `"vdq:peakSendRate": true` reads as a switch, not a rate: it is no rate of
    # one email a second.
    from infra.config import ConfigError

    with pytest.raises(ConfigError, match="vdq:peakSendRate"):
        _config({"vdq:peakSendRate": value})


@pytest.mark.parametrize("context", [{"VDQ_SES_MAX_SEND_RATE": "1000"},
                                     {"VDQ_SES_MAX_SEND_RATE": "1000", "vdq:peakSendRate": 500}])
def test_a_pinned_ses_rate_gets_the_index_shards_it_needs_or_fails_the_synth(context):
    # The send functions pace at VDQ_SES_MAX_SEND_RATE when it is set, and warn at their first
    # send that the sparse indexes' shards are short of it (vdq.dispatch.pacing.check_shards):
    # the synth knows that rate as well as vdq:peakSendRate's, and takes the larger.
    from infra.config import ConfigError

    from vdq.core.settings import index_shards_for

    try:
        config = _config(context)
    except ConfigError as refused:
        assert "VDQ_SES_MAX_SEND_RATE" in str(refused)
        return
    assert int(config.settings.get("VDQ_INDEX_SHARDS", "4")) >= index_shards_for(1000)


@pytest.mark.parametrize(("value", "expected"), [
    (None, ()), ([], ()), (["shop", "billing-2"], ("shop", "billing-2")),
    ('["shop"]', ("shop",)), ("shop, billing", ("shop", "billing")),
])  # fmt: skip
def test_producer_clients_are_read_from_a_list_json_or_commas(value, expected):
    assert _config({"vdq:producerClients": value}).producer_clients == expected


@pytest.mark.parametrize(("value", "says"), [
    (["Shop"], "lower-case"), (["shop_orders"], "lower-case"), (["1shop"], "lower-case"),
    (["x" * 41], "lower-case"), (["shop", "shop"], "more than once"),
    (["shop-2", "shop2"], "more than once"), ({"shop": 1}, "a list of names"),
])  # fmt: skip
def test_a_bad_producer_client_name_fails_the_synth_naming_the_choice(value, says):
    from infra.config import ConfigError

    with pytest.raises(ConfigError, match=f"vdq:producerClients.*{says}"):
        _config({"vdq:producerClients": value})


@pytest.mark.parametrize("key", ["vdq:machineScopes", "vdq:producerScopes"])
def test_scopes_of_a_group_vdq_does_not_have_fail_the_synth_naming_the_key(key):
    from infra.config import ConfigError

    with pytest.raises(ConfigError, match=f"{key} names unknown groups \\['vdq-root'\\]"):
        _config({key: ["vdq-senders", "vdq-root"]})
    field = "machine_scopes" if key == "vdq:machineScopes" else "producer_scopes"
    assert getattr(_config({key: '["vdq-viewers"]'}), field) == ("vdq-viewers",)


@pytest.mark.parametrize("key", ["vdq:machineScopes", "vdq:producerScopes"])
@pytest.mark.parametrize(("value", "expected"), [
    ("vdq-senders", ("vdq-senders",)), ("vdq-senders, vdq-viewers", ("vdq-senders", "vdq-viewers")),
    ('["vdq-viewers"]', ("vdq-viewers",)), (["vdq-viewers"], ("vdq-viewers",)),
])  # fmt: skip
def test_scopes_are_read_from_a_list_json_or_commas(key, value, expected):
    # As vdq:producerClients is: a -c with a bare group name is what people type.
    field = "machine_scopes" if key == "vdq:machineScopes" else "producer_scopes"
    assert getattr(_config({key: value}), field) == expected


@pytest.mark.parametrize("key", ["vdq:machineScopes", "vdq:producerScopes"])
@pytest.mark.parametrize(("value", "says"), [
    ("[vdq-senders", "must be a list of group names"), ({"vdq-senders": 1}, "must be a list"),
    ([5], "must be a list"), ('"vdq-senders"', "names unknown groups"),
    ('{"vdq-senders": 1}', "names unknown groups"),
])  # fmt: skip
def test_scopes_that_are_no_list_of_groups_fail_the_synth_naming_the_key(key, value, says):
    from infra.config import ConfigError

    with pytest.raises(ConfigError, match=f"{key} {says}"):
        _config({key: value})
