"""End to end against the real binary: scapy-built update packets replayed from a capture are
applied and acknowledged; the control socket takes Python-built envelopes and refuses replays."""

import os
import pathlib
import subprocess
import time

import pytest
from scapy.layers.inet import IP, UDP
from scapy.layers.l2 import Ether
from scapy.utils import rdpcap, wrpcap

from hotplane import Client, HotplaneError, envelope
from hotplane.layers import HotplaneAck, HotplaneUpdate

KEY = bytes.fromhex("2f" * 32)


def update_packet(datagram: bytes) -> Ether:
    return (Ether(src="02:00:00:00:09:09", dst="02:00:00:00:00:fe") / IP(src="10.9.9.9", dst="10.0.0.254")
            / UDP(sport=40000, dport=47474) / HotplaneUpdate(datagram))


def test_inband_updates_from_a_capture(tmp_path, hotplane_bin):
    good = envelope.build("pre", envelope.Kind.NATIVE_STAGE, b'{"stage":"count"}', key_id=1, key=KEY, seq=100)[0]
    tampered = bytearray(envelope.build("mid", envelope.Kind.NATIVE_STAGE, b'{"stage":"drop"}', key_id=1,
                                        key=KEY, seq=101)[0])
    tampered[-40] ^= 1
    frag = envelope.build("flow:proto=udp,dport=5000", envelope.Kind.NATIVE_STAGE,
                          b'{"stage":"set-field","base":"payload","offset":0,"value":"0x01"}   ',
                          key_id=1, key=KEY, seq=102, max_fragment=20)
    packets = [update_packet(good), update_packet(bytes(tampered)), update_packet(good)]
    packets += [update_packet(d) for d in frag]
    wrpcap(str(tmp_path / "in.pcap"), packets)
    (tmp_path / "c.toml").write_text(f"""
[[port]]
name = "p"
kind = "pcap"
read = "{tmp_path / 'in.pcap'}"
write = "{tmp_path / 'out.pcap'}"
[[control.keys]]
id = 1
key = "{KEY.hex()}"
""")
    r = subprocess.run([hotplane_bin, "run", "--json", "--config", str(tmp_path / "c.toml")],
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    acks = [p[HotplaneAck] for p in rdpcap(str(tmp_path / "out.pcap")) if HotplaneAck in p]
    assert len(acks) == len(packets)
    decoded = [a.to_ack() for a in acks]
    by_seq = {}
    for a in decoded:
        by_seq.setdefault(a.seq, []).append(a)
    assert [a.status for a in by_seq[100]] == ["applied", "refused"]
    assert by_seq[100][1].reason == "replay"
    assert by_seq[101][0].reason == "bad_mac"
    assert by_seq[102][-1].status == "applied"
    assert all(a.status == "partial" for a in by_seq[102][:-1])
    # Acknowledgements of authenticated updates are MACed with the same key.
    assert all(a.check(KEY) for a in acks if a.to_ack().reason != "bad_mac")


@pytest.fixture
def running_node(tmp_path, hotplane_bin):
    sock = tmp_path / "ctl.sock"
    (tmp_path / "c.toml").write_text(f"""
[[port]]
name = "p0"
kind = "mem"
gen = {{ flows = 2, rate_pps = 20000 }}
[[predefined]]
id = 3
stage = {{ stage = "count" }}
[control]
socket = "{sock}"
[[control.keys]]
id = 1
key = "{KEY.hex()}"
""")
    proc = subprocess.Popen([hotplane_bin, "run", "--config", str(tmp_path / "c.toml")],
                            stderr=subprocess.PIPE, text=True)
    deadline = time.time() + 20
    while not sock.exists():
        assert proc.poll() is None, proc.stderr.read()
        assert time.time() < deadline, "control socket never appeared"
        time.sleep(0.01)
    yield str(sock)
    if proc.poll() is None:
        proc.terminate()
    proc.wait(timeout=20)


def test_control_client(running_node):
    with Client(running_node) as c:
        assert c.install("pre", {"stage": "count"})["version"] == 2
        assert c.switch("post", 3)["version"] == 2
        slots = {(s["worker"], s["target"]): s for s in c.slots()}
        assert slots[(0, "pre")]["program"].startswith("count")
        with pytest.raises(HotplaneError, match="no port named"):
            c.install("pre", {"stage": "forward", "to": "nowhere"})
        ds = envelope.build("mid", envelope.Kind.SELECT_PREDEFINED, (3).to_bytes(4, "big"), key_id=1, key=KEY,
                            seq=envelope.next_seq())
        assert c.update(ds)[0]["status"] == "applied"
        again = c.update(ds)[0]
        assert again["status"] == "refused" and again["reason"] == "replay"
        stats = c.stats()
        assert stats["updates"]["refused"]["replay"] == 1
        assert "hotplane_worker_packets_total" in c.metrics()
        c.shutdown()


def test_ebpf_updates_and_maps(running_node):
    examples = pathlib.Path(__file__).resolve().parents[2] / "examples" / "ebpf"
    with Client(running_node) as c:
        ack = c.ebpf_update("pre", (examples / "xdp_count.o").read_bytes(), key=KEY)
        assert ack["status"] == "applied", ack
        maps = {m["name"]: m for m in c.ebpf_maps()}
        assert maps["xdp_count/proto_count"]["kind"] == "percpu_array"
        deadline = time.time() + 10
        udp = 0
        while udp < 100 and time.time() < deadline:
            entries = c.ebpf_map_dump("xdp_count/proto_count")["entries"]
            udp = sum(int.from_bytes(bytes.fromhex(v), "little") for v in entries[5]["values"])
            time.sleep(0.05)
        assert udp >= 100, "the protocol counter never counted UDP"
        c.ebpf_map_update("xdp_count/proto_count", (0).to_bytes(4, "little"), (7).to_bytes(8, "little"))
        assert c.ebpf_map_dump("xdp_count/proto_count")["entries"][0]["values"][0] == (7).to_bytes(8, "little").hex()
        # Bytecode reading the packet without a bounds check: refused, with the reason.
        bad = bytes.fromhex("6112000000000000" "7120000000000000" "9500000000000000")
        ack = c.ebpf_update("mid", bad, key=KEY)
        assert ack["status"] == "refused" and ack["reason"] == "rejected", ack
        assert "instruction 1" in ack["message"]
        # C source, compiled on the node, run by the interpreter on request.
        src = b"""#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>
SEC("xdp") int pass(struct xdp_md *ctx) { return XDP_PASS; }
char _license[] SEC("license") = "GPL";
"""
        ack = c.ebpf_update("post", src, key=KEY, interpret=True)
        assert ack["status"] == "applied", ack
        slots = {(s["worker"], s["target"]): s["program"] for s in c.slots()}
        assert "interp" in slots[(0, "post")] and "xdp_count" in slots[(0, "pre")]
        with pytest.raises(HotplaneError, match="no map named"):
            c.ebpf_map_dump("nope")
        c.shutdown()


def test_lua_updates(running_node):
    with Client(running_node) as c:
        ack = c.lua_update("flow:default", "return function(pkt) pkt:setMark(7) end", key=KEY, opt_level=2)
        assert ack["status"] == "applied", ack
        ack = c.lua_update("flow:default", "return function(pkt", key=KEY)
        assert ack["status"] == "refused" and ack["reason"] == "rejected", ack
        assert "syntax error" in ack["message"]
        deadline = time.time() + 10
        while time.time() < deadline:
            f = {e["target"]: e for e in c.lua_functions()}
            if f.get("flow:default", {}).get("packets", 0) > 0:
                break
            time.sleep(0.05)
        d = f["flow:default"]
        assert d["opt_level"] == 2 and d["jit"] is True and d["errors"] == 0, d
        assert d["packets"] > 0, d
        c.shutdown()
