"""The unsubscribe key can be rotated: links sealed with the previous key keep working during a
rotation, new links use the current key, and a rotation after that retires the old one. A
deploy's key is a Secrets Manager secret (its previous value is the version Secrets Manager
labels AWSPREVIOUS); the local stack's is a setting. Against moto, through the webhook."""

from __future__ import annotations

import uuid
from dataclasses import replace

import boto3
import pytest
from aws_lambda_powertools.utilities import parameters

from tests.integration.test_unsubscribe_lists import (
    ADA,
    SENDER,
    click,
    newsletter_token,
    sent,
    token_of,
)
from vdq.results import unsubscribe
from vdq.runtime import Runtime


@pytest.fixture
def rt(aws, settings, clock):
    boto3.client("ses").verify_email_identity(EmailAddress=SENDER)
    rt = use(Runtime(settings=replace(settings, unsubscribe_key="the local key",
                                      unsubscribe_url="https://api.example.com/v1/unsubscribe/"),
                     clock=clock))  # fmt: skip
    yield rt
    Runtime.reset_default()


def use(rt: Runtime) -> Runtime:
    import vdq.runtime as runtime_module

    runtime_module._DEFAULT = rt
    return rt


@pytest.fixture
def secret(aws):
    """A fresh secret's name (each test its own: the functions cache what they read)."""
    name = f"vdq-unsubscribe-key-{uuid.uuid4().hex[:8]}"
    boto3.client("secretsmanager").create_secret(Name=name, SecretString="the first key")
    return name


@pytest.fixture
def deployed(rt, secret):
    return use(Runtime(settings=replace(rt.settings, unsubscribe_key=None,
                                        unsubscribe_secret_name=secret),
                       clock=rt.clock))  # fmt: skip


def rotate(name: str, value: str) -> None:
    """The rotation the operating docs give: a new value, which Secrets Manager makes
    AWSCURRENT and whose predecessor it labels AWSPREVIOUS."""
    boto3.client("secretsmanager").put_secret_value(SecretId=name, SecretString=value)


def test_a_link_sealed_before_a_rotation_still_unsubscribes(aws, deployed, secret):
    old = newsletter_token(aws, deployed, list="news")
    rotate(secret, "the second key")
    parameters.clear_caches()  # the functions' cached key has expired
    assert click(old)["statusCode"] == 200
    assert deployed.store.get_suppression(ADA, "news").reason == "unsubscribe"


def test_new_links_are_sealed_with_the_current_key(aws, deployed, secret):
    old = newsletter_token(aws, deployed, list="news")
    rotate(secret, "the second key")
    parameters.clear_caches()
    new = newsletter_token(aws, deployed, list="offers")
    current = unsubscribe.key(deployed.settings)
    assert unsubscribe.read_token(new, current, deployed.settings.table_name) == (ADA, "offers")
    assert unsubscribe.read_token(old, current, deployed.settings.table_name) is None
    assert click(new)["statusCode"] == 200


def test_a_new_link_opens_where_the_old_key_is_still_cached(aws, deployed, secret):
    # A warm webhook read the key before the rotation and keeps it up to five minutes; a
    # sender that read the new one meanwhile seals with it. The webhook reads its key again
    # rather than refuse the link.
    assert unsubscribe.key(deployed.settings) is not None  # cached: the first key
    rotate(secret, "the second key")
    sealed = unsubscribe.make_token(ADA, "news", unsubscribe.derive("the second key"),
                                    deployed.settings.table_name)  # fmt: skip
    assert click(sealed)["statusCode"] == 200


def test_a_second_rotation_retires_the_first_key(aws, deployed, secret):
    first = newsletter_token(aws, deployed, list="news")
    rotate(secret, "the second key")
    rotate(secret, "the third key")
    parameters.clear_caches()
    assert click(first)["statusCode"] == 404
    assert deployed.store.get_suppression(ADA, "news") is None


def test_a_secret_never_rotated_has_no_previous_key(aws, deployed):
    assert unsubscribe.previous_key(deployed.settings) is None
    assert click("not-a-token")["statusCode"] == 404


def test_the_local_stack_names_its_previous_key_in_a_setting(aws, rt):
    old = newsletter_token(aws, rt, list="news")
    rotated = use(Runtime(settings=replace(rt.settings, unsubscribe_key="a new local key",
                                           unsubscribe_previous_key=rt.settings.unsubscribe_key),
                          clock=rt.clock))  # fmt: skip
    assert click(old)["statusCode"] == 200
    assert rotated.store.get_suppression(ADA, "news") is not None
    forged = unsubscribe.make_token(ADA, "offers", unsubscribe.derive("another key"),
                                    rotated.settings.table_name)  # fmt: skip
    assert click(forged)["statusCode"] == 404
    assert token_of(sent()[-1]) == old


def test_links_that_are_no_tokens_cost_no_secrets_manager_call_each(aws, deployed, monkeypatch):
    # A scanner's guesses open with no key: the first reads the current key, finds no previous
    # one and reads the current again; the next ones are answered from what was read.
    from aws_lambda_powertools.utilities.parameters import SecretsProvider

    calls = []
    original = SecretsProvider._get

    def counted(self, name, **options):
        calls.append(options.get("VersionStage", "AWSCURRENT"))
        return original(self, name, **options)

    monkeypatch.setattr(SecretsProvider, "_get", counted)
    for n in range(5):
        assert click(f"guess{n}")["statusCode"] == 404
    assert calls == ["AWSCURRENT", "AWSPREVIOUS", "AWSCURRENT"]
