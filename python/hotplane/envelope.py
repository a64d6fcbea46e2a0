"""The hotplane update envelope and acknowledgement, byte for byte as docs/update-protocol.md
specifies and the Rust node implements (tests/vectors/envelope.json keeps both honest)."""

from __future__ import annotations

import ipaddress
import struct
import time
from dataclasses import dataclass
from typing import List, Optional, Tuple

import blake3

MAGIC = b"HPUP"
ACK_MAGIC = b"HPAK"
VERSION = 1
HEADER_LEN = 36
MAC_LEN = 32
MIN_LEN = HEADER_LEN + MAC_LEN
WORKER_ALL = 0xFFFF
WORKER_RECEIVING = 0xFFFE
DEFAULT_UPDATE_PORT = 47474
DEFAULT_FRAGMENT = 1300
# Over the control socket there is no MTU: one fragment up to 60 KB (frag_len is 16 bits).
API_FRAGMENT = 60000


class Kind:
    NATIVE_STAGE = 1
    SELECT_PREDEFINED = 2
    REMOVE = 3
    EBPF_BYTECODE = 16
    EBPF_ELF = 17
    EBPF_C = 18
    LUA = 32
    WASP = 48
    P4 = 64


KIND_NAMES = {
    1: "native-stage", 2: "select-predefined", 3: "remove", 16: "ebpf-bytecode",
    17: "ebpf-elf", 18: "ebpf-c", 32: "lua", 48: "wasp", 64: "p4",
}


class Flags:
    NO_ACK = 1 << 0
    NO_JIT = 1 << 1
    OPT_LEVEL_SET = 1 << 6

    @staticmethod
    def opt_level(level: int) -> int:
        return ((level & 3) << 4) | Flags.OPT_LEVEL_SET


REASONS = {
    1: "truncated", 2: "bad_magic", 3: "bad_version", 4: "unknown_key", 5: "bad_mac",
    6: "unauthenticated", 7: "replay", 8: "oversized", 9: "malformed",
    10: "inconsistent_fragment", 11: "too_many_pending", 12: "unsupported_kind",
    13: "bad_target", 14: "apply_failed", 15: "timed_out", 16: "rejected",
}
STATUSES = {0: "applied", 1: "partial", 2: "refused"}
POSITIONS = {"pre": 0, "mid": 1, "post": 2}
PROTOCOLS = {"udp": 17, "tcp": 6, "icmp": 1, "icmpv6": 58}


class EnvelopeError(ValueError):
    pass


def next_seq() -> int:
    """A sequence number that grows across runs: microseconds since the Unix epoch."""
    return time.time_ns() // 1000


def mac(key: bytes, body: bytes) -> bytes:
    return blake3.blake3(body, key=key).digest()


def _flow_descriptor(selector: str) -> bytes:
    present = 0
    version = 0
    proto = 0
    plen = {"src": 0, "dst": 0}
    addr = {"src": bytes(16), "dst": bytes(16)}
    sport = dport = vlan = 0
    seen = set()
    text = selector.strip()
    if text not in ("", "*", "any"):
        for part in text.split(","):
            if "=" not in part:
                raise EnvelopeError(f"flow selector field `{part.strip()}` is not key=value")
            k, v = (x.strip() for x in part.split("=", 1))
            if k in seen:
                raise EnvelopeError(f"flow selector field `{k}` given twice")
            seen.add(k)
            if k == "proto":
                proto = PROTOCOLS[v] if v in PROTOCOLS else int(v)
                present |= 1
            elif k in ("src", "dst"):
                net = ipaddress.ip_network(v, strict=False)
                a = ipaddress.ip_address(v.split("/")[0])
                if version and version != a.version:
                    raise EnvelopeError("flow selector mixes IPv4 and IPv6 addresses")
                version = a.version
                n = net.prefixlen
                masked = int(a) & (int(net.netmask))
                raw = masked.to_bytes(4 if a.version == 4 else 16, "big")
                addr[k] = raw + bytes(16 - len(raw))
                plen[k] = n
                present |= 2 if k == "src" else 4
            elif k == "sport":
                sport = int(v)
                present |= 8
            elif k == "dport":
                dport = int(v)
                present |= 16
            elif k == "vlan":
                vlan = int(v) & 0x0FFF
                present |= 32
            else:
                raise EnvelopeError(f"flow selector field `{k}` is not one of proto, src, dst, sport, dport, vlan")
    return (bytes([present, version, proto, plen["src"], plen["dst"]]) + addr["src"] + addr["dst"]
            + struct.pack(">HHH", sport, dport, vlan))


def encode_target(target: str) -> Tuple[int, bytes]:
    """`pre`, `mid`, `post`, `extern:NAME`, `flow:SELECTOR` or `flow:default` -> (type, descriptor)."""
    if target in POSITIONS:
        return 0, bytes([POSITIONS[target]])
    if target.startswith("extern:"):
        name = target[len("extern:"):].encode()
        if not 1 <= len(name) <= 64:
            raise EnvelopeError("extern name must be 1 to 64 bytes")
        return 1, name
    if target == "flow:default":
        return 3, b""
    if target.startswith("flow:"):
        return 2, _flow_descriptor(target[len("flow:"):])
    raise EnvelopeError(f"`{target}` is not a target (pre, mid, post, extern:NAME, flow:SELECTOR, flow:default)")


def build(target: str, kind: int, payload: bytes, *, key_id: int, key: Optional[bytes], seq: int,
          worker: int = WORKER_ALL, flags: int = 0, max_fragment: int = DEFAULT_FRAGMENT) -> List[bytes]:
    """The datagrams (UDP payloads) of one update; several when the payload needs fragments."""
    if key_id != 0 and (key is None or len(key) != 32):
        raise EnvelopeError("a 32-byte key is required for key_id != 0")
    ttype, desc = encode_target(target)
    max_fragment = max(1, min(max_fragment, 0xFFFF))
    chunks = [payload[i:i + max_fragment] for i in range(0, len(payload), max_fragment)] or [b""]
    out = []
    offset = 0
    for chunk in chunks:
        body = (MAGIC + struct.pack(">BBHIQIIHBBHH", VERSION, kind, flags, key_id, seq, len(payload),
                                    offset, len(chunk), ttype, len(desc), worker, 0) + desc + chunk)
        out.append(body + (mac(key, body) if key_id != 0 else bytes(MAC_LEN)))
        offset += len(chunk)
    return out


@dataclass
class Fragment:
    kind: int
    flags: int
    key_id: int
    seq: int
    total_len: int
    offset: int
    target_type: int
    target: bytes
    worker: int
    data: bytes
    mac: bytes


def parse(datagram: bytes) -> Fragment:
    """Parse a datagram's fields (does not check the MAC: see `verify`)."""
    if len(datagram) < MIN_LEN:
        raise EnvelopeError(f"datagram of {len(datagram)} bytes is shorter than the {MIN_LEN}-byte minimum")
    if datagram[:4] != MAGIC:
        raise EnvelopeError("not an update (bad magic)")
    (ver, kind, flags, key_id, seq, total, offset, flen, ttype, tlen, worker, reserved) = struct.unpack(
        ">BBHIQIIHBBHH", datagram[4:HEADER_LEN])
    if ver != VERSION:
        raise EnvelopeError(f"envelope version {ver} is not supported")
    if HEADER_LEN + tlen + flen + MAC_LEN != len(datagram):
        raise EnvelopeError("length mismatch")
    target = datagram[HEADER_LEN:HEADER_LEN + tlen]
    data = datagram[HEADER_LEN + tlen:HEADER_LEN + tlen + flen]
    return Fragment(kind, flags, key_id, seq, total, offset, ttype, target, worker, data, datagram[-MAC_LEN:])


def verify(datagram: bytes, key: bytes) -> bool:
    """Constant-time check of a datagram's MAC."""
    import hmac
    return hmac.compare_digest(mac(key, datagram[:-MAC_LEN]), datagram[-MAC_LEN:])


@dataclass
class Ack:
    status: str
    reason: Optional[str]
    key_id: int
    seq: int
    version: int
    received: int
    message: str

    @staticmethod
    def decode(data: bytes, key: Optional[bytes] = None) -> "Ack":
        """Parse an acknowledgement; with `key`, its MAC must verify."""
        if len(data) < 34 + MAC_LEN or data[:4] != ACK_MAGIC or data[4] != 1:
            raise EnvelopeError("not an acknowledgement")
        (status, reason, key_id, seq, version, received, mlen) = struct.unpack(">BHIQQIH", data[5:34])
        if len(data) != 34 + mlen + MAC_LEN:
            raise EnvelopeError("acknowledgement is truncated")
        if key is not None and not verify(data, key):
            raise EnvelopeError("acknowledgement MAC does not verify")
        return Ack(STATUSES.get(status, str(status)), REASONS.get(reason) if reason else None, key_id, seq,
                   version, received, data[34:34 + mlen].decode("utf-8", "replace"))

    def encode(self, key: Optional[bytes] = None) -> bytes:
        status = {v: k for k, v in STATUSES.items()}[self.status]
        reason = {v: k for k, v in REASONS.items()}[self.reason] if self.reason else 0
        msg = self.message.encode()[:1024]
        body = ACK_MAGIC + struct.pack(">BBHIQQIH", 1, status, reason, self.key_id, self.seq, self.version,
                                       self.received, len(msg)) + msg
        return body + (mac(key, body) if key is not None else bytes(MAC_LEN))
