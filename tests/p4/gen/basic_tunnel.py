"""Packets and expected outputs of tests/p4/basic_tunnel.stf, built with scapy (which computes
the IPv4 checksums), independently of hotplane."""
from scapy.all import Ether, IP, UDP, Packet, ShortField, bind_layers, raw

class MyTunnel(Packet):
    name = "MyTunnel"
    fields_desc = [ShortField("proto_id", 0x0800), ShortField("dst_id", 0)]

bind_layers(Ether, MyTunnel, type=0x1212)
bind_layers(MyTunnel, IP, proto_id=0x0800)

def h(p): return raw(p).hex().upper()
SRC, SW = "00:00:00:00:00:01", "00:00:00:00:00:aa"
ip = lambda dst, ttl=64: IP(src="10.0.0.1", dst=dst, ttl=ttl)/UDP(sport=1000, dport=2000)/b"tunnel"

# 1. Plain IPv4, routed: MACs rewritten, TTL one lower, checksum recomputed.
p1 = Ether(dst=SW, src=SRC)/ip("10.0.2.2")
q1 = Ether(dst="00:00:00:00:02:02", src=SW)/ip("10.0.2.2", ttl=63)
print("packet 0", h(p1)); print("expect 2", h(q1), "$")
# 2. Plain IPv4 into the tunnel: tunnel header pushed (proto_id 0x800, dst_id 3), then switched
#    by tunnel id to port 3; the IPv4 header is untouched.
p2 = Ether(dst=SW, src=SRC)/ip("10.0.3.3")
q2 = Ether(dst=SW, src=SRC, type=0x1212)/MyTunnel(proto_id=0x0800, dst_id=3)/ip("10.0.3.3")
print("packet 0", h(p2)); print("expect 3", h(q2), "$")
print("# ingress length of packet 2:", len(raw(p2)))
# 3. A tunnelled packet for tunnel 1 leaves the tunnel: header popped, etherType restored.
p3 = Ether(dst=SW, src=SRC, type=0x1212)/MyTunnel(proto_id=0x0800, dst_id=1)/ip("10.0.1.1")
q3 = Ether(dst="00:00:00:00:01:01", src=SRC)/ip("10.0.1.1")
print("packet 4", h(p3)); print("expect 1", h(q3), "$")
# 4. An unknown tunnel: dropped by the default action.
p4 = Ether(dst=SW, src=SRC, type=0x1212)/MyTunnel(proto_id=0x0800, dst_id=9)/ip("10.0.1.1")
print("packet 4", h(p4))
# 5. No route: NoAction leaves egress_spec at 0; the packet goes out of port 0 unchanged.
p5 = Ether(dst=SW, src=SRC)/ip("192.168.0.1")
print("packet 5", h(p5)); print("expect 0", h(p5), "$")
