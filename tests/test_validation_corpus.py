"""The corpus of bad inputs (tests/bad_inputs/): each file must make `hierfl validate` and
`hierfl run` exit 2 with no traceback, reporting exactly the expected problems -- file and line
where known, key path, bad value and why -- and nothing else (no spurious follow-on errors).
npz files are written by the tests into a temporary folder next to a copy of the scenario."""
from __future__ import annotations

import contextlib
import io
import os
import re
import shutil

import numpy as np
import pytest

from hierfl.cli import main
from hierfl.config.errors import ScenarioError

HERE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "bad_inputs")

# file -> (substrings the error output must hold, number of problems reported)
CORPUS: dict[str, tuple[list[str], int]] = {
    "wrong_type_rounds.yaml": (["wrong_type_rounds.yaml:8:", "train.rounds = 'ten'",
                                "expected an integer"], 1),
    "wrong_type_lr_list.yaml": (["wrong_type_lr_list.yaml:9:", "train.local.lr = [0.1]",
                                 "expected a number"], 1),
    "wrong_type_seed_bool.yaml": (["wrong_type_seed_bool.yaml:11:", "seed = True",
                                   "expected an integer"], 1),
    "seed_beyond_32_bits.yaml": (["seed_beyond_32_bits.yaml:11:", "seed = 4294967296",
                                  "must be in 0..4294967295"], 1),
    "wrong_type_name.yaml": (["wrong_type_name.yaml:2:", "name = [1, 2]",
                              "expected a string"], 1),
    "wrong_type_topology_count.yaml": (["wrong_type_topology_count.yaml:4:",
                                        "topology.edges.count = 1.5", "expected an integer"], 1),
    "unknown_top_key.yaml": (["unknown_top_key.yaml:8:", "trian = {'rounds': 2}", "unknown key",
                              "did you mean 'train'?", "allowed: algorithms, attack, data"], 1),
    "unknown_nested_key.yaml": (["unknown_nested_key.yaml:7:", "model.hiden = [10]",
                                 "did you mean 'hidden'?"], 1),
    "unknown_algorithm.yaml": (["unknown_algorithm.yaml:10:", "algorithms[0].name = 'fedprx'",
                                "unknown algorithm (did you mean 'fedprox'?)", "known: "], 1),
    "unknown_hyperparameter.yaml": (["unknown_hyperparameter.yaml:10:",
                                     "algorithms[0].edge_round = 2",
                                     "did you mean 'edge_rounds'?"], 1),
    "wrong_enum.yaml": (["wrong_enum.yaml:6:", "data.name = 'synthetik'",
                         "did you mean 'synthetic'?"], 1),
    "zero_rounds.yaml": (["zero_rounds.yaml:8:", "train.rounds = 0", "must be > 0"], 1),
    "negative_lr.yaml": (["train.local.lr = -0.1", "must be > 0"], 1),
    "zero_clients.yaml": (["zero_clients.yaml:4:", "topology.clients.count = 0",
                           "must be > 0"], 1),
    "zero_edges.yaml": (["topology.edges.count = 0", "must be > 0"], 1),
    "tier_rounds_length.yaml": (["algorithms[0].tier_rounds = [2]",
                                 "one entry per aggregator tier, from the top: this topology "
                                 "has 2"], 1),
    "negative_batch.yaml": (["train.local.batch_size = -4", "must be > 0"], 1),
    "negative_hyperparameter.yaml": (["algorithms[0].mu = -1", "must be >= 0"], 1),
    "nan_lr.yaml": (["nan_lr.yaml:8:", "train.local.lr = nan", "expected a finite number"], 1),
    "nan_in_distribution.yaml": (["topology.clients.compute_flops.median = nan",
                                  "expected a finite number"], 1),
    "inf_latency.yaml": (["topology.clients.link.latency_s = inf",
                          "expected a finite number"], 1),
    "overflow_float.yaml": (["train.local.lr = inf", "expected a finite number"], 1),
    "missing_required.yaml": (["missing_required.yaml: data: required key is missing"], 1),
    "missing_topology_file.yaml": (["missing_topology_file.yaml:3:",
                                    "topology = 'topologies/nowhere.yaml'",
                                    "topology file not found"], 1),
    "topology_is_directory.yaml": (["topology = 'a_directory'",
                                    "topology file is a directory, not a regular file"], 1),
    "missing_npz.yaml": (["missing_npz.yaml:6:", "data.path = 'nothing.npz'",
                          "file not found"], 1),
    "npz_is_directory.yaml": (["data.path = 'a_directory'", "not a regular file"], 1),
    "npz_without_path.yaml": (["data.path", "npz data needs path:"], 1),
    "tree_client_twice.yaml": ([os.path.join("topologies", "client_twice.yaml") + ":7:",
                                "clients.assignment[1][0] = 1", "listed twice",
                                "under edges 0 and 1", "must be a tree"], 1),
    "tree_client_missing.yaml": ([os.path.join("topologies", "client_missing.yaml") + ":5:",
                                  "clients.assignment = [3]", "client id 3 is under no edge"], 1),
    "tree_wrong_list_count.yaml": (["topology.clients.assignment = '3 lists'",
                                    "needs one list per edge (2 lists)"], 1),
    "tree_id_out_of_range.yaml": (["topology.clients.assignment[1][1] = 9",
                                   "client id out of range: ids are 0..3",
                                   "client id 3 is under no edge"], 2),
    "topology_file_typo.yaml": ([os.path.join("topologies", "typo.yaml") + ":3:",
                                 "clinets = {'count': 4}", "did you mean 'clients'?"], 1),
    "topology_file_is_list.yaml": ([os.path.join("topologies", "a_list.yaml"),
                                    "a topology must be a mapping"], 1),
    "topology_not_mapping.yaml": (["topology = [1, 2]", "expected a file path or a mapping"], 1),
    "topology_draws_overflow.yaml": ([os.path.join("topologies", "overflow.yaml"),
                                     ".flops = inf: must be a finite number > 0"], None),
    "graph_not_a_tree.yaml": ([os.path.join("topologies", "lateral.json") + ": links.client0"
                               "->client1: a link must join a node and its parent",
                               "must be a tree"], 1),     # (named the scenario file, not it)
    "graph_file_unreadable.yaml": ([os.path.join("topologies", "not_a_graph.json"),
                                    "cannot read graph"], 1),
    "too_many_clients_per_round.yaml": (["train.clients_per_round = 20",
                                         "more than the 12 clients"], 1),
    "alias_bomb.yaml": (["alias_bomb.yaml:9:", "aliases expand to more than 1000000 values"], 1),
    "alias_too_many.yaml": (["alias_too_many.yaml:204:", "more than 200 aliases"], 1),
    "recursive_alias.yaml": (["recursive alias"], 1),
    "huge_clients.yaml": (["topology.clients.count = '1e12'",
                           "must be <= 1e+07 (resource guard)"], 1),
    "huge_layer.yaml": (["model.hidden = [1000000000]", "must be <= 100000 (resource guard)"], 1),
    # P = (5*1e5 + 1e5) + (1e5*1e5 + 1e5) + (1e5*3 + 3) = 10001000003; one round is
    # 4 bytes x P x 10 clients x 6 copies = 2.4e12 bytes = 2.24e3 GiB, and even one client's
    # round does not fit: the model is named (an algorithm's per-client state is the state
    # guard's, algorithms/state_size.py)
    "huge_memory.yaml": (["model = '10001000003 parameters'", "needs about",
                          "one round 2.24e+03 GiB", "50 clients x 10001000003 parameters",
                          "resource guard"], 1),
    "huge_data.yaml": (["data = '1e+09 rows x 100000'", "needs about", "resource guard"], 1),
    "huge_batch.yaml": (["train.local.batch_size = 1000000000000", "minibatch plan",
                         "resource guard"], 1),
    "deep_nesting.yaml": (["deep_nesting.yaml:3:", "nested more than 64 levels deep"], 1),
    "scenario_is_list.yaml": (["a scenario must be a mapping of keys", "the file is a list"], 1),
    "empty.yaml": (["a scenario must be a mapping of keys", "the file is empty"], 1),
    "comments_only.yaml": (["the file is empty"], 1),
    "control_chars.yaml": (["invalid YAML", "special characters are not allowed"], 1),
    "binary_garbage.yaml": (["scenario file is not UTF-8 text"], 1),
    "invalid_syntax.yaml": (["invalid_syntax.yaml:7:", "invalid YAML"], 1),
    "multi_document.yaml": (["invalid YAML", "another document"], 1),
    "name_traversal.yaml": (["name_traversal.yaml:2:", "name = '../../etc'", "no '..'"], 1),
    "name_absolute.yaml": (["name = '/etc/passwd'", "letters, digits"], 1),
    "label_traversal.yaml": (["algorithms[0].label = '../outside'", "no '..'"], 1),
    "label_dotdot.yaml": (["algorithms[0].label = '..'"], 1),
    "duplicate_labels.yaml": (["duplicate_labels.yaml:11:", "algorithms[1].label = 'prox'",
                               "labels must be unique (also algorithms[0]"], 1),
    "duplicate_key.yaml": (["duplicate_key.yaml:11: train: key given twice (first on line 8)"],
                           1),
    "steps_and_epochs.yaml": (["train.local = {'epochs': 1, 'steps': 2}",
                               "give steps or epochs, not both"], 1),
    "linear_on_classes.yaml": (["model.name = 'linear'", "use logreg or mlp"], 1),
    "digits_too_many_clients.yaml": (["data.name = 'digits'", "at most 898 clients",
                                      "the topology has 1000"], 1),
    "deadline_missing.yaml": (["train.round = {'policy': 'deadline_drop'}",
                               "needs deadline_s"], 1),
    "uniform_low_high.yaml": (["topology.clients.compute_flops", "uniform needs low <= high"], 1),
    "negative_latency_normal.yaml": (["topology.clients.link.latency_s = {",
                                      "a normal distribution can draw values", "set min:"], 1),
    "negative_bandwidth.yaml": (["topology.clients.link.bandwidth_Bps = -5", "must be > 0"], 1),
    "empty_algorithms.yaml": (["algorithms = []", "list at least one algorithm"], 1),
    "algorithm_not_mapping.yaml": (["algorithms[0] = 'fedavg'", "write {name: fedavg}",
                                    "algorithms[1] = 5"], 2),
    "many_errors.yaml": (["data.dim = -1", "train.rounds = 0", "train.local.lr = nan",
                          "name = '../x'", "did you mean 'fedavg'?"], 5),
    # npz files written by the test (see NPZ below)
    "npz_mismatch.yaml": (["data.path = ", "x_1 (10, 3) and y_1 (9,) do not match"], 1),
    "npz_nonfinite.yaml": (["data.path = ", "x_2 / y_2 hold non-finite values"], 1),
    "npz_client_count.yaml": (["has 3 clients (x_0, x_1, ...) but the topology has 12"], 1),
    "npz_float_labels.yaml": (["y_0 (float64, shape (10,)) must be 1-D integer labels"], 1),
    "npz_not_zip.yaml": (["data.path = 'data.npz'", "not a readable npz file"], 1),
    "npz_pickled.yaml": (["not a readable npz file", "allow_pickle=False"], 1),
    # issue 20: hangs and runaway memory (guards on work), tracebacks, inputs that slipped
    # 12 clients x (2 rounds x 2 x 0.05 s of latency) x 2 / 2e-9 s = 2.4e9 switches
    "markov_fast.yaml": (["markov_fast.yaml:6:", "topology.availability = {",
                          "12 clients x about 0.2 simulated s x 2 / 2e-09 s per on/off cycle "
                          "= 2.4e+09 availability switches", "work guard"], 1),
    "huge_steps.yaml": (["huge_steps.yaml:10:", "algorithms[0].local.steps = 10000000",
                         "1e+07 local steps per client in one cloud round", "work guard"], 1),
    "lr_overflow.yaml": (["algorithms[0].local.lr = 1e+308", "reaches 10^308"], 1),
    "lr_decay_overflow.yaml": (["algorithms[0].local.lr_decay = 1e+308",
                                "reaches 10^306 by round 2"], 1),
    "label_report_md.yaml": (["algorithms[0].label = 'report.md'",
                              "a folder next to the report's files"], 1),
    "label_scenario_yaml.yaml": (["algorithms[0].label = 'scenario.yaml'", "may not end in"],
                                 1),
    "output_proc.yaml": (["output_proc.yaml:11:", "output = '/proc/hierfl'",
                          "is a system folder"], 1),
    "output_etc.yaml": (["output = '/etc/hierfl-out'", "is a system folder"], 1),
    "latency_huge.yaml": (["topology.clients.link.latency_s = 1e+308",
                           "latencies above 1e+06 s"], 1),
    "bandwidth_tiny.yaml": (["topology.clients.link.bandwidth_Bps = 1e-300",
                             "must be >= 1 B/s"], 1),
    "first_k_above.yaml": (["train.round.k = 6", "more than the 4 clients per round"], 1),
    "wait_all_deadline.yaml": (["train.round = {", "deadline_s applies to the deadline "
                                "policies, not 'wait_all' (use timeout_s)"], 1),
    "edges_per_round_above.yaml": (["algorithms[0].edges_per_round = 5",
                                    "more than the 2 edges under the cloud"], 1),
    "sparsity_gamma_none.yaml": (["algorithms[0].sparsity.gamma = 0.1",
                                  "sparsity.kind is none"], 1),
    "availability_p_markov.yaml": (["topology.availability = {", "p does not apply to kind "
                                    "'markov' (it takes mean_on_s, mean_off_s)"], 1),
    "dist_extra_key.yaml": (["topology.clients.compute_flops = {", "'median': '5.0e8'",
                             "dist 'uniform' takes low, high; median does not apply"], 1),
    "outage_no_link.yaml": (["topology.failures.outages[0].link = ['client0', 'cloud']",
                             "no such link"], 1),
    "samples_zero.yaml": (["data.samples = {'dist': 'constant', 'value': 0.0}",
                           "value must be > 0 (every client needs samples)"], 1),
    "test_fraction_one.yaml": (["data.test_fraction = 1.0", "must be in [0, 1)"], 1),
    "graph_txt.yaml": (["topology.graph = 'topologies/g.txt'", "node-link JSON (.json) or "
                        "GraphML"], 1),
    "graph_json_nan.yaml": (["nan_flops.json", "NaN is not a number"], 1),
    "graphml_entity_bomb.yaml": (["entity_bomb.graphml", "DOCTYPE or entity declarations"],
                                 1),
    "graphml_external_entity.yaml": (["external_entity.graphml", "entity declarations"], 1),
    "npz_many_classes.yaml": (["labels go up to 9999 (10000 classes) for only 96 training "
                               "rows"], 1),
    "npz_bool_labels.yaml": (["y_0 (bool, shape (10,)) holds booleans"], 1),
    "npz_huge_features.yaml": (["x_3 holds values up to 1e+308, beyond float32's range"], 1),
    # local training (issue 41): optimizers, clipping, schedules, losses, the new algorithms
    "optimizer_three_betas.yaml": (["optimizer_three_betas.yaml:8:", "train.local.optimizer",
                                    "betas must be two numbers [beta1, beta2]"], 1),
    "clip_both_kinds.yaml": (["train.local.clip", "give max_norm (and norm_type) or max_value, "
                              "one of them"], 1),
    "optimizer_misspelt.yaml": (["train.local.optimizer.name = 'adma'", "did you mean 'adam'?"],
                                1),
    "optimizer_state_unknown.yaml": (["train.local.optimizer.state = 'forever'",
                                      "expected one of 'reset', 'keep'"], 1),
    "loss_unregistered.yaml": (["train.local.loss = 'focal'", "unknown loss: none is "
                                "registered"], 1),
    "schedule_per_step_with_epochs.yaml": (["train.local = ", "lr_schedule every: step needs "
                                            "steps"], 1),
    "fedavgm_momentum_one.yaml": (["fedavgm_momentum_one.yaml:10:",
                                   "algorithms[0].server_momentum = 1.0", "must be in [0, 1)"],
                                  1),
    "moon_temperature_zero.yaml": (["algorithms[0].temperature = 0", "must be > 0"], 1),
    "fedbn_hyperparameter.yaml": (["algorithms[0].mu = 0.1", "fedbn has no hyperparameters"],
                                  1),
    "fednova_adam.yaml": (["train.local.optimizer.name = 'adam'", "fednova (algorithms[0]) "
                           "does not take it"], 1),
}


def _clients(n: int, rows: int = 10, dim: int = 3) -> dict[str, np.ndarray]:
    g = np.random.default_rng(0)
    out = {}
    for k in range(n):
        out[f"x_{k}"] = g.normal(size=(rows, dim))
        out[f"y_{k}"] = np.arange(rows) % 3
    return out


def _npz(name: str, path: str) -> None:
    a = _clients(12)
    if name == "npz_mismatch.yaml":
        a["y_1"] = a["y_1"][:9]
    elif name == "npz_nonfinite.yaml":
        a["x_2"][4, 1] = np.nan
    elif name == "npz_client_count.yaml":
        a = _clients(3)
    elif name == "npz_float_labels.yaml":
        a["y_0"] = a["y_0"].astype(np.float64)
    elif name == "npz_many_classes.yaml":
        a["y_5"][3] = 9999
    elif name == "npz_bool_labels.yaml":
        a["y_0"] = a["y_0"] > 0
    elif name == "npz_huge_features.yaml":
        a["x_3"][0, 0] = 1e308
    elif name == "npz_pickled.yaml":
        a["x_0"] = np.array([{"a": 1}] * 10, dtype=object)
    if name == "npz_not_zip.yaml":
        with open(path, "wb") as fh:
            fh.write(b"this is not a zip file" * 10)
        return
    np.savez(path, **a)


def _scenario(name: str, tmp_path) -> str:
    """The path to run: the corpus file itself, or a copy next to a freshly written npz."""
    if not name.startswith("npz_") or name in ("npz_is_directory.yaml",
                                               "npz_without_path.yaml"):
        return os.path.join(HERE, name)
    dst = os.path.join(tmp_path, name)
    shutil.copy(os.path.join(HERE, name), dst)
    _npz(name, os.path.join(tmp_path, "data.npz"))
    return dst


def cli(*argv: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        rc = main(list(argv))
    return rc, out.getvalue(), err.getvalue()


def _check(err: str, fragments: list[str], count: int | None) -> None:
    assert "Traceback" not in err
    lines = err.splitlines()        # (a numpy warning may come first)
    starts = [i for i, ln in enumerate(lines) if ln.startswith("error: ")]
    assert len(starts) == 1, err
    for f in fragments:
        assert f in err, f"{f!r} not in:\n{err}"
    problems = [ln for ln in lines[starts[0] + 1:] if ln.startswith("  ")]
    if count is not None:
        assert len(problems) == count, err


def test_corpus_is_complete():
    on_disk = sorted(f for f in os.listdir(HERE) if f.endswith(".yaml"))
    assert on_disk == sorted(CORPUS), set(on_disk) ^ set(CORPUS)
    assert len(CORPUS) >= 40


@pytest.mark.parametrize("name", sorted(CORPUS))
def test_validate_rejects(name, tmp_path):
    path = _scenario(name, str(tmp_path))
    rc, out, err = cli("validate", path)
    assert rc == 2, (out, err)
    fragments, count = CORPUS[name]
    _check(err, fragments, count)


@pytest.mark.parametrize("name", sorted(CORPUS))
def test_run_rejects_before_running(name, tmp_path):
    path = _scenario(name, str(tmp_path))
    out_dir = os.path.join(str(tmp_path), "out")
    rc, _, err = cli("run", path, "--out", out_dir, "--quiet")
    assert rc == 2
    fragments, count = CORPUS[name]
    _check(err, fragments, count)
    written = {f for _, _, files in os.walk(out_dir) for f in files}
    assert not written & {"metrics.csv", "clients.csv", "trace.csv", "final_params.npz"}


def test_good_npz_is_accepted(tmp_path):
    """The positive control of the npz checks: the same file without the defect loads, with
    the row counts written (10 rows, 2 held out per client)."""
    shutil.copy(os.path.join(HERE, "npz_mismatch.yaml"), tmp_path / "s.yaml")
    np.savez(tmp_path / "data.npz", **_clients(12))
    rc, out, err = cli("validate", str(tmp_path / "s.yaml"))
    assert rc == 0, err
    assert "data: npz, 96 training rows (8..8 per client), 24 test rows, dim 3" in out


def test_unreadable_file(tmp_path):
    if os.geteuid() == 0:
        pytest.skip("running as root: chmod 000 does not stop root from reading "
                    "(the directory-as-file cases cover unreadable paths)")
    path = tmp_path / "s.yaml"
    shutil.copy(os.path.join(HERE, "zero_rounds.yaml"), path)
    os.chmod(path, 0)
    rc, _, err = cli("validate", str(path))
    assert rc == 2 and "cannot read scenario file" in err


def test_missing_scenario_file(tmp_path):
    rc, _, err = cli("validate", str(tmp_path / "nowhere.yaml"))
    assert rc == 2 and "scenario file not found" in err and "Traceback" not in err


def test_command_line_overrides_are_checked(tmp_path):
    good = tmp_path / "s.yaml"
    text = open(os.path.join(HERE, "zero_rounds.yaml"), encoding="utf-8").read()
    good.write_text(text.replace("rounds: 0", "rounds: 2"))
    rc, _, err = cli("run", str(good), "--rounds", "0", "--out", str(tmp_path / "o"))
    assert rc == 2 and "--rounds = 0: must be an integer in 1..10000000" in err
    rc, _, err = cli("run", str(good), "--threads", "0", "--out", str(tmp_path / "o"))
    assert rc == 2 and "--threads = 0: must be in 1..256" in err


def test_errors_from_data_building_name_the_file():
    """The digits guard inside the data builder (reached from the Python API, where load's
    cross-check is bypassed) raises a ScenarioError naming the scenario file and key."""
    from hierfl.data.real import digits
    from hierfl.data.registry import data_spec

    with pytest.raises(ScenarioError) as exc:
        digits(data_spec(name="digits"), 1000, 0, file="s.yaml")
    (p,) = exc.value.problems
    assert (p.file, p.key, p.value) == ("s.yaml", "data.name", "digits")
    assert "at most 898 clients" in p.message


def test_problem_lines_follow_the_file(tmp_path):
    """`file:line:` points at the offending key: move it down two lines, the line moves too."""
    src = open(os.path.join(HERE, "zero_rounds.yaml"), encoding="utf-8").read()
    base = re.search(r"zero_rounds\.yaml:(\d+):", cli("validate", os.path.join(
        HERE, "zero_rounds.yaml"))[2])
    path = tmp_path / "zero_rounds.yaml"
    path.write_text("\n\n" + src, encoding="utf-8")
    moved = re.search(r"zero_rounds\.yaml:(\d+):", cli("validate", str(path))[2])
    assert base is not None and moved is not None
    assert (int(base.group(1)), int(moved.group(1))) == (8, 10)


@pytest.mark.parametrize("where", ["train", "entry"])
def test_gamma_refusal_names_the_key_that_set_it(tmp_path, where):
    """A gamma target for an algorithm without one local objective is refused naming the key
    the user wrote: train.local.gamma when set there (it named the entry's local.gamma, a key
    the file did not have)."""
    from hierfl.scenario.load import load
    from conftest import make_scenario
    entry = {"name": "pfedmac_sh"}
    train = {"local": {"steps": 2, "batch_size": 5, "lr": 0.1}}
    if where == "train":
        train["local"]["gamma"] = 0.5
    else:
        entry["local"] = {"gamma": 0.5}
    path = make_scenario(tmp_path, name="g", algorithms=[entry], train=train)
    with pytest.raises(ScenarioError) as err:
        load(path)
    text = str(err.value)
    key = "train.local.gamma" if where == "train" else "algorithms[0].local.gamma"
    assert f"{key} = 0.5" in text and "no single local objective" in text


def test_a_problem_found_once_per_algorithm_is_said_once(tmp_path, capsys):
    """train.edge_preaggregate under a fedasync cloud is checked for each entry: three entries
    printed the same line three times ("3 problems")."""
    from conftest import make_scenario
    path = make_scenario(tmp_path, name="dup", algorithms=[
        {"name": "fedavg"}, {"name": "fedprox", "mu": 0.1}, {"name": "fedavg", "label": "b"}],
        **{"train.edge_preaggregate": True, "train.round": {"policy": "fedasync"}})
    assert main(["validate", path]) == 2
    err = capsys.readouterr().err
    assert "1 problem in the input" in err and err.count("edge_preaggregate = True") == 1
