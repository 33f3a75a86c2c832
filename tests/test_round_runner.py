"""The seam between timing and learning: sim/ knows no tensors, message sizes are computed
from shapes and nonzero counts, and the round runner (exec/round.py) is the only caller of the
executor -- which a caller may pass in (run_algorithm(executor=...))."""
from __future__ import annotations

import ast
import os
from pathlib import Path

import numpy as np
import pytest
import torch
import yaml

from hierfl.exec import RoundRunner, make_executor
from hierfl.run import build_world, run_algorithm
from hierfl.scenario.load import load
from hierfl.sim import messages
from hierfl.sim.work import ClientRecord

SIM = Path(__file__).resolve().parent.parent / "hierfl" / "sim"
# what a timing module may import from hierfl: the layers below it
ALLOWED = {"hierfl", "hierfl.config", "hierfl.topology", "hierfl.seeding", "hierfl.sim"}


def _imports(path: Path) -> set[str]:
    """Every module a file imports, relative imports resolved against hierfl.sim."""
    out = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            out.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level == 0:
                out.add(node.module or "")
            else:
                base = "hierfl.sim".split(".")[:3 - node.level]
                mod = ".".join(base + ([node.module] if node.module else []))
                out.add(mod)
                if not node.module:
                    out.update(f"{mod}.{a.name}" for a in node.names)
    return out


@pytest.mark.parametrize("path", sorted(SIM.glob("*.py")), ids=lambda p: p.name)
def test_sim_imports_no_torch_and_nothing_above_it(path):
    for mod in _imports(path):
        top = mod.split(".")[0]
        assert top != "torch", f"{path.name} imports {mod}"
        if top == "hierfl":
            assert any(mod == a or mod.startswith(a + ".") for a in ALLOWED - {"hierfl"}) \
                or mod == "hierfl", f"{path.name} imports {mod}"


def test_message_sizes_from_nonzero_counts():
    """P = 100 entries, rows with 0, 3, 10, 60, 100 nonzeros: dense 400 B; sparse 8 nnz;
    bitmap ceil(100 / 8) = 13 B + 4 nnz; auto the smaller of dense and sparse, best of all."""
    nnz = np.array([0.0, 3.0, 10.0, 60.0, 100.0])
    rows = len(nnz)
    assert messages.row_bytes([100], None, rows).tolist() == [400.0] * 5
    assert messages.row_bytes([100], [nnz], rows, "sparse").tolist() == [0, 24, 80, 480, 800]
    assert messages.row_bytes([100], [nnz], rows, "bitmap").tolist() == [13, 25, 53, 253, 413]
    assert messages.row_bytes([100], [nnz], rows, "auto").tolist() == [0, 24, 80, 400, 400]
    assert messages.row_bytes([100], [nnz], rows, "best").tolist() == [0, 24, 53, 253, 400]
    assert messages.row_encodings([100], [nnz], rows, "best") == \
        ["sparse", "sparse", "bitmap", "bitmap", "dense"]
    # two tensors per row: sizes add, encodings are joined
    two = messages.row_bytes([100, 8], [nnz, np.array([8.0, 0, 0, 0, 1])], rows, "auto")
    assert two.tolist() == [32, 24, 80, 400, 408]
    assert messages.row_encodings([100, 8], [nnz, np.array([8.0, 0, 0, 0, 1])], rows,
                                  "auto")[0] == "sparse+dense"
    assert messages.message_bytes([100, 8]) == 432.0
    assert messages.tensor_bytes(100, 10, "bitmap") == 53.0


def test_runner_sizes_uploads_from_the_tensors():
    """The runner counts each row's nonzeros and writes size and encoding on the records."""
    from hierfl.algorithms.base import Upload
    x = torch.zeros(3, 100)
    x[1, :10] = 1.0
    x[2, :] = 2.0
    recs = [ClientRecord(1, 0, k, 1, 1, 0.0, float("nan"), False, False, float("nan"))
            for k in range(3)]
    got = RoundRunner._upload_sizes(Upload((x,), "best"), recs)
    assert got.tolist() == [0.0, 53.0, 400.0]
    assert [(r.up_bytes, r.encoding) for r in recs] == \
        [(0.0, "sparse"), (53.0, "bitmap"), (400.0, "dense")]


class Counting:
    """An executor that counts its calls and the clients it trains."""

    def __init__(self, inner):
        self.inner, self.calls, self.clients = inner, 0, 0

    def run(self, program, plan, full, budgets, *a, **k):
        self.calls += 1
        self.clients += int(budgets.shape[0])
        return self.inner.run(program, plan, full, budgets, *a, **k)


def test_run_algorithm_takes_an_executor(tmp_path):
    """One executor call per aggregation round, with the given executor: FedAvg 3 rounds x 1
    call of 4 clients; HierFAVG 3 rounds x 2 edge rounds, one call for both edges' 4 clients
    (4 clients over 2 edges, all selected; every round is evaluated, and this small model's
    edges of one full-batch width share the call: exec/edges.company_free, call_groups);
    outputs byte-identical to the scenario's own executor."""
    doc = {"name": "ex", "seed": 1,
           "topology": {"edges": {"count": 2, "link": {"latency_s": 0.01, "bandwidth_Bps": 1e6}},
                        "clients": {"count": 4, "compute_flops": 1e9,
                                    "link": {"latency_s": 0.02, "bandwidth_Bps": 1e5}}},
           "data": {"name": "synthetic", "dim": 4, "classes": 3, "samples": 12},
           "model": {"name": "logreg"},
           "train": {"rounds": 3, "clients_per_round": "all",
                     "local": {"steps": 2, "batch_size": 4, "lr": 0.1}},
           "algorithms": [{"name": "fedavg"}, {"name": "hierfavg", "edge_rounds": 2}]}
    path = tmp_path / "s.yaml"
    path.write_text(yaml.safe_dump(doc))
    files = {}
    for way in ("own", "given"):
        sc = load(str(path), out=str(tmp_path / way))
        world = build_world(sc)
        for entry, calls, clients in zip(sc.algorithms, (3, 6), (12, 24)):
            ex = Counting(make_executor("batched")) if way == "given" else None
            folder = os.path.join(sc.output, entry.label)
            run_algorithm(sc, entry, world, folder, progress=False, executor=ex)
            if ex is not None:
                assert (ex.calls, ex.clients) == (calls, clients), entry.label
            files[way, entry.label] = [open(os.path.join(folder, f), "rb").read()
                                       for f in ("metrics.csv", "clients.csv", "trace.csv")]
    for label in ("fedavg", "hierfavg"):
        assert files["own", label] == files["given", label]
