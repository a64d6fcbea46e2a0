"""WASP from Python: the shim layer per docs/wasp.md §2, the assembler against the Rust one, the
builder."""

import pathlib
import random
import re
import subprocess

import pytest
from scapy.layers.inet import IP, UDP
from scapy.layers.inet6 import IPv6, IPv6ExtHdrHopByHop
from scapy.packet import Raw

from hotplane import wasp
from hotplane.wasp import WASP, AsmError, assemble, assemble_program, disassemble, internet_checksum, wasp_packet

REPO = pathlib.Path(__file__).resolve().parents[2]
EXAMPLES = sorted((REPO / "examples" / "wasp").glob("*.s"))
COUNT = (REPO / "examples" / "wasp" / "count.s").read_text()

# Every assembler form, as crates/wasp/src/asm.rs's own test writes it.
EVERY_FORM = """\
start:  lookup k1          ; comment
        inc
        insert k1
        imm a, 300
        imm b, 7
        shl 3
        shr 0x3f
        addi 255
        subi 1
        mov a, b
        mov b, a
        ld a, e.time
        ld b, h.32[3]
        st s.16[5], a
        ldx a, s.32[b+2]
        stx m.8[b], a
        map k0
        ld a, m.64[3]
        ceq
        jt end
        return
end:    fwd
"""


# --- the assembler ---


def rust_array(name: str) -> bytes:
    """The bytes crates/wasp/tests/hops.rs asserts for `name.code`."""
    text = (REPO / "crates" / "wasp" / "tests" / "hops.rs").read_text()
    found = re.search(rf"{name}\.code,\s*\[([^\]]*)\]", text)
    assert found, f"hops.rs no longer asserts {name}.code"
    return bytes(int(b, 16) for b in re.findall(r"0x[0-9a-fA-F]+", found.group(1)))


def test_count_and_collect_assemble_to_the_bytes_the_rust_tests_pin():
    assert rust_array("count") == bytes([0x90, 0x18, 0x94, 0xB0, 0x34, 0x3A, 0x01, 0x02])
    assert assemble(COUNT) == rust_array("count")
    assert assemble((REPO / "examples" / "wasp" / "collect.s").read_text()) == rust_array("collect")


def test_every_example_assembles_within_the_limits():
    assert len(EXAMPLES) >= 9, [e.name for e in EXAMPLES]
    for path in EXAMPLES:
        out = assemble_program(path.read_text())
        assert 1 <= len(out.code) <= wasp.MAX_CODE, path.name
        assert out.keys_used <= wasp.MAX_KEYS, path.name


def test_every_form_encodes_as_the_isa_table_says():
    # docs/wasp.md §4, instruction by instruction.
    expected = bytes.fromhex(
        "91" "18" "95" "24012c" "2307" "2003" "213f" "26ff" "2701" "1b" "1c" "4b05" "5e03"
        "6105" "7202" "8400" "98" "d3" "30" "3901" "03" "01")
    out = assemble_program(EVERY_FORM)
    assert out.code == expected
    assert out.keys_used == 2


# The cases of asm.rs's errors_say_where_and_why, with the same positions and words, and more.
ERRORS = [
    ("  fwd\n  frob a", 2, 3, "unknown instruction 'frob'"),
    ("x: fwd\n   jmp x", 2, 8, "jump back to 'x': jumps go forward only"),
    ("jmp nowhere", 1, 5, "unknown label 'nowhere'"),
    ("x:\nx: fwd", 2, 1, "label 'x' defined twice"),
    ("shl 64", 1, 5, "number 64 out of range"),
    ("lookup k4", 1, 8, "expected a key slot (k0..k3), found 'k4'"),
    ("ld a, q.64[0]", 1, 7, "expected a bank operand like s.64[0] or e.time, found 'q.64[0]'"),
    ("st s.64[0], b", 1, 13, "expected register a, found 'b'"),
    ("fwd a", 1, 5, "unexpected 'a' after the operands"),
    ("imm a", 1, 6, "missing operand: expected a number (0..65535)"),
    ("imm a, 1000\n" * 22, 22, 1, "code is 66 bytes, more than 64"),
    ("mov a, a", 1, 1, "expected a, b or b, a, found 'the same register twice'"),
    ("ldx a, s.32[3]", 1, 8, "expected a bank operand like s.32[b+1], found 's.32[3]'"),
    ("ld a, s.8[256]", 1, 7, "number s.8[256] out of range"),
    ("1x: fwd", 1, 1, "expected a label name, found '1x:'"),
    ("imm a, -1", 1, 8, "expected a number (0..65535), found '-1'"),
]


@pytest.mark.parametrize("source, line, col, message", ERRORS)
def test_errors_say_where_and_why(source, line, col, message):
    with pytest.raises(AsmError) as caught:
        assemble(source)
    assert (caught.value.line, caught.value.col, caught.value.message) == (line, col, message)
    assert str(caught.value) == f"{line}:{col}: {message}"


def test_numbers_and_names_parse_as_in_rust():
    assert assemble("imm a, 0xFF\nimm b, +2\nld a, e.64[5]\nld a, e.time") == bytes.fromhex("22ff2302" "4b05" "4b05")
    assert assemble("lookup k+1") == b"\x91"  # Rust's u8 parser takes a '+'
    for bad in ("imm a, 1_0", "imm a, 0x", "imm a, ١٢"):
        with pytest.raises(AsmError):
            assemble(bad)
    # A label alone on the last line is the end of the code; CRLF lines are fine.
    assert assemble("jf done\r\ndrop\r\ndone:") == bytes.fromhex("3a01" "02")


def rust_assemble(binary: str, path: pathlib.Path):
    """`hotplane wasp asm FILE --hex`: the code bytes, or (line, col, message) of its error."""
    run = subprocess.run([binary, "wasp", "asm", str(path), "--hex"], capture_output=True, text=True, timeout=60)
    if run.returncode != 0 and re.search(r"unrecognized subcommand|unexpected argument", run.stderr):
        pytest.skip(f"`hotplane wasp asm FILE --hex` is not in this binary yet: {run.stderr.strip().splitlines()[0]}")
    if run.returncode == 0:
        return bytes.fromhex(run.stdout.strip())
    found = re.search(rf"{re.escape(str(path))}:(\d+):(\d+): (.*)", run.stderr)
    assert found, f"{path.name}: no line:col in the error: {run.stderr}"
    return int(found.group(1)), int(found.group(2)), found.group(3).strip()


def python_assemble(text: str):
    try:
        return assemble(text)
    except AsmError as e:
        return e.line, e.col, e.message


def test_python_and_rust_assemble_every_example_alike(hotplane_bin, tmp_path):
    every_form = tmp_path / "every_form.s"
    every_form.write_text(EVERY_FORM)
    for path in EXAMPLES + [every_form]:
        assert assemble(path.read_text()) == rust_assemble(hotplane_bin, path), path.name


def test_python_and_rust_refuse_alike(hotplane_bin, tmp_path):
    for i, (source, line, col, message) in enumerate(ERRORS):
        path = tmp_path / f"error{i}.s"
        path.write_text(source)
        assert rust_assemble(hotplane_bin, path) == (line, col, message), source


def random_program(rng: random.Random) -> str:
    """Lines from the instruction forms with random operands, one in ten of them bent into a
    near miss; labels, comments, blank and CRLF lines."""
    number = lambda: str(rng.choice([0, 1, 7, 63, 64, 200, 255, 256, 300, 0xFFFF]))  # noqa: E731
    reg = lambda: rng.choice("ab")  # noqa: E731
    bank = lambda: rng.choice("smeh") + "." + rng.choice(["8", "16", "32", "64"])  # noqa: E731
    mem = lambda: rng.choice([bank() + f"[{rng.randint(0, 20)}]", "e.time", "e.queue", "e.node_id"])  # noqa: E731
    memx = lambda: bank() + rng.choice(["[b]", "[b+1]", "[b+0x10]"])  # noqa: E731
    key = lambda: f"k{rng.randint(0, 3)}"  # noqa: E731
    forms = [
        lambda: rng.choice(["fwd", "drop", "nop", "return", "inc", "dec", "add", "sub", "and", "or", "xor", "min",
                            "max", "not", "swap", "clr", "ceq", "cne", "clt", "cle", "cgt", "cge", "cnz"]),
        lambda: f"{rng.choice(['shl', 'shr'])} {rng.randint(0, 63)}",
        lambda: f"imm {reg()}, {number()}",
        lambda: f"{rng.choice(['addi', 'subi'])} {rng.randint(0, 255)}",
        lambda: f"ld {reg()}, {mem()}",
        lambda: f"st {mem()}, a",
        lambda: f"ldx a, {memx()}",
        lambda: f"stx {memx()}, a",
        lambda: rng.choice(["mov a, b", "mov b, a"]),
        lambda: f"{rng.choice(['lookup', 'insert', 'map'])} {key()}",
        lambda: f"{rng.choice(['jmp', 'jt', 'jf'])} {rng.choice(['L1', 'L2', 'end'])}",
        lambda: ".byte " + ", ".join(str(rng.randint(0, 255)) for _ in range(rng.randint(1, 3))),
    ]
    near_misses = ["a", "b", "c", "k4", "k+1", "-1", "+2", "1_0", "0x", "65536", "e.bogus", "s.64[0",
                   "s.32[b-1]", "q.64[0]", "h.8[300]", "s.64", "frob", "Fwd", "ld.", "L1:"]
    lines, defined = [], set()
    for _ in range(rng.randint(1, 7)):
        line = rng.choice(forms)()
        if rng.random() < 0.1:
            words = line.replace(",", " ").split()
            words[rng.randrange(len(words))] = rng.choice(near_misses)
            line = " ".join(words)
        if rng.random() < 0.3:
            label = rng.choice(["L1", "L2"])
            if label not in defined:
                defined.add(label)
                line = f"{label}: {line}"
        lines.append(rng.choice(["", "    ", "\t"]) + line + rng.choice(["", "", "  ; note", " # x, y"]))
    tail = rng.choice(["", "\nend:", "\nend:\n", "\r\nend:"])
    return rng.choice(["\n", "\n", "\r\n"]).join(lines) + tail


def test_python_and_rust_agree_on_random_programs(hotplane_bin, tmp_path):
    rng = random.Random(20)
    outcomes = {"ok": 0, "error": 0}
    for i in range(200):
        text = random_program(rng)
        path = tmp_path / f"random{i}.s"
        path.write_text(text)
        ours = python_assemble(text)
        assert ours == rust_assemble(hotplane_bin, path), text
        outcomes["ok" if isinstance(ours, bytes) else "error"] += 1
    assert min(outcomes.values()) >= 40, outcomes  # both paths exercised


def rust_disassemble(binary: str, code: bytes) -> str:
    """`hotplane wasp disasm --hex HEX`: the text it prints."""
    run = subprocess.run([binary, "wasp", "disasm", "--hex", code.hex()], capture_output=True, text=True, timeout=60)
    assert run.returncode == 0, run.stderr
    return run.stdout


def test_python_and_rust_disassemble_alike(hotplane_bin):
    """Every example, and random bytes (mostly not programs): the same text, and text that
    assembles again (to the same program; short encodings may replace long ones)."""
    rng = random.Random(21)
    codes = [assemble(path.read_text()) for path in EXAMPLES]
    codes += [bytes(rng.randrange(256) for _ in range(rng.randrange(1, 65))) for _ in range(150)]
    codes += [bytes([0x38, 0x00]), bytes([0x39, 0x01, 0x00, 0x02]), bytes([0x3A, 0x05, 0x01]), bytes([0x24, 0x01])]
    for code in codes:
        text = disassemble(code)
        assert text == rust_disassemble(hotplane_bin, code), code.hex()
        assert len(assemble(text)) <= len(code), code.hex()


def test_disassembly_names_banks_words_and_labels():
    code = assemble("lookup k1\nld a, e.time\nldx a, h.16[b+3]\ncgt\njt end\nst m.64[2], a\nend:")
    assert disassemble(code).split("\n") == [
        "        lookup k1", "        ld a, e.time", "        ldx a, h.16[b+3]", "        cgt",
        "        jt L9", "        st m.64[2], a", "L9:", ""]
    # An unknown opcode, a shift by 64, an instruction cut short: bytes, as they are.
    assert disassemble(bytes([0xFF, 0x20, 64, 0x40])) == (
        "        .byte 0xff\n        .byte 0x20\n        ld a, s.8[64]\n"
    )
    assert disassemble(bytes([0x40])) == "        .byte 0x40\n"


# --- the shim layer ---


def test_layer_lays_out_fields_as_docs_wasp_md_section_2():
    shim = wasp_packet(COUNT, keys=[0xC0FFEE], scratch=[3], cid=0xDEADBEEF)
    raw = bytes(IP(src="192.0.2.1", dst="198.51.100.9") / shim / UDP(sport=4660, dport=53) / b"data")[20:]
    assert raw[:8] == bytes([1, 0, 17, 1, 8, 8, 0, 0])  # version flags next_header nkeys code scratch pc code
    assert raw[8:12] == bytes.fromhex("deadbeef")
    assert raw[14:16] == b"\x00\x00"
    assert raw[16:24] == (0xC0FFEE).to_bytes(8, "big")
    assert raw[24:32] == (3).to_bytes(8, "big")
    assert raw[32:40] == rust_array("count")
    assert raw[40:42] == (4660).to_bytes(2, "big"), "the UDP header follows the code"
    assert internet_checksum(raw[:40]) == 0


def test_checksum_is_rfc_1071_computed_by_hand():
    raw = bytes(wasp_packet(COUNT, keys=[0xC0FFEE], scratch=[3], next_header=17))
    # 16-bit words, checksum field 0: 0100 1101 0808 0000 0000 0000 0000 0000 | key 0000 0000
    # 00c0 ffee | scratch 0000 0000 0000 0003 | code 9018 94b0 343a 0102.
    # Sum 0x274be; folded 0x74be + 0x2 = 0x74c0; complement 0x8b3f.
    assert raw[12:14] == b"\x8b\x3f"
    assert internet_checksum(b"\x01") == 0xFEFF, "an odd byte is padded with a zero byte"
    assert internet_checksum(b"\xff\xff\xff\xff") == 0x0000, "0xffff + 0xffff folds to 0xffff"


def test_round_trip_through_ipv4_with_udp_behind_the_shim():
    pkt = IP(src="192.0.2.1", dst="198.51.100.9") / wasp_packet(COUNT, [7], [3]) / UDP(sport=1, dport=5000) / b"hi"
    again = IP(bytes(pkt))
    assert again.proto == wasp.IP_PROTOCOL
    w = again[WASP]
    assert (w.version, w.nkeys, w.code_len, w.scratch_len, w.next_header) == (1, 1, 8, 8, 17)
    assert w.keys == [7] and w.scratch_words() == [3] and w.code == assemble(COUNT)
    assert w.verify_checksum() and w.fault() is None
    assert again[UDP].dport == 5000 and again[Raw].load == b"hi"
    assert bytes(again) == bytes(pkt)
    # The UDP checksum is filled (scapy leaves it 0 when UDP is not right on IP) and valid:
    # the same as for the same datagram without the shim.
    plain = IP(bytes(IP(src="192.0.2.1", dst="198.51.100.9") / UDP(sport=1, dport=5000) / b"hi"))
    assert again[UDP].chksum == plain[UDP].chksum != 0


def test_a_flipped_bit_fails_the_checksum():
    raw = bytearray(bytes(wasp_packet(COUNT, [7], [3])))
    for at in range(len(raw)):
        flipped = bytearray(raw)
        flipped[at] ^= 0x10
        if at in (3, 4, 5):
            continue  # a length byte: the layer would read other bytes; the node refuses it first
        assert not WASP(bytes(flipped)).verify_checksum(), at


def test_ipv6_and_udp_carriage_bind():
    v6 = IPv6(src="2001:db8::1", dst="2001:db8::2") / wasp_packet("fwd") / UDP(dport=7) / b"x"
    again = IPv6(bytes(v6))
    assert again.nh == 253 and again[WASP].verify_checksum() and again[UDP].dport == 7
    plain = IPv6(bytes(IPv6(src="2001:db8::1", dst="2001:db8::2") / UDP(dport=7) / b"x"))
    assert again[UDP].chksum == plain[UDP].chksum, "UDP over IPv6 needs its checksum"
    hbh = IPv6(bytes(IPv6() / IPv6ExtHdrHopByHop() / wasp_packet("fwd")))
    assert hbh[IPv6ExtHdrHopByHop].nh == 253 and hbh[WASP].code == b"\x01"
    over_udp = IP(bytes(IP() / UDP(sport=40000, dport=wasp.DEFAULT_UDP_PORT) / wasp_packet(COUNT, [1], [2]) / b"app"))
    w = over_udp[WASP]
    assert w.next_header == wasp.NO_NEXT_HEADER and w.verify_checksum() and w[Raw].load == b"app"


def test_a_shim_shaped_as_rust_emits_it_parses():
    # crates/wasp/src/wire.rs sample(): keys [0x0102030405060708, 42], scratch 1..8, code
    # 90 18 01, cid 0xdeadbeef, next header 17; its test pins these offsets.
    shim = wasp_packet(bytes([0x90, 0x18, 0x01]), [0x0102030405060708, 42], bytes(range(1, 9)),
                       cid=0xDEADBEEF, next_header=17)
    raw = bytes(shim)
    assert len(raw) == 16 + 16 + 8 + 3
    assert raw[:6] == bytes([1, 0, 17, 2, 3, 8]) and raw[8:12] == bytes.fromhex("deadbeef")
    assert raw[16:24] == bytes(range(1, 9)) and raw[40:43] == bytes([0x90, 0x18, 0x01])
    parsed = WASP(raw + b"payload")
    assert parsed.keys == [0x0102030405060708, 42] and parsed.cid == 0xDEADBEEF
    assert parsed.verify_checksum() and parsed[Raw].load == b"payload"


def test_fault_report_reads_back():
    # A node that forwards a faulted packet flagged sets FAULT, fault_pc and fault_code (index + 1).
    w = WASP(bytes(wasp_packet(COUNT, [1], [0], flags=wasp.FLAG_FAULT)))
    w.fault_pc, w.fault_code = 4, 1
    assert w.fault() == "read-only"
    assert WASP(bytes(w)).fault_pc == 4


def test_builder_refuses_what_a_node_would_refuse():
    with pytest.raises(ValueError, match="5 keys"):
        wasp_packet("fwd", keys=[1, 2, 3, 4, 5])
    with pytest.raises(ValueError, match="whole 64-bit words"):
        wasp_packet("fwd", scratch=b"\x00" * 7)
    with pytest.raises(ValueError, match="at most 128"):
        wasp_packet("fwd", scratch=[0] * 17)
    with pytest.raises(ValueError, match="code is 65 bytes"):
        wasp_packet(b"\x00" * 65)
    with pytest.raises(ValueError, match="flags"):
        wasp_packet("fwd", flags=wasp.FLAG_ADMIN)
    with pytest.raises(AsmError, match="1:1: unknown instruction 'jump'"):
        wasp_packet("jump")


def test_a_node_rewriting_a_udp_carried_shim_leaves_the_udp_checksum_valid():
    # docs/wasp.md §2: the shim's own checksum keeps its one's-complement sum constant, and the
    # shim starts at an even offset of the UDP datagram, so a node need not touch the UDP checksum.
    pkt = IP(bytes(IP(src="192.0.2.1", dst="198.51.100.9") / UDP(sport=40000, dport=wasp.DEFAULT_UDP_PORT)
                   / wasp_packet("imm a, 5\nst s.64[0], a", scratch=[0]) / b"application data"))
    udp = bytearray(bytes(pkt[UDP]))

    def udp_valid() -> bool:
        pseudo = bytes(map(int, pkt.src.split("."))) + bytes(map(int, pkt.dst.split(".")))
        return internet_checksum(pseudo + bytes([0, 17]) + len(udp).to_bytes(2, "big") + bytes(udp)) == 0

    assert udp_valid()
    shim = 8  # the shim right after the UDP header
    scratch = shim + 16
    udp[scratch:scratch + 8] = (5).to_bytes(8, "big")        # what the program writes
    udp[shim + 12:shim + 14] = b"\x00\x00"
    shim_len = WASP(bytes(udp[shim:])).shim_len()
    udp[shim + 12:shim + 14] = internet_checksum(bytes(udp[shim:shim + shim_len])).to_bytes(2, "big")
    assert WASP(bytes(udp[shim:])).verify_checksum() and WASP(bytes(udp[shim:])).scratch_words() == [5]
    assert udp_valid(), "the UDP checksum still holds"
