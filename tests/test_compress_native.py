"""The upload codecs in C (hierfl/compress/native.py, kernels.c) against the torch path: the same
bits for every kind they take (topk, randk, qsgd, sign), with and without error feedback, a
reference or not, one tensor or two stacked, silent rows, over several rounds (residuals carried),
with the AVX2 paths on and off. Where a C compiler is here the kernels must be built."""
from __future__ import annotations

import shutil

import numpy as np
import pytest
import torch

from hierfl.compress import native
from hierfl.compress.layer import Compressor
from hierfl.compress.spec import CodecSpec, CompressSpec

BUILT = native.available()

CODECS = [
    ("topk", {"ratio": 0.01}), ("topk", {"k": 1}), ("topk", {"k": 40}),
    ("topk", {"k": 200}),                       # above the sorted top k: the quickselect
    ("topk", {"k": 610}),                       # every entry
    ("randk", {"ratio": 0.1}), ("randk", {"ratio": 0.7}),     # 0.7: the left-out drawn
    ("randk", {"k": 610}),
    ("qsgd", {"levels": 4}), ("qsgd", {"levels": 1}), ("qsgd", {"levels": 2 ** 24}),
    ("sign", {}),
]


def _bits(t: torch.Tensor) -> np.ndarray:
    return t.contiguous().view(torch.int32).numpy()


def _inputs(seed: int, blocks: int, p: int = 610, n: int = 37):
    g = torch.Generator().manual_seed(seed)
    xs = [torch.randn(n, p, generator=g) * torch.rand(n, 1, generator=g) * 10
          for _ in range(blocks)]
    xs[0][3] = 0.0                             # a silent-looking row; -0.0 and tiny values too
    xs[0][5, ::7] = -0.0
    xs[-1][6, :50] = 1e-41
    xs[-1][7] *= 1e18
    xs[0][8] = torch.arange(p, dtype=torch.float32) * 1e-3
    xs[0][8, ::8] += 100.0          # one lane holds the large ones: AVX2 topk's loose bound
    return xs


def _run(kind, kw, ef, blocks, as_is, silent, on):
    spec = CompressSpec(up=CodecSpec(kind=kind, error_feedback=ef, **kw))
    c = Compressor(spec, 11, 200, 610, blocks, tuple(range(blocks)) if as_is else ())
    start = torch.randn(610, generator=torch.Generator().manual_seed(99))
    outs = []
    old = native.ENABLED
    native.ENABLED = on
    try:
        for t in range(3):
            clients = np.sort(np.random.default_rng(t).choice(200, 37, replace=False))
            quiet = None
            if silent:
                quiet = np.zeros(37, bool)
                quiet[::4] = True
            sent = c.uploads(t, 0, clients, start, tuple(_inputs(t, blocks)), 0, silent=quiet)
            outs.append(sent)
    finally:
        native.ENABLED = old
    return outs, c.residual


def _same(a, b):
    (outs_a, res_a), (outs_b, res_b) = a, b
    for sa, sb in zip(outs_a, outs_b):
        assert len(sa.tensors) == len(sb.tensors)
        for x, y in zip(sa.tensors, sb.tensors):
            np.testing.assert_array_equal(_bits(x), _bits(y))
        np.testing.assert_array_equal(sa.bytes, sb.bytes)
        assert sa.wire == sb.wire
    assert res_a.keys() == res_b.keys()
    for key in res_a:
        np.testing.assert_array_equal(_bits(res_a[key]), _bits(res_b[key]))


def test_kernels_are_built_where_a_compiler_is():
    if not native.ENABLED:
        pytest.skip("HIERFL_NATIVE=0")
    if shutil.which("cc") is None and shutil.which("gcc") is None:
        pytest.skip("no C compiler: pip install leaves the kernels out")
    assert native.library_path() is not None, (
        "a C compiler is here but the C codecs were not built: `.venv/bin/pip install -v -e .` "
        "shows why (HIERFL_NATIVE=0 runs the torch path, the same numbers, slower)")
    assert BUILT


@pytest.mark.skipif(not BUILT, reason="the C kernels are not built")
@pytest.mark.parametrize("kind,kw", CODECS, ids=lambda v: str(v))
@pytest.mark.parametrize("ef,blocks,as_is,silent", [
    (False, 1, False, False), (True, 1, False, False), (True, 2, True, True),
    (False, 2, False, False), (True, 2, False, False)])
def test_kernels_give_the_torch_paths_bits(kind, kw, ef, blocks, as_is, silent):
    torch_path = _run(kind, kw, ef, blocks, as_is, silent, on=False)
    for simd in (True, False):
        native.simd(simd)
        try:
            _same(_run(kind, kw, ef, blocks, as_is, silent, on=True), torch_path)
        finally:
            native.simd(True)


@pytest.mark.skipif(not BUILT, reason="the C kernels are not built")
def test_kernels_take_ordinary_rows_and_leave_ties_to_torch():
    """The fast path runs on ordinary messages (it is not silently skipped), and a topk row
    that ties for the last place (zeros) is left whole to the torch path, which writes the
    residuals itself: the same bits either way."""
    spec = CodecSpec(kind="topk", ratio=0.01)
    x = torch.randn(8, 610)
    senders = np.arange(8)
    assert native.code(spec, None, [x], None, None, None, senders, None) is not None
    x[2] = 0.0
    assert native.code(spec, None, [x], None, None, None, senders, None) is None
    for kind in ("qsgd", "sign", "randk"):
        codec = CodecSpec(kind=kind, levels=4 if kind == "qsgd" else None,
                          ratio=0.1 if kind == "randk" else None)
        assert native.code(codec, x, [x], np.arange(8, dtype=np.uint32), None, None, senders,
                           None) is not None

    def tied(on):
        spec2 = CompressSpec(up=CodecSpec(kind="topk", ratio=0.01, error_feedback=True))
        c = Compressor(spec2, 3, 8, 610, 1)
        old, native.ENABLED = native.ENABLED, on
        try:
            sent = [c.uploads(t, 0, senders, torch.zeros(610), (x * (t + 1),), 0)
                    for t in range(2)]
        finally:
            native.ENABLED = old
        return sent, c.residual

    _same(tied(True), tied(False))


@pytest.mark.skipif(not BUILT, reason="the C kernels are not built")
@pytest.mark.parametrize("ef,blocks,as_is", [(True, 2, False), (True, 1, True), (False, 2, False),
                                             (False, 1, False)])
def test_the_message_in_c_is_torchs(ef, blocks, as_is):
    spec = CompressSpec(up=CodecSpec(kind="sign", error_feedback=ef))
    c = Compressor(spec, 5, 200, 610, blocks)
    for table in c.residual.values():
        table.copy_(torch.randn(200, 610))
    xs = _inputs(4, blocks)
    ref = None if as_is else torch.randn(610)
    clients = np.sort(np.random.default_rng(1).choice(200, 37, replace=False))
    res = list(c.residual.values()) or None
    want = c._message(xs, ref, res, clients).clone()
    absolute = torch.empty(blocks * 37, 610)
    got = native.message(xs, ref, res, clients, torch.empty(blocks * 37, 610), absolute)
    np.testing.assert_array_equal(_bits(got), _bits(want))
    np.testing.assert_array_equal(_bits(absolute), _bits(want.abs()))


@pytest.mark.skipif(not BUILT, reason="the C kernels are not built")
def test_other_dtypes_take_the_torch_path():
    spec = CodecSpec(kind="sign")
    x = torch.randn(4, 50, dtype=torch.float64)
    assert native.code(spec, x, [x], None, None, None, np.arange(4), None) is None


@pytest.mark.skipif(not BUILT, reason="the C kernels are not built")
def test_sign_scales_are_torchs_for_one_client_and_two_tensors():
    """sign's scale is torch's mean |x| of the stacked message: a (1, P) block alone is reduced
    in another order once P is large (torch's parallel reduction), so the kernels reduce the
    message as the torch path stacks it."""
    threads = torch.get_num_threads()
    torch.set_num_threads(2)
    try:
        for seed in range(4):
            g = torch.Generator().manual_seed(seed)
            xs = tuple(torch.randn(1, 70_000, generator=g) * 3 for _ in range(2))

            def sent(on):
                c = Compressor(CompressSpec(up=CodecSpec(kind="sign")), 1, 4, 70_000, 2, (0, 1))
                old, native.ENABLED = native.ENABLED, on
                try:
                    return c.uploads(0, 0, np.array([2]), torch.zeros(70_000), xs, 0)
                finally:
                    native.ENABLED = old

            for x, y in zip(sent(True).tensors, sent(False).tensors):
                np.testing.assert_array_equal(_bits(x), _bits(y))
    finally:
        torch.set_num_threads(threads)


@pytest.mark.skipif(not BUILT, reason="the C kernels are not built")
@pytest.mark.parametrize("p", [9, 10, 11, 12, 13, 17])
def test_topk_rows_shorter_than_the_lanes_are_coded(p):
    """AVX2's lane values (8 ceil(k / 8) of them) may outnumber a short row's entries: its
    sorted top k lies after them, and ordinary rows are coded, not sent to torch."""
    x = torch.randn(6, p, generator=torch.Generator().manual_seed(p))
    for k in range(1, p + 1):
        out = native.code(CodecSpec(kind="topk", k=k), None, [x], None, None, None,
                          np.arange(6), None)
        assert out is not None, k
        want = torch.zeros_like(x).scatter_(1, x.abs().topk(k, dim=1).indices,
                                            x.gather(1, x.abs().topk(k, dim=1).indices))
        np.testing.assert_array_equal(_bits(out), _bits(want))


@pytest.mark.skipif(not BUILT, reason="the C kernels are not built")
def test_a_sender_twice_with_residuals_is_left_to_torch():
    """The kernels write each residual row as they go: a sender twice in one call would read
    its own new row, so such a call takes the torch path (the engine never makes one)."""
    tables = [torch.randn(4, 50)]
    x = torch.randn(2, 50)
    for kind in ("topk", "randk"):
        spec = CodecSpec(kind=kind, ratio=0.1, error_feedback=True)
        keys = np.array([7], np.uint32)
        assert native.code(spec, None, [x], keys, None, tables, np.array([2, 2]), None) is None
        assert native.code(spec, None, [x], keys, None, tables, np.array([2, 3]), None) \
            is not None


@pytest.mark.skipif(not BUILT, reason="the C kernels are not built")
def test_whole_runs_are_the_same_bytes_with_and_without_the_kernels(tmp_path):
    """Every output file of compressed runs — asynchronous FedBuff (uploads coded a client at a
    time), a hierarchical FedAsync, SCAFFOLD's two tensors with error feedback, silent and late
    clients under a deadline — is the same bytes with the C kernels and with the torch path."""
    import yaml

    from hierfl.run import run_scenario
    from hierfl.scenario.load import load

    doc = {"name": "native", "seed": 3,
           "topology": {"edges": {"count": 2, "link": {"latency_s": 0.01, "bandwidth_Bps": 1e5}},
                        "clients": {"count": 8, "compute_flops": {"dist": "lognormal",
                                                                  "median": 2e6, "sigma": 0.8},
                                    "link": {"latency_s": 0.02, "bandwidth_Bps": 2e4}},
                        "failures": {"crash_p": 0.15}},
           "data": {"name": "synthetic", "samples": {"dist": "uniform", "low": 20, "high": 40},
                    "dim": 12, "classes": 3},
           "model": {"name": "logreg"},
           "train": {"rounds": 6, "clients_per_round": 5,
                     "local": {"steps": 3, "batch_size": 5, "lr": 0.1}},
           "algorithms": [
               {"name": "fedavg", "label": "buff_topk", "round": {"policy": "fedbuff", "k": 2},
                "compress": {"up": {"kind": "topk", "ratio": 0.1, "error_feedback": True}}},
               {"name": "hierfavg", "label": "async_qsgd", "edge_rounds": 2,
                "round": {"policy": "fedasync", "alpha": 0.6},
                "compress": {"up": {"kind": "qsgd", "levels": 4}, "edge_up": {"kind": "int8"}}},
               {"name": "scaffold", "label": "scaffold_randk",
                "compress": {"up": {"kind": "randk", "ratio": 0.3, "error_feedback": True}}},
               {"name": "fedavg", "label": "deadline_sign", "local": {"steps": 40},
                "round": {"policy": "deadline_partial", "deadline_s": 0.1},
                "compress": {"up": {"kind": "sign", "error_feedback": True}}}]}
    path = tmp_path / "s.yaml"
    path.write_text(yaml.safe_dump(doc))
    files = {}
    for on in (True, False):
        old, native.ENABLED = native.ENABLED, on
        try:
            out = tmp_path / f"out_{on}"
            run_scenario(load(str(path), out=str(out)), progress=False)
        finally:
            native.ENABLED = old
        files[on] = {p.relative_to(out): p.read_bytes() for p in sorted(out.rglob("*"))
                     if p.suffix in (".csv", ".npz")}
    assert files[True].keys() == files[False].keys() and len(files[True]) >= 16
    for name in files[True]:
        assert files[True][name] == files[False][name], name
