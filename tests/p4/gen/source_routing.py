"""tests/p4/source_routing.stf: hop lists encoded here; the expected packet has the first hop
removed, the TTL one lower and, after the last hop, the IPv4 EtherType."""
from scapy.all import Ether, IP, UDP, raw

ip = IP(src="10.0.0.1", dst="10.0.2.2", ttl=64) / UDP(sport=7, dport=9) / b"route me"

def frame(hops, ether_type):
    route = b"".join(((1 if i == len(hops) - 1 else 0) << 15 | p).to_bytes(2, "big") for i, p in enumerate(hops))
    eth = bytes.fromhex("000000000002" "000000000001") + ether_type.to_bytes(2, "big")
    return eth + route + raw(ip)

def after(hops):
    rest = hops[1:]
    q = IP(raw(ip)); q.ttl -= 1  # the exercise does not update the checksum
    body = raw(q)[:8] + bytes([q.ttl]) + raw(ip)[9:]
    route = b"".join(((1 if i == len(rest) - 1 else 0) << 15 | p).to_bytes(2, "big") for i, p in enumerate(rest))
    eth = bytes.fromhex("000000000002" "000000000001") + (0x1234 if rest else 0x0800).to_bytes(2, "big")
    return eth + route + body

for hops in ([2, 3, 1], [3], [4, 1, 1, 1, 1, 1, 1, 1, 2]):
    print(f"packet 1 {frame(hops, 0x1234).hex().upper()}")
    print(f"expect {hops[0]} {after(hops).hex().upper()} $")
print("# ten hops overflow the nine-entry stack: parser error, dropped")
print(f"packet 1 {frame([1] * 10, 0x1234).hex().upper()}")
print("# not source-routed: dropped")
print(f"packet 1 {(bytes.fromhex('000000000002000000000001' '0800') + raw(ip)).hex().upper()}")
