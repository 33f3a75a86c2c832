"""IFCA through the engine: two groups of clients whose least-squares optima are opposite
(w* and -w*); IFCA with k = 2 recovers both (each client's personal model is its group's
optimum), FedAvg cannot (one model between them); clients.csv names each client's cluster; the
downlink carries k models (or one with `downlink: chosen` after the first round), counted by
hand; with k = 1 IFCA is FedAvg."""
from __future__ import annotations

import numpy as np

from conftest import make_scenario, run_outputs

D = 3
N_CLIENTS = 6
W_STAR = np.array([1.5, -2.0, 1.0])


def opposite_groups() -> list[tuple[np.ndarray, np.ndarray]]:
    """Clients 0, 2, 4: y = x w*; clients 1, 3, 5: y = -x w* (a little noise)."""
    g = np.random.default_rng(3)
    out = []
    for k in range(N_CLIENTS):
        x = g.normal(size=(40, D))
        y = x @ (W_STAR if k % 2 == 0 else -W_STAR) + 0.01 * g.normal(size=40)
        out.append((x.astype(np.float32).astype(np.float64),
                    y.astype(np.float32).astype(np.float64)))
    return out


def scenario(tmp_path, algorithms, rounds: int, name: str = "ifca") -> str:
    return make_scenario(tmp_path, name=name, clients=opposite_groups(), seed=2,
                         topology={"clients": {"count": N_CLIENTS}, "edges": {"count": 1}},
                         model={"name": "linear", "bias": False, "init": "zeros"},
                         train={"rounds": rounds, "clients_per_round": "all",
                                "local": {"steps": 5, "batch_size": "full", "lr": 0.05}},
                         algorithms=algorithms, output=f"out_{name}")


def loss(w: np.ndarray, x: np.ndarray, y: np.ndarray) -> float:
    return float(np.mean((x @ w - y) ** 2))


def test_ifca_recovers_both_optima_and_beats_fedavg(tmp_path):
    data = opposite_groups()
    out = run_outputs(scenario(tmp_path, [{"name": "fedavg"}, {"name": "ifca", "clusters": 2}],
                               rounds=30))
    z = out.params["ifca"]
    for k, (x, y) in enumerate(data):
        want = W_STAR if k % 2 == 0 else -W_STAR
        np.testing.assert_allclose(z[f"client_{k}"], want, rtol=0, atol=0.02, err_msg=str(k))
    # the groups sit in different clusters, every round after the first, as clients.csv says
    rows = out.clients["ifca"]
    last = {int(r["client"]): int(r["cluster"]) for r in rows if int(r["round"]) == 30}
    assert {last[k] for k in (0, 2, 4)} != {last[k] for k in (1, 3, 5)}
    assert len({last[k] for k in (0, 2, 4)}) == 1 and len({last[k] for k in (1, 3, 5)}) == 1
    assert all(r["cluster"] == "" for r in out.clients["fedavg"])
    # FedAvg's one model sits between the optima (near 0); its mean loss is far higher
    fa = out.final("fedavg")
    assert np.linalg.norm(fa) < 0.5
    ifca_loss = np.mean([loss(z[f"client_{k}"], x, y) for k, (x, y) in enumerate(data)])
    fedavg_loss = np.mean([loss(fa, x, y) for x, y in data])
    assert ifca_loss < 1e-3 < 1.0 < fedavg_loss


def test_ifca_downlink_bytes_are_k_models(tmp_path):
    """One edge, 6 clients, P = 3 float32 entries: a broadcast crosses cloud -> edge once and
    edge -> client six times, 7 messages; a model is 12 bytes. k = 3: 7 x 3 x 12 = 252 bytes
    every round; chosen: 252 in round 1, then 7 x 12 = 84. Up: the model and a 4-byte cluster
    id, 16 bytes, over 2 links per client: 6 x 2 x 16 = 192."""
    algos = [{"name": "ifca", "label": "all", "clusters": 3},
             {"name": "ifca", "label": "chosen", "clusters": 3, "downlink": "chosen"},
             {"name": "fedavg"}]
    out = run_outputs(scenario(tmp_path, algos, rounds=3, name="bytes"))

    def per_round(label, col):
        vals = [float(r[col]) for r in out.metrics[label]]
        return [b - a for a, b in zip(vals, vals[1:])]

    assert per_round("all", "bytes_down") == [252.0, 252.0, 252.0]
    assert per_round("chosen", "bytes_down") == [252.0, 84.0, 84.0]
    assert per_round("fedavg", "bytes_down") == [84.0, 84.0, 84.0]
    assert per_round("all", "bytes_up") == [192.0] * 3
    assert {float(r["up_bytes"]) for r in out.clients["all"]} == {16.0}
    # choosing costs k forward passes = k/3 full-data gradients on top of the K = 5 full-batch
    # steps: (5 + 1) / 5 of the time of `chosen` (which no longer chooses) from round 2 on
    for a, c in zip(out.clients["all"], out.clients["chosen"]):
        assert a["client"] == c["client"] and a["round"] == c["round"]
        ratio = float(a["compute_s"]) / float(c["compute_s"])
        assert abs(ratio - (1.2 if int(a["round"]) > 1 else 1.0)) < 1e-12, (a, c)


def test_ifca_with_one_cluster_is_fedavg(tmp_path):
    out = run_outputs(scenario(tmp_path, [{"name": "fedavg"}, {"name": "ifca", "clusters": 1}],
                               rounds=3, name="one"))
    np.testing.assert_array_equal(out.final("ifca"), out.final("fedavg"))
    assert {r["cluster"] for r in out.clients["ifca"]} == {"0"}
