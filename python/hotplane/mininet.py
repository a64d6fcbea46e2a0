"""hotplane as a Mininet switch: `hotplane switch` on the node's interfaces, a P4Runtime target
on 127.0.0.1, no Open vSwitch needed (Debian's `mininet` package without its recommends).

    from mininet.net import Mininet
    from hotplane.mininet import HotplaneSwitch

    net = Mininet(switch=HotplaneSwitch, controller=None)
    s1 = net.addSwitch("s1")            # P4Runtime on 127.0.0.1:50051, device id 0
    ...
    net.start()                         # each switch drops everything until a controller
                                        # pushes a pipeline to s1.grpc_addr

Switches number their gRPC ports from 50051 and their device ids from 0 in the order they are
made, as the p4lang tutorials' P4RuntimeSwitch does; `grpc_port=` and `device_id=` fix them.
`program=` starts a switch with a program (a device config `hotplane p4c` wrote, or P4
source); `cpu_port=` gives it a CPU port for packet-in and packet-out. The binary is `hotplane`
on PATH, or `binary=` (or `$HOTPLANE_BIN`).

Needs Mininet (import it from Debian's python3, or a virtual environment made with
`--system-site-packages`); the rest of the SDK does not.
"""

import os
import shlex
import socket
import time

from mininet.node import Switch


class HotplaneSwitch(Switch):
    """A Mininet switch running `hotplane switch`."""

    next_grpc_port = 50051
    next_device_id = 0

    def __init__(
        self,
        name,
        binary=None,
        grpc_port=None,
        device_id=None,
        program=None,
        cpu_port=None,
        port_kind="afpacket",
        log_file=None,
        start_timeout=30,
        **params,
    ):
        Switch.__init__(self, name, **params)
        self.binary = binary or os.environ.get("HOTPLANE_BIN", "hotplane")
        if grpc_port is None:
            grpc_port = HotplaneSwitch.next_grpc_port
            HotplaneSwitch.next_grpc_port += 1
        if device_id is None:
            device_id = HotplaneSwitch.next_device_id
            HotplaneSwitch.next_device_id += 1
        self.grpc_port = grpc_port
        self.device_id = device_id
        self.program = program
        self.cpu_port = cpu_port
        self.port_kind = port_kind
        self.log_file = log_file or f"/tmp/hotplane-{name}.log"
        self.start_timeout = start_timeout
        self.switch_pid = None

    @property
    def grpc_addr(self):
        """Where its P4Runtime server listens."""
        return f"127.0.0.1:{self.grpc_port}"

    def command_line(self):
        """The `hotplane switch` command this switch runs."""
        args = [self.binary, "switch", "--port-kind", self.port_kind]
        for port, intf in sorted(self.intfs.items()):
            if intf.name != "lo" and not intf.IP():
                args += ["-i", f"{port}@{intf.name}"]
        args += ["--device-id", str(self.device_id)]
        args += [str(self.program)] if self.program else ["--no-p4"]
        args += ["--", "--grpc-server-addr", self.grpc_addr]
        if self.cpu_port is not None:
            args += ["--cpu-port", str(self.cpu_port)]
        return args

    def _listening(self):
        with socket.socket() as s:
            return s.connect_ex(("127.0.0.1", self.grpc_port)) == 0

    def start(self, controllers):
        """Start the switch and wait until its P4Runtime server answers."""
        if self._listening():
            raise RuntimeError(f"{self.name}: port {self.grpc_port} is taken by another process")
        cmd = shlex.join(self.command_line())
        log = shlex.quote(self.log_file)
        self.switch_pid = int(self.cmd(f"{cmd} > {log} 2>&1 & echo $!").strip().split()[-1])
        deadline = time.time() + self.start_timeout
        while time.time() < deadline:
            if not os.path.exists(f"/proc/{self.switch_pid}"):
                raise RuntimeError(f"{self.name} exited at start; see {self.log_file}")
            if self._listening():
                return
            time.sleep(0.1)
        raise RuntimeError(f"{self.name}: no P4Runtime server after {self.start_timeout} s")

    def stop(self, deleteIntfs=True):
        """Stop the switch (SIGTERM; hotplane exits within its stop grace) and remove its
        interfaces."""
        if self.switch_pid is not None:
            self.cmd(f"kill {self.switch_pid}; wait {self.switch_pid}")
            self.switch_pid = None
        super().stop(deleteIntfs)
