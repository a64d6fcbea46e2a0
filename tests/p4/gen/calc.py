"""Packets and expected outputs of tests/p4/calc.stf, built with scapy, independently of
hotplane (results computed here in Python)."""
from scapy.all import Ether, Packet, ByteField, IntField, StrFixedLenField, bind_layers, raw

class P4calc(Packet):
    name = "P4calc"
    fields_desc = [StrFixedLenField("P", "P", length=1), StrFixedLenField("Four", "4", length=1),
                   ByteField("version", 0x01), StrFixedLenField("op", "+", length=1),
                   IntField("operand_a", 0), IntField("operand_b", 0), IntField("result", 0xDEADBABE)]

bind_layers(Ether, P4calc, type=0x1234)
def h(p): return raw(p).hex().upper()
A, B = "00:00:00:00:00:01", "00:00:00:00:00:02"
ops = {"+": lambda a, b: a + b, "-": lambda a, b: a - b, "&": lambda a, b: a & b,
       "|": lambda a, b: a | b, "^": lambda a, b: a ^ b}
cases = [("+", 7, 5), ("-", 5, 7), ("&", 0xF0F0, 0xFF00), ("|", 0xF0F0, 0x0F0F), ("^", 0xFFFF, 0x1234)]
for port, (op, a, b) in enumerate(cases, start=1):
    p = Ether(dst=B, src=A)/P4calc(op=op, operand_a=a, operand_b=b)
    q = Ether(dst=A, src=B)/P4calc(op=op, operand_a=a, operand_b=b, result=ops[op](a, b) & 0xFFFFFFFF)
    print(f"packet {port}", h(p)); print(f"expect {port}", h(q), "$")
# An unknown operator, a wrong version and a non-calculator frame are all dropped.
print("packet 1", h(Ether(dst=B, src=A)/P4calc(op="*", operand_a=2, operand_b=3)))
print("packet 1", h(Ether(dst=B, src=A)/P4calc(version=2, op="+", operand_a=2, operand_b=3)))
print("packet 1", h(Ether(dst=B, src=A, type=0x0800)/(b"\x00" * 30)))
