"""Compression through whole runs: `kind: none` is no compression byte for byte; clients.csv's
bytes follow the codec (SCAFFOLD's two tensors both coded); the batched and sequential executors
agree on a compressed run; a paused and resumed run with error feedback equals an uninterrupted
one (the residuals are checkpointed); bad `compress:` keys are ScenarioErrors naming the key."""
from __future__ import annotations

import dataclasses
import os
import subprocess
import sys

import numpy as np
import pytest
import yaml

from hierfl.config.errors import ScenarioError
from hierfl.run import build_world, run_algorithm, run_scenario
from hierfl.scenario.load import load

from conftest import read_csv

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _path(tmp_path, algorithms, rounds=4, name="s.yaml"):
    doc = {"name": "comp", "seed": 5,
           "topology": {"edges": {"count": 2, "link": {"latency_s": 0.01, "bandwidth_Bps": 1e5}},
                        "clients": {"count": 6, "compute_flops": 2e6,
                                    "link": {"latency_s": 0.02, "bandwidth_Bps": 2e4}}},
           "data": {"name": "synthetic", "samples": {"dist": "uniform", "low": 20, "high": 40},
                    "dim": 8, "classes": 3},
           "model": {"name": "logreg"},              # P = 8 x 3 + 3 = 27
           "train": {"rounds": rounds, "clients_per_round": 4, "checkpoint_every": 1,
                     "local": {"steps": 3, "batch_size": 5, "lr": 0.1}},
           "algorithms": algorithms}
    path = tmp_path / name
    path.write_text(yaml.safe_dump(doc))
    return str(path)


def _files(folder):
    out = {k: open(os.path.join(folder, f"{k}.csv"), "rb").read()
           for k in ("metrics", "clients", "trace")}
    with np.load(os.path.join(folder, "final_params.npz")) as z:
        out.update({k: z[k].tobytes() for k in z.files})
    return out


NONE = {"up": {"kind": "none"}, "down": {"kind": "none"}, "edge_up": {"kind": "none"},
        "edge_down": {"kind": "none"}}


@pytest.mark.parametrize("name", ["fedavg", "hierfavg"])
def test_kind_none_is_no_compression(tmp_path, name):
    extra = {"edge_rounds": 2} if name == "hierfavg" else {}
    for label, comp in (("plain", None), ("none", NONE)):
        entry = {"name": name, **extra, **({"compress": comp} if comp else {})}
        sc = load(_path(tmp_path, [entry], name=f"{label}.yaml"), out=str(tmp_path / label))
        run_scenario(sc, progress=False)
    assert _files(tmp_path / "plain" / name) == _files(tmp_path / "none" / name)


def test_client_bytes_follow_the_codec(tmp_path):
    """P = 27: sign is ceil(27 / 8) = 4 + 4 = 8 B per tensor, SCAFFOLD sends two; top-2 of 27 is
    16 B sparse; QSGD s = 4 is (1 + 3) x 27 = 108 bits = 14 B + 4."""
    algos = [{"name": "scaffold", "label": "sc_sign", "compress": {"up": {"kind": "sign"}}},
             {"name": "fedavg", "label": "fa_top2", "compress": {"up": {"kind": "topk", "k": 2}}},
             {"name": "fedavg", "label": "fa_q4",
              "compress": {"up": {"kind": "qsgd", "levels": 4}}},
             {"name": "fedavg", "label": "fa"}]
    sc = load(_path(tmp_path, algos, rounds=2), out=str(tmp_path / "o"))
    run_scenario(sc, progress=False)
    want = {"sc_sign": ("16.0", "sign+sign", "sign"), "fa_top2": ("16.0", "sparse", "topk"),
            "fa_q4": ("18.0", "qsgd", "qsgd"), "fa": ("108.0", "dense", "none")}
    for label, (nb, enc, kind) in want.items():
        rows = read_csv(tmp_path / "o" / label / "clients.csv")
        assert rows and {(r["up_bytes"], r["encoding"], r["compress"]) for r in rows} == \
            {(nb, enc, kind)}, label
    # the ledger counts the coded uploads: client-edge upload bytes of fa_top2 vs fa
    m = {lb: read_csv(tmp_path / "o" / lb / "metrics.csv")[-1] for lb in ("fa", "fa_top2")}
    n_up = float(m["fa"]["bytes_up_client_edge"]) / 108
    assert float(m["fa_top2"]["bytes_up_client_edge"]) == pytest.approx(16 * n_up)


def test_compressed_run_batched_equals_sequential(tmp_path):
    entry = {"name": "fedavg", "compress": {"up": {"kind": "qsgd", "levels": 3,
                                                   "error_feedback": True},
                                            "down": {"kind": "int8"}}}
    sc = load(_path(tmp_path, [entry], rounds=3), out=str(tmp_path / "o"))
    world = build_world(sc)
    got = {}
    for kind in ("batched", "sequential"):
        ex = dataclasses.replace(sc.train.executor, kind=kind)
        s = dataclasses.replace(sc, train=dataclasses.replace(sc.train, executor=ex))
        run_algorithm(s, s.algorithms[0], world, str(tmp_path / kind), progress=False)
        got[kind] = dict(np.load(tmp_path / kind / "final_params.npz"))
    for k in got["batched"]:
        np.testing.assert_allclose(got["batched"][k], got["sequential"][k], atol=1e-5)


@pytest.mark.parametrize("entry", [
    {"name": "fedavg", "compress": {"up": {"kind": "topk", "ratio": 0.1,
                                           "error_feedback": True}}},
    {"name": "hierfavg", "edge_rounds": 2,
     "compress": {"up": {"kind": "sign", "error_feedback": True}, "edge_up": {"kind": "int8"},
                  "down": {"kind": "fp16"}, "edge_down": {"kind": "int8"}}}])
def test_resume_with_error_feedback_is_bit_identical(tmp_path, entry):
    path = _path(tmp_path, [entry], rounds=5)
    run_scenario(load(path, out=str(tmp_path / "ref")), progress=False)
    sc = load(path, out=str(tmp_path / "cut"))
    res = run_scenario(sc, progress=False, stop_after=3)
    assert next(iter(res.values())).paused_at == 3
    run_scenario(sc, progress=False, resume=True)
    label = entry["name"]
    assert _files(tmp_path / "ref" / label) == _files(tmp_path / "cut" / label)


@pytest.mark.parametrize("comp,key,says", [
    ({"up": {"kind": "zip"}}, "compress.up.kind", "zip"),
    ({"up": {"kind": "topk", "ratio": 0}}, "compress.up.ratio", "(0, 1]"),
    ({"up": {"kind": "topk", "ratio": 1.5}}, "compress.up.ratio", "(0, 1]"),
    ({"up": {"kind": "qsgd", "levels": 0}}, "compress.up.levels", ">= 1"),
    ({"up": {"kind": "qsgd"}}, "compress.up", "needs levels"),
    ({"up": {"kind": "topk"}}, "compress.up", "exactly one of ratio, k"),
    ({"up": {"kind": "sign", "ratio": 0.1}}, "compress.up", "ratio and k apply"),
    ({"down": {"kind": "int8", "error_feedback": True}}, "compress", "up only"),
    ({"edge_up": {"kind": "randk", "k": 3}}, "compress", "random codecs"),
    ({"sideways": {"kind": "none"}}, "compress.sideways", "unknown key"),
    ({"up": {"kind": "qsgd", "levels": 10 ** 20}}, "compress.up.levels", "at most 16777216"),
    ({"up": {"kind": "int8", "encoding": "sparse"}}, "compress.up.encoding", "applies to topk"),
    ({"up": {"kind": "randk", "k": 2, "encoding": "sparse"}}, "compress.up.encoding",
     "applies to topk"),
    ({"edge_up": {"kind": "int8"}}, "compress.edge_up.kind", "hierarchical algorithms"),
    ({"edge_down": {"kind": "fp16"}}, "compress.edge_down.kind", "hierarchical algorithms"),
    ("topk", "compress", "expected a mapping"),
])
def test_bad_compress_is_a_scenario_error(tmp_path, comp, key, says):
    path = _path(tmp_path, [{"name": "fedavg", "compress": comp}])
    with pytest.raises(ScenarioError) as err:
        load(path, out=str(tmp_path / "o"))
    text = str(err.value)
    assert f"algorithms[0].{key}" in text and says in text and "s.yaml" in text


def test_cli_exit_2_without_traceback(tmp_path):
    path = _path(tmp_path, [{"name": "fedavg", "compress": {"up": {"kind": "qsgd",
                                                                   "levels": -1}}}])
    proc = subprocess.run([sys.executable, "-m", "hierfl", "validate", path],
                          capture_output=True, text=True, cwd=ROOT,
                          env={**os.environ, "PYTHONPATH": ROOT})
    assert proc.returncode == 2
    assert "algorithms[0].compress.up.levels" in proc.stderr and "Traceback" not in proc.stderr


def test_deadline_and_crashes_with_compression(tmp_path):
    """Coded uploads are smaller, so under a deadline more of them arrive (same draws of
    crashes and minibatches for both entries); the run goes through with crashes and the
    residuals of clients whose uploads were lost."""
    doc = yaml.safe_load(open(_path(tmp_path, [
        {"name": "fedavg", "label": "dense"},
        {"name": "fedavg", "label": "sign_ef",
         "compress": {"up": {"kind": "sign", "error_feedback": True}}}], rounds=4)))
    doc["topology"]["clients"]["link"] = {"latency_s": 0.001, "bandwidth_Bps": 2000}
    doc["topology"]["failures"] = {"crash_p": 0.2}
    doc["train"]["round"] = {"policy": "deadline_drop", "deadline_s": 0.09}
    path = tmp_path / "deadline.yaml"
    path.write_text(yaml.safe_dump(doc))
    run_scenario(load(str(path), out=str(tmp_path / "o")), progress=False)
    got = {lb: read_csv(tmp_path / "o" / lb / "metrics.csv")[1:] for lb in ("dense", "sign_ef")}
    reported = {lb: sum(int(r["reported"]) for r in rows) for lb, rows in got.items()}
    failed = {lb: sum(int(r["failed"]) for r in rows) for lb, rows in got.items()}
    assert reported["sign_ef"] > reported["dense"] and failed["dense"] > 0
    rows = read_csv(tmp_path / "o" / "sign_ef" / "clients.csv")
    assert {r["up_bytes"] for r in rows} == {"8.0"} and any(r["failed"] == "1" for r in rows)


def test_compress_is_part_of_the_scenario_hash(tmp_path):
    """A resume or a rerun into the same --out must see a changed codec (the manifest hash and
    the resume fingerprint are built from scenario_dict); an entry without compress: hashes as
    before the key existed (no `compress` in its dict)."""
    from hierfl.outputs.manifest import scenario_hash
    from hierfl.outputs.summary import scenario_dict

    hashes = []
    for i, comp in enumerate((None, {"up": {"kind": "int8"}}, {"up": {"kind": "fp16"}})):
        entry = {"name": "fedavg", **({"compress": comp} if comp else {})}
        sc = load(_path(tmp_path, [entry], name=f"h{i}.yaml"), out=str(tmp_path / "o"))
        hashes.append(scenario_hash(sc))
        assert ("compress" in scenario_dict(sc)["algorithms"][0]) == (comp is not None)
    assert len(set(hashes)) == 3


def test_down_on_a_deeper_tree_is_refused(tmp_path):
    doc = yaml.safe_load(open(_path(tmp_path, [
        {"name": "fedavg"},
        {"name": "hierfavg", "edge_rounds": 2, "compress": {"down": {"kind": "int8"}}}])))
    doc["topology"] = {"tiers": [{"name": "regional", "count": 1},
                                 {"name": "edge", "count": 2}],
                       "clients": doc["topology"]["clients"]}
    path = tmp_path / "deep.yaml"
    path.write_text(yaml.safe_dump(doc))
    with pytest.raises(ScenarioError) as err:
        run_scenario(load(str(path), out=str(tmp_path / "o")), progress=False)
    text = str(err.value)
    assert "algorithms[1].compress.down.kind = 'int8'" in text and "one aggregator tier" in text
    assert not (tmp_path / "o" / "fedavg").exists()     # refused before the first one ran
    proc = subprocess.run([sys.executable, "-m", "hierfl", "validate", str(path)],
                          capture_output=True, text=True)
    assert proc.returncode == 2 and "algorithms[1].compress.down.kind" in proc.stderr
    assert "Traceback" not in proc.stderr


def test_validate_lists_each_entrys_codecs(tmp_path):
    """Entries that differ only in compress are told apart by `hierfl validate`."""
    path = _path(tmp_path, [
        {"name": "fedavg", "label": "plain", "compress": NONE},
        {"name": "fedavg", "label": "top", "compress": {"up": {"kind": "topk", "k": 3,
                                                               "error_feedback": True}}},
        {"name": "hierfavg", "label": "h", "compress": {"up": {"kind": "qsgd", "levels": 4},
                                                        "edge_up": {"kind": "int8"}}}])
    proc = subprocess.run([sys.executable, "-m", "hierfl", "validate", path],
                          capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    lines = {ln.split(":")[0].split()[-1]: ln for ln in proc.stdout.splitlines()
             if ln.startswith("  algorithm ")}
    assert "compress" not in lines["plain"]
    assert lines["top"].endswith("; compress up={kind=topk, k=3, error_feedback=True}")
    assert lines["h"].endswith("; compress up={kind=qsgd, levels=4}, edge_up={kind=int8}")


@pytest.mark.parametrize("name,tensor", [("fedsplit", 0), ("feddr", 0), ("fedpd", 0),
                                         ("feddc", 1), ("scaffold", 0), ("scaffold", 1)])
def test_difference_uploads_are_coded_as_they_are(tmp_path, monkeypatch, name, tensor):
    """A tensor that is a difference already (FedSplit's z_new - z_old, FedDR's change of
    x-hat, FedPD's x0+ - x0, FedDC's dg, SCAFFOLD's two) is coded as it is: with top-1 its
    decoded rows hold one non-zero each. Coded as a model (its difference from the start
    model, the start added back) a dropped coordinate decoded to the start model's value: a
    tester's FedSplit went from accuracy 0.80 to 0.54 under top-50%."""
    from hierfl.algorithms.registry import REGISTRY
    cls = REGISTRY[name]
    seen = []
    plain = cls.server_update

    def spy(self, state, clients, up, ctx):
        if len(clients):
            seen.append(up.tensors[tensor].clone())
        return plain(self, state, clients, up, ctx)

    monkeypatch.setattr(cls, "server_update", spy)
    entry = {"name": name, "compress": {"up": {"kind": "topk", "k": 1}}}
    if name == "fedpd":
        entry["p_comm"] = 1.0
    sc = load(_path(tmp_path, [entry], rounds=3), out=str(tmp_path / "out"))
    run_scenario(sc, progress=False)
    assert len(seen) == 3
    for rows in seen[1:]:           # (the start model is not zero after the first round)
        assert int((rows != 0).sum(1).max()) <= 1


def test_fedpd_silent_rounds_send_nothing_when_compressed(tmp_path):
    """FedPD's rounds without communication send no upload: 0 bytes with or without a codec,
    and error feedback keeps its residuals (a tester saw 148 B a client in every silent
    round under int8, and top-k + EF sending more bytes than no compression)."""
    runs = {}
    for label, comp in (("plain", None), ("int8", {"up": {"kind": "int8"}}),
                        ("topk", {"up": {"kind": "topk", "ratio": 0.25,
                                         "error_feedback": True}})):
        entry = {"name": "fedpd", "label": label, "p_comm": 0.4,
                 **({"compress": comp} if comp else {})}
        sc = load(_path(tmp_path, [entry], rounds=6, name=f"{label}.yaml"),
                  out=str(tmp_path / label))
        run_scenario(sc, progress=False)
        total = [float(r["bytes_up_client_edge"]) for r in read_csv(
            tmp_path / label / label / "metrics.csv")]
        runs[label] = np.diff(total)        # (the column is cumulative) each round's bytes
    silent = np.flatnonzero(runs["plain"] == 0)
    loud = np.flatnonzero(runs["plain"] > 0)
    assert len(silent) and len(loud)        # the seed gives both kinds of round
    for label in ("int8", "topk"):
        assert (runs[label][silent] == 0).all() and (runs[label][loud] > 0).all(), label


def test_ifca_uploads_are_coded_against_their_cluster_model(tmp_path, monkeypatch):
    """IFCA's clients train from their cluster's model; their uploads are coded as the
    difference from it (with top-1: one coordinate off it per row), and `down`, which would
    code one broadcast model the clients do not train from, is refused."""
    from hierfl.algorithms.ifca.algorithm import IFCA
    seen = []
    plain = IFCA.server_update

    def spy(self, state, clients, up, ctx):
        if len(clients):
            ref = state.server.models.index_select(0, up.tensors[1][:, 0].long())
            seen.append((up.tensors[0] - ref, up.tensors[1][:, 0].long()))
        return plain(self, state, clients, up, ctx)

    monkeypatch.setattr(IFCA, "server_update", spy)
    entry = {"name": "ifca", "clusters": 3, "compress": {"up": {"kind": "topk", "k": 1}}}
    sc = load(_path(tmp_path, [entry], rounds=3), out=str(tmp_path / "out"))
    run_scenario(sc, progress=False)
    assert len(seen) == 3 and len(set(_chosen(seen))) > 1     # several clusters chosen
    for diff, _ in seen:
        assert int((diff != 0).sum(1).max()) <= 1
    entry["compress"] = {"down": {"kind": "int8"}}
    with pytest.raises(ScenarioError, match=r"compress\.down\.kind.*not supported"):
        load(_path(tmp_path, [entry], name="down.yaml"))


def _chosen(seen) -> list[int]:
    return [int(i) for _, ids in seen for i in ids.tolist()]


def test_k_above_the_models_size_is_refused(tmp_path):
    """k counts entries of a model-sized tensor: above P (27 here) it was capped silently, top-k
    sending every entry in a sparse encoding dearer than dense."""
    from hierfl.run import build_world
    path = _path(tmp_path, [{"name": "fedavg", "compress": {"up": {"kind": "topk", "k": 28}}}])
    with pytest.raises(ScenarioError, match=r"compress\.up\.k = 28: more entries than the "
                                            r"model's 27 parameters"):
        build_world(load(path, out=str(tmp_path / "o")))
    ok = _path(tmp_path, [{"name": "fedavg", "compress": {"up": {"kind": "topk", "k": 27}}}],
               name="ok.yaml")
    build_world(load(ok, out=str(tmp_path / "o2")))
