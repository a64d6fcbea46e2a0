"""Packets and expected outputs of tests/p4/load_balance.stf. The next hop of each flow is
crc16 (CRC-16/ARC, bitwise reference) of its 5-tuple modulo 2, plus base 1, computed here
independently of hotplane; packets by scapy (the TCP checksum is left as sent, as the program
does not update it)."""
from scapy.all import Ether, IP, TCP, raw
from crc import crc16_arc

def h(p): return raw(p).hex().upper()
ip4 = lambda a: bytes(map(int, a.split(".")))
NHOP = {1: ("00:00:00:00:01:02", "10.0.2.2", 2), 2: ("00:00:00:00:01:03", "10.0.3.3", 3)}
SMAC = {2: "00:00:00:01:02:00", 3: "00:00:00:01:03:00"}
seen = set()
for sport in range(50000, 50008):
    p = Ether(raw(Ether(dst="00:00:00:00:01:01", src="00:00:00:00:00:01")
                  / IP(src="10.0.1.1", dst="10.0.0.1") / TCP(sport=sport, dport=1234, flags="S")))
    key = ip4("10.0.1.1") + ip4("10.0.0.1") + bytes([6]) + sport.to_bytes(2, "big") + (1234).to_bytes(2, "big")
    nh = 1 + crc16_arc(key) % 2
    seen.add(nh)
    dmac, dip, port = NHOP[nh]
    q = p.copy()
    q[Ether].dst, q[Ether].src = dmac, SMAC[port]
    q[IP].dst, q[IP].ttl = dip, 63
    del q[IP].chksum
    print("packet 1", h(p)); print(f"expect {port}", h(Ether(raw(q))), "$")
assert seen == {1, 2}, "both next hops must be exercised"
