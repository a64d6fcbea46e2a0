"""Packets, expected outputs and Bloom filter positions of tests/p4/firewall.stf. Packets by
scapy; the register positions by zlib's crc32 and a bitwise CRC-16/ARC, independently of
hotplane."""
import zlib
from scapy.all import Ether, IP, TCP, raw
from crc import crc16_arc

def h(p): return raw(p).hex().upper()
def positions(ip1, ip2, p1, p2):
    key = bytes(map(int, ip1.split("."))) + bytes(map(int, ip2.split("."))) + \
        p1.to_bytes(2, "big") + p2.to_bytes(2, "big") + bytes([6])
    return crc16_arc(key) % 4096, zlib.crc32(key) % 4096

SW, IN_MAC, OUT_MAC = "00:00:00:00:00:aa", "00:00:00:00:01:01", "00:00:00:00:03:03"
INSIDE, OUTSIDE = "10.0.1.1", "10.0.3.3"
def seg(src, dst, sport, dport, flags, ttl=64):
    return IP(src=src, dst=dst, ttl=ttl)/TCP(sport=sport, dport=dport, flags=flags, seq=1, ack=0, window=100)
def routed(src, dst, sport, dport, flags, mac):
    return h(Ether(dst=mac, src=SW)/seg(src, dst, sport, dport, flags, ttl=63))

# 1. From outside, no connection yet: dropped.
print("packet 3", h(Ether(dst=SW, src=OUT_MAC)/seg(OUTSIDE, INSIDE, 80, 1234, "SA")))
# 2. A SYN from inside opens the connection (and is forwarded out of port 3).
print("packet 1", h(Ether(dst=SW, src=IN_MAC)/seg(INSIDE, OUTSIDE, 1234, 80, "S")))
print("expect 3", routed(INSIDE, OUTSIDE, 1234, 80, "S", OUT_MAC), "$")
a, b = positions(INSIDE, OUTSIDE, 1234, 80)
print(f"register_read MyIngress.bloom_filter_1 {a} 1")
print(f"register_read MyIngress.bloom_filter_2 {b} 1")
# 3. The reply from outside now passes.
print("packet 3", h(Ether(dst=SW, src=OUT_MAC)/seg(OUTSIDE, INSIDE, 80, 1234, "SA")))
print("expect 1", routed(OUTSIDE, INSIDE, 80, 1234, "SA", IN_MAC), "$")
# 4. Another connection from outside is still refused (its bits are not both set).
c, d = positions(INSIDE, OUTSIDE, 1234, 81)
assert (c, d) != (a, b)
print("packet 3", h(Ether(dst=SW, src=OUT_MAC)/seg(OUTSIDE, INSIDE, 81, 1234, "SA")))
# 5. A non-SYN from inside passes but opens nothing.
print("packet 1", h(Ether(dst=SW, src=IN_MAC)/seg(INSIDE, OUTSIDE, 1234, 82, "A")))
print("expect 3", routed(INSIDE, OUTSIDE, 1234, 82, "A", OUT_MAC), "$")
e, f = positions(INSIDE, OUTSIDE, 1234, 82)
if e not in (a,):
    print(f"register_read MyIngress.bloom_filter_1 {e} 0")
