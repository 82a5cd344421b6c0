"""The bench's bill models what the deployed stack does: the SES events it receives for a
delivered email are the ones the configuration set subscribes, and the arithmetic of a line."""

from __future__ import annotations

from bench import bill, cost, requests


def test_the_events_of_a_delivered_email_are_those_the_stack_subscribes():
    from infra.email_events import EVENT_TYPES, RECORDED_EVENTS

    # What SES publishes for a delivered email, in order: Send (it accepted it), then Delivery.
    published = ("Send", "Delivery")
    subscribed = tuple(e for e in published if EVENT_TYPES[e] in RECORDED_EVENTS)
    assert subscribed == requests.DELIVERED_EMAIL_EVENTS


def test_the_stream_batch_matches_the_mapping_and_provisioned_is_cheaper_at_a_steady_rate():
    import inspect

    from infra import stack

    table = cost.prices()
    assert f"batch_size={table['assumptions']['stream_batch_records']}" in inspect.getsource(stack)
    usage = {"wru": 10.0, "rru": 2.0}
    provisioned = bill.provisioned_dynamodb(usage, table)
    on_demand = 1e6 * (10 * table["dynamodb"]["per_million_write_request_units"]
                       + 2 * table["dynamodb"]["per_million_read_request_units"]) / 1e6
    # 10 WRU at US$0.00065 per WCU-hour, 70% utilised: 10 * 0.00065 / 3600 / 0.7 per message.
    assert round(provisioned, 4) == round(1e6 * (10 * 0.00065 + 2 * 0.00013) / 3600 / 0.7, 4)
    assert provisioned < on_demand


def test_a_journey_bill_has_every_line_and_totals_them():
    journey = requests.Journey()
    tally = requests.Tally()
    tally.wru, tally.log_bytes = 4.0, 1000
    journey.phases.append(("enqueue", tally, None, 0))
    billed = bill.bill(journey)
    assert set(billed["lines"]) == {k for k, _ in bill.LINES}
    assert billed["total_on_demand"] == round(sum(billed["lines"].values()), 2)
    assert billed["lines"]["cloudwatch_logs"] > 0 and billed["lines"]["dynamodb"] == 2.5
    text = bill.table_text({"email": billed})
    assert all(line in text for _, line in bill.LINES)


def test_storage_is_a_line_for_the_retention_and_provider_fees_are_rows_outside_the_total():
    journey = requests.Journey(stored_bytes=3_000)
    billed = bill.bill(journey)
    # 3,000 bytes a message, a million messages, 30 days of retention + 2 of TTL lag, at
    # US$0.25 per GB-month.
    expected = 1e6 * 3_000 / 1024**3 * 0.25 * (30 + 2) / 30
    assert billed["lines"]["dynamodb_storage"] == round(expected, 4)
    assert billed["total_on_demand"] == round(sum(billed["lines"].values()), 2)
    assert billed["ses_fee"] == 100.0 and billed["twilio_fee"] is None
    sms = bill.bill(requests.Journey(sms=True))
    assert sms["ses_fee"] is None and sms["twilio_fee"] > 0
    text = bill.table_text({"email": billed, "sms": sms})
    assert "SES's own fee" in text and "(outside the total)" in text


def test_a_full_batch_shares_its_pace_reservation_and_a_batch_of_one_pays_it_whole():
    send = requests.Tally()
    send.wru, send.pace_wru = 7.0, 1.0  # of which the pace record's slot: one UpdateItem
    journey = [cost.Invocation("send", send.as_json(), queue="send")]
    volume = cost.journey_cost(journey, fill=10)["_usage_per_message"]
    trickle = cost.journey_cost(journey, fill=1)["_usage_per_message"]
    assert volume["wru"] == 6.1 and trickle["wru"] == 7.0


def test_the_floor_prices_the_required_writes_and_keeps_the_other_lines_but_xray_and_logs():
    journey = requests.Journey(stored_bytes=3_000)
    tally = requests.Tally()
    tally.wru, tally.rru, tally.log_bytes = 20.0, 3.0, 1_300
    journey.phases.append(("enqueue", tally, None, 0))
    billed = bill.bill(journey)
    low = bill.floor(billed)
    table = cost.prices()
    assert low["wru"] == sum(n for _, n in bill.FLOOR_WRITES) == 11
    # One invocation (not queue-fed): 700 platform bytes of its 2,000 log bytes stay.
    logs = billed["lines"]["cloudwatch_logs"] * 700 / 2_000
    kept = billed["lines"]["lambda"] + billed["lines"]["dynamodb_storage"] + logs
    ddb = (11 * table["dynamodb"]["per_million_write_request_units"]
           + 1 * table["dynamodb"]["per_million_read_request_units"])
    assert low["on_demand"] == round(kept + ddb, 2)
    assert low["provisioned"] == round(kept + bill.provisioned_dynamodb(low, table), 2)
    assert low["provisioned"] < low["on_demand"] < billed["total_on_demand"]
