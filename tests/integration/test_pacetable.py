"""bench.virtual.PaceTable answers the pace records' requests as DynamoDB (moto) does: the same
sequence of reservations, cuts and reads through the real PaceRecords gives the same answers,
request counts included, on both. The lanes-at-the-rate simulation (bench/lanesim.py) relies
on it.
"""

from __future__ import annotations

import random

import boto3
from bench.virtual import PaceTable

from vdq.store.pacing import PaceRecords


def script(records: PaceRecords, seed: int) -> list[object]:
    """Reservations by several callers with right and wrong busy guesses, against a schedule
    running ahead, behind and past ``latest``; cuts in and out of a burst; reads."""
    rng = random.Random(seed)
    answers: list[object] = []
    now = 1_700_000_000.0
    for step in range(60):
        now += rng.choice([0.0, 0.013, 0.1, 0.25, 1.5, 4.0])
        key = rng.choice(["ses", "ses#bulk", "twilio#+15005550006"])
        if step % 9 == 8:  # a cut, and another in the same burst
            answers.append(records.cut(key, rng.uniform(1, 10), now, since=now - 2.0))
            answers.append(records.cut(key, 1.0, now + 0.5, since=now - 1.5))
        elif step % 7 == 6:
            answers.append(records.read(key))
        else:
            length = rng.choice([0.1, 0.5, 1.0, 3.0])
            latest = now + rng.choice([0.0, 0.5, 1.0, 5.0])
            answers.append(records.reserve(key, length, now, latest, busy=rng.random() < 0.5))
    return answers


def test_the_pace_table_answers_as_dynamodb_does(aws):
    for seed in range(3):
        real = PaceRecords(boto3.client("dynamodb"), aws["table"])
        memory = PaceRecords(PaceTable(), aws["table"])
        assert script(memory, seed) == script(real, seed)
        for key in ("ses", "ses#bulk", "twilio#+15005550006"):  # a fresh schedule per seed
            boto3.client("dynamodb").delete_item(
                TableName=aws["table"], Key={"pk": {"S": f"PACE#{key}"}, "sk": {"S": "PACE"}})
