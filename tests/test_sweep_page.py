"""The sweep's page from hand-written point folders (no runs): sweep.html is self-contained
(every <img> an embedded PNG that decodes; every PNG/SVG link a file next to it) and renders in
headless Chromium; regression sweeps plot and tabulate the test MSE; byte counts are shown in
decimal units (never 6.442e+05); "mean ± std over seeds" only when there are two seeds."""
from __future__ import annotations

import base64
import html.parser
import os
import re
import shutil
import subprocess

import pytest

from hierfl import sweep as sw


def _point(out, name: str, values, labels: dict[str, list[tuple]], score: str) -> sw.Point:
    """A finished point: per label, rows (round, time, bytes_up, score, loss)."""
    folder = out / name
    for label, rows in labels.items():
        (folder / label).mkdir(parents=True)
        (folder / label / "metrics.csv").write_text(
            f"round,sim_time_s,bytes_up,bytes_down,{score},train_loss\n"
            + "".join(f"{t},{s},{b},{b // 2},{a},{lo}\n" for t, s, b, a, lo in rows))
    (folder / sw.DONE).write_text("{}\n")
    return sw.Point(name, values, "", 1)


def _sweep(tmp_path, score: str, seeds: list[int], target: float | None) -> sw.Sweep:
    out = tmp_path / "out"
    points = []
    for k in (1, 2, 4):
        for seed in seeds:
            d = 0.01 * seed
            rows = {"fedavg": [(0, 0.0, 0, 0.9 - d, 2.0), (1, 1.5, 322100, 0.5 - d, 1.0),
                               (2, 3.0, 644200, 0.3 - d, 0.5)],
                    "hierfavg": [(0, 0.0, 0, 0.9 - d, 2.0), (1, 1.0 * k, 200000 * k, 0.4, 0.8),
                                 (2, 2.0 * k, 400000 * k, 0.2 / k, 0.4)]}
            if score == "test_acc":
                rows = {lb: [(t, s, b, 1 - a, lo) for t, s, b, a, lo in r]
                        for lb, r in rows.items()}
            values = (("algorithms[1].edge_rounds", k),) + (
                (("seed", seed),) if len(seeds) > 1 else ())
            name = f"edge_rounds={k}" + (f",seed={seed}" if len(seeds) > 1 else "")
            points.append(_point(out, name, values, rows, score))
    keys = ("algorithms[1].edge_rounds",) + (("seed",) if len(seeds) > 1 else ())
    return sw.Sweep(str(tmp_path / "sw.yaml"), keys, tuple(points), str(out), target,
                    ("fedavg", "hierfavg"))


class _Imgs(html.parser.HTMLParser):
    def __init__(self):
        super().__init__()
        self.imgs: list[str] = []
        self.links: list[str] = []

    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        if tag == "img":
            self.imgs.append(a.get("src") or "")
        if tag == "a" and a.get("href", "").endswith((".png", ".svg", ".csv", ".html")):
            self.links.append(a["href"])


def _check_page(out) -> int:
    """Every <img src> decodes to a PNG (or is a file that exists); every file link exists."""
    p = _Imgs()
    p.feed((out / "sweep.html").read_text())
    assert p.imgs
    for src in p.imgs:
        if src.startswith("data:image/png;base64,"):
            raw = base64.b64decode(src.split(",", 1)[1], validate=True)
            assert raw[:8] == b"\x89PNG\r\n\x1a\n" and len(raw) > 1000
        else:
            assert (out / src).is_file(), src
    for href in p.links:
        assert (out / href).is_file(), href
    return len(p.imgs)


def test_regression_sweep_plots_and_tabulates_the_test_mse(tmp_path):
    s = _sweep(tmp_path, "test_mse", [0], None)
    sw.summarize(s)
    out = tmp_path / "out"
    assert (out / "sweep_test_mse.png").is_file() and not (out / "sweep_test_acc.png").exists()
    md = (out / "sweep.md").read_text()
    assert "final test MSE" in md and "Target test MSE (lower is better)" in md
    # target = 1.1 x the lowest final MSE (0.05, hierfavg at edge_rounds=4) = 0.055;
    # only that point reaches it, at round 2, after 8 s and 2.4 MB (1.6 MB up + 0.8 MB down)
    assert "| 4 | hierfavg | 1 | 0.050 | 8.0 | 2.4 MB | 2.0 | 1/1 |" in md
    assert "| 1 | fedavg | 1 | 0.300 | — | — | — | 0/1 |" in md
    assert not re.search(r"\de[+-]\d", md)            # no 6.442e+05 anywhere
    assert "mean ± " not in md and "over seeds" not in md   # one seed: no spread claimed
    assert _check_page(out) == 3
    assert "<title>hierfl sweep sw.yaml</title>" in (out / "sweep.html").read_text()


def test_two_seeds_say_mean_and_std_and_old_figures_go(tmp_path):
    s = _sweep(tmp_path, "test_acc", [0, 1], 0.65)
    out = tmp_path / "out"

    (out / "sweep_accuracy.png").write_bytes(b"stale")          # an earlier version's figure
    sw.summarize(s)
    assert not (out / "sweep_accuracy.png").exists() and (out / "sweep_test_acc.png").is_file()
    md = (out / "sweep.md").read_text()
    assert "mean ± sample standard deviation (ddof=1) over seeds" in md
    # fedavg's finals 0.7 and 0.71: mean 0.705, sample std 0.00707 -> "0.705 ± 0.007"
    assert "| 1 | fedavg | 2 | 0.705 ± 0.007 |" in md
    assert _check_page(out) == 3


CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")


@pytest.mark.skipif(CHROMIUM is None, reason="chromium is not installed")
def test_sweep_html_renders_in_headless_chromium(tmp_path):
    s = _sweep(tmp_path, "test_acc", [0, 1], 0.65)
    sw.summarize(s)
    page = tmp_path / "out" / "sweep.html"
    cmd = [CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", "--no-first-run",
           "--disable-background-networking", "--disable-component-update", "--disable-sync",
           f"--user-data-dir={tmp_path / 'profile'}", "--dump-dom", page.as_uri()]
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
    assert p.returncode == 0, p.stderr[-2000:]
    m = re.search(r'<p id="render-check"([^>]*)>', p.stdout)
    assert m, "no render check in the dumped DOM"
    check = dict(re.findall(r'(data-[a-z]+)="([^"]*)"', m.group(1)))
    assert check == {"data-status": "ok", "data-images": "3", "data-loaded": "3",
                     "data-errors": "0", "data-small": "0"}, check
