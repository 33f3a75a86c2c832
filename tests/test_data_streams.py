"""Issue 19: synthetic data drawn in bulk equals the per-client recipe byte for byte.

The reference here is the eager generator the project shipped before (one seeded generator, one
draw, one matrix product and one split per client, then concatenated); data/synthetic.py makes
the same streams in bulk (data/streams.py) and does the arithmetic on blocks of clients."""
from __future__ import annotations

import numpy as np
import pytest

from hierfl import seeding
from hierfl.config.schema import DataSpec, DistSpec
from hierfl.data.registry import data_spec
from hierfl.data import pcg64, shuffles, streams, synthetic
from hierfl.data.federated import FederatedData, split_train_test


def eager(spec: DataSpec, n_clients: int, seed: int) -> FederatedData:
    """The per-client recipe, one client at a time."""
    d, c = spec.dim, spec.classes
    iid = spec.name == "synthetic_iid"
    counts = synthetic.sample_counts(spec, n_clients, seed)
    cov_diag = np.arange(1, d + 1, dtype=np.float64) ** -1.2
    shared = seeding.rng(seed, "data/synthetic/shared")
    w_iid, b_iid = shared.normal(0, 1, (d, c)), shared.normal(0, 1, c)
    g_het = seeding.rng(seed, "data/synthetic/heterogeneity")
    if not iid:                             # (synthetic_iid has no alpha, beta: no u_k, B_k)
        u = g_het.normal(0, spec.alpha, n_clients)
        bk = g_het.normal(0, spec.beta, n_clients)
    train, test = [], []
    for k in range(n_clients):
        g = seeding.rng(seed, "data/synthetic/client", k)
        if iid:
            w, b, v = w_iid, b_iid, np.zeros(d)
        else:
            w = g.normal(u[k], 1, (d, c))
            b = g.normal(u[k], 1, c)
            v = g.normal(bk[k], 1, d)
        x = g.normal(0, 1, (counts[k], d)) * np.sqrt(cov_diag) + v
        y = np.argmax(x @ w + b, axis=1)
        tr, te = split_train_test(x, y, spec.test_fraction, seeding.rng(seed, "data/split", k))
        train.append(tr)
        test.append(te)
    return FederatedData.from_arrays(train, test, c)


def same(a: FederatedData, b: FederatedData) -> None:
    for key in ("x", "y", "offsets", "x_test", "y_test", "test_offsets"):
        x, y = getattr(a, key), getattr(b, key)
        assert x.dtype == y.dtype and x.shape == y.shape, key
        assert x.tobytes() == y.tobytes(), key
    assert a.n_classes == b.n_classes and a.input_shape == b.input_shape


def test_bulk_seed_words_are_seedsequence_words():
    ids = np.array([0, 1, 2, 99, 65536, 2**31, 2**32 - 1])
    for seed in (0, 7, -3, 2**33 + 5):
        for purpose in ("data/synthetic/client", "data/split", "x"):
            words = streams.seed_words(seed, purpose, ids)
            for k, row, g in zip(ids, words, streams.generators(seed, purpose, ids)):
                key = seeding._key(seed, purpose, (int(k),))
                assert (np.random.SeedSequence(key).generate_state(4, np.uint64) == row).all()
                want = seeding.rng(seed, purpose, int(k)).random(3)
                assert g.random(3).tobytes() == want.tobytes()
    with pytest.raises(ValueError):
        streams.seed_words(0, "x", np.array([2**32]))


def test_pcg64_states_are_those_numpy_seeds():
    words = streams.seed_words(9, "p", np.arange(40))
    for row, (s_lo, s_hi, i_lo, i_hi) in zip(words, streams.pcg64_states(words)):
        want = np.random.PCG64(streams._Words(row)).state["state"]
        assert want["state"] == int(s_lo) | int(s_hi) << 64
        assert want["inc"] == int(i_lo) | int(i_hi) << 64


SPECS = [
    data_spec(name="synthetic"),                                 # lognormal sizes: many sizes
    data_spec(name="synthetic", alpha=0.5, beta=0.0, dim=7, classes=4, test_fraction=0.3,
             samples=DistSpec(dist="uniform", low=1, high=9)),  # tiny clients (2 rows: 1 test)
    data_spec(name="synthetic_iid", dim=3, classes=3, samples=DistSpec(dist="constant",
                                                                      value=20.0)),
    data_spec(name="synthetic", max_samples=60, test_fraction=0.0),
    data_spec(name="synthetic_iid", test_fraction=0.5),           # shared W, b; many sizes
    data_spec(name="synthetic", dim=5, classes=2,                 # city_scale's: one size
             samples=DistSpec(dist="constant", value=20.0)),
]


@pytest.mark.parametrize("way", ["bulk", "reseeded", "one_pcg64_each"])
@pytest.mark.parametrize("spec", SPECS, ids=["lognormal", "tiny", "iid", "capped", "iid_sizes", "one_size"])
def test_bulk_generation_equals_the_per_client_recipe(spec, way, monkeypatch):
    """bulk: numpy's C fill per stream and shuffles on arrays (data/shuffles.py); reseeded:
    one generator reseeded in place per stream, its own draw and shuffle; one_pcg64_each: a
    PCG64 per stream."""
    assert streams.reseeder() is not None          # this numpy's PCG64 layout is the known one
    assert streams.normal_fill() is not None and shuffles.bulk_ok()      # and its C fill
    if way != "bulk":
        monkeypatch.setattr(streams, "_FILL", [None])
        monkeypatch.setattr(shuffles, "_BULK_OK", [False])
    monkeypatch.setattr(streams, "_LAYOUT_OK", [way != "one_pcg64_each"])
    same(synthetic.generate(spec, 40, seed=3), eager(spec, 40, seed=3))
    monkeypatch.setattr(synthetic, "CHUNK_DRAWS", 50)          # many small blocks, and
    same(synthetic.generate(spec, 40, seed=3), eager(spec, 40, seed=3))  # blocks of one client


def test_layout_has_the_generated_shapes_and_no_rows():
    spec = SPECS[1]
    data, shape = synthetic.generate(spec, 30, seed=2), synthetic.layout(spec, 30, seed=2)
    for key in ("offsets", "test_offsets"):
        assert getattr(shape, key).tobytes() == getattr(data, key).tobytes()
    for key in ("x", "y", "x_test", "y_test"):
        got, want = getattr(shape, key), getattr(data, key)
        assert got.shape == want.shape and got.dtype == want.dtype
        assert got.strides[0] == 0                               # no memory per row
    assert (shape.dim, shape.out_dim, shape.n_classes) == (7, 4, 4)


def test_validate_of_200k_clients_draws_no_client_data(tmp_path, monkeypatch):
    """`hierfl validate`'s checks at 200,000 clients: counts and shapes, not one client's rows
    (no per-client stream is made), in seconds."""
    import time

    import yaml

    from hierfl.scenario.load import load
    from hierfl.scenario.checks import check_world

    made = []
    monkeypatch.setattr(synthetic, "normals", lambda *a: made.append(a))
    monkeypatch.setattr(synthetic, "permutations", lambda *a: made.append(a))
    monkeypatch.setattr(synthetic, "generate", lambda *a: made.append(a))
    real_rng = seeding.rng

    def rng(seed, purpose, *ids):
        if purpose.startswith("data/") and ids:
            made.append((purpose, ids))
        return real_rng(seed, purpose, *ids)
    monkeypatch.setattr(seeding, "rng", rng)
    doc = {"name": "big", "seed": 1, "topology": {
        "tiers": [{"name": "district", "count": 4}, {"name": "edge", "count": 200}],
        "clients": {"count": 200_000, "compute_flops": 1e9}},
        "data": {"name": "synthetic", "dim": 5, "classes": 2, "samples": 20},
        "model": {"name": "logreg"}, "train": {"clients_per_round": 100},
        "algorithms": [{"name": "fedavg"}]}
    (tmp_path / "big.yaml").write_text(yaml.safe_dump(doc))
    sc = load(str(tmp_path / "big.yaml"), out=str(tmp_path / "out"))
    t0 = time.process_time()
    facts = check_world(sc)
    assert time.process_time() - t0 < 30                    # ~0.5 s alone on this machine
    assert made == []                                        # no client's stream drawn
    assert facts.topo.n_clients == 200_000 and facts.n_params == 12
    assert len(facts.data.x) == 200_000 * 16 and len(facts.data.x_test) == 200_000 * 4
    assert facts.data.x.strides[0] == 0 and facts.data.y_test.strides[0] == 0


def test_pcg64_outputs_on_arrays_are_random_raw():
    words = streams.seed_words(11, "raw", np.array([0, 5, 2**32 - 1, 77]))
    out = pcg64.outputs(pcg64.pcg64_states(words), 9)
    for k, row in enumerate(words):
        assert out[:, k].tobytes() == np.random.PCG64(streams._Words(row)).random_raw(9).tobytes()


@pytest.mark.parametrize("cap", [None, 3], ids=["bulk", "most_left_to_their_generators"])
def test_bulk_permutations_are_numpy_permutations(cap, monkeypatch):
    """Every size (0, 1, 2, ..., past SMALL, lognormal), each stream's permutation(n) of its own
    generator; with the outputs capped at 3, streams left unfinished are redone one by one."""
    assert shuffles.bulk_ok()       # checked (and cached) before the cap: the cap tests _bulk's leftovers
    if cap is not None:
        monkeypatch.setattr(shuffles, "MAX_OUTPUTS", cap)
    rs = np.random.default_rng(5)
    sizes = np.concatenate([np.arange(shuffles.SMALL + 5), np.full(300, 20),
                            rs.lognormal(4, 2, 60).astype(np.int64) + 50])
    ids = rs.choice(10**6, len(sizes), replace=False)
    perm = shuffles.permutations(3, "data/split", ids, sizes)
    start = 0
    for k, n in zip(ids.tolist(), sizes.tolist()):
        want = seeding.rng(3, "data/split", k).permutation(n)
        assert perm[start:start + n].tobytes() == want.tobytes(), (k, n)
        start += n
    assert start == len(perm)


def test_normals_fill_each_stream_s_span_and_refuse_bad_bounds():
    ids = np.array([4, 0, 9, 2])
    bounds = np.array([0, 3, 3, 10, 11])                # widths 3, 0, 7, 1
    out = np.full(12, 99.0)
    streams.normals(8, "n", ids, out, bounds)
    for k, a, b in zip(ids.tolist(), bounds[:-1], bounds[1:]):
        assert out[a:b].tobytes() == seeding.rng(8, "n", k).standard_normal(b - a).tobytes()
    assert out[11] == 99.0                              # past the last span: untouched
    for bad in (np.array([0, 3, 2, 10, 11]), np.array([0, 3, 3, 10, 13]), np.array([0, 3])):
        with pytest.raises(ValueError):
            streams.normals(8, "n", ids, out, bad)
    with pytest.raises(ValueError):
        streams.normals(8, "n", ids, out.astype(np.float32), bounds)


def test_seed_words_of_no_ids_is_empty_for_one_and_many_words():
    """A part with no clients (a shuffle group, a round's empty upload block) asks for the
    words of no ids: (0, 4), whether its keys have one word or several."""
    from hierfl.data import streams

    for ids in (np.zeros(0, np.int64), np.zeros((0, 3), np.int64)):
        got = streams.seed_words(7, "x", ids)
        assert got.shape == (0, 4) and got.dtype == np.uint64
    several = streams.seed_words(7, "x", np.array([[1, 2, 3]]))
    assert several.tobytes() == np.random.SeedSequence(
        [*streams.seeding.key_prefix(7, "x"), 1, 2, 3]).generate_state(4, np.uint64).tobytes()


def test_no_streams_draw_nothing_and_a_read_only_out_is_refused():
    """normals and permutations of no ids are empty; normals never writes through ctypes into an
    array numpy holds read-only."""
    out = np.zeros(4)
    streams.normals(1, "x", np.zeros(0, np.int64), out, np.zeros(1, np.int64))
    assert not out.any()
    assert shuffles.permutations(1, "x", np.zeros(0, np.int64), np.zeros(0, np.int64)).size == 0
    out.flags.writeable = False
    with pytest.raises(ValueError, match="writeable"):
        streams.normals(1, "x", np.array([3]), out, np.array([0, 4]))
    assert not out.any()
