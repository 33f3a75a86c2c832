"""Non-finite values are caught where they arise: the warning names algorithm, round and client."""
from __future__ import annotations

from conftest import make_scenario, run_outputs


def test_divergence_names_the_client_it_came_from(tmp_path, capsys):
    # client 1's features are huge: one GD step overflows float32 -> inf in its upload only
    clients = [([[1.0], [2.0]], [1.0, 2.0]), ([[1e25], [2e25]], [1.0, 2.0]),
               ([[0.5], [1.0]], [0.5, 1.0])]
    path = make_scenario(tmp_path, name="nan", clients=clients, tests=None,
                         topology={"edges": {"count": 1}, "clients": {"count": 3}},
                         model={"name": "linear", "bias": False, "init": "zeros"},
                         train={"rounds": 3, "clients_per_round": "all",
                                "local": {"steps": 2, "batch_size": "full", "lr": 0.1}},
                         algorithms=[{"name": "fedavg"}, {"name": "fedprox", "mu": 0.1}],
                         **{"data.test_fraction": 0.0})
    res = run_outputs(path, out=tmp_path / "out").results
    err = capsys.readouterr().err
    for label in ("fedavg", "fedprox"):
        assert res[label].diverged_at == 1
        assert res[label].nonfinite_clients == [1]
        assert res[label].rows[-1]["diverged"] == 1
        assert f"warning: {label} diverged at round 1" in err
    assert "non-finite uploads from client(s) 1)" in err
