"""The Python envelope is byte-compatible with the node (shared vectors) and rejects bad input."""

import pytest

from hotplane import envelope
from hotplane.envelope import Ack, EnvelopeError


def test_updates_match_shared_vectors(vectors):
    for case in vectors["updates"]:
        key = bytes.fromhex(case["key"]) if case["key"] else None
        got = envelope.build(case["target"], case["kind"], bytes.fromhex(case["payload"]),
                             key_id=case["key_id"], key=key, seq=int(case["seq"]), worker=case["worker"],
                             flags=case["flags"], max_fragment=case["max_fragment"])
        assert [d.hex() for d in got] == case["datagrams"], case["name"]
        for d in got:
            f = envelope.parse(d)
            assert (f.kind, f.key_id, f.seq, f.worker) == (case["kind"], case["key_id"], int(case["seq"]), case["worker"])
            if key:
                assert envelope.verify(d, key)
                assert not envelope.verify(d, bytes(32))


def test_acks_match_shared_vectors(vectors):
    for case in vectors["acks"]:
        key = bytes.fromhex(case["key"]) if case["key"] else None
        raw = bytes.fromhex(case["bytes"])
        a = Ack.decode(raw, key)
        assert a.seq == int(case["seq"]) and a.version == int(case["version"]) and a.message == case["message"]
        assert a.encode(key) == raw
        if key:
            with pytest.raises(EnvelopeError):
                Ack.decode(raw, bytes(32))


def test_reassembling_fragments_gives_the_payload():
    key = bytes(range(32))
    payload = bytes(range(256)) * 10
    ds = envelope.build("post", envelope.Kind.NATIVE_STAGE, payload, key_id=1, key=key, seq=5, max_fragment=300)
    assert len(ds) == 9
    out = bytearray(len(payload))
    for d in ds:
        f = envelope.parse(d)
        out[f.offset:f.offset + len(f.data)] = f.data
    assert bytes(out) == payload


@pytest.mark.parametrize("target", ["sideways", "extern:", "flow:port=1", "flow:src=10.0.0.1,dst=fd00::1"])
def test_bad_targets_are_refused(target):
    with pytest.raises((EnvelopeError, ValueError)):
        envelope.build(target, 1, b"", key_id=0, key=None, seq=1)


def test_key_is_required():
    with pytest.raises(EnvelopeError):
        envelope.build("pre", 1, b"{}", key_id=1, key=None, seq=1)


def test_parse_rejects_garbage():
    for junk in [b"", b"HPUP", b"x" * 100, b"HPUP\x02" + bytes(80)]:
        with pytest.raises(EnvelopeError):
            envelope.parse(junk)
