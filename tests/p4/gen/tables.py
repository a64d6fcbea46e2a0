"""tests/p4/tables.stf: frames are Ethernet + a 12-byte probe header (kind, a, b, addr, tag,
count); the expected tags follow from the entries below by hand."""
ETH = "000000000001" "000000000002" "1234"

def pkt(kind, a=0, b=0, addr=0, tag=0, count=0):
    return f"{ETH}{kind:02X}{a:02X}{b:04X}{addr:08X}{tag:04X}{count:04X}"

o = []
p = o.append
for k in (1, 2, 3, 4):
    p(f"add by_kind kind:{k} to_port(port:1)")
p("add by_kind kind:5 nop()")
p("# ternary + range, higher priority wins")
p("add classify 10 a:0x1* b:0x0000..0x00ff set_tag(tag:0x0111)")
p("add classify 20 a:0x12 b:0x0000..0xffff set_tag(tag:0x0222)")
p("add classify 5 a:0x** b:0x0100..0x01ff set_tag(tag:0x0333)")
for (a, b, tag) in [(0x12, 0x50, 0x0222), (0x15, 0x50, 0x0111), (0x15, 0x150, 0x0333), (0x35, 0x50, 0xDEAD)]:
    p(f"packet 0 {pkt(1, a, b)}"); p(f"expect 1 {pkt(1, a, b, tag=tag)} $")
p("# exact + lpm in one key")
p("add routes kind:2 addr:10.0.0.0/8 set_tag(tag:0x0800)")
p("add routes kind:2 addr:10.1.0.0/16 set_tag(tag:0x1600)")
p("# prefixes past the first 24 key bits: one and two levels of 256-entry groups")
p("add routes kind:2 addr:10.1.2.0/24 set_tag(tag:0x2400)")
p("add routes kind:2 addr:10.1.2.128/25 set_tag(tag:0x2500)")
p("add routes kind:2 addr:10.1.2.3/32 set_tag(tag:0x3200)")
for (addr, tag) in [(0x0A010203, 0x3200), (0x0A010204, 0x2400), (0x0A010281, 0x2500),
                    (0x0A010301, 0x1600), (0x0A020000, 0x0800), (0x0B000001, 0xFFFF)]:
    p(f"packet 0 {pkt(2, addr=addr)}"); p(f"expect 1 {pkt(2, addr=addr, tag=tag)} $")
p("# const entries with an optional key")
for (a, b, tag) in [(0x10, 1, 0x1001), (0x10, 5, 0x1000), (0x11, 1, 0)]:
    p(f"packet 0 {pkt(3, a, b)}"); p(f"expect 1 {pkt(3, a, b, tag=tag)} $")
p("# an @ref parameter counts packets in the entry")
p("add counting addr:0x01020304 count_in(n:0)")
for n in (1, 2, 3):
    p(f"packet 0 {pkt(4, addr=0x01020304)}"); p(f"expect 1 {pkt(4, addr=0x01020304, count=n)} $")
p(f"packet 0 {pkt(4, addr=0x01020305)}"); p(f"expect 1 {pkt(4, addr=0x01020305)} $")
p("# switch on action_run: nop leaves egress_spec 0")
p(f"packet 0 {pkt(5)}"); p(f"expect 0 {pkt(5, tag=0x0BAD)} $")
p("# a miss runs the default action, which the control plane can change")
p(f"packet 0 {pkt(7)}"); p(f"expect 9 {pkt(7)} $")
p("setdefault by_kind to_port(port:8)")
p(f"packet 0 {pkt(7)}"); p(f"expect 8 {pkt(7)} $")
print("\n".join(o))
