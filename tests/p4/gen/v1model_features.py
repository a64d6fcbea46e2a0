"""Packets and expected outputs of tests/p4/v1model_features.stf. Checksums and CRCs are
computed here, independently of hotplane: crc32 by zlib, CRC-16/ARC by a bitwise reference
(checked against its published check value)."""
import zlib
from crc import crc16_arc

ETH = "000000000001" "000000000002" "88B5"
TAIL = "DEADBEEF"

def pkt(op, arg, res=0, extra=0):
    return f"{ETH}{op:02X}{arg:02X}{res:04X}{extra:08X}{TAIL}"

out = []
p = out.append
p("# forwarding to the port in the argument")
p(f"packet 0 {pkt(1, 7)}"); p(f"expect 7 {pkt(1, 7)} $")
p("# multicast: group 1 = node 0 (rid 10: ports 2, 3) + node 1 (rid 11: port 4)")
p("mc_mgrp_create 1"); p("mc_node_create 10 2 3"); p("mc_node_create 11 4")
p("mc_node_associate 1 0"); p("mc_node_associate 1 1")
p(f"packet 0 {pkt(2, 1)}")
p(f"expect 2 {pkt(2, 1, 10, 2)} $"); p(f"expect 3 {pkt(2, 1, 10, 3)} $"); p(f"expect 4 {pkt(2, 1, 11, 4)} $")
p("# ingress clone to session 5 (port 6); the original goes to port 1")
p("mirroring_add 5 6")
p(f"packet 0 {pkt(3, 5)}"); p(f"expect 1 {pkt(3, 5)} $"); p(f"expect 6 {pkt(3, 5, 0xC1C1)} $")
p("# resubmit: the second pass sees instance_type 6")
p(f"packet 0 {pkt(4, 0)}"); p(f"expect 2 {pkt(4, 0, 6)} $")
p("# recirculate: egress writes 5555 and recirculates; the second ingress pass writes 4444")
p(f"packet 0 {pkt(5, 0)}"); p(f"expect 3 {pkt(5, 0, 0x4444)} $")
p("# crc16 of {op, arg}; crc32 of the source MAC")
h16 = crc16_arc(bytes([6, 0x22])); h32 = zlib.crc32(bytes.fromhex("000000000002"))
p(f"packet 0 {pkt(6, 0x22)}"); p(f"expect 1 {pkt(6, 0x22, h16, h32)} $")
p("# a register counts per argument")
p(f"packet 0 {pkt(7, 3)}"); p(f"expect 1 {pkt(7, 3, 1)} $")
p(f"packet 0 {pkt(7, 3)}"); p(f"expect 1 {pkt(7, 3, 2)} $")
p("register_read hits 3 2"); p("register_write Ing.hits 4 41")
p(f"packet 0 {pkt(7, 4)}"); p(f"expect 1 {pkt(7, 4, 42)} $")
p("register_read hits 4 == 42")
p("# an indexed counter: two packets of 26 bytes at index 2")
p(f"packet 0 {pkt(8, 2)}"); p(f"packet 0 {pkt(8, 2)}")
p(f"expect 1 {pkt(8, 2)} $"); p(f"expect 1 {pkt(8, 2)} $")
p("check_counter per_arg(2) packets == 2"); p("check_counter per_arg(2) bytes == 52")
p("check_counter per_arg(3) packets == 0")
p("# dropped in egress; dropped in ingress; not a cmd packet")
p(f"packet 0 {pkt(9, 0)}"); p(f"packet 0 {pkt(0, 0)}")
p(f"packet 0 000000000001000000000002080045000014")
print("\n".join(out))
