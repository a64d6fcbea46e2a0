"""The p4lang tutorials' exercises in Mininet with hotplane as every switch.

The tutorials' own Mininet glue (`utils/run_exercise.py`, `p4runtime_switch.py`) builds each
exercise's topology with `simple_switch_grpc` (hotplane, under that name on PATH), compiles the
solution program with `p4c` (hotplane p4c) as the exercises' Makefiles do, and programs the
switches with the tutorials' P4Runtime controller from the runtime JSON files. Each exercise is
then checked with its own tools or ping:

- basic (pod topology: four switches, four hosts): every host pings every other; then, with a
  ping flood from h1 to h4 crossing s1, s1's pipeline is replaced (RECONCILE_AND_COMMIT, the
  same program) and not one packet of the flood may be lost;
- basic_tunnel (three switches): ping, and the exercise's send.py/receive.py: a message to h2,
  and one addressed to h3 but tunnelled to h2 (`--dst_id 2`), both arrive at h2;
- p4runtime: the solution controller (mycontroller.py) installs the tunnels on s1 and s2 and
  reads their counters; h1 and h2 ping each other through the tunnels and the counters count;
- multicast (one switch, the solution's multicast group): every host pings every other, ARP
  flooded by the group;
- calc: the exercise's calc.py computes 1+1, 7-3, 6&3, 4|1 and 5^1 through the switch.

Everything runs inside a network namespace of its own (Mininet's switch-side interfaces, its
hosts' namespaces hang off it), on a copy of the tutorials' files.

    HOTPLANE_BIN=target/debug/hotplane VENV/bin/python tests/p4runtime/tutorials_mininet.py

VENV: Debian's python3 with `--system-site-packages` (Mininet comes from Debian's `mininet`
package), plus p4runtime==1.4.1 protobuf==3.20.3 grpcio, and tests/p4runtime/p4tmp as
`p4/tmp`. Exit status 0: passed; 1: failed; 2: not run (no root, no Mininet, no tutorials).
"""

import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from testenv import not_run, run_inside, tutorials

REPO = Path(__file__).resolve().parents[2]
WHAT = "tutorials in Mininet"



def in_namespace():
    """Re-run this script inside a network namespace of its own; its exit status."""
    env = dict(os.environ, HOTPLANE_MN_INSIDE="1")
    return run_inside("hp-mn", [sys.executable, __file__], env=env).returncode


def compile_solution(exercise, name, source, env):
    """As the exercise's Makefile does (utils/Makefile), on the solution program."""
    (exercise / "build").mkdir(exist_ok=True)
    for d in ["logs", "pcaps"]:
        (exercise / d).mkdir(exist_ok=True)
    subprocess.run(
        [
            "p4c-bm2-ss",
            "--p4v",
            "16",
            "--p4runtime-files",
            f"build/{name}.p4.p4info.txtpb",
            "-o",
            f"build/{name}.json",
            source,
        ],
        cwd=exercise,
        env=env,
        check=True,
    )


def start(exercise, topo, name):
    """The tutorials' ExerciseRunner, up to where it would start its CLI."""
    from run_exercise import ExerciseRunner

    os.chdir(exercise)
    runner = ExerciseRunner(topo, "logs", "pcaps", f"build/{name}.json", "simple_switch_grpc", True)
    runner.create_network()
    runner.net.start()
    time.sleep(1)
    runner.program_hosts()
    runner.program_switches()
    time.sleep(1)
    return runner


def reconcile(runner, switch, p4info, device_config):
    """Push the switch's pipeline again with RECONCILE_AND_COMMIT, through the tutorials'
    P4Runtime library (its own SetForwardingPipelineConfig always verifies and commits)."""
    import p4runtime_lib.bmv2
    import p4runtime_lib.helper
    from p4.v1 import p4runtime_pb2

    sw = runner.net.get(switch)
    helper = p4runtime_lib.helper.P4InfoHelper(p4info)
    conn = p4runtime_lib.bmv2.Bmv2SwitchConnection(
        name=switch, address=f"127.0.0.1:{sw.grpc_port}", device_id=sw.device_id
    )
    try:
        conn.MasterArbitrationUpdate()
        req = p4runtime_pb2.SetForwardingPipelineConfigRequest()
        req.election_id.low = 1
        req.device_id = sw.device_id
        req.config.p4info.CopyFrom(helper.p4info)
        req.config.p4_device_config = conn.buildDeviceConfig(
            bmv2_json_file_path=device_config
        ).SerializeToString()
        req.action = p4runtime_pb2.SetForwardingPipelineConfigRequest.RECONCILE_AND_COMMIT
        conn.client_stub.SetForwardingPipelineConfig(req)
    finally:
        conn.shutdown()


def check_basic(runner, exercise):
    net = runner.net
    loss = net.pingAll(timeout=2)
    assert loss == 0, f"pingAll lost {loss}%"
    h1, h4 = net.get("h1"), net.get("h4")
    # A flood of 2000 pings at 2 ms from h1 to h4 (through s1, s4 and s2), and s1's pipeline
    # replaced in the middle of it.
    h1.sendCmd(f"ping -c 2000 -i 0.002 -q {h4.IP()}")
    time.sleep(1.5)
    started = time.time()
    reconcile(runner, "s1", "build/basic.p4.p4info.txtpb", "build/basic.json")
    took = time.time() - started
    out = h1.waitOutput()
    m = re.search(r"(\d+) packets transmitted, (\d+) received", out)
    assert m, out
    sent, got = int(m.group(1)), int(m.group(2))
    print(f"basic: pingAll 0% loss; {sent} pings through s1 while its pipeline was replaced "
          f"({took * 1000:.0f} ms), {sent - got} lost")
    assert sent == 2000 and got == sent, out


def on_host(runner, host, command, exercise):
    """Run `command` on `host` in the exercise's directory with this Python; its output."""
    return runner.net.get(host).cmd(f"cd {exercise} && {command.replace('PY', sys.executable)}")


def check_basic_tunnel(runner, exercise):
    loss = runner.net.pingAll(timeout=2)
    assert loss == 0, f"pingAll lost {loss}%"
    h2 = runner.net.get("h2")
    h2.sendCmd(f"cd {exercise} && timeout 10 {sys.executable} receive.py")
    time.sleep(3)
    on_host(runner, "h1", "PY send.py 10.0.2.2 'P4 is cool'", exercise)
    on_host(runner, "h1", "PY send.py 10.0.3.3 'tunnelled to h2' --dst_id 2", exercise)
    out = h2.waitOutput()
    assert "P4 is cool" in out and "tunnelled to h2" in out, out[-3000:]
    assert "MyTunnel" in out, out[-3000:]
    print("basic_tunnel: pingAll 0% loss; a plain and a tunnelled message reached h2")


def check_p4runtime(runner, exercise):
    ctl = subprocess.Popen(
        [sys.executable, "mycontroller.py"],
        cwd=exercise,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    try:
        time.sleep(4)
        assert ctl.poll() is None, ctl.stdout.read()
        h1, h2 = runner.net.get("h1"), runner.net.get("h2")
        out = h1.cmd(f"ping -c 5 -i 0.2 -W 2 {h2.IP()}")
        assert " 0% packet loss" in out, out
        time.sleep(2.5)
    finally:
        ctl.terminate()
        out, _ = ctl.communicate(timeout=30)
    counted = re.findall(r"ingressTunnelCounter 100: (\d+) packets", out)
    assert counted and int(counted[-1]) >= 5, out[-3000:]
    print(f"p4runtime: the controller's tunnels carried h1's pings; its counter read {counted[-1]}")


def check_multicast(runner, exercise):
    loss = runner.net.pingAll(timeout=2)
    assert loss == 0, f"pingAll lost {loss}%"
    print("multicast: pingAll 0% loss (ARP flooded by the multicast group)")


def check_calc(runner, exercise):
    inputs = ["1+1", "7-3", "6&3", "4|1", "5^1"]
    feed = "\\n".join(inputs + ["quit"])
    out = on_host(runner, "h1", f"printf '{feed}\\n' | PY calc.py", exercise)
    lines = [line.strip() for line in out.splitlines()]
    # Each answer follows its echoed question (`> 1+1`).
    asked = [f"> {i}" for i in inputs]
    answers = [lines[lines.index(q) + 1] for q in asked if q in lines[:-1]]
    assert answers == ["2", "4", "2", "5", "4"], out
    print(f"calc: {', '.join(f'{i}={a}' for i, a in zip(inputs, answers))}")


# (exercise, topology, program name, program source, solution files copied in place, check)
EXERCISES = [
    ("basic", "pod-topo/topology.json", "basic", "solution/basic.p4", {}, check_basic),
    (
        "basic_tunnel",
        "topology.json",
        "basic_tunnel",
        "solution/basic_tunnel.p4",
        {},
        check_basic_tunnel,
    ),
    (
        "p4runtime",
        "topology.json",
        "advanced_tunnel",
        "advanced_tunnel.p4",
        {"solution/mycontroller.py": "mycontroller.py"},
        check_p4runtime,
    ),
    (
        "multicast",
        "sig-topo/topology.json",
        "multicast",
        "solution/multicast.p4",
        {"solution/s1-runtime.json": "sig-topo/s1-runtime.json"},
        check_multicast,
    ),
    ("calc", "topology.json", "calc", "solution/calc.p4", {}, check_calc),
]


def run_one(name, work):
    """One exercise, in a process of its own (the tutorials' glue numbers switches and gRPC
    ports per process, and the p4runtime exercise's controller expects s1 on 50051)."""
    _, topo, program, source, solution, check = next(e for e in EXERCISES if e[0] == name)
    tut = tutorials(WHAT)
    tools = work / "tools"
    env = dict(os.environ)
    env["PATH"] = f"{tools}:{Path(sys.executable).parent}:{env.get('PATH', '/usr/bin:/bin')}"
    os.environ["PATH"] = env["PATH"]
    sys.path.insert(0, str(work / "utils"))
    exercise = work / "exercises" / name
    shutil.copytree(tut / "exercises" / name, exercise)
    for src, dst in solution.items():
        shutil.copy(exercise / src, exercise / dst)
    compile_solution(exercise, program, source, env)
    runner = start(exercise, topo, program)
    try:
        check(runner, exercise)
        return True
    except Exception as e:  # noqa: BLE001 - reported with the switches' logs
        print(f"{name}: FAILED: {e}")
        for log in sorted((exercise / "logs").glob("*.log")):
            print(f"--- {log.name}\n{log.read_text()[-2000:]}")
        return False
    finally:
        runner.net.stop()



def main():
    if len(sys.argv) == 4 and sys.argv[1] == "--exercise":
        sys.exit(0 if run_one(sys.argv[2], Path(sys.argv[3])) else 1)
    if os.geteuid() != 0:
        not_run(WHAT, "needs root")
    tut = tutorials(WHAT)
    try:
        import mininet  # noqa: F401
    except ImportError:
        not_run(WHAT, "no Mininet in this Python (Debian's mininet package, --system-site-packages)")
    if not os.environ.get("HOTPLANE_MN_INSIDE"):
        sys.exit(in_namespace())

    binary = Path(os.environ.get("HOTPLANE_BIN", REPO / "target" / "debug" / "hotplane")).resolve()
    only = os.environ.get("HOTPLANE_MN_ONLY")
    failed = []
    with tempfile.TemporaryDirectory(prefix="hotplane-mn-") as w:
        work = Path(w)
        tools = work / "tools"
        tools.mkdir()
        for name in ["p4c-bm2-ss", "simple_switch_grpc"]:
            (tools / name).symlink_to(binary)
        shutil.copytree(tut / "utils", work / "utils")
        for name, *_ in EXERCISES:
            if only and name not in only.split(","):
                continue
            r = subprocess.run(
                [sys.executable, __file__, "--exercise", name, str(work)],
                capture_output=True,
                text=True,
                timeout=300,
            )
            said = [line for line in r.stdout.splitlines() if line.startswith(f"{name}: ")]
            print("\n".join(said) or f"{name}: no result")
            if r.returncode != 0:
                failed.append(name)
                print(r.stdout[-6000:], r.stderr[-3000:])
    print(f"tutorials in Mininet: {'all passed' if not failed else 'FAILED: ' + ', '.join(failed)}")
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
