"""Packets and expected outputs of tests/p4/link_monitor.stf, built here independently of
hotplane: data packets by scapy, probes byte by byte. Times are wildcards (`*`): only their
presence and place are checked; byte counts are the lengths of the frames sent out of the port
since the last probe, the probe itself included."""
from scapy.all import Ether, IP, UDP, raw

def h(b): return (b if isinstance(b, bytes) else raw(b)).hex().upper()
SW, SRC = "00:00:00:00:00:aa", "00:00:00:00:00:01"
eth = lambda t: bytes.fromhex("0000000000AA000000000001") + t.to_bytes(2, "big")

def probe(hop_cnt, data, fwd):
    """data: (bos, swid, port, byte_cnt) newest first; fwd: egress ports of the route."""
    b = eth(0x812) + bytes([hop_cnt])
    for bos, swid, port, cnt in data:
        b += bytes([(bos << 7) | swid, port]) + cnt.to_bytes(4, "big") + b"\xff" * 12
    return b + bytes(fwd)

def wild(b, data_count):
    """Hex of b with the 12 time bytes of each probe_data entry replaced by wildcards."""
    x = h(b)
    for i in range(data_count):
        at = (15 + i * 18 + 6) * 2
        x = x[:at] + "*" * 24 + x[at + 24:]
    return x

# Two data packets out of port 2 (routed), then a probe routed out of port 2 as its first hop.
sent = 0
for n in (40, 100):
    p = Ether(dst=SW, src=SRC)/IP(src="10.0.1.1", dst="10.0.2.2")/UDP(sport=1, dport=2)/(b"d" * n)
    q = Ether(dst="00:00:00:00:02:02", src=SW)/IP(src="10.0.1.1", dst="10.0.2.2", ttl=63)/UDP(sport=1, dport=2)/(b"d" * n)
    sent += len(raw(p))
    print("packet 1", h(p)); print("expect 2", h(q), "$")
first = probe(0, [], [2, 3])
out = probe(1, [(1, 5, 2, sent + len(first))], [2, 3])
out = bytes.fromhex("0000000000AA000000000001") + out[12:]
print("packet 1", h(first)); print("expect 2", wild(out, 1), "$")
# The same probe after one more hop elsewhere (hop_cnt 1, one entry): it leaves by port 3;
# nothing else went out of port 3, so it reports only its own length.
second = probe(1, [(1, 9, 4, 123)], [4, 3])
out2 = probe(2, [(0, 5, 3, len(second)), (1, 9, 4, 123)], [4, 3])
print("packet 2", h(second)); print("expect 3", wild(out2, 1), "$")
# Port 2's count restarted at the first probe: a probe out of port 2 now reports only itself.
third = probe(0, [], [2])
print("packet 1", h(third)); print("expect 2", wild(probe(1, [(1, 5, 2, len(third))], [2]), 1), "$")
