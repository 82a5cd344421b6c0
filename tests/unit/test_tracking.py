"""Email tracking strategies: tags on the way out, the item key back from an SES event."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from vdq.core.errors import SettingsError
from vdq.results.tracking import EmailTrackingStrategy, TagEmailTrackingStrategy, load_strategy

ITEM_ID = "01KBF3ZQ0M8Y4T6R2W9X5N7C3D"


def ses_event(tags):
    return {"eventType": "Delivery", "mail": {"messageId": "0100-x", "tags": tags}}


def test_the_tag_strategy_attaches_the_item_and_attempt_and_reads_them_back():
    tags: list[dict[str, str]] = []
    strategy = TagEmailTrackingStrategy()
    strategy.attach(tags, SimpleNamespace(id=ITEM_ID, attempt=3))
    assert tags == [{"Name": "vdq_item", "Value": ITEM_ID}, {"Name": "vdq_attempt", "Value": "3"}]
    event = ses_event({"ses:configuration-set": ["vdq-events"], "vdq_item": [ITEM_ID],
                       "vdq_attempt": ["3"]})  # fmt: skip
    assert strategy.find_queue_item(event) == (ITEM_ID, 3)


@pytest.mark.parametrize("tags", [
    {}, {"vdq_item": []}, {"vdq_item": ["1; DROP"]}, {"vdq_item": [42]}, None, ["vdq_item"],
])  # fmt: skip
def test_the_tag_strategy_finds_nothing_in_an_event_without_a_valid_key(tags):
    assert TagEmailTrackingStrategy().find_queue_item(ses_event(tags)) is None


def test_an_attempt_that_is_not_a_number_is_left_out():
    event = ses_event({"vdq_item": [ITEM_ID], "vdq_attempt": ["x"]})
    assert TagEmailTrackingStrategy().find_queue_item(event) == (ITEM_ID, None)


def test_the_base_strategy_attaches_and_finds_nothing():
    tags: list[dict[str, str]] = []
    EmailTrackingStrategy().attach(tags, SimpleNamespace(id=ITEM_ID, attempt=1))
    assert tags == []
    assert EmailTrackingStrategy().find_queue_item(ses_event({"vdq_item": [ITEM_ID]})) is None


def test_load_strategy_imports_the_named_class_once():
    first = load_strategy("vdq.results.tracking.TagEmailTrackingStrategy")
    assert isinstance(first, TagEmailTrackingStrategy)
    assert load_strategy("vdq.results.tracking.TagEmailTrackingStrategy") is first
    strategy = load_strategy("vdq.results.tracking.EmailTrackingStrategy")
    assert type(strategy) is EmailTrackingStrategy


def test_a_strategy_named_by_the_modules_former_path_still_loads():
    # VDQ_EMAIL_TRACKING_STRATEGY values written before the package had subpackages
    assert type(load_strategy("vdq.tracking.EmailTrackingStrategy")) is EmailTrackingStrategy
    assert isinstance(load_strategy("vdq.tracking.TagEmailTrackingStrategy"),
                      TagEmailTrackingStrategy)


@pytest.mark.parametrize("path", ["nope.Strategy", "vdq.results.tracking.Missing",
                                  "vdq.core.settings.Settings", "TagEmailTrackingStrategy",
                                  ""])  # fmt: skip
def test_a_bad_strategy_path_is_a_settings_error_naming_the_setting(path):
    with pytest.raises(SettingsError, match="VDQ_EMAIL_TRACKING_STRATEGY"):
        load_strategy(path)
