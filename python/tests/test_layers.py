"""Scapy layers: build, dissect, sign and check update and acknowledgement packets."""

from scapy.layers.inet import IP, UDP
from scapy.layers.l2 import Ether

from hotplane import envelope
from hotplane.layers import HotplaneAck, HotplaneUpdate

KEY = bytes(range(32))


def test_update_round_trips_through_scapy():
    d = envelope.build("flow:proto=udp,dport=5000", envelope.Kind.NATIVE_STAGE, b'{"stage":"count"}',
                       key_id=1, key=KEY, seq=42)[0]
    pkt = Ether() / IP(src="10.9.9.9", dst="10.0.0.254") / UDP(sport=40000, dport=47474) / HotplaneUpdate(d)
    again = Ether(bytes(pkt))
    u = again[HotplaneUpdate]
    assert u.seq == 42 and u.kind == envelope.Kind.NATIVE_STAGE and u.data == b'{"stage":"count"}'
    assert u.target_type == 2 and len(u.target) == 43
    assert bytes(u) == d
    assert u.check(KEY)


def test_fields_built_by_hand_and_signed_match_the_builder():
    ttype, desc = envelope.encode_target("pre")
    by_hand = HotplaneUpdate(kind=1, key_id=1, seq=7, target_type=ttype, target=desc,
                             data=b'{"stage":"drop"}').signed(KEY)
    builder = envelope.build("pre", 1, b'{"stage":"drop"}', key_id=1, key=KEY, seq=7)[0]
    assert bytes(by_hand) == builder


def test_tampering_is_detected():
    d = bytearray(envelope.build("mid", 1, b'{"stage":"drop"}', key_id=1, key=KEY, seq=1)[0])
    d[40] ^= 1
    assert not HotplaneUpdate(bytes(d)).check(KEY)


def test_ack_layer():
    raw = envelope.Ack("refused", "replay", 1, 3, 0, 0, "too old").encode(KEY)
    pkt = Ether(bytes(Ether() / IP() / UDP(sport=47474, dport=40000) / raw))
    a = pkt[HotplaneAck]
    assert a.check(KEY)
    assert a.to_ack(KEY).reason == "replay"
    assert a.message == b"too old"
