"""Packets and expected outputs of tests/p4/mri.stf, built with scapy (which lays out the IPv4
option and computes IHL, total length and checksum), independently of hotplane."""
from scapy.all import Ether, IP, UDP, Packet, IntField, ShortField, FieldLenField, \
    PacketListField, IPOption, raw
from scapy.layers.inet import _IPOption_HDR

class SwitchTrace(Packet):
    fields_desc = [IntField("swid", 0), IntField("qdepth", 0)]
    def extract_padding(self, p): return "", p

class IPOption_MRI(IPOption):
    name = "MRI"
    option = 31
    fields_desc = [_IPOption_HDR,
                   FieldLenField("length", None, fmt="B", length_of="swtraces",
                                 adjust=lambda pkt, l: l + 4),
                   ShortField("count", 0),
                   PacketListField("swtraces", [], SwitchTrace, count_from=lambda pkt: pkt.count)]

def h(p): return raw(p).hex().upper()

def base_checksum(p):
    """The program's update_checksum lists only the 20-byte base header's fields, so (as on
    BMv2) the checksum covers those and not the option: recompute it that way."""
    b = bytearray(raw(p))
    ip = b[14:34]
    ip[10:12] = b"\0\0"
    s = sum(int.from_bytes(ip[i:i + 2], "big") for i in range(0, 20, 2))
    while s >> 16:
        s = (s & 0xFFFF) + (s >> 16)
    b[24:26] = (~s & 0xFFFF).to_bytes(2, "big")
    return b.hex().upper()
SW, DST = "00:00:00:00:00:aa", "00:00:00:00:02:02"
def pkt(traces, mac_dst=SW, mac_src="00:00:00:00:00:01", ttl=64):
    opt = IPOption_MRI(count=len(traces), swtraces=[SwitchTrace(swid=s, qdepth=q) for s, q in traces])
    return Ether(dst=mac_dst, src=mac_src)/IP(src="10.0.1.1", dst="10.0.2.2", ttl=ttl, options=[opt])/UDP(sport=4321, dport=1234)/b"mri"

# This switch is id 7 and its queue is empty (depth 0): each hop pushes (7, 0) in front.
for before in ([], [(3, 5)], [(2, 1), (1, 4)]):
    print("packet 1", h(pkt(before)))
    print("expect 2", base_checksum(pkt([(7, 0)] + before, DST, SW, 63)), "$")
# Without the option the packet is only forwarded.
plain = Ether(dst=SW, src="00:00:00:00:00:01")/IP(src="10.0.1.1", dst="10.0.2.2")/UDP(sport=4321, dport=1234)/b"mri"
fwd = Ether(dst=DST, src=SW)/IP(src="10.0.1.1", dst="10.0.2.2", ttl=63)/UDP(sport=4321, dport=1234)/b"mri"
print("packet 1", h(plain)); print("expect 2", h(fwd), "$")
