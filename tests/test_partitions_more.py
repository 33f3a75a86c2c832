"""The partitions of issue 44 (data/partitions.py): classes_per_client gives every client exactly
C distinct labels with each label's rows cut evenly among its holders; quantity_skew's sizes
follow the requested law (the sd of their log is sigma, or 1/alpha for the power law), sum to
the data and are >= min_size; dirichlet's min_size redraws until it holds. The same seed gives
the same split, another seed another; impossible requests exit 2 from `hierfl validate` naming
the key; the kinds that were there draw what they drew (tests/test_golden.py pins the runs)."""
from __future__ import annotations

import hashlib
import math
import subprocess
import sys

import numpy as np
import pytest

from datasets_util import scenario, validate_exit2, write_mnist
from hierfl import seeding
from hierfl.cli import main
from hierfl.config.schema import PartitionSpec
from hierfl.data import load_data
from hierfl.data.partitions import MAX_DRAWS, PartitionError, partition, quantity_sizes
from hierfl.scenario.load import load


def _labels(n_per: list[int], seed: int = 3) -> np.ndarray:
    y = np.concatenate([np.full(n, c) for c, n in enumerate(n_per)]).astype(np.int64)
    return np.random.default_rng(seed).permutation(y)


def _split(y, k, spec, seed=0):
    return partition(y, k, spec, seeding.rng(seed, "data/partition"))


def _is_partition(parts, n):
    rows = np.concatenate(parts)
    assert len(rows) == n and np.array_equal(np.sort(rows), np.arange(n))


# ------------------------------------------------------------------------ classes_per_client
@pytest.mark.parametrize("k,c,n_per", [(20, 2, [100] * 10), (7, 3, [50] * 10),
                                       (10, 10, [30] * 10), (33, 4, list(range(40, 140, 10))),
                                       (5, 2, [20] * 10)])
def test_classes_per_client_every_client_exactly_c_labels(k, c, n_per):
    y = _labels(n_per)
    parts = _split(y, k, PartitionSpec("classes_per_client", classes=c))
    _is_partition(parts, len(y))
    assert [len(np.unique(y[p])) for p in parts] == [c] * k
    n_labels = len(n_per)
    holders = np.zeros(n_labels, int)
    for p in parts:
        holders[np.unique(y[p])] += 1
    # every label held by floor(KC/L) or ceil(KC/L) clients, KC in all
    assert holders.sum() == k * c
    assert set(holders.tolist()) <= {k * c // n_labels, -(-k * c // n_labels)}
    for lab in range(n_labels):             # a label's rows cut evenly among its holders
        got = [int((y[p] == lab).sum()) for p in parts if (y[p] == lab).any()]
        assert sum(got) == n_per[lab] and max(got) - min(got) <= 1


def test_classes_per_client_same_seed_same_split_other_seed_other():
    y = _labels([60] * 10)
    spec = PartitionSpec("classes_per_client", classes=2)
    a, b, other = _split(y, 12, spec, 0), _split(y, 12, spec, 0), _split(y, 12, spec, 1)
    assert all(np.array_equal(p, q) for p, q in zip(a, b))
    assert not all(np.array_equal(p, q) for p, q in zip(a, other))


@pytest.mark.parametrize("k,c,n_per,needle", [
    (10, 11, [10] * 10, "cannot hold 11 distinct"),
    (4, 2, [10] * 10, "fewer than the 10 labels"),
    (30, 5, [100] * 9 + [3], "label 9 has only 3"),
])
def test_classes_per_client_impossible(k, c, n_per, needle):
    with pytest.raises(PartitionError) as e:
        _split(_labels(n_per), k, PartitionSpec("classes_per_client", classes=c))
    assert e.value.key == "data.partition.classes" and needle in str(e.value)


# ------------------------------------------------------------------------------ quantity_skew
@pytest.mark.parametrize("sigma", [0.5, 1.0, 1.5])
def test_quantity_skew_lognormal_log_sizes_have_sigma(sigma):
    n, k = 400_000, 2000
    sizes = quantity_sizes(n, k, PartitionSpec("quantity_skew", sigma=sigma),
                           seeding.rng(0, "data/partition"))
    assert sizes.sum() == n and sizes.min() >= 1
    # sd of 2000 normal draws is within ~3% of sigma (se = sigma / sqrt(2 k)); rounding adds less
    assert abs(np.log(sizes).std() - sigma) < 0.06 * sigma + 0.01
    # and the log is normal: its skewness near 0
    z = np.log(sizes) - np.log(sizes).mean()
    assert abs((z ** 3).mean() / z.std() ** 3) < 0.25


@pytest.mark.parametrize("alpha", [1.0, 2.0, 3.0])
def test_quantity_skew_power_law_log_is_exponential(alpha):
    n, k = 2_000_000, 2000
    sizes = quantity_sizes(n, k, PartitionSpec("quantity_skew", sizes="power_law", alpha=alpha),
                           seeding.rng(5, "data/partition"))
    assert sizes.sum() == n and sizes.min() >= 1
    logs = np.log(sizes) - np.log(sizes.min())
    # Pareto(alpha): log w ~ Exp(alpha): sd 1/alpha; P(w > x w_min) = x^-alpha
    assert abs(logs.std() - 1 / alpha) < 0.08 / alpha
    assert abs((logs > math.log(2)).mean() - 2 ** -alpha) < 0.04


def test_quantity_skew_zero_sigma_is_even_and_min_size_holds():
    sizes = quantity_sizes(1003, 10, PartitionSpec("quantity_skew", sigma=0.0),
                           seeding.rng(0, "data/partition"))
    assert sorted(sizes.tolist()) == [100] * 7 + [101] * 3
    for m in (1, 20, 50):
        s = quantity_sizes(5000, 100, PartitionSpec("quantity_skew", sigma=2.0, min_size=m),
                           seeding.rng(0, "data/partition"))
        assert s.sum() == 5000 and s.min() >= m
        assert (s == m).any()              # sigma 2: the smallest get the floor exactly
    s = quantity_sizes(5000, 100, PartitionSpec("quantity_skew", min_size=50),
                       seeding.rng(0, "data/partition"))
    assert s.tolist() == [50] * 100        # the floor takes every row


def test_quantity_skew_labels_iid_and_seeded():
    y = _labels([1000] * 10)
    spec = PartitionSpec("quantity_skew", sigma=1.0, min_size=5)
    parts = _split(y, 50, spec)
    _is_partition(parts, len(y))
    assert min(len(p) for p in parts) >= 5
    big = max(parts, key=len)               # a big client's label mix is near uniform
    assert len(big) > 400 and np.bincount(y[big], minlength=10).min() > 0.5 * len(big) / 10
    again, other = _split(y, 50, spec), _split(y, 50, spec, seed=9)
    assert all(np.array_equal(p, q) for p, q in zip(parts, again))
    assert [len(p) for p in parts] != [len(p) for p in other]


def test_quantity_skew_min_size_above_the_data():
    with pytest.raises(PartitionError) as e:
        _split(_labels([10] * 10), 11, PartitionSpec("quantity_skew", min_size=10))
    assert e.value.key == "data.partition.min_size" and "more than the 100 rows" in str(e.value)


# --------------------------------------------------------------------------- dirichlet min_size
def test_dirichlet_min_size_every_client_holds_it():
    y = _labels([200] * 10)
    plain = _split(y, 40, PartitionSpec("dirichlet", 0.1))
    assert min(len(p) for p in plain) < 10         # the draw without it misses 10
    for seed in range(3):
        parts = _split(y, 40, PartitionSpec("dirichlet", 0.1, min_size=10), seed)
        _is_partition(parts, len(y))
        assert min(len(p) for p in parts) >= 10
    same = _split(y, 40, PartitionSpec("dirichlet", 0.1, min_size=10), 2)
    assert all(np.array_equal(p, q) for p, q in zip(parts, same))
    other = _split(y, 40, PartitionSpec("dirichlet", 0.1, min_size=10), 1)
    assert not all(np.array_equal(p, q) for p, q in zip(parts, other))


def test_dirichlet_min_size_follows_niid_bench_cap():
    """With min_size, NIID-Bench's rule: a client at N / K rows or more gets no later label, so
    no client ends above N / K + the largest label's rows."""
    y = _labels([200] * 10)
    for seed in range(5):
        parts = _split(y, 8, PartitionSpec("dirichlet", 0.05, min_size=1), seed)
        assert max(len(p) for p in parts) <= len(y) / 8 + 200


def test_dirichlet_min_size_impossible():
    y = _labels([37] * 5 + [3] * 5)     # Dir(0.01) rarely splits a label: 5 clients get < 19
    with pytest.raises(PartitionError) as e:
        _split(y, 10, PartitionSpec("dirichlet", 0.01, min_size=19))
    assert e.value.key == "data.partition.min_size" and f"of {MAX_DRAWS}" in str(e.value)
    with pytest.raises(PartitionError, match="10 clients x 21 rows is more than the 200"):
        _split(y, 10, PartitionSpec("dirichlet", 0.5, min_size=21))


# ------------------------------------------------------------------------ existing kinds pinned
def test_existing_kinds_draw_what_they_drew():
    """Digests of the split before data/partitions.py (computed on the code of e708bb9)."""
    y = _labels([97, 130, 88, 150, 61, 120, 99, 105, 140, 70])
    got = {}
    for name, spec in [("iid", PartitionSpec()), ("dir", PartitionSpec("dirichlet", 0.3)),
                       ("dir_small", PartitionSpec("dirichlet", 0.01)),
                       ("shards", PartitionSpec("shards", shards_per_client=3))]:
        parts = _split(y, 17, spec, 4)
        h = hashlib.sha256()
        for p in parts:
            h.update(np.asarray(p, np.int64).tobytes() + b"|")
        got[name] = h.hexdigest()[:16]
    assert got == PINNED


PINNED = {"iid": "c2343d47df2fc388", "dir": "43bd2d328e5f28e0", "dir_small": "5356201ca3c249d0",
          "shards": "e8186c0308282b5a"}


# ------------------------------------------------------------------------ through the loaders
def test_mnist_classes_per_client_and_validate_summary(tmp_path, capsys):
    write_mnist(str(tmp_path / "mn"))
    path = scenario(str(tmp_path), "{name: mnist, root: mn, partition: "
                    "{kind: classes_per_client, classes: 3}}", 8)
    sc = load(path)
    d = load_data(sc, 8)
    y, off = d.y.numpy(), d.offsets
    assert [len(np.unique(y[a:b])) for a, b in zip(off[:-1], off[1:])] == [3] * 8
    assert main(["validate", path]) == 0
    out = capsys.readouterr().out
    lo, hi = int(np.diff(off).min()), int(np.diff(off).max())
    assert f"  partition: classes_per_client (classes=3): {lo}..{hi} rows and 3..3 labels " \
           "per client" in out


@pytest.mark.parametrize("part,key,needle", [
    ("{kind: classes_per_client, classes: 12}", "data.partition.classes = 12",
     "cannot hold 12 distinct"),
    ("{kind: classes_per_client, classes: 1}", "data.partition.classes = 1",
     "fewer than the 10 labels"),
    ("{kind: quantity_skew, min_size: 400}", "data.partition.min_size = 400",
     "6 clients x 400 rows is more than the 1797"),
    ("{kind: dirichlet, alpha: 0.01, min_size: 290}", "data.partition.min_size = 290",
     "no Dirichlet(0.01) draw"),
    ("{kind: iid, min_size: 3}", "data.partition.min_size = 3", "kind: dirichlet, quantity_skew"),
    ("{kind: quantity_skew, sizes: zipf}", "data.partition.sizes", "lognormal"),
])
def test_impossible_requests_exit_2_naming_the_key(tmp_path, capsys, part, key, needle):
    path = scenario(str(tmp_path), f"{{name: digits, partition: {part}}}", 6)
    validate_exit2(capsys, path, "s.yaml", key, needle)


def test_validate_exit_2_without_traceback_in_a_process(tmp_path):
    path = scenario(str(tmp_path), "{name: digits, partition: "
                    "{kind: classes_per_client, classes: 11}}", 6)
    r = subprocess.run([sys.executable, "-m", "hierfl", "validate", path], capture_output=True,
                       text=True, timeout=120)
    assert r.returncode == 2 and "Traceback" not in r.stderr
    assert "data.partition.classes = 11" in r.stderr and "s.yaml" in r.stderr


def test_sweep_over_kind_keeps_each_new_key_to_its_kind(tmp_path):
    """A base {kind: classes_per_client, classes: 3, ...} swept over kind: each point keeps
    only the keys its kind reads (PARTITION_READS), as the older kinds' points do."""
    from hierfl import sweep as sw

    scenario(str(tmp_path), "{name: digits, partition: {kind: classes_per_client, classes: 3}}",
             6)
    (tmp_path / "sw.yaml").write_text(
        "base: s.yaml\ngrid:\n  data.partition.kind: [iid, classes_per_client, quantity_skew]\n"
        "output: out\npoint_reports: false\n")
    s = sw.load_sweep(str(tmp_path / "sw.yaml"))
    texts = [pt.text for pt in s.points]
    assert "partition: {kind: iid}" in texts[0] and "partition: {kind: quantity_skew}" in texts[2]
    assert "partition: {kind: classes_per_client, classes: 3}" in texts[1]
    got = []
    for pt in s.points:
        (tmp_path / "p.yaml").write_text(pt.text)
        got.append(load(str(tmp_path / "p.yaml")).data.partition)
    assert [(p.kind, p.classes) for p in got] == [("iid", 2), ("classes_per_client", 3),
                                                   ("quantity_skew", 2)]


def test_validate_prints_quantity_skew_spread(tmp_path, capsys):
    path = scenario(str(tmp_path), "{name: digits, partition: {kind: quantity_skew, "
                    "sizes: power_law, alpha: 1.5, min_size: 20}}", 6)
    assert main(["validate", path]) == 0
    line = [x for x in capsys.readouterr().out.splitlines() if "partition:" in x][0]
    assert line.startswith("  partition: quantity_skew (sizes=power_law, alpha=1.5, "
                           "min_size=20): ") and line.endswith(" labels per client")
    lo = int(line.split(": ")[2].split("..")[0])
    assert lo >= 16              # 20 rows before digits holds out test_fraction 0.2 of them
