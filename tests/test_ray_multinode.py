"""A real two-node Ray cluster on loopback, started the way the README's cluster recipe says
(`ray start --head`, then `ray start --address` on the other node, both with Ray's token
authentication: RAY_AUTH_MODE=token and the same token), one CPU each, private ports and temp
dirs. A 4-point sweep and a run with the Ray executor go over both nodes; both nodes must have
run hierfl's tasks, and the results must equal the local backend's. Only the processes of the
two nodes started here are stopped (never `ray stop`, which stops every Ray node of the
machine)."""
from __future__ import annotations

import json
import os
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import textwrap
import time

import pytest

pytest.importorskip("ray", reason="Ray is not installed (pip install 'hierfl[ray]')")

from conftest import make_scenario, scenario_doc  # noqa: E402
from test_ray import TINY as RAY_TINY  # noqa: E402

pytestmark = pytest.mark.ray

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
RAY = os.path.join(os.path.dirname(sys.executable), "ray")

# test_ray's tiny system, with rounds and work of its own
TINY = scenario_doc(RAY_TINY, **{"train.rounds": 2, "train.clients_per_round": 6,
                                 "train.local.steps": 4})

# imported by every process that runs hierfl's work (plugins are shipped to Ray's workers):
# inside a Ray task it leaves a file named after the node it runs on, and holds that first task
# for a second, so that the round's other chunks need a second worker (the tiny chunks would
# otherwise all finish on the first leased worker before another node's worker could start)
MARKER = """
import os, time
try:
    import ray
    ctx = ray.get_runtime_context() if ray.is_initialized() else None
    if ctx is not None and ctx.get_task_id() is not None:
        open(os.path.join({marks!r}, ctx.get_node_id() + "." + str(os.getpid())), "w").close()
        time.sleep(1.5)
except ImportError:
    pass
"""

DRIVER = """
import dataclasses, json, sys
from hierfl import sweep as sweep_mod
from hierfl.run import run_scenario
from hierfl.scenario.load import load

address, sweep_file, scenario_file, out = sys.argv[1:5]
sw = sweep_mod.load_sweep(sweep_file, out=out + "/sweep_ray")
failed = sweep_mod.run_sweep(sw, "ray", address=address, progress=False)
sc = load(scenario_file, out=out + "/run_ray")
assert sc.train.executor.kind == "ray", sc.train.executor
run_scenario(sc, progress=False)
import ray
print(json.dumps({"failed": failed, "nodes": sorted(n["NodeID"] for n in ray.nodes()
                                                    if n["Alive"])}))
"""


def _free_ports(n: int) -> list[int]:
    socks = []
    for _ in range(n):
        s = socket.socket()
        s.bind(("127.0.0.1", 0))
        socks.append(s)
    ports = [s.getsockname()[1] for s in socks]
    for s in socks:
        s.close()
    return ports


def _descendants(pid: int) -> set[int]:
    """`pid` and every process below it (from /proc's parent links)."""
    children: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/stat") as fh:
                    ppid = int(fh.read().rsplit(")", 1)[1].split()[1])
            except (OSError, IndexError, ValueError):
                continue
            children.setdefault(ppid, []).append(int(entry))
    out, todo = set(), [pid]
    while todo:
        p = todo.pop()
        if p not in out:
            out.add(p)
            todo.extend(children.get(p, []))
    return out


class Node:
    """One `ray start --block` node in its own session; stop() ends it and its descendants."""

    def __init__(self, args: list[str], env: dict[str, str], log: str):
        self.log = open(log, "w")
        self.proc = subprocess.Popen([RAY, "start", "--block", *args], env=env,
                                     stdout=self.log, stderr=subprocess.STDOUT,
                                     start_new_session=True)

    def stop(self) -> None:
        pids = _descendants(self.proc.pid)
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)     # --block: shuts its node down
            try:
                self.proc.wait(timeout=15)
            except subprocess.TimeoutExpired:
                pass
        for pid in pids:                              # what is left of this node only
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        self.proc.wait()
        self.log.close()


def _node_args(temp: str, ports: list[int]) -> list[str]:
    nm, om, lo, agent, grpc, renv, metrics = ports
    return ["--node-ip-address=127.0.0.1", "--num-cpus=1", f"--temp-dir={temp}",
            f"--node-manager-port={nm}", f"--object-manager-port={om}",
            f"--min-worker-port={lo}", f"--max-worker-port={lo + 20}",
            f"--dashboard-agent-listen-port={agent}", f"--dashboard-agent-grpc-port={grpc}",
            f"--runtime-env-agent-port={renv}", f"--metrics-export-port={metrics}",
            "--object-store-memory=80000000", "--disable-usage-stats"]


def _node_ports(n: int) -> list[int]:
    """`n` free ports and a worker-port base before their last four (as _node_args reads them):
    none of the others inside the base's run of 21 (a metrics port drawn inside it made
    `ray start` refuse: "trying to use a port number ... used by other components")."""
    base = _worker_port_base()
    taken = set(range(base, base + 21))
    others: list[int] = []
    while len(others) < n:
        others += [p for p in _free_ports(n - len(others)) if p not in taken and p not in others]
    return others[:n - 4] + [base] + others[n - 4:]


def _worker_port_base() -> int:
    """A run of 21 free ports for one node's workers."""
    for _ in range(50):
        base = _free_ports(1)[0]
        if base + 21 > 65535:
            continue
        try:
            socks = []
            for p in range(base, base + 21):
                s = socket.socket()
                s.bind(("127.0.0.1", p))
                socks.append(s)
            return base
        except OSError:
            continue
        finally:
            for s in socks:
                s.close()
    raise RuntimeError("no run of free ports")


@pytest.fixture
def two_nodes(tmp_path):
    """(address, env, marks folder): a head and a worker node joined with a private token."""
    token = secrets.token_hex(32)
    env = {**os.environ, "RAY_AUTH_MODE": "token", "RAY_AUTH_TOKEN": token,
           "RAY_USAGE_STATS_ENABLED": "0", "PYTHONPATH": ROOT}
    short = tempfile.mkdtemp(prefix="hfl")            # unix socket paths must stay short
    nodes: list[Node] = []
    try:
        gcs, client, *head_ports = _node_ports(8)
        nodes.append(Node(["--head", f"--port={gcs}", f"--ray-client-server-port={client}",
                           "--include-dashboard=false",
                           *_node_args(os.path.join(short, "h"), head_ports)],
                          env, str(tmp_path / "head.log")))
        address = f"127.0.0.1:{gcs}"
        _wait_for(lambda: _probe(address, env) >= 1, nodes, tmp_path)
        worker_ports = _node_ports(6)
        nodes.append(Node([f"--address={address}",
                           *_node_args(os.path.join(short, "w"), worker_ports)],
                          env, str(tmp_path / "worker.log")))
        _wait_for(lambda: _probe(address, env) >= 2, nodes, tmp_path)
        yield address, env
    finally:
        for node in reversed(nodes):
            node.stop()
        shutil.rmtree(short, ignore_errors=True)


def _probe(address: str, env: dict) -> int:
    """Alive nodes of the cluster at `address` (0 when it does not answer yet)."""
    code = (f"import ray; ray.init(address={address!r}, log_to_driver=False); "
            "print(sum(n['Alive'] for n in ray.nodes()))")
    proc = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True,
                          text=True, timeout=60)
    last = proc.stdout.strip().splitlines()[-1:] or ["0"]
    return int(last[0]) if last[0].isdigit() else 0


def _wait_for(cond, nodes: list[Node], tmp_path, timeout: float = 60.0) -> None:
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if any(n.proc.poll() is not None for n in nodes):
            break
        if cond():
            return
        time.sleep(1.0)
    logs = "".join(p.read_text()[-2000:] for p in tmp_path.glob("*.log"))
    pytest.fail(f"the Ray nodes did not come up:\n{logs}")


def test_sweep_and_ray_executor_over_two_nodes_equal_local(two_nodes, tmp_path):
    from hierfl import sweep as sweep_mod
    from hierfl.run import run_scenario
    from hierfl.scenario.load import load

    address, env = two_nodes
    marks = {side: tmp_path / f"marks_{side}" for side in ("sweep", "run")}
    plugin = {}
    for side, folder in marks.items():
        folder.mkdir()
        plugin[side] = tmp_path / f"marker_{side}.py"
        plugin[side].write_text(MARKER.format(marks=str(folder)))
    # the sweep: 4 points, each a Ray task (one CPU: at most one per node at a time)
    make_scenario(tmp_path, TINY, name="base", plugins=[str(plugin["sweep"])],
                  **{"train.executor": {"kind": "batched"}})
    sweep_file = tmp_path / "sw.yaml"
    sweep_file.write_text("base: base.yaml\ngrid:\n" + textwrap.indent(
        "train.local.lr: [0.05, 0.2]\nseed: [0, 1]", "  ") + "\noutput: out\n"
        "point_reports: false\n")
    # the run: the ray executor ships chunks of 2 clients (3 tasks a round)
    ray_file = make_scenario(tmp_path, TINY, name="tiny_ray", plugins=[str(plugin["run"])],
                             **{"train.executor": {"kind": "ray", "address": address,
                                                   "clients_per_task": 2}})
    out = tmp_path / "out_cluster"
    proc = subprocess.run([sys.executable, "-c", DRIVER, address, str(sweep_file), ray_file,
                           str(out)], env=env, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    result = json.loads(proc.stdout.strip().splitlines()[-1])
    assert result["failed"] == {} and len(result["nodes"]) == 2
    for side, folder in marks.items():            # hierfl's work ran on both nodes
        nodes = {name.split(".")[0] for name in os.listdir(folder)}
        assert nodes == set(result["nodes"]), (side, nodes, result["nodes"])

    # the same on this machine without Ray: the local backend, the batched executor
    sw = sweep_mod.load_sweep(str(sweep_file), out=str(tmp_path / "sweep_local"))
    assert sweep_mod.run_sweep(sw, "local", workers=1, progress=False) == {}
    for pt in sw.points:
        for label in ("fedavg", "hierfavg"):
            for name in ("metrics.csv", "clients.csv"):
                a = (tmp_path / "sweep_local" / pt.name / label / name).read_text()
                b = (out / "sweep_ray" / pt.name / label / name).read_text()
                assert a == b, (pt.name, label, name)
    assert (tmp_path / "sweep_local" / "sweep.csv").read_text() == \
        (out / "sweep_ray" / "sweep.csv").read_text()
    b = make_scenario(tmp_path, TINY, name="tiny_batched", plugins=[str(plugin["run"])],
                      **{"train.executor": {"kind": "batched"}})
    run_scenario(load(b, out=str(tmp_path / "run_local")), progress=False)
    for label in ("fedavg", "hierfavg"):
        a = (tmp_path / "run_local" / label / "metrics.csv").read_text().splitlines()
        c = (out / "run_ray" / label / "metrics.csv").read_text().splitlines()
        assert len(a) == len(c) == 4                   # header, round 0, rounds 1 and 2
        _same_numbers(a, c)


def _same_numbers(a: list[str], b: list[str]) -> None:
    """CSV lines equal, numbers to 1e-6 relative (Ray's chunks sum in another order)."""
    import math

    for la, lb in zip(a, b):
        for x, y in zip(la.split(","), lb.split(",")):
            if x == y:
                continue
            assert math.isclose(float(x), float(y), rel_tol=1e-6, abs_tol=1e-9), (la, lb)
