"""WASP active packets from Python: the shim as a scapy layer, an assembler and a builder.

The byte format is `docs/wasp.md` §2; the instruction set and the assembler syntax are §4 and
`crates/wasp/src/asm.rs`, which this assembler mirrors (same mnemonics, same encodings, same
error messages and line:column positions). Importing the module binds the layer to IPv4
protocol 253, IPv6 next header 253 (also behind hop-by-hop, routing and destination-options
headers) and UDP destination port 9277.

    from scapy.all import IP, UDP
    from hotplane.wasp import WASP, assemble, wasp_packet

    code = assemble(open("examples/wasp/count.s").read())
    pkt = IP(dst="10.0.2.2") / wasp_packet(code, keys=[0xc0ffee], scratch=[3]) / UDP(dport=5000)
    ...
    reply[WASP].scratch_words()        # the scratchpad as 64-bit words
"""

from __future__ import annotations

import re
import struct
from dataclasses import dataclass
from typing import Iterable, Optional, Sequence, Union

from scapy.fields import (ByteField, FieldLenField, FieldListField, FlagsField, IntField, LongField,
                          ShortField, StrLenField, XShortField)
from scapy.layers.inet import ICMP, IP, TCP, UDP, in4_chksum
from scapy.layers.inet6 import (IPv6, IPv6ExtHdrDestOpt, IPv6ExtHdrHopByHop, IPv6ExtHdrRouting,
                                in6_chksum)
from scapy.packet import Packet, bind_layers

# --- wire constants (docs/wasp.md §2) ---

IP_PROTOCOL = 253
DEFAULT_UDP_PORT = 9277
NO_NEXT_HEADER = 59
VERSION = 1
HEADER_LEN = 16
MAX_KEYS = 4
MAX_CODE = 64
MAX_SCRATCH = 128

FLAG_RETURNED = 0x01
FLAG_FAULT = 0x02
FLAG_ADMIN = 0x04

#: `fault_code` on the wire is the index of the fault + 1 (docs/wasp.md §5).
FAULTS = ["read-only", "out-of-bounds", "not-mapped", "second-return", "protected"]

#: Environment words, by index (`e.time` is e.64[5]).
ENV_WORDS = ["node_id", "addr_hi", "addr_lo", "in_port", "out_port", "time", "queue", "len", "flags"]


def internet_checksum(data: bytes) -> int:
    """RFC 1071: the one's complement of the one's-complement sum of big-endian 16-bit words
    (an odd last byte is padded with a zero byte)."""
    if len(data) % 2:
        data += b"\x00"
    total = sum(struct.unpack(f"!{len(data) // 2}H", data))
    while total >> 16:
        total = (total & 0xFFFF) + (total >> 16)
    return ~total & 0xFFFF


# --- the scapy layer ---


class WASP(Packet):
    """The WASP shim. `nkeys`, `code_len`, `scratch_len` and `checksum` are filled in when left
    as None; `next_header` follows the layer above it (UDP 17, TCP 6, ICMP 1) and is 59 (none)
    otherwise, as in the UDP carriage."""

    name = "WASP"
    fields_desc = [
        ByteField("version", VERSION),
        FlagsField("flags", 0, 8, ["RETURNED", "FAULT", "ADMIN"]),
        ByteField("next_header", NO_NEXT_HEADER),
        FieldLenField("nkeys", None, count_of="keys", fmt="B"),
        FieldLenField("code_len", None, length_of="code", fmt="B"),
        FieldLenField("scratch_len", None, length_of="scratch", fmt="B"),
        ByteField("fault_pc", 0),
        ByteField("fault_code", 0),
        IntField("cid", 0),
        XShortField("checksum", None),
        ShortField("reserved", 0),
        FieldListField("keys", [], LongField("key", 0), count_from=lambda p: p.nkeys),
        StrLenField("scratch", b"", length_from=lambda p: p.scratch_len),
        StrLenField("code", b"", length_from=lambda p: p.code_len),
    ]

    def post_build(self, p: bytes, pay: bytes) -> bytes:
        # `p` is the shim alone (header, keys, scratchpad, code): the checksum covers exactly it.
        if self.checksum is None:
            p = p[:12] + b"\x00\x00" + p[14:]
            p = p[:12] + internet_checksum(p).to_bytes(2, "big") + p[14:]
        return p + self._transport_checksum(pay)

    def _transport_checksum(self, pay: bytes) -> bytes:
        """Scapy's UDP and TCP fill their checksum only right on top of IP: behind the shim
        they would leave 0 (invalid for UDP over IPv6). Fill it here when left as None: the
        pseudo-header is the IP one with the transport's own length (not the IP payload's,
        which includes the shim)."""
        transport = self.payload
        offset = {UDP: 6, TCP: 16}.get(type(transport))
        if offset is None or transport.chksum is not None or len(pay) < offset + 2:
            return pay
        proto = 17 if isinstance(transport, UDP) else 6
        carrier = self.underlayer
        while carrier is not None and not isinstance(carrier, (IP, IPv6)):
            carrier = carrier.underlayer
        if isinstance(carrier, IP):
            ip = carrier.copy()
            ip.len = None  # in4_chksum then takes len(pay) as the length
            ck = in4_chksum(proto, ip, pay)
        elif isinstance(carrier, IPv6):
            ck = in6_chksum(proto, self, pay)  # walks down to the IPv6 header; length len(pay)
        else:
            return pay
        if proto == 17 and ck == 0:
            ck = 0xFFFF  # RFC 768: a computed 0 is sent as all ones
        return pay[:offset] + ck.to_bytes(2, "big") + pay[offset + 2:]

    def shim_len(self) -> int:
        return HEADER_LEN + 8 * len(self.keys) + len(self.scratch) + len(self.code)

    def shim_bytes(self) -> bytes:
        """The built shim without what follows it."""
        return bytes(self)[:self.shim_len()]

    def verify_checksum(self) -> bool:
        """True when the Internet checksum over the shim is right (as a node checks it)."""
        return internet_checksum(self.shim_bytes()) == 0

    def scratch_words(self) -> list:
        """The scratchpad as big-endian 64-bit words."""
        return words(self.scratch)

    def fault(self) -> Optional[str]:
        """The fault's name when FAULT is set (and fault_code is known), else None."""
        if not int(self.flags) & FLAG_FAULT:
            return None
        index = self.fault_code - 1
        return FAULTS[index] if 0 <= index < len(FAULTS) else f"fault-{self.fault_code}"

    def mysummary(self) -> str:
        return self.sprintf("WASP keys=%nkeys% code=%code_len%B scratch=%scratch_len%B %flags%")


bind_layers(IP, WASP, proto=IP_PROTOCOL, frag=0)
for _carrier in (IPv6, IPv6ExtHdrHopByHop, IPv6ExtHdrRouting, IPv6ExtHdrDestOpt):
    bind_layers(_carrier, WASP, nh=IP_PROTOCOL)
bind_layers(UDP, WASP, dport=DEFAULT_UDP_PORT)
bind_layers(WASP, UDP, next_header=17)
bind_layers(WASP, TCP, next_header=6)
bind_layers(WASP, ICMP, next_header=1)


def words(data: bytes) -> list:
    """Big-endian 64-bit words of `data` (its length a multiple of 8)."""
    if len(data) % 8:
        raise ValueError(f"{len(data)} bytes are not whole 64-bit words")
    return [int.from_bytes(data[i:i + 8], "big") for i in range(0, len(data), 8)]


def scratch_bytes(scratch: Union[bytes, Sequence[int]]) -> bytes:
    """A scratchpad from bytes or from a list of 64-bit words (big-endian, docs/wasp.md §1.9)."""
    if isinstance(scratch, (bytes, bytearray)):
        return bytes(scratch)
    return b"".join(int(w).to_bytes(8, "big") for w in scratch)


def wasp_packet(code: Union[bytes, str], keys: Iterable[int] = (), scratch: Union[bytes, Sequence[int]] = b"",
                *, cid: int = 0, flags: int = 0, next_header: Optional[int] = None) -> WASP:
    """A WASP shim. `code` is bytecode or assembler text (assembled here); `scratch` is bytes or
    64-bit words. The limits are checked here (as the node would refuse them): at most 4 keys,
    64 code bytes, a scratchpad of whole words up to 128 bytes; ADMIN is reserved."""
    if isinstance(code, str):
        code = assemble(code)
    keys = [int(k) for k in keys]
    scratch = scratch_bytes(scratch)
    if len(keys) > MAX_KEYS:
        raise ValueError(f"{len(keys)} keys: at most {MAX_KEYS}")
    if any(not 0 <= k < 1 << 64 for k in keys):
        raise ValueError("keys are 64-bit unsigned integers")
    if len(code) > MAX_CODE:
        raise ValueError(f"code is {len(code)} bytes: at most {MAX_CODE}")
    if len(scratch) > MAX_SCRATCH or len(scratch) % 8:
        raise ValueError(f"scratchpad of {len(scratch)} bytes: whole 64-bit words, at most {MAX_SCRATCH}")
    if flags & ~(FLAG_RETURNED | FLAG_FAULT):
        raise ValueError(f"flags {flags:#x}: only RETURNED (1) and FAULT (2) may be set")
    fields = dict(keys=keys, scratch=scratch, code=bytes(code), cid=cid, flags=flags)
    if next_header is not None:
        fields["next_header"] = next_header
    return WASP(**fields)


# --- the assembler (mirrors crates/wasp/src/asm.rs) ---


class AsmError(ValueError):
    """Where (1-based line and column) and why the text did not assemble; str() is
    `line:col: message`, as the Rust assembler prints it."""

    def __init__(self, line: int, col: int, message: str):
        super().__init__(f"{line}:{col}: {message}")
        self.line = line
        self.col = col
        self.message = message


@dataclass(frozen=True)
class Assembled:
    code: bytes
    #: Key slots the code names: the packet must declare at least this many keys.
    keys_used: int


_ALU = ["add", "sub", "and", "or", "xor", "min", "max", "not", "inc", "dec", "swap"]  # 0x10.., mov 0x1b/0x1c
_CLR = 0x1D
_CONDS = ["ceq", "cne", "clt", "cle", "cgt", "cge", "cnz"]  # 0x30..
_JUMPS = {"jmp": 0x38, "jt": 0x39, "jf": 0x3A}
_BANKS = {"s": 0, "m": 1, "e": 2, "h": 3}
_WIDTHS = {"8": 0, "16": 1, "32": 2, "64": 3}
_U64_MAX = (1 << 64) - 1

_EXPECT_REG = "a register (a or b)"
_EXPECT_KEY = "a key slot (k0..k3)"
_EXPECT_MEM = "a bank operand like s.64[0] or e.time"
_EXPECT_MEMX = "a bank operand like s.32[b+1]"


def _parse_uint(text: str, radix: int) -> Optional[int]:
    """Rust's `u64::from_str_radix`: an optional '+', then one or more digits; None otherwise
    (no sign '-', no '_', no spaces) or past u64."""
    digits = text[1:] if text.startswith("+") else text
    allowed = "0123456789" if radix == 10 else "0123456789abcdefABCDEF"
    if not digits or any(ch not in allowed for ch in digits):
        return None
    value = int(digits, radix)
    return value if value <= _U64_MAX else None


def _parse_number(text: str) -> Optional[int]:
    if text.startswith(("0x", "0X")):
        return _parse_uint(text[2:], 16)
    return _parse_uint(text, 10)


@dataclass
class _Token:
    text: str
    col: int


def _utf8_len(text: str) -> int:
    return len(text.encode("utf-8"))


#: Rust's `char::is_whitespace` (Unicode White_Space; Python's isspace() adds \x1c-\x1f).
_WHITESPACE = frozenset("\t\n\x0b\x0c\r \x85\xa0\u1680\u2000\u2001\u2002\u2003\u2004\u2005\u2006"
                        "\u2007\u2008\u2009\u200a\u2028\u2029\u202f\u205f\u3000")


def _trim_end(text: str) -> str:
    end = len(text)
    while end and text[end - 1] in _WHITESPACE:
        end -= 1
    return text[:end]


def _tokens(text: str) -> list:
    """Split on whitespace and commas; columns are 1-based byte offsets (as in Rust)."""
    out, start = [], None
    for i, ch in enumerate(text):
        separator = ch in _WHITESPACE or ch == ","
        if start is None and not separator:
            start = i
        elif start is not None and separator:
            out.append(_Token(text[start:i], _utf8_len(text[:start]) + 1))
            start = None
    if start is not None:
        out.append(_Token(text[start:], _utf8_len(text[:start]) + 1))
    return out


class _Operands:
    def __init__(self, line: int, end_col: int, rest: list):
        self.line, self.end_col, self.rest = line, end_col, list(rest)

    def next(self, expected: str) -> _Token:
        if not self.rest:
            raise AsmError(self.line, self.end_col, f"missing operand: expected {expected}")
        return self.rest.pop(0)

    def bad(self, token: _Token, expected: str) -> AsmError:
        return AsmError(self.line, token.col, f"expected {expected}, found '{token.text}'")

    def number(self, expected: str, maximum: int) -> int:
        token = self.next(expected)
        value = _parse_number(token.text)
        if value is None:
            raise self.bad(token, expected)
        if value > maximum:
            raise AsmError(self.line, token.col, f"number {token.text} out of range")
        return value

    def reg(self) -> str:
        token = self.next(_EXPECT_REG)
        if token.text not in ("a", "b"):
            raise self.bad(token, _EXPECT_REG)
        return token.text

    def expect_a(self) -> None:
        token = self.next("register a")
        if token.text != "a":
            raise self.bad(token, "register a")

    def key(self) -> int:
        token = self.next(_EXPECT_KEY)
        slot = _parse_uint(token.text[1:], 10) if token.text.startswith("k") else None
        if slot is None or slot > 0xFF or slot >= MAX_KEYS:
            raise self.bad(token, _EXPECT_KEY)
        return slot

    def mem(self, indexed: bool) -> tuple:
        """(bank, width, index) from `s.64[3]`, `e.time` or, indexed, `s.32[b+3]`."""
        expected = _EXPECT_MEMX if indexed else _EXPECT_MEM
        token = self.next(expected)
        bad = self.bad(token, expected)
        bank, dot, rest = token.text.partition(".")
        if not dot or bank not in _BANKS:
            raise bad
        bank = _BANKS[bank]
        if bank == _BANKS["e"] and not indexed and rest in ENV_WORDS:
            return bank, 3, ENV_WORDS.index(rest)
        width, bracket, index = rest.partition("[")
        if not bracket or width not in _WIDTHS or not index.endswith("]"):
            raise bad
        index = index[:-1]
        if indexed:
            if not index.startswith("b"):
                raise bad
            offset = index[1:]
            if offset == "":
                index = "0"
            elif offset.startswith("+"):
                index = offset[1:]
            else:
                raise bad
        value = _parse_number(index)
        if value is None:
            raise bad
        if value > 0xFF:
            raise AsmError(self.line, token.col, f"number {token.text} out of range")
        return bank, _WIDTHS[width], value

    def finish(self) -> None:
        if self.rest:
            token = self.rest[0]
            raise AsmError(self.line, token.col, f"unexpected '{token.text}' after the operands")


def _ld(reg: str, mem: tuple) -> bytes:
    bank, width, index = mem
    if (bank, width) == (0, 3) and index < 16:
        return bytes([(0xA0 if reg == "a" else 0xB0) + index])
    if (bank, width) == (1, 3) and index < 4:
        return bytes([(0xD0 if reg == "a" else 0xD4) + index])
    return bytes([(0x40 if reg == "a" else 0x50) + (bank << 2 | width), index])


def _st(mem: tuple) -> bytes:
    bank, width, index = mem
    if (bank, width) == (0, 3) and index < 16:
        return bytes([0xC0 + index])
    if (bank, width) == (1, 3) and index < 4:
        return bytes([0xD8 + index])
    return bytes([0x60 + (bank << 2 | width), index])


def _parse_item(mnemonic: _Token, ops: _Operands):
    """Bytes for an instruction, or ("jump", opcode, label token), and the key slot it names."""
    m = mnemonic.text
    if m in _ALU:
        return bytes([0x10 + _ALU.index(m)]), None
    if m == "clr":
        return bytes([_CLR]), None
    if m in _CONDS:
        return bytes([0x30 + _CONDS.index(m)]), None
    if m in ("nop", "fwd", "drop", "return"):
        return bytes([["nop", "fwd", "drop", "return"].index(m)]), None
    if m == "mov":
        pair = (ops.reg(), ops.reg())
        if pair == ("a", "b"):
            return b"\x1b", None
        if pair == ("b", "a"):
            return b"\x1c", None
        raise AsmError(ops.line, mnemonic.col, "expected a, b or b, a, found 'the same register twice'")
    if m in ("shl", "shr"):
        return bytes([0x20 if m == "shl" else 0x21, ops.number("a shift (0..63)", 63)]), None
    if m == "imm":
        reg = ops.reg()
        value = ops.number("a number (0..65535)", 0xFFFF)
        if value <= 0xFF:
            return bytes([0x22 if reg == "a" else 0x23, value]), None
        return bytes([0x24 if reg == "a" else 0x25]) + value.to_bytes(2, "big"), None
    if m in ("addi", "subi"):
        return bytes([0x26 if m == "addi" else 0x27, ops.number("a number (0..255)", 0xFF)]), None
    if m in _JUMPS:
        return ("jump", _JUMPS[m], ops.next("a label")), None
    if m == "ld":
        reg = ops.reg()
        return _ld(reg, ops.mem(False)), None
    if m == "st":
        mem = ops.mem(False)
        ops.expect_a()
        return _st(mem), None
    if m == "ldx":
        ops.expect_a()
        bank, width, index = ops.mem(True)
        return bytes([0x70 + (bank << 2 | width), index]), None
    if m == "stx":
        bank, width, index = ops.mem(True)
        ops.expect_a()
        return bytes([0x80 + (bank << 2 | width), index]), None
    if m in ("lookup", "insert", "map"):
        slot = ops.key()
        return bytes([{"lookup": 0x90, "insert": 0x94, "map": 0x98}[m] + slot]), slot
    if m == ".byte":
        out = [ops.number("a byte", 0xFF)]
        while ops.rest:
            out.append(ops.number("a byte", 0xFF))
        return bytes(out), None
    raise AsmError(ops.line, mnemonic.col, f"unknown instruction '{m}'")


_LABEL = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\Z")


def _lines(source: str) -> list:
    """Rust's `str::lines`: split at '\\n' or '\\r\\n'; a final line ending is optional."""
    lines = source.split("\n")
    last = lines.pop()
    lines = [line[:-1] if line.endswith("\r") else line for line in lines]
    return lines + [last] if last else lines


def assemble_program(source: str) -> Assembled:
    """Assembles `source`; raises AsmError (with line and column) on the first error."""
    labels: dict = {}
    items = []  # (line, at, bytes or jump tuple)
    at = 0
    keys_used = 0
    for number, text in enumerate(_lines(source), start=1):
        comment = min((i for i in (text.find(";"), text.find("#")) if i >= 0), default=-1)
        if comment >= 0:
            text = text[:comment]
        rest = _tokens(text)
        if rest and rest[0].text.endswith(":"):
            first = rest[0]
            name = first.text[:-1]
            if not _LABEL.match(name):
                raise AsmError(number, first.col, f"expected a label name, found '{first.text}'")
            if name in labels:
                raise AsmError(number, first.col, f"label '{name}' defined twice")
            labels[name] = at
            rest = rest[1:]
        if not rest:
            continue
        mnemonic, operands = rest[0], rest[1:]
        ops = _Operands(number, _utf8_len(_trim_end(text)) + 1, operands)
        item, slot = _parse_item(mnemonic, ops)
        ops.finish()
        if slot is not None:
            keys_used = max(keys_used, slot + 1)
        items.append((number, at, item))
        at += 2 if isinstance(item, tuple) else len(item)
        if at > MAX_CODE:
            raise AsmError(number, mnemonic.col, f"code is {at} bytes, more than 64")
    code = bytearray()
    for number, item_at, item in items:
        if not isinstance(item, tuple):
            code += item
            continue
        _, opcode, label = item
        if label.text not in labels:
            raise AsmError(number, label.col, f"unknown label '{label.text}'")
        target, after = labels[label.text], item_at + 2
        if target < after:
            raise AsmError(number, label.col, f"jump back to '{label.text}': jumps go forward only")
        code += bytes([opcode, target - after])
    return Assembled(bytes(code), keys_used)


def assemble(source: str) -> bytes:
    """Assembles WASP assembler text into code bytes (at most 64); raises AsmError."""
    return assemble_program(source).code


# --- disassembler (the text `hotplane wasp disasm` prints, byte for byte) ---

_ALU_TEXT = _ALU + ["mov a, b", "mov b, a", "clr"]  # 0x10..0x1d
_LETTERS = "smeh"
_INSN_LEN_2 = set(range(0x20, 0x28)) | {0x38, 0x39, 0x3A} | set(range(0x40, 0x90))


def _mem_text(low: int, index: int, indexed: bool) -> str:
    bank, width = (low >> 2) & 3, low & 3
    if bank == 2 and width == 3 and not indexed and index < len(ENV_WORDS):
        return f"e.{ENV_WORDS[index]}"
    where = f"b+{index}" if indexed else str(index)
    return f"{_LETTERS[bank]}.{8 << width}[{where}]"


def _decode_one(code: bytes, at: int):
    """(text, length, jump) of the instruction at `at`, `jump` = (mnemonic, offset) for a jump;
    None when the bytes there do not decode (as `isa::decode_one` refuses them)."""
    op = code[at]
    length = 3 if op in (0x24, 0x25) else 2 if op in _INSN_LEN_2 else 1
    if at + length > len(code):
        return None
    arg = code[at + 1] if length > 1 else 0
    reg = lambda flag: "a" if flag else "b"  # noqa: E731
    if op <= 0x03:
        return ["nop", "fwd", "drop", "return"][op], 1, None
    if 0x10 <= op <= 0x1D:
        return _ALU_TEXT[op - 0x10], 1, None
    if op in (0x20, 0x21):
        return (None if arg >= 64 else (f"{'shl' if op == 0x20 else 'shr'} {arg}", 2, None))
    if op in (0x22, 0x23):
        return f"imm {reg(op == 0x22)}, {arg}", 2, None
    if op in (0x24, 0x25):
        return f"imm {reg(op == 0x24)}, {int.from_bytes(code[at + 1:at + 3], 'big')}", 3, None
    if op in (0x26, 0x27):
        return f"{'addi' if op == 0x26 else 'subi'} {arg}", 2, None
    if 0x30 <= op <= 0x36:
        return _CONDS[op - 0x30], 1, None
    if op in (0x38, 0x39, 0x3A):
        name = {0x38: "jmp", 0x39: "jt", 0x3A: "jf"}[op]
        offset = arg - 256 if arg >= 128 else arg
        return f"{name} .{offset:+d}", 2, (name, offset)
    if 0x40 <= op <= 0x5F:
        return f"ld {reg(op < 0x50)}, {_mem_text(op & 0xF, arg, False)}", 2, None
    if 0x60 <= op <= 0x6F:
        return f"st {_mem_text(op & 0xF, arg, False)}, a", 2, None
    if 0x70 <= op <= 0x7F:
        return f"ldx a, {_mem_text(op & 0xF, arg, True)}", 2, None
    if 0x80 <= op <= 0x8F:
        return f"stx {_mem_text(op & 0xF, arg, True)}, a", 2, None
    if 0x90 <= op <= 0x9B:
        return f"{['lookup', 'insert', 'map'][(op - 0x90) >> 2]} k{op & 3}", 1, None
    if 0xA0 <= op <= 0xBF:
        return f"ld {reg(op < 0xB0)}, s.64[{op & 0xF}]", 1, None
    if 0xC0 <= op <= 0xCF:
        return f"st s.64[{op & 0xF}], a", 1, None
    if 0xD0 <= op <= 0xD7:
        return f"ld {reg(op < 0xD4)}, m.64[{op & 3}]", 1, None
    if 0xD8 <= op <= 0xDB:
        return f"st m.64[{op & 3}], a", 1, None
    return None


def disassemble(code: bytes) -> str:
    """Text `assemble` accepts (and `hotplane wasp disasm` prints): valid forward jumps get
    labels `L<byte>`, bytes that do not decode (or jumps that would not validate) `.byte` lines."""
    decoded = []
    at = 0
    while at < len(code):
        one = _decode_one(code, at)
        decoded.append((at, one, one[1] if one else 1))
        at += one[1] if one else 1
    starts = {at for at, _, _ in decoded}

    def target(at, one):
        if not one or not one[2] or one[2][1] < 0:
            return None
        t = at + 2 + one[2][1]
        return t if t == len(code) or t in starts else None

    labels = sorted({t for at, one, _ in decoded if (t := target(at, one)) is not None})
    out = []
    for at, one, length in decoded:
        if at in labels:
            out.append(f"L{at}:")
        if one and one[2]:
            t = target(at, one)
            text = f"{one[2][0]} L{t}" if t is not None else None
        else:
            text = one[0] if one else None
        if text is None:
            text = ".byte " + ", ".join(f"{b:#04x}" for b in code[at:at + length])
        out.append("        " + text)
    if len(code) in labels:
        out.append(f"L{len(code)}:")
    return "".join(line + "\n" for line in out)
