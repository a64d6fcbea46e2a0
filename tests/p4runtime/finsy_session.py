"""A finsy controller against `hotplane switch`, as finsy's own l2_switch demo drives BMv2.

finsy 0.30.0 (PyPI, unchanged) runs a learning switch (tests/p4/learn.p4) on `hotplane switch`
with two veth ports, inside a network namespace of its own:

- it connects, wins arbitration, finds no pipeline cookie and pushes the program with its
  cookie; `delete_all()` clears the tables, groups, clone sessions, action profiles and digest
  entries;
- it configures the `learn_t` digest and learns: a frame from a new address arrives as a
  digest list; the controller writes an `smac` entry with an idle timeout and a `dmac` entry
  and acknowledges the list; the same address is not reported again while it is known;
- left alone, the `smac` entry goes idle: an `IdleTimeoutNotification` names it, and the
  controller unlearns it (deletes both entries); the next frame from it is learned again;
- a second controller session finds the cookie it expects, so it does not push the pipeline
  again: the entries the first one left are still there, until its `delete_all()`.

    HOTPLANE_BIN=target/debug/hotplane VENV/bin/python tests/p4runtime/finsy_session.py

Exit status 0: passed; 1: failed; 2: not run (not root: the namespace needs it).
"""

import asyncio
import os
import socket
import subprocess
import sys
import tempfile
from pathlib import Path

from testenv import free_port, not_run, run_inside, wait_listening

REPO = Path(__file__).resolve().parents[2]
PROGRAM = REPO / "tests" / "p4" / "learn.p4"
WHAT = "finsy session"
IDLE_TIMEOUT_NS = 400_000_000


def sh(*argv):
    subprocess.run(argv, check=True)


def frame_from(last):
    """An Ethernet frame from 02:00:00:00:00:LAST to an address nobody has."""
    return bytes([2, 0, 0, 0, 0, 0xEE, 2, 0, 0, 0, 0, last]) + b"\x88\xb5" + b"finsy" * 10


def send(iface, frame):
    with socket.socket(socket.AF_PACKET, socket.SOCK_RAW) as s:
        s.bind((iface, 0))
        s.send(frame)


def queue_of(sw, aiter):
    """What `aiter` yields, gathered by a task of the switch into a queue: waiting on the queue
    with a timeout leaves the iterator open (a timed-out `__anext__` would close it)."""
    q = asyncio.Queue()

    async def pump():
        async for x in aiter:
            await q.put(x)

    sw.create_task(pump())
    return q


async def next_of(q, seconds, what):
    try:
        return await asyncio.wait_for(q.get(), seconds)
    except asyncio.TimeoutError:
        raise AssertionError(f"no {what} within {seconds} s") from None


async def nothing_from(q, seconds, what):
    try:
        got = await asyncio.wait_for(q.get(), seconds)
    except asyncio.TimeoutError:
        return
    raise AssertionError(f"unexpected {what}: {got}")


async def first_session(fy, addr, opts):
    async with fy.Switch("sw1", addr, opts) as sw:
        assert sw.is_primary, "the only controller is the primary"
        await sw.delete_all()
        await sw.write(
            [+fy.P4DigestEntry("learn_t", max_list_size=1, ack_timeout_ns=int(10e9))]
        )
        got = [e async for e in sw.read([fy.P4DigestEntry("learn_t")])]
        assert len(got) == 1 and got[0].max_list_size == 1, got
        digests = queue_of(sw, sw.read_digests("learn_t"))
        timeouts = queue_of(sw, sw.read_idle_timeouts())
        await asyncio.sleep(0)

        async def learn():
            digest = await next_of(digests, 5, "digest list")
            entries = list(digest)
            assert len(entries) == 1, entries
            src, port = entries[0]["src"], entries[0]["port"]
            assert (src, port) == (0x020000000001, 0), entries
            await sw.write(
                [
                    +fy.P4TableEntry(
                        "smac",
                        match=fy.P4TableMatch({"hdr.ethernet.src": src}),
                        action=fy.P4TableAction("known"),
                        idle_timeout_ns=IDLE_TIMEOUT_NS,
                    ),
                    +fy.P4TableEntry(
                        "dmac",
                        match=fy.P4TableMatch({"hdr.ethernet.dst": src}),
                        action=fy.P4TableAction("forward", port=port),
                    ),
                ]
            )
            await sw.write([digest.ack()])

        send("h0", frame_from(1))
        await learn()
        # Known now: hit for a while, it is neither reported again nor idle.
        for _ in range(10):
            send("h0", frame_from(1))
            await asyncio.sleep(0.03)
        await nothing_from(digests, 0.2, "digest for a known address")
        # Left alone, it goes idle; the controller unlearns it.
        note = await next_of(timeouts, 5, "idle timeout notification")
        idle = list(note)
        assert len(idle) == 1, idle
        assert idle[0].table_id == "smac" and idle[0].idle_timeout_ns == IDLE_TIMEOUT_NS, idle
        # finsy names a decoded match field by its short name ("src").
        (src,) = idle[0].match.values()
        assert src == 0x020000000001, idle
        await sw.write(
            [
                -fy.P4TableEntry("smac", match=fy.P4TableMatch({"hdr.ethernet.src": src})),
                -fy.P4TableEntry("dmac", match=fy.P4TableMatch({"hdr.ethernet.dst": src})),
            ]
        )
        # Unknown again: learned again, and this time left in place.
        send("h0", frame_from(1))
        await learn()
        entries = [e async for e in sw.read([fy.P4TableEntry("dmac")])]
        assert len(entries) == 1, entries


async def second_session(fy, addr, opts):
    async with fy.Switch("sw1", addr, opts(initial_election_id=20)) as sw:
        entries = [e async for e in sw.read([fy.P4TableEntry("dmac")])]
        assert len(entries) == 1, f"the pipeline was pushed again: {entries}"
        await sw.delete_all()
        for table in ["smac", "dmac"]:
            left = [e async for e in sw.read([fy.P4TableEntry(table)])]
            assert left == [], left
        got = [e async for e in sw.read([fy.P4DigestEntry("learn_t")])]
        assert got == [], got


def inside():
    import finsy as fy

    binary = os.environ.get("HOTPLANE_BIN", str(REPO / "target" / "debug" / "hotplane"))
    # No router solicitations or other chatter from the hosts' side: only the test's frames.
    sh("sysctl", "-qw", "net.ipv6.conf.all.disable_ipv6=1")
    sh("sysctl", "-qw", "net.ipv6.conf.default.disable_ipv6=1")
    for i in range(2):
        sh("ip", "link", "add", f"s{i}", "type", "veth", "peer", "name", f"h{i}")
        sh("ip", "link", "set", f"s{i}", "up")
        sh("ip", "link", "set", f"h{i}", "up")
    port = free_port()
    with tempfile.TemporaryDirectory(prefix="hotplane-finsy-") as work:
        work = Path(work)
        p4info = work / "learn.p4info.txtpb"
        sh(binary, "p4", "info", str(PROGRAM), "--out", str(p4info))
        log = open(work / "switch.log", "w")
        argv = [binary, "switch", "--device-id", "1", "-i", "0@s0", "-i", "1@s1", "--no-p4"]
        argv += ["--", "--grpc-server-addr", f"127.0.0.1:{port}"]
        proc = subprocess.Popen(argv, stdout=log, stderr=log)
        try:
            wait_listening(port, proc)
            opts = fy.SwitchOptions(p4info=p4info, p4blob=PROGRAM)
            addr = f"127.0.0.1:{port}"
            asyncio.run(first_session(fy, addr, opts))
            asyncio.run(second_session(fy, addr, opts))
            assert proc.poll() is None, "hotplane switch is still running after the sessions"
        except BaseException:
            log.flush()
            print((work / "switch.log").read_text(), file=sys.stderr)
            raise
        finally:
            proc.terminate()
            proc.wait(timeout=30)
            log.close()
    print("finsy session: ok")


def main():
    if "--inside" in sys.argv:
        inside()
        return
    if os.geteuid() != 0:
        not_run(WHAT, "needs root for its network namespace")
    r = run_inside("hp-finsy", [sys.executable, __file__, "--inside"], timeout=300)
    sys.exit(0 if r.returncode == 0 else 1)


if __name__ == "__main__":
    main()
