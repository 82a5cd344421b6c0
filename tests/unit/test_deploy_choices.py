"""The deploy choices as the documentation lists them (``infra.choices.CHOICES``, from which the
settings page is generated) are the ones infra/ reads, with the defaults it applies."""

from __future__ import annotations

import ast
import re
from dataclasses import fields
from pathlib import Path

from infra.choices import CHOICES, choice_default
from infra.config import DeployConfig

ROOT = Path(__file__).resolve().parents[2]


def context_keys_read_by_infra() -> set[str]:
    """``vdq:*`` keys passed to a call in infra/: ``try_get_context("vdq:x")``, ``_get(node,
    "vdq:x", default)`` and the like (a key only mentioned in a comment or message is not)."""
    keys = set()
    for path in (ROOT / "infra").glob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Call):
                for arg in node.args:
                    if isinstance(arg, ast.Constant) and re.fullmatch(r"vdq:\w+", str(arg.value)):
                        keys.add(arg.value)
    return keys


class EmptyContext:
    """A CDK node with no context at all (from_context reads nothing else)."""

    def try_get_context(self, key: str) -> None:
        return None


def test_the_documented_choices_are_exactly_the_keys_infra_reads():
    documented = [c.key for c in CHOICES]
    assert len(documented) == len(set(documented))
    read = context_keys_read_by_infra()
    assert "vdq:sesIdentities" in read and "vdq:stackName" in read  # the scan finds them
    assert sorted(read - set(documented)) == [], "undocumented deploy choices"
    assert sorted(set(documented) - read) == [], "documented choices infra/ never reads"


def test_each_default_shown_is_the_one_a_deploy_without_context_gets():
    names = {f.name for f in fields(DeployConfig)}
    assert DeployConfig.from_context(EmptyContext()) == DeployConfig()  # type: ignore[arg-type]
    for choice in CHOICES:
        assert choice.meaning and choice_default(choice), choice.key
        assert (choice.field is None) != (choice.default is None), choice.key
        assert choice.field is None or choice.field in names, choice.key


def test_a_choice_that_sets_a_parameters_default_says_it_holds_from_the_first_deploy_only():
    """vdq:twilioSecretName is the default of the TwilioCredentialsName parameter, and `cdk
    deploy` keeps an existing parameter's value (UsePreviousValue) unless --parameters names
    it: a secret name changed in cdk.json after the first deploy was silently not used. The
    settings page says so, and how to change it."""
    [choice] = [c for c in CHOICES if c.key == "vdq:twilioSecretName"]
    meaning = " ".join(choice.meaning.split())
    assert "first deploy" in meaning
    assert "--parameters TwilioCredentialsName=" in meaning
