"""Scapy layers for hotplane update and acknowledgement packets, bound to UDP port 47474.

    pkt = Ether()/IP(dst="10.0.0.254")/UDP(sport=40000, dport=47474)/HotplaneUpdate(datagram)
    ack = reply[HotplaneAck]; ack.check(key)
"""

from scapy.fields import (ByteEnumField, ByteField, FieldLenField, FlagsField, IntField, LongField,
                          ShortEnumField, ShortField, StrFixedLenField, StrLenField)
from scapy.layers.inet import UDP
from scapy.packet import Packet, bind_layers

from . import envelope

TARGET_TYPES = {0: "position", 1: "extern", 2: "flow", 3: "flow-default"}


class HotplaneUpdate(Packet):
    name = "hotplane update"
    fields_desc = [
        StrFixedLenField("magic", envelope.MAGIC, 4),
        ByteField("proto_version", envelope.VERSION),
        ByteEnumField("kind", envelope.Kind.NATIVE_STAGE, envelope.KIND_NAMES),
        FlagsField("flags", 0, 16, ["no_ack", "no_jit", "b2", "b3", "opt0", "opt1", "opt_set"]),
        IntField("key_id", 0),
        LongField("seq", 0),
        IntField("total_len", None),
        IntField("frag_offset", 0),
        FieldLenField("frag_len", None, length_of="data", fmt="!H"),
        ByteEnumField("target_type", 0, TARGET_TYPES),
        FieldLenField("target_len", None, length_of="target", fmt="B"),
        ShortField("worker", envelope.WORKER_ALL),
        ShortField("reserved", 0),
        StrLenField("target", b"", length_from=lambda p: p.target_len),
        StrLenField("data", b"", length_from=lambda p: p.frag_len),
        StrFixedLenField("mac", b"\x00" * envelope.MAC_LEN, envelope.MAC_LEN),
    ]

    def post_build(self, p, pay):
        if self.total_len is None:
            p = p[:20] + len(self.data).to_bytes(4, "big") + p[24:]
        return p + pay

    def check(self, key: bytes) -> bool:
        """True if the MAC verifies under `key`."""
        return envelope.verify(bytes(self), key)

    def signed(self, key: bytes) -> "HotplaneUpdate":
        """A copy with the MAC computed under `key`."""
        raw = bytes(self)
        body = raw[:-envelope.MAC_LEN]
        return HotplaneUpdate(body + envelope.mac(key, body))


class HotplaneAck(Packet):
    name = "hotplane ack"
    fields_desc = [
        StrFixedLenField("magic", envelope.ACK_MAGIC, 4),
        ByteField("proto_version", 1),
        ByteEnumField("status", 0, envelope.STATUSES),
        ShortEnumField("reason", 0, envelope.REASONS),
        IntField("key_id", 0),
        LongField("seq", 0),
        LongField("slot_version", 0),
        IntField("received", 0),
        FieldLenField("msg_len", None, length_of="message", fmt="!H"),
        StrLenField("message", b"", length_from=lambda p: p.msg_len),
        StrFixedLenField("mac", b"\x00" * envelope.MAC_LEN, envelope.MAC_LEN),
    ]

    def check(self, key: bytes) -> bool:
        return envelope.verify(bytes(self), key)

    def to_ack(self, key=None) -> envelope.Ack:
        return envelope.Ack.decode(bytes(self), key)


bind_layers(UDP, HotplaneUpdate, dport=envelope.DEFAULT_UPDATE_PORT)
bind_layers(UDP, HotplaneAck, sport=envelope.DEFAULT_UPDATE_PORT)
