"""The demo end to end, through the real command line: `hierfl run scenarios/quickstart.yaml
--rounds 3 --out DIR` writes metrics with the contract columns, a report whose table names both
algorithms, and figures that are real pictures with both algorithms' curves on them."""
from __future__ import annotations

import csv
import os
import re
import subprocess
import sys

import matplotlib.colors
import matplotlib.image
import numpy as np
import pytest

from hierfl.report.plots import colour

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
CONTRACT = ["round", "sim_time_s", "bytes_up", "bytes_down", "bytes_client_edge",
            "bytes_edge_cloud", "train_loss", "test_acc"]
ALGOS = ("fedavg", "hierfavg")


@pytest.fixture(scope="module")
def out(tmp_path_factory):
    d = tmp_path_factory.mktemp("demo") / "quick"
    proc = subprocess.run([sys.executable, "-m", "hierfl", "run", "scenarios/quickstart.yaml",
                           "--rounds", "3", "--out", str(d)], cwd=REPO, capture_output=True,
                          text=True, timeout=600, env={**os.environ, "OMP_NUM_THREADS": "1"})
    assert proc.returncode == 0, proc.stderr
    assert "Traceback" not in proc.stderr
    assert str(d / "report.md") in proc.stdout          # it says where the report is
    return d


def test_metrics_have_rounds_0_to_3_and_the_contract_columns(out):
    for algo in ALGOS:
        with open(out / algo / "metrics.csv", newline="") as fh:
            rows = list(csv.DictReader(fh))
        assert set(CONTRACT) <= set(rows[0])
        assert [int(r["round"]) for r in rows] == [0, 1, 2, 3]
        num = {c: np.array([float(r[c]) for r in rows]) for c in CONTRACT}
        assert num["sim_time_s"][0] == 0 and np.all(np.diff(num["sim_time_s"]) > 0)
        for c in ("bytes_up", "bytes_down", "bytes_client_edge", "bytes_edge_cloud"):
            assert num[c][0] == 0 and np.all(np.diff(num[c]) > 0), c     # cumulative
        np.testing.assert_allclose(num["bytes_up"] + num["bytes_down"],
                                   num["bytes_client_edge"] + num["bytes_edge_cloud"])
        assert np.all(np.isfinite(num["train_loss"]))
        assert np.all((num["test_acc"] >= 0) & (num["test_acc"] <= 1))
        assert num["train_loss"][3] < num["train_loss"][0]               # it learned
        params = np.load(out / algo / "final_params.npz")["global"]
        assert params.ndim == 1 and params.shape == (610,)               # 60 x 10 + 10 (logreg)


def test_report_table_names_both_algorithms(out):
    text = (out / "report.md").read_text()
    rows = [ln for ln in text.splitlines() if ln.startswith("| ")]
    for algo in ALGOS:
        assert any(re.match(rf"\|\s*{algo}\s*\|\s*0\.\d+", ln) for ln in rows), algo


def test_figures_are_real_pictures(out):
    text = (out / "report.md").read_text()
    pngs = re.findall(r"!\[[^\]]*\]\(([^)]+\.png)\)", text)
    for need in ("accuracy_vs_time.png", "accuracy_vs_bytes.png", "loss_vs_round.png"):
        assert need in pngs
    for name in pngs:
        path = out / name
        assert path.stat().st_size > 5000, name
        img = matplotlib.image.imread(str(path))
        assert img.ndim == 3 and img.shape[0] > 200 and img.shape[1] > 200, name
        rgb = img[..., :3].reshape(-1, 3)
        assert rgb.std(0).max() > 0.05, name                          # not one flat colour
        q = (rgb[::5] * 255).astype(np.int64)
        assert len(np.unique(q[:, 0] * 65536 + q[:, 1] * 256 + q[:, 2])) > 20, name
    # both algorithms' curves are on the accuracy-vs-time axes: pixels of both colours
    rgb = matplotlib.image.imread(str(out / "accuracy_vs_time.png"))[..., :3]
    for i in range(2):
        c = np.array(matplotlib.colors.to_rgb(colour(i)))
        assert (np.abs(rgb - c).max(-1) < 0.03).sum() > 50, colour(i)
