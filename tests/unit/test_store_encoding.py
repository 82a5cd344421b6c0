"""How the store packs what it writes: content blobs and history records (pure, no AWS)."""

from __future__ import annotations

import json
import zlib

from vdq.store import (
    HistoryRecord,
    decode_content,
    encode_content,
    pack_history,
    unpack_history,
)

ROWS = "".join(f"<tr><td>Parcel #{n:05d}</td><td>{n % 7}</td><td>US$ {n * 3.17:.2f}</td></tr>\n"
               for n in range(300))  # fmt: skip


def test_content_round_trips_in_whichever_encoding_is_smaller():
    short = {"subject": "Hi", "text": "Your code is 493021"}
    long = {"subject": "Your order shipped", "html": f"<table>{ROWS}</table>"}
    for data in (short, long):
        blob = encode_content(data)
        assert decode_content(blob) == data
        assert len(blob) <= len(zlib.compress(json.dumps(data).encode(), 9))
    assert encode_content(long)[:3] == b"BZh"  # long repetitive HTML: bzip2 wins here
    assert encode_content(short)[:1] == b"\x78"  # short text: deflate


def test_blobs_written_with_deflate_alone_still_decode():
    data = {"subject": "s", "html": ROWS}
    assert decode_content(zlib.compress(json.dumps(data).encode(), 6)) == data


def entry(item: str, at: str, key: str, name: str) -> HistoryRecord:
    return HistoryRecord(f"QI#{item}", f"H#{at}#{key}", at=at, actor="vdq", source="server",
                         kind="transition", name=name, attempt=1)  # fmt: skip


def test_entries_of_one_write_share_one_record_per_item_and_unpack_in_order():
    send = entry("a", "2026-01-01T00:00:00.000000Z", "send1", "send")
    accepted = entry("a", "2026-01-01T00:00:00.000001Z", "9f0c1d", "await")
    other = entry("b", "2026-01-01T00:00:00.000002Z", "77aa01", "cancel")
    records = pack_history([send, accepted, other])
    assert [r.sk for r in records] == [accepted.sk, other.sk]
    assert send.more is None and accepted.more is None  # the caller's entries are unchanged
    entries = unpack_history(records[:1])
    assert [(e.sk, e.name, e.attempt) for e in entries] == [(send.sk, "send", 1),
                                                            (accepted.sk, "await", 1)]  # fmt: skip


def test_an_entry_stored_by_two_writers_is_listed_once():
    send = entry("a", "2026-01-01T00:00:00.000000Z", "send1", "send")
    succeeded = entry("a", "2026-01-01T00:00:00.000003Z", "c0ffee", "succeed")
    late = entry("a", "2026-01-01T00:00:00.000004Z", "beef01", "await")
    stored = [*pack_history([send, succeeded]), *pack_history([send, late])]
    assert [e.name for e in unpack_history(stored)] == ["send", "succeed", "await"]
