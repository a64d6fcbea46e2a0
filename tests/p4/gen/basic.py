from scapy.all import Ether, IP, UDP, ARP, raw
def h(p): return raw(p).hex().upper()
def fwd(pkt, newdst, port):
    q = pkt.copy(); q[Ether].src = pkt[Ether].dst; q[Ether].dst = newdst; q[IP].ttl -= 1; del q[IP].chksum
    return h(Ether(raw(q)))
p1 = Ether(dst="00:00:00:00:00:aa", src="00:00:00:00:00:01")/IP(src="10.0.0.1", dst="10.0.1.5", ttl=64)/UDP(sport=1234, dport=80)/b"hello"
p2 = Ether(dst="00:00:00:00:00:aa", src="00:00:00:00:00:01")/IP(src="10.0.0.1", dst="10.0.2.2", ttl=7)/UDP(sport=1, dport=2)/(b"x"*20)
p3 = Ether(dst="00:00:00:00:00:aa", src="00:00:00:00:00:01")/IP(src="10.0.0.1", dst="10.0.3.3")/UDP()
p4 = Ether(dst="ff:ff:ff:ff:ff:ff", src="00:00:00:00:00:01")/ARP(pdst="10.0.1.1")
print("packet 0", h(p1)); print("expect 1", fwd(p1, "00:00:00:00:01:01", 1), "$")
print("packet 3", h(p2)); print("expect 2", fwd(p2, "00:00:00:00:02:02", 2), "$")
print("packet 0", h(p3))
print("packet 5", h(p4)); print("expect 0", h(p4), "$")
