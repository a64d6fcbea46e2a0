"""Three hotplane switches and four hosts in Mininet, driven by one P4Runtime controller.

    h1, h2 -- s1 -- s2 -- s3 -- h3, h4

The switches are `hotplane.mininet.HotplaneSwitch` (no Open vSwitch). This script is the
controller: over P4Runtime it pushes tests/p4/basic.p4 to every switch and writes the routes;
then every host pings every other, and while h1 floods h4 with pings (through all three
switches) s2's pipeline is replaced (RECONCILE_AND_COMMIT, a new build of the program): not one
ping may be lost. Everything runs inside a network namespace of its own.

    HOTPLANE_BIN=target/debug/hotplane VENV/bin/python tests/p4runtime/mininet_topology.py

VENV: Debian's python3 with `--system-site-packages` (Mininet) plus p4runtime==1.4.1
protobuf==3.20.3 grpcio. Exit status 0: passed; 1: failed; 2: not run (no root or no Mininet).
"""

import os
import queue
import re
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
PROGRAM = REPO / "tests" / "p4" / "basic.p4"

HOSTS = {f"h{i}": (f"10.0.0.{i}", f"08:00:00:00:00:0{i}") for i in range(1, 5)}
# Switch -> {host or switch it reaches: port}.
PORTS = {
    "s1": {"h1": 1, "h2": 2, "s2": 3},
    "s2": {"s1": 1, "s3": 2},
    "s3": {"s2": 1, "h3": 2, "h4": 3},
}
# Which neighbour each switch sends each host's traffic to.
NEXT_HOP = {
    "s1": {"h1": "h1", "h2": "h2", "h3": "s2", "h4": "s2"},
    "s2": {"h1": "s1", "h2": "s1", "h3": "s3", "h4": "s3"},
    "s3": {"h1": "s2", "h2": "s2", "h3": "h3", "h4": "h4"},
}


class Controller:
    """A P4Runtime primary for one switch: arbitration, pipeline pushes, table writes."""

    def __init__(self, addr, device_id):
        import grpc
        from p4.v1 import p4runtime_pb2, p4runtime_pb2_grpc

        self.pb = p4runtime_pb2
        self.device_id = device_id
        self.channel = grpc.insecure_channel(addr)
        self.stub = p4runtime_pb2_grpc.P4RuntimeStub(self.channel)
        self.requests = queue.Queue()
        self.stream = self.stub.StreamChannel(iter(self.requests.get, None))
        req = p4runtime_pb2.StreamMessageRequest()
        req.arbitration.device_id = device_id
        req.arbitration.election_id.low = 1
        self.requests.put(req)
        answer = next(self.stream)
        assert answer.arbitration.status.code == 0, answer

    def set_pipeline(self, p4info, source, reconcile=False):
        pb = self.pb
        req = pb.SetForwardingPipelineConfigRequest(device_id=self.device_id)
        req.election_id.low = 1
        req.config.p4info.CopyFrom(p4info)
        req.config.p4_device_config = source.encode()
        action = pb.SetForwardingPipelineConfigRequest
        req.action = action.RECONCILE_AND_COMMIT if reconcile else action.VERIFY_AND_COMMIT
        self.stub.SetForwardingPipelineConfig(req)

    def write(self, entries):
        req = self.pb.WriteRequest(device_id=self.device_id)
        req.election_id.low = 1
        for e in entries:
            u = req.updates.add()
            u.type = self.pb.Update.INSERT
            u.entity.table_entry.CopyFrom(e)
        self.stub.Write(req)

    def close(self):
        self.requests.put(None)
        self.channel.close()


def ids(p4info):
    by_name = {t.preamble.name: t.preamble.id for t in p4info.tables}
    by_name.update({a.preamble.name: a.preamble.id for a in p4info.actions})
    return by_name


def route(pb, names, ip, mac, port):
    e = pb.TableEntry(table_id=names["MyIngress.ipv4_lpm"])
    m = e.match.add(field_id=1)
    m.lpm.value = bytes(int(x) for x in ip.split("."))
    m.lpm.prefix_len = 32
    a = e.action.action
    a.action_id = names["MyIngress.ipv4_forward"]
    a.params.add(param_id=1, value=bytes.fromhex(mac.replace(":", "")))
    a.params.add(param_id=2, value=port.to_bytes(2, "big"))
    return e


def run():
    from google.protobuf import text_format
    from mininet.net import Mininet
    from p4.config.v1 import p4info_pb2

    sys.path.insert(0, str(REPO / "python"))
    from hotplane.mininet import HotplaneSwitch

    binary = os.environ.get("HOTPLANE_BIN", str(REPO / "target" / "debug" / "hotplane"))
    text = subprocess.run(
        [binary, "p4", "info", str(PROGRAM)], check=True, capture_output=True, text=True
    ).stdout
    p4info = text_format.Parse(text, p4info_pb2.P4Info())
    names = ids(p4info)
    source = PROGRAM.read_text()

    net = Mininet(controller=None, autoSetMacs=False)
    switches = {s: net.addSwitch(s, cls=HotplaneSwitch, binary=binary) for s in PORTS}
    hosts = {h: net.addHost(h, ip=f"{ip}/24", mac=mac) for h, (ip, mac) in HOSTS.items()}
    done = set()
    for s, ports in PORTS.items():
        for peer, port in ports.items():
            if (peer, s) in done:
                continue
            done.add((s, peer))
            if peer in hosts:
                net.addLink(hosts[peer], switches[s], port2=port)
            else:
                net.addLink(switches[s], switches[peer], port1=port, port2=PORTS[peer][s])
    net.start()
    controllers = {}
    try:
        for h, host in hosts.items():
            for other, (ip, mac) in HOSTS.items():
                if other != h:
                    host.cmd(f"arp -s {ip} {mac}")
        for s, sw in switches.items():
            c = Controller(sw.grpc_addr, sw.device_id)
            controllers[s] = c
            c.set_pipeline(p4info, source)
            entries = []
            for h, (ip, mac) in HOSTS.items():
                entries.append(route(c.pb, names, ip, mac, PORTS[s][NEXT_HOP[s][h]]))
            c.write(entries)
        loss = net.pingAll(timeout=2)
        assert loss == 0, f"pingAll lost {loss}%"
        h1, h4 = hosts["h1"], hosts["h4"]
        h1.sendCmd(f"ping -c 2000 -i 0.002 -q {h4.IP()}")
        time.sleep(1.5)
        started = time.time()
        controllers["s2"].set_pipeline(p4info, source + "\n// build 2\n", reconcile=True)
        took = time.time() - started
        out = h1.waitOutput()
        m = re.search(r"(\d+) packets transmitted, (\d+) received", out)
        assert m, out
        sent, got = int(m.group(1)), int(m.group(2))
        print(
            f"3 switches, 4 hosts: pingAll 0% loss; {sent} pings h1 -> h4 while s2's pipeline "
            f"was replaced ({took * 1000:.0f} ms), {sent - got} lost"
        )
        assert sent == 2000 and got == sent, out
    finally:
        for c in controllers.values():
            c.close()
        net.stop()


def main():
    if os.geteuid() != 0:
        print("Mininet topology: NOT RUN (needs root)")
        sys.exit(2)
    try:
        import mininet  # noqa: F401
    except ImportError:
        print("Mininet topology: NOT RUN (no Mininet in this Python)")
        sys.exit(2)
    if os.environ.get("HOTPLANE_MN_INSIDE"):
        run()
        return
    from testenv import run_inside

    env = dict(os.environ, HOTPLANE_MN_INSIDE="1")
    sys.exit(run_inside("hp-topo", [sys.executable, __file__], env=env).returncode)


if __name__ == "__main__":
    main()
