"""A p4runtime-shell session against `hotplane run`, as an operator would type it.

p4runtime-shell 0.0.6 (PyPI, unchanged) connects, wins arbitration, pushes tables.p4 with the
P4Info `hotplane p4 info` writes, then writes and reads entries of every match kind (exact,
ternary + range with priorities, exact + lpm, exact + optional in a const table), modifies and
resets a default action, reads direct counters (inline and as entries), and meets the spec's refusals (a duplicate, a
missing entry, a const table), writes, reads, modifies and deletes a multicast group and a
clone session. A second session pushes packet_io.p4 and sends a packet-out
that the program loops back to the CPU port, so it returns as a packet-in. Run by scripts/test.sh in its own virtual environment
(p4runtime-shell pins protobuf 3.20, which other clients cannot share):

    HOTPLANE_BIN=target/debug/hotplane VENV/bin/python tests/p4runtime/shell_session.py
"""

import contextlib
import io
import os
import subprocess
import sys
import tempfile
from pathlib import Path

import p4runtime_sh.shell as sh
from p4runtime_sh.p4runtime import P4RuntimeWriteException
from testenv import free_port, wait_listening

REPO = Path(__file__).resolve().parents[2]
PROGRAM = REPO / "tests" / "p4" / "tables.p4"
PACKET_IO = REPO / "tests" / "p4" / "packet_io.p4"


def refused(code, action):
    """`action` must fail with a per-update error whose code is `code`."""
    try:
        action()
    except P4RuntimeWriteException as e:
        assert code in str(e), f"expected {code}, got {e}"
        return
    raise AssertionError(f"expected {code}, the write succeeded")


def connect(addr, p4info, program):
    """Connect as the primary and push `program` with its P4Info."""
    sh.setup(
        device_id=1,
        grpc_addr=addr,
        election_id=(0, 1),
        config=sh.FwdPipeConfig(str(p4info), str(program)),
    )


def session(addr, p4info, work):
    connect(addr, p4info, PROGRAM)
    try:
        # exact
        te = sh.TableEntry("Ing.by_kind")(action="Ing.to_port")
        te.match["hdr.probe.kind"] = "5"
        te.action["port"] = "2"
        te.insert()
        # ternary + range, with a priority
        te = sh.TableEntry("Ing.classify")(action="Ing.set_tag")
        te.match["hdr.probe.a"] = "0x10&&&0xf0"
        te.match["hdr.probe.b"] = "100..200"
        te.priority = 10
        te.action["tag"] = "0x77"
        te.insert()
        # exact + lpm
        te = sh.TableEntry("Ing.routes")(action="Ing.set_tag")
        te.match["hdr.probe.kind"] = "2"
        te.match["hdr.probe.addr"] = "10.1.0.0/16"
        te.action["tag"] = "0x42"
        te.insert()

        got = list(sh.TableEntry("Ing.classify").read())
        assert len(got) == 1, got
        entry = got[0].msg()
        assert entry.priority == 10, entry
        # Read back as written: one entry, canonical bytes, the range whole (the data plane
        # stores it as prefixes).
        a, b = entry.match
        assert (a.ternary.value, a.ternary.mask) == (b"\x10", b"\xf0"), entry
        assert (b.range.low, b.range.high) == (bytes([100]), bytes([200])), entry
        routes = list(sh.TableEntry("Ing.routes").read())
        assert len(routes) == 1, routes
        assert routes[0].msg().match[1].lpm.prefix_len == 16, routes[0].msg()
        everything = list(sh.TableEntry("Ing.by_kind").read()) + got + routes
        assert len(everything) == 3

        # Direct counters come with the entries of tables that have them.
        counted = list(sh.TableEntry("Ing.by_kind").read())[0]
        assert counted.msg().HasField("counter_data"), counted.msg()
        # ... and as direct counter entries, one per entry, keyed by it.
        direct = list(sh.DirectCounterEntry("Ing.exact_hits").read())
        assert len(direct) == 1, direct
        key = direct[0].msg().table_entry
        assert key.match == counted.msg().match and key.table_id == counted.msg().table_id, key

        # MODIFY of the default action, then a reset (MODIFY without an action).
        te = sh.TableEntry("Ing.by_kind")(action="Ing.nop", is_default=True)
        te.modify()
        default = list(sh.TableEntry("Ing.by_kind")(is_default=True).read())
        nop = sh.context.get_obj_id(sh.P4Type.action, "Ing.nop")
        to_port = sh.context.get_obj_id(sh.P4Type.action, "Ing.to_port")
        assert len(default) == 1, default
        assert default[0].msg().action.action.action_id == nop, default[0].msg()
        sh.TableEntry("Ing.by_kind")(is_default=True).modify()
        default = list(sh.TableEntry("Ing.by_kind")(is_default=True).read())
        assert default[0].msg().action.action.action_id == to_port, default[0].msg()

        # The spec's refusals.
        dup = sh.TableEntry("Ing.by_kind")(action="Ing.to_port")
        dup.match["hdr.probe.kind"] = "5"
        dup.action["port"] = "3"
        refused("ALREADY_EXISTS", dup.insert)
        gone = sh.TableEntry("Ing.by_kind")(action="Ing.nop")
        gone.match["hdr.probe.kind"] = "77"
        refused("NOT_FOUND", gone.delete)
        const = sh.TableEntry("Ing.fixed")(action="Ing.nop")
        const.match["hdr.probe.a"] = "0x20"
        refused("PERMISSION_DENIED", const.insert)
        # The const table's own entries read back (an optional `_` is omitted).
        fixed = list(sh.TableEntry("Ing.fixed").read())
        assert len(fixed) == 2, fixed

        # MODIFY and DELETE.
        te = sh.TableEntry("Ing.by_kind")(action="Ing.to_port")
        te.match["hdr.probe.kind"] = "5"
        te.action["port"] = "7"
        te.modify()
        now = list(sh.TableEntry("Ing.by_kind").read())[0].msg()
        assert now.action.action.params[0].value == b"\x07", now
        te.delete()
        assert not list(sh.TableEntry("Ing.by_kind").read())

        # Multicast groups and clone sessions (the shell writes the numeric `egress_port` form,
        # and reads it back).
        sh.MulticastGroupEntry(1).add(1, 1).add(2, 1).insert()
        groups = list(sh.MulticastGroupEntry(1).read())
        assert len(groups) == 1, groups
        replicas = [(r.egress_port, r.instance) for r in groups[0].msg().multicast_group_entry.replicas]
        assert replicas == [(1, 1), (2, 1)], groups[0].msg()
        sh.MulticastGroupEntry(1).add(3, 1).modify()
        now = list(sh.MulticastGroupEntry(1).read())[0].msg().multicast_group_entry
        assert [r.egress_port for r in now.replicas] == [3], now
        refused("ALREADY_EXISTS", sh.MulticastGroupEntry(1).add(1, 1).insert)
        sh.CloneSessionEntry(5).add(2).insert()
        assert len(list(sh.CloneSessionEntry(5).read())) == 1
        sh.MulticastGroupEntry(1).delete()
        refused("NOT_FOUND", sh.MulticastGroupEntry(1).delete)
    finally:
        sh.teardown()


def packet_session(addr, p4info):
    connect(addr, p4info, PACKET_IO)
    try:
        sniffer = sh.PacketIn()
        # An Ethernet frame (the program parses one behind the packet_out header).
        frame = bytes.fromhex("020000000002" "020000000001" "88b5") + b"hotplane" * 6
        sh.PacketOut(frame, egress_port="255").send()
        got = list(sniffer.sniff(timeout=2))
        assert len(got) == 1, got
        packet = got[0].packet
        assert packet.payload == frame, packet
        metadata = {m.metadata_id: m.value for m in packet.metadata}
        assert metadata == {1: b"\xff", 2: b"\x00"}, packet
    finally:
        sh.teardown()


def main():
    binary = os.environ.get("HOTPLANE_BIN", str(REPO / "target" / "debug" / "hotplane"))
    port = free_port()
    with tempfile.TemporaryDirectory(prefix="hotplane-p4rt-shell-") as work:
        work = Path(work)
        p4info = work / "tables.p4info.txtpb"
        subprocess.run([binary, "p4", "info", str(PROGRAM), "--out", str(p4info)], check=True)
        io_info = work / "packet_io.p4info.txtpb"
        subprocess.run([binary, "p4", "info", str(PACKET_IO), "--out", str(io_info)], check=True)
        config = work / "switch.toml"
        config.write_text(
            f"""
[[port]]
name = "p0"
kind = "mem"
[[port]]
name = "p1"
kind = "mem"
[p4runtime]
listen = "127.0.0.1:{port}"
device_id = 1
cpu_port = 255
"""
        )
        log = open(work / "hotplane.log", "w")
        proc = subprocess.Popen([binary, "run", "--config", str(config)], stdout=log, stderr=log)
        try:
            wait_listening(port, proc)
            # The shell prints every entry it writes; shown only when the session fails.
            said = io.StringIO()
            try:
                with contextlib.redirect_stdout(said):
                    session(f"127.0.0.1:{port}", p4info, work)
                    packet_session(f"127.0.0.1:{port}", io_info)
            except BaseException:
                print(said.getvalue())
                raise
            assert proc.poll() is None, "hotplane is still running after the session"
        finally:
            proc.terminate()
            proc.wait(timeout=30)
            log.close()
            if proc.returncode not in (0, -15):
                print((work / "hotplane.log").read_text(), file=sys.stderr)
                raise SystemExit(f"hotplane exited with {proc.returncode}")
    print("p4runtime-shell session: ok")


if __name__ == "__main__":
    main()
