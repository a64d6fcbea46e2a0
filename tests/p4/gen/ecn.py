"""Packets and expected outputs of tests/p4/ecn*.stf, built with scapy (IPv4 checksums
computed by scapy), independently of hotplane. MARK=1 expects CE on ECN-capable packets."""
import sys
from scapy.all import Ether, IP, UDP, raw
mark = len(sys.argv) > 1 and sys.argv[1] == "mark"
def h(p): return raw(p).hex().upper()
SW = "00:00:00:00:00:aa"
for i, tos in enumerate([0x00, 0x01, 0x02, 0x03, 0xB9, 0xBA]):
    p = Ether(dst=SW, src="00:00:00:00:00:01")/IP(src="10.0.0.1", dst="10.0.2.2", tos=tos)/UDP(sport=1000 + i, dport=80)/b"ecn"
    ect = tos & 3 in (1, 2)
    out_tos = (tos | 3) if (mark and ect) else tos
    q = Ether(dst="00:00:00:00:02:02", src=SW)/IP(src="10.0.0.1", dst="10.0.2.2", tos=out_tos, ttl=63)/UDP(sport=1000 + i, dport=80)/b"ecn"
    print("packet 1", h(p)); print("expect 2", h(q), "$")
