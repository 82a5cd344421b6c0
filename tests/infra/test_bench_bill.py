"""The bench's bill models what the deployed stack does: the SES events it receives for a
delivered email are the ones the configuration set subscribes, and the arithmetic of a line."""

from __future__ import annotations

from bench import bill, cost, hotkeys, requests


def test_the_events_of_a_delivered_email_are_those_the_stack_subscribes():
    from infra.email_events import EVENT_TYPES, RECORDED_EVENTS

    # What SES publishes for a delivered email, in order: Send (it accepted it), then Delivery.
    published = ("Send", "Delivery")
    subscribed = tuple(e for e in published if EVENT_TYPES[e] in RECORDED_EVENTS)
    assert subscribed == requests.DELIVERED_EMAIL_EVENTS


def test_the_stream_batch_matches_the_mapping_and_provisioned_is_cheaper_at_a_steady_rate():
    import inspect

    from infra import stack

    # The bill models the stream mapping the stack deploys: both read vdq.core.resources.
    source = inspect.getsource(stack)
    assert "batch_size=resources.STREAM_BATCH_SIZE" in source
    assert "Duration.seconds(resources.STREAM_BATCHING_WINDOW_SECONDS)" in source
    table = cost.prices()
    assert "Duration.seconds(resources.STREAM_TUMBLING_WINDOW_SECONDS)" in source
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
    assert "SES's own fee" in text and "outside the total:" in text


def test_a_full_batch_shares_its_pace_reservation_and_a_batch_of_one_pays_it_whole():
    send = requests.Tally()
    send.wru, send.pace_wru = 7.0, 1.0  # of which the pace record's slot: one UpdateItem
    journey = [cost.Invocation("send", send.as_json(), queue="send")]
    volume = cost.journey_cost(journey, fill=10)["_usage_per_message"]
    trickle = cost.journey_cost(journey, fill=1)["_usage_per_message"]
    assert volume["wru"] == 6.1 and trickle["wru"] == 7.0


def test_a_full_batch_pays_its_replayed_time_and_shares_its_metric_line():
    send = requests.Tally()
    send.requests[("dynamodb", "GetItem")] = 1
    send.requests[("sesv2", "SendEmail")] = 1
    send.log_bytes = 190  # the metric line of an invocation of one
    journey = [cost.Invocation("send", send.as_json(), queue="send", batch_ms=20.0,
                               batch_log_bytes=23.0)]  # fmt: skip
    volume = cost.journey_cost(journey, fill=10)["_usage_per_message"]
    trickle = cost.journey_cost(journey, fill=1)["_usage_per_message"]
    # At volume: the replay's 20 ms a message, the batch's line shared; a batch of one: the
    # base and each request after another (5 + 6 + 60 ms), its own line.
    assert volume["lambda_gbs"] == round(0.5 * 20 / 1000, 6)
    assert trickle["lambda_gbs"] == round(0.5 * 71 / 1000, 6)
    platform = 0 if cost.deployed()["system_log_level"] == "WARN" else 700  # an invocation's
    assert volume["log_bytes"] == round(23.0 + platform / 10, 6)
    assert trickle["log_bytes"] == 190.0 + platform


def test_the_floor_prices_the_required_writes_and_keeps_the_other_lines_but_xray_and_logs():
    journey = requests.Journey(stored_bytes=3_000)
    tally = requests.Tally()
    tally.wru, tally.rru, tally.log_bytes = 20.0, 3.0, 1_300
    journey.phases.append(("enqueue", tally, None, 0))
    billed = bill.bill(journey)
    low = bill.floor(billed)
    table = cost.prices()
    # (The provider's ID needs no write of its own: the first result's or the check's carries
    # it; nor the publish a timer: a stray is found in the open items; nor the content's expiry:
    # it is written at birth; nor a done-list entry: the stream's done postings list it.)
    assert low["wru"] == sum(n for _, n in bill.FLOOR_WRITES) == 7
    # At the default system log level (WARN) Lambda prints no start and report lines: the
    # handler's 1,300 log bytes are the line, and the floor keeps none of it.
    assert billed["model"]["system_log_level"] == "WARN"
    assert billed["lines"]["cloudwatch_logs"] == round(1e6 * 1_300 / 1e9 * 0.53, 4)
    # At INFO, 700 bytes an invocation more (one, not queue-fed): a row beside the total.
    assert billed["variants"]["platform_logs"] == round(1e6 * 700 / 1e9 * 0.53, 4)
    kept = billed["lines"]["lambda"] + billed["lines"]["dynamodb_storage"]
    ddb = (7 * table["dynamodb"]["per_million_write_request_units"]
           + 1 * table["dynamodb"]["per_million_read_request_units"])
    assert low["on_demand"] == round(kept + ddb, 2)
    assert low["provisioned"] == round(kept + bill.provisioned_dynamodb(low, table), 2)
    assert low["provisioned"] < low["on_demand"] < billed["total_on_demand"]


# ---- the lines of the honest bill, each on fixed inputs ---------------------------------------


def test_point_in_time_recovery_bills_the_table_share_for_the_retention():
    journey = requests.Journey(stored_bytes=3_300, table_bytes=3_000)
    billed = bill.bill(journey)
    # Table data only (not the global indexes' entries), for as long as storage: 30 + 2 days.
    expected = 1e6 * 3_000 / 1024**3 * 0.20 * (30 + 2) / 30
    assert cost.prices()["dynamodb"]["pitr_per_gb_month"] == 0.20
    assert billed["lines"]["dynamodb_pitr"] == round(expected, 4)
    assert billed["total_on_demand"] == round(sum(billed["lines"].values()), 2)


def test_the_stream_shards_follow_the_table_size_and_a_batch_fills_over_its_window():
    import math

    table = cost.prices()
    # 3,000 table bytes an email, 1M a day, held 32 days: 96 GB, 10 partitions of 10 GB.
    assert cost.stream_shards(3_000, table) == 10
    assert cost.stream_shards(100, table) == 4  # a new on-demand table's partitions
    # A window starts when the last invocation ended; one that caught nothing invokes nothing:
    # x / (1 - e^-x) records a batch, x = records a second x window.
    assert cost.stream_fill(3.0, 1, 100) == 3.0 / (1 - math.exp(-3.0))
    assert abs(cost.stream_fill(0.001, 1, 100) - 1.0) < 0.001  # a trickle: one a batch
    assert cost.stream_fill(50.0, 10, 100) == 100  # a full batch before the window ends
    # A stream phase of 3 records pays 3 / fill of an invocation, at the deployed window.
    from vdq.core import resources

    phase = cost.Invocation("schedule", requests.Tally().as_json(), stream_records=3)
    usage = cost.journey_cost([phase], table_bytes=3_000)["_usage_per_message"]
    x = 1e6 / 86_400 * 3 / 10 * resources.STREAM_BATCHING_WINDOW_SECONDS  # on each of 10 shards
    fill = min(resources.STREAM_BATCH_SIZE, x / (1 - math.exp(-x)))
    assert abs(usage["lambda_requests"] - 3 / fill) < 1e-5


def test_xray_samples_a_reservoir_of_one_a_second_and_five_percent_of_the_rest():
    table = cost.prices()
    assert cost.traced_per_second(0.5, table) == 0.5
    assert abs(cost.traced_per_second(11, table) - (1 + 0.05 * 10)) < 1e-12
    rate = 1e6 / 86_400
    traces = cost.traces_per_message({"enqueue": 1.0, "send": 0.1}, table)
    # Shared: 1.1 invocations an email at 11.57/s is 12.7/s, of which 1 + 5% of 11.7 traced.
    assert abs(traces["shared"] - (1 + 0.05 * (1.1 * rate - 1)) / rate) < 1e-9
    # A reservoir each: enqueue 1 + 5% of the rest, send (1.16/s) 1 + 5% of 0.16.
    each = (1 + 0.05 * (rate - 1)) + (1 + 0.05 * (0.1 * rate - 1))
    assert abs(traces["per_function"] - each / rate) < 1e-9


def test_a_read_that_finds_nothing_costs_what_a_hit_of_size_zero_would():
    key = {"pk": {"S": "SUP#1"}, "sk": {"S": "x"}}
    strong = {"TableName": "t", "Key": key, "ConsistentRead": True}
    assert requests._reads("GetItem", strong, {}) == [("table", "SUP#1", 1.0)]
    assert requests._reads("GetItem", dict(strong, ConsistentRead=False), {}) == [
        ("table", "SUP#1", 0.5)]
    found = {"pk": {"S": "QI#a"}, "sk": {"S": "STATE"}, "blob": {"S": "x" * 5_000}}
    batch = {"RequestItems": {"t": {"Keys": [key, {"pk": found["pk"], "sk": found["sk"]}]}}}
    # Eventually consistent: the miss half a unit, the 5 KB hit half of two.
    reads = requests._reads("BatchGetItem", batch, {"Responses": {"t": [found]}})
    assert reads == [("table", "SUP#1", 0.5), ("table", "QI#a", 1.0)]
    batch["RequestItems"]["t"]["ConsistentRead"] = True
    reads = requests._reads("BatchGetItem", batch, {"Responses": {"t": [found]}})
    assert [units for _, _, units in reads] == [1.0, 2.0]
    query = {"TableName": "t", "IndexName": "active", "KeyConditionExpression": "#0 = :0",
             "ExpressionAttributeNames": {"#0": "active_pk"},
             "ExpressionAttributeValues": {":0": {"S": "A#2"}}}
    assert requests._reads("Query", query, {"Items": []}) == [("active", "A#2", 0.5)]


def test_a_send_batch_is_replayed_on_its_threads():
    latency = {"dynamodb": 6.0, "sesv2": 60.0}.__getitem__
    # Pace reservation, then two messages: each a suppression read and a claim in the main
    # thread, then its SES call and its record on a sending thread.
    events = [(None, "dynamodb"),
              (None, "dynamodb"), (None, "dynamodb"), ("submit", "a"),
              ("a", "sesv2"), (None, "dynamodb"), (None, "dynamodb"), ("a", "dynamodb"),
              ("submit", "b"), ("b", "sesv2"), ("b", "dynamodb")]
    # Two threads: main 5 + 6 + 12 = 23, a runs 23-89; main + 12 = 35, b runs 35-101.
    assert cost.replay(events, 2, latency, 5.0) == 101.0
    # One thread: the sends are made in the main thread, one after another.
    assert cost.replay(events, 1, latency, 5.0) == 5 + 6 + 2 * (12 + 66)
    # A third message on two threads: it waits for the first send to end before it is
    # prepared (make_room: both threads are busy), then its own 12 ms and 66 ms.
    three = [*events, (None, "dynamodb"), (None, "dynamodb"), ("submit", "c"),
             ("c", "sesv2"), ("c", "dynamodb")]
    assert cost.replay(three, 2, latency, 5.0) == 89 + 12 + 66


def test_the_bill_prices_api_gateway_at_one_and_ten_receivers_and_the_callbacks():
    journey = requests.Journey(sms=True)
    for function, queue in (("enqueue", None), ("send", "send"), ("webhook", None),
                            ("webhook", None)):
        journey.phases.append((function, requests.Tally(), queue, 0))
    billed = bill.bill(journey)
    assert billed["api_gateway"] == {"1": 3.50, "10": 0.35}
    assert billed["api_callbacks"] == 7.00  # Twilio's "sent" and "delivered", 2 requests
    assert bill.bill(requests.Journey())["api_callbacks"] == 0


def test_emf_lines_are_counted_as_printed_one_json_line_each():
    from vdq.core.observability import metrics

    requests.COUNTER.install()

    @metrics.log_metrics
    def handler(event, context):
        metrics.add_metric(name="ItemsEnqueued", unit="Count", value=1)
        return {}

    with requests.COUNTER.measure() as tally:
        handler({}, None)
    assert tally.metrics == {"ItemsEnqueued": 1}
    assert tally.log_bytes > 100  # the EMF line, as Lambda ships it


def test_keys_shared_by_many_emails_take_their_units_at_the_send_rate():
    keys = {"table|QI#a": [5.0, 2.0], "table|QI#b": [5.0, 2.0], "table|CT#c": [4.0, 0.0],
            "table|PACE#ses": [0.2, 0.0], "active|A#1": [3.0, 0.0], "active|A#2": [1.0, 0.0],
            "table|SUP#3": [0.0, 1.5]}
    owners = {"a": {"a"}, "b": {"b"}, "c": {"a", "b"}}  # c: a content both share
    found = hotkeys.by_partition(keys, owners, count=2, rate=1_000)
    # 4 units of the content the 2 emails share: 2,000 a second at 1,000 emails a second.
    assert found["writes"] == {"key": "table:CT#c (of 2 emails)", "writes": 2000.0,
                               "reads": 0.0}
    assert found["reads"] == {"key": "table:SUP#*", "writes": 0.0, "reads": 750.0}
    # The shards of the active index take their mean: 2 units of 2 emails, 1,000 a second.
    assert ["active:A#* (2 shards)", 1000.0, 0.0] in found["shared"]
    assert found["own_writes"]["writes"] == 5.0  # an email's state: its own, whatever the rate
    # A content of 2 of 4 emails: its units over the 2 that use it, not over the 4.
    found = hotkeys.by_partition(keys, owners, count=4, rate=1_000)
    assert found["writes"]["writes"] == 2000.0


def test_an_origins_shards_take_their_mean_over_all_of_them_not_the_ones_a_sample_met():
    from vdq.store.models import ORIGIN_SHARDS

    # Two of an origin's shards met by a sample of 2 emails: at the rate, every shard takes
    # its share, so the units go over ORIGIN_SHARDS partitions.
    keys = {"table|CO#abcdefghijklm-3": [16.0, 0.0], "table|CO#abcdefghijklm-7": [16.0, 0.0]}
    found = hotkeys.by_partition(keys, {}, count=2, rate=1_000)
    per_shard = 32 / ORIGIN_SHARDS / 2 * 1_000
    assert found["writes"] == {"key": f"table:CO#abcdefghijklm#* ({ORIGIN_SHARDS} shards)",
                               "writes": per_shard, "reads": 0.0}


def test_the_idle_month_prices_what_the_template_holds():
    import json

    from bench import idle

    template = {"Parameters": {"TwilioCredentialsName": {}}, "Resources": {
        "A1": {"Type": "AWS::CloudWatch::Alarm"}, "A2": {"Type": "AWS::CloudWatch::Alarm"},
        "D": {"Type": "AWS::CloudWatch::Dashboard"}, "K": {"Type": "AWS::KMS::Key"},
        "T": {"Type": "AWS::SNS::Topic", "Properties": {"KmsMasterKeyId": "k"}},
        "S": {"Type": "AWS::SecretsManager::Secret"},
        "Q": {"Type": "AWS::Lambda::EventSourceMapping",
              "Properties": {"EventSourceArn": {"Fn::GetAtt": ["SendQueue", "Arn"]}}},
        "R": {"Type": "AWS::Lambda::EventSourceMapping",
              "Properties": {"EventSourceArn": {"Fn::GetAtt": ["Table", "StreamArn"]}}},
        "M": {"Type": "AWS::Scheduler::Schedule", "Properties": {
            "ScheduleExpression": "rate(1 minute)",
            "Target": {"Input": json.dumps({"task": "sweep"})}}}}}
    provisioned = {"Resources": {
        "P1": {"Type": "AWS::ApplicationAutoScaling::ScalingPolicy"},
        "P2": {"Type": "AWS::ApplicationAutoScaling::ScalingPolicy"},
        "T": {"Type": "AWS::DynamoDB::Table", "Properties": {
            "ProvisionedThroughput": {"WriteCapacityUnits": 5, "ReadCapacityUnits": 5},
            "GlobalSecondaryIndexes": [{"ProvisionedThroughput": {
                "WriteCapacityUnits": 5, "ReadCapacityUnits": 5}}]}}}}
    run = requests.Tally()
    run.requests[("dynamodb", "Query")] = 2
    run.rru, run.log_bytes = 1.0, 100
    run.metrics["Schedule_lease_moved"] = 1
    month = idle.monthly(template, provisioned, {"sweep": run.as_json()},
                         system_log_level="WARN", tracing="passthrough")
    lines = [(od, pr) for _, od, pr in month["lines"]]
    alarms, dashboards, kms, secrets, runs, reads, logs, traces, metrics, polls, minimum = lines
    assert alarms == (0.2, round(0.2 + 2 * 2 * 0.1, 4))  # 2 alarms a scaling policy
    assert dashboards == (3.0, 3.0)
    # The key, and SNS's data key requests: 2 every 5 minutes for the one publisher (SES).
    assert kms[0] == round(1.0 + 30 * 86_400 / 300 * 2 / 1e4 * 0.03, 4)
    assert secrets == (0.8, 0.8)  # the template's and the Twilio credentials'
    count = 30 * 24 * 60  # rate(1 minute)
    per_run = 1.0 / 1e6 + 0.2 / 1e6 + 0.5 * (5 + 2 * 6) / 1000 * 1.33334e-05
    assert runs[0] == round(count * per_run, 4)  # the scheduler's invocation and Lambda's
    assert reads[0] == round(count * 1.0 * 0.125 / 1e6, 4)
    assert logs[0] == round(count * 100 / 1e9 * 0.53, 4)  # no platform lines at WARN
    assert traces[0] == 0  # none when tracing passes through
    assert metrics == (0.3, 0.3)  # one custom metric emitted while idle
    # One SQS mapping: 5 long polls of 20 s each, a month; the stream's reads are free.
    assert polls[0] == round(5 * 30 * 86_400 / 20 * 0.4 / 1e6, 4)
    assert minimum == (0.0, round(720 * (10 * 0.00065 + 10 * 0.00013), 4))
    assert month["on_demand"] == round(sum(od for _, od, _ in month["lines"]), 2)


def test_the_guard_reads_little_per_message_and_prices_it():
    from vdq.core import resources

    model = {"messages_per_second": 1e6 / 86_400, "stream_shards": 10}
    found = bill.guard_reads(model, cost.prices())
    # Per window of a shard, two producers' looks of 1 + 24 x 0.5 units; 4 containers' cache.
    windows = 10 / resources.STREAM_TUMBLING_WINDOW_SECONDS
    assert found["evaluate_rru"] == round(windows * 2 * 13 / (1e6 / 86_400), 4)
    assert found["cache_rru"] == round(4 / 30 / (1e6 / 86_400), 4)
    assert found["rru"] < 0.5 and found["usd_per_million"] < 0.1  # close to nothing
