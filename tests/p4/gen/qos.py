"""Packets and expected outputs of tests/p4/qos.stf, built with scapy (IPv4 checksums computed
by scapy), independently of hotplane."""
from scapy.all import Ether, IP, UDP, TCP, ICMP, raw
def h(p): return raw(p).hex().upper()
SW = "00:00:00:00:00:aa"
for l4, dscp in [(UDP(sport=5, dport=6), 46), (TCP(sport=5, dport=6), 44), (ICMP(), 0)]:
    for ecn in (0, 2):
        p = Ether(dst=SW, src="00:00:00:00:00:01")/IP(src="10.0.0.1", dst="10.0.2.2", tos=(10 << 2) | ecn)/l4
        q = Ether(dst="00:00:00:00:02:02", src=SW)/IP(src="10.0.0.1", dst="10.0.2.2", tos=(dscp << 2) | ecn, ttl=63)/l4
        print("packet 1", h(p)); print("expect 2", h(q), "$")
