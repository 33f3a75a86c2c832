"""The report: regenerated from saved outputs, tidy metrics equal to metrics.csv, seed pooling
(mean and sample std checked against numpy), the round timeline from a hand-written trace, and
report.html rendered by a real headless Chromium (every figure decoded, no console message)."""
from __future__ import annotations

import base64
import csv
import json
import math
import os
import re
import shutil
import subprocess

import numpy as np
import pytest

from hierfl.cli import main
from hierfl.report import timeline
from hierfl.outputs import load_run
from hierfl.report.html import render_html
from hierfl.report.markdown import render_md
from hierfl.report.model import NO_NOTES, Figure, Report, sections
from hierfl.report.stats import groups_of, mean_std
from hierfl.report.tables import num, pm, size

SCENARIO = """
name: tiny
seed: 0
topology:
  edges: {count: 2, link: {latency_s: 0.01, bandwidth_Bps: 1.0e+6}}
  clients:
    count: 4
    compute_flops: {dist: uniform, low: 5.0e+6, high: 2.0e+7}
    link: {latency_s: 0.02, bandwidth_Bps: 1.0e+5}
data: {name: synthetic, dim: 5, classes: 3, samples: {dist: constant, value: 30}}
model: {name: logreg}
train:
  rounds: 2
  clients_per_round: all
  local: {steps: 6, batch_size: 5, lr: 0.05}
stragglers: {fraction: 0.5}
algorithms:
  - {name: fedavg}
  - {name: hierfavg, edge_rounds: 2}
"""
ALGS = ("fedavg", "hierfavg")
TARGET = 0.4


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    """Seed 0 through the CLI (run writes the summary and the report), seed 1 through the API
    (the same calls without the figures, to keep the test fast)."""
    from hierfl.run import run_scenario
    from hierfl.scenario.load import load

    root = tmp_path_factory.mktemp("report")
    scen = root / "tiny.yaml"
    scen.write_text(SCENARIO)
    s0, s1 = root / "s0", root / "s1"
    assert main(["run", str(scen), "--out", str(s0), "--quiet"]) == 0
    sc = load(str(scen), seed=1, out=str(s1))
    run_scenario(sc, progress=False)
    return root, s0, s1


def metrics(folder) -> list[dict[str, str]]:
    with open(os.path.join(folder, "metrics.csv"), newline="") as fh:
        return list(csv.DictReader(fh))


def md_row(md: str, label: str) -> list[str]:
    for line in md.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if line.startswith("|") and cells[0] == label:
            return cells
    raise AssertionError(f"no table row for {label}")


def first_reaching(rows: list[dict[str, str]], target: float) -> dict[str, str] | None:
    return next((r for r in rows if r["test_acc"] and float(r["test_acc"]) >= target), None)


# ------------------------------------------------------------------------------ set-up record
def test_run_records_its_setup(runs):
    root, s0, _ = runs
    assert (s0 / "scenario.yaml").read_text() == SCENARIO
    s = json.loads((s0 / "summary.json").read_text())
    # 30 samples per client, test_fraction 0.2: round(0.2 * 30) = 6 test rows each
    assert s["data"]["train_counts"] == [24, 24, 24, 24]
    assert s["data"]["test_counts"] == [6, 6, 6, 6]
    assert [sum(r) for r in s["data"]["label_counts"]] == [24, 24, 24, 24]
    topo = s["topology"]
    assert topo["client_edge"] == ["edge0", "edge1", "edge0", "edge1"]   # round robin
    nodes = topo["nodes"]
    cl = [i for i, r in enumerate(nodes["role"]) if r == "client"]
    assert [nodes["name"][i] for i in cl] == ["client0", "client1", "client2", "client3"]
    assert all(5e6 <= nodes["flops"][i] <= 2e7 for i in cl)
    assert {nodes["latency_up_s"][i] for i in cl} == {0.02}
    assert {nodes["up_Bps"][i] for i in cl} == {1e5}
    assert s["scenario"]["seed"] == 0 and s["scenario"]["train"]["rounds"] == 2


# ------------------------------------------------------------------------------ regeneration
def test_report_regenerates_from_saved_outputs(runs):
    _, s0, _ = runs
    for name in os.listdir(s0):
        if name.endswith((".png", ".svg", ".md", ".html")) or name in ("metrics_all.csv",
                                                                       "table.csv"):
            os.remove(s0 / name)
    assert main(["report", str(s0), "--target", str(TARGET)]) == 0
    md = (s0 / "report.md").read_text()
    for alg in ALGS:
        rows = metrics(s0 / alg)
        cells = md_row(md, alg)
        final = [float(r["test_acc"]) for r in rows if r["test_acc"]][-1]
        assert cells[1] == f"{final:.3f}"
        assert cells[3] == f"{float(rows[-1]['sim_time_s']):.1f}"
        hit = first_reaching(rows, TARGET)
        assert cells[6] == (f"{float(hit['sim_time_s']):.1f}" if hit else "not reached")
        assert cells[8] == (str(int(hit["round"])) if hit else "not reached")
    html = (s0 / "report.html").read_text()
    pngs = sorted(n for n in os.listdir(s0) if n.endswith(".png"))
    assert all(os.path.exists(s0 / (n[:-4] + ".svg")) for n in pngs)
    # every figure written is embedded in the HTML, byte for byte, and nothing is fetched
    embedded = re.findall(r'<img src="data:image/png;base64,([^"]+)"', html)
    assert len(embedded) == len(pngs) == html.count("<img ")
    assert sorted(base64.b64decode(e) for e in embedded) == sorted(
        (s0 / n).read_bytes() for n in pngs)
    assert not re.search(r'(src|href)="(https?:)?//', html)
    # fedavg drops its stragglers: the notes say how many client-rounds were not aggregated
    failed = sum(int(r["failed"]) for r in metrics(s0 / "fedavg"))
    assert failed > 0
    assert f"fedavg: {failed} selected client-rounds were not aggregated" in md


def test_metrics_all_matches_metrics_csv(runs):
    _, s0, _ = runs
    with open(s0 / "metrics_all.csv", newline="") as fh:
        tidy = list(csv.DictReader(fh))
    assert list(tidy[0]) == ["algorithm", "seed", "round", "metric", "value"]
    got = {(r["algorithm"], int(r["round"]), r["metric"]): float(r["value"]) for r in tidy}
    assert len(got) == len(tidy)                      # no duplicates
    want = {}
    for alg in ALGS:
        for r in metrics(s0 / alg):
            for k, v in r.items():
                if k != "round" and v != "":
                    want[(alg, int(r["round"]), k)] = float(v)
    assert got == want
    assert {r["seed"] for r in tidy} == {"0"}


# ------------------------------------------------------------------------------ compare
def test_compare_refuses_a_folder_given_twice(runs, capsys):
    """Its seeds would be pooled with themselves (seeds "1, 1", a std of 0)."""
    _, s0, s1 = runs
    assert main(["compare", str(s0), str(s1), str(s0) + "/"]) == 2
    err = capsys.readouterr().err
    assert "RUN" in err and f"the same folder as {s0}" in err and "Traceback" not in err


def test_compare_pools_seeds_mean_and_sample_std(runs):
    root, s0, s1 = runs
    out = root / "cmp"
    assert main(["compare", str(s0), str(s1), "--out", str(out), "--target", str(TARGET)]) == 0
    with open(out / "table.csv", newline="") as fh:
        table = {(r["algorithm"], r["metric"]): r for r in csv.DictReader(fh)}
    md = (out / "report.md").read_text()
    for alg in ALGS:
        per_seed = [metrics(s / alg) for s in (s0, s1)]
        finals = np.array([[float(r["test_acc"]) for r in rows if r["test_acc"]][-1]
                           for rows in per_seed])
        row = table[(alg, "final_acc")]
        assert int(row["n"]) == 2
        assert float(row["mean"]) == pytest.approx(finals.mean(), abs=1e-12)
        assert float(row["std"]) == pytest.approx(abs(finals[0] - finals[1]) / math.sqrt(2),
                                                  abs=1e-12)
        cells = md_row(md, alg)
        assert cells[1] == f"{finals.mean():.3f} ± {finals.std(ddof=1):.3f}"
        assert cells[-1] == "0, 1"                     # the seeds column
        times = [float(h["sim_time_s"]) for h in (first_reaching(r, TARGET) for r in per_seed)
                 if h is not None]
        row = table[(alg, "time_to_target_s")]
        assert int(row["count"]) == len(times)
        if times:
            assert float(row["mean"]) == pytest.approx(np.mean(times), abs=1e-12)
        if len(times) > 1:
            assert float(row["std"]) == pytest.approx(np.std(times, ddof=1), abs=1e-12)
        else:                 # the sample std of one value is undefined: an empty cell
            assert row["std"] == ""
    with open(out / "metrics_all.csv", newline="") as fh:
        tidy = list(csv.DictReader(fh))
    assert list(tidy[0])[:2] == ["run", "algorithm"]
    assert {(r["run"], r["algorithm"], r["seed"]) for r in tidy} == {
        (run, alg, seed) for run, seed in (("s0", "0"), ("s1", "1")) for alg in ALGS}


def test_runs_of_different_scenarios_are_not_pooled(runs):
    root, s0, s1 = runs
    other = root / "other"
    shutil.copytree(s1, other)
    s = json.loads((other / "summary.json").read_text())
    s["scenario"]["train"]["local"]["lr"] = 0.5          # a different scenario, not a seed
    (other / "summary.json").write_text(json.dumps(s))
    groups, _ = groups_of([load_run(str(s0)), load_run(str(other))], prefix=True)
    assert [(g.label, g.n) for g in groups] == [
        ("s0/fedavg", 1), ("s0/hierfavg", 1), ("other/fedavg", 1), ("other/hierfavg", 1)]
    pooled, _ = groups_of([load_run(str(s0)), load_run(str(s1))], prefix=True)
    assert [(g.label, g.n, g.seeds) for g in pooled] == [("fedavg", 2, [0, 1]),
                                                         ("hierfavg", 2, [0, 1])]


def test_a_seed_run_twice_counts_once(runs):
    """Two copies of one run (the same scenario, the same seed) are one sample: pooled as two
    they gave "seeds 0, 0" and a std of 0."""
    root, s0, s1 = runs
    again = root / "again"
    shutil.copytree(s0, again)
    groups, notes = groups_of([load_run(str(s0)), load_run(str(again)), load_run(str(s1))],
                              prefix=True)
    assert [(g.label, g.n, g.seeds) for g in groups] == [("fedavg", 2, [0, 1]),
                                                         ("hierfavg", 2, [0, 1])]
    assert any("s0, again are the same scenario with the same seed (0)" in n for n in notes)
    alone, notes = groups_of([load_run(str(s0)), load_run(str(again))], prefix=True)
    assert [(g.label, g.n) for g in alone] == [("s0/fedavg", 1), ("s0/hierfavg", 1)]
    assert not any("differ only by the seed" in n for n in notes)


def test_compare_gives_each_curve_its_own_timeline(runs):
    """Run folders "odd dir" and "odd_dir" gave both timelines one file name: the second
    figure replaced the first under both headings."""
    root, s0, s1 = runs
    spaced, under = root / "odd dir", root / "odd_dir"
    shutil.copytree(s0, spaced)
    shutil.copytree(s1, under)
    s = json.loads((under / "summary.json").read_text())
    s["scenario"]["train"]["local"]["lr"] = 0.5          # not pooled with "odd dir"
    (under / "summary.json").write_text(json.dumps(s))
    out = root / "cmp_names"
    assert main(["compare", str(spaced), str(under), "--out", str(out)]) == 0
    md = (out / "report.md").read_text()
    linked = re.findall(r"\((timeline_[^)]*\.png)\)", md)
    assert len(linked) == 4 and len(set(linked)) == 4, linked
    assert all((out / f).is_file() for f in linked)


def test_runs_whose_topology_files_lie_in_different_folders_are_pooled(runs):
    """A sweep's points are run from their own folders: the topology file's path differs, its
    contents (in summary.json's scenario.topology) do not. Only a different topology splits."""
    root, s0, s1 = runs
    moved = root / "moved"
    shutil.copytree(s1, moved)
    s = json.loads((moved / "summary.json").read_text())
    s["scenario"]["topology_file"] = "/elsewhere/.staging/point.1234/topology.yaml"
    (moved / "summary.json").write_text(json.dumps(s))
    pooled, _ = groups_of([load_run(str(s0)), load_run(str(moved))], prefix=True)
    assert [(g.label, g.n) for g in pooled] == [("fedavg", 2), ("hierfavg", 2)]


def test_a_torn_last_metrics_row_is_not_a_round(runs):
    """A run killed while appending a row leaves a last line without its newline: the report
    reads the rounds before it (it took the torn row for a round, with a numpy warning)."""
    root, s0, _ = runs
    torn = root / "torn"
    shutil.copytree(s0, torn)
    with open(torn / "fedavg" / "metrics.csv", "a") as fh:
        fh.write("99,1.23,45")
    want = {s.label: s.rows for s in load_run(str(s0)).series}
    got = {s.label: s.rows for s in load_run(str(torn)).series}
    assert got == want


def test_report_of_a_folder_without_runs_exits_2(tmp_path, capsys):
    assert main(["report", str(tmp_path)]) == 2
    assert "metrics.csv" in capsys.readouterr().err


# ------------------------------------------------------------------------------ statistics, model
def test_mean_and_sample_std_and_their_cells():
    mu, sd, k = mean_std([1.0, 3.0, math.nan])
    assert (mu, k) == (2.0, 2) and sd == pytest.approx(math.sqrt(2), abs=1e-15)
    mu, sd, k = mean_std([5.0])             # one value: the sample std is undefined
    assert (mu, k) == (5.0, 1) and math.isnan(sd)
    mu, sd, k = mean_std([])
    assert k == 0 and math.isnan(mu) and math.isnan(sd)
    assert pm([1.0, 3.0, math.nan], num) == "2.000 ± 1.414 (2/3)"
    assert pm([5.0], num) == "5.000" and pm([math.nan], num) == "—"
    assert pm([1500.0, 2500.0], size) == "2.0 kB ± 707 B"


def test_markdown_and_html_render_the_same_model(tmp_path):
    png = tmp_path / "f.png"               # a PNG header is all the HTML renderer reads
    png.write_bytes(b"\x89PNG\r\n\x1a\n" + b"\x00\x00\x00\rIHDR" + (300).to_bytes(4, "big")
                    + (200).to_bytes(4, "big"))
    secs = sections()
    rep = Report("t", str(tmp_path), ["intro"], secs, 0.5)
    rep.section("scenario").facts = [("seed", "0")]
    table = rep.section("table")
    table.head, table.rows, table.text = ["algorithm", "final acc"], [["a|b", "0.5"]], "x < y"
    rep.section("curves").figures = [Figure(str(png), "Acc & loss")]
    rep.section("notes").notes, rep.section("notes").empty = [], NO_NOTES
    md, page = render_md(rep), render_html(rep)
    assert [ln for ln in md.splitlines() if ln.startswith("## ")] == [
        "## Scenario", "## Time and bytes to accuracy", "## Accuracy and loss",
        "## Divergence and failures"]                 # empty sections are left out
    for part in ("| seed | 0 |", "| a\\|b | 0.5 |", "\nx < y\n", "### Acc & loss",
                 "![Acc & loss](f.png)", "\n" + NO_NOTES + "\n"):
        assert part in md, part
    assert re.findall(r'<nav>(.*)</nav>', page)[0].count("<a ") == 4
    assert re.findall(r'<h2 id="(\w+)">', page) == ["scenario", "table", "curves", "notes"]
    for part in ("<td>a|b</td>", "<p>x &lt; y Machine-readable:", 'alt="Acc &amp; loss"',
                 'width="192"', f"<li>{NO_NOTES}</li>", "<td>seed</td><td>0</td>"):
        assert part in page, part


# ------------------------------------------------------------------------------ timeline
HAND_TRACE = """time_s,node,kind,peer,value
0.0,cloud,round_start,,1
0.0,cloud,send,edge0,100
1.0,edge0,recv,cloud,100
1.0,edge0,send,client0,100
1.0,edge0,send,client1,100
2.0,client0,recv,edge0,100
2.0,client0,compute_start,,5
2.5,client1,recv,edge0,100
2.5,client1,compute_start,,5
3.0,client0,compute_end,,5
3.0,client0,send,edge0,50
3.5,client1,compute_end,,5
3.5,client1,send,edge0,50
4.0,edge0,recv,client0,50
4.5,edge0,recv,client1,50
4.5,edge0,aggregate,,2
4.5,edge0,send,cloud,50
5.0,edge0,send,cloud,60
5.5,cloud,recv,edge0,50
6.0,cloud,recv,edge0,60
6.0,cloud,aggregate,,1
6.0,cloud,round_end,,1
6.0,cloud,round_start,,2
6.0,cloud,send,edge0,100
7.0,edge0,recv,cloud,100
7.0,edge0,send,client0,100
7.5,cloud,round_end,,2
"""


def test_timeline_of_a_hand_written_round(tmp_path):
    (tmp_path / "trace.csv").write_text(HAND_TRACE)
    tl = timeline.load(str(tmp_path), 1)
    B = timeline.Bar
    assert sorted(tl.bars, key=lambda b: (b.start, b.node, b.kind)) == sorted([
        B("cloud", "upload", 0.0, 1.0, "edge0"), B("edge0", "download", 0.0, 1.0, "cloud"),
        B("edge0", "upload", 1.0, 2.0, "client0"), B("client0", "download", 1.0, 2.0, "edge0"),
        B("edge0", "upload", 1.0, 2.5, "client1"), B("client1", "download", 1.0, 2.5, "edge0"),
        B("client0", "compute", 2.0, 3.0), B("client1", "compute", 2.5, 3.5),
        B("client0", "upload", 3.0, 4.0, "edge0"), B("edge0", "download", 3.0, 4.0, "client0"),
        B("client1", "upload", 3.5, 4.5, "edge0"), B("edge0", "download", 3.5, 4.5, "client1"),
        B("edge0", "upload", 4.5, 5.5, "cloud"), B("cloud", "download", 4.5, 5.5, "edge0"),
        B("edge0", "upload", 5.0, 6.0, "cloud"), B("cloud", "download", 5.0, 6.0, "edge0"),
    ], key=lambda b: (b.start, b.node, b.kind))
    assert (tl.start, tl.end, tl.round) == (0.0, 6.0, 1)
    assert tl.nodes == ["cloud", "edge0", "client0", "client1"]
    assert tl.marks == [(4.5, "edge0"), (6.0, "cloud")]
    assert tl.in_flight == 0
    # edge0 sends during [1, 2.5] and [4.5, 6]: 3 s of 6; client0 computes 1 s of 6
    assert timeline.busy_fraction(tl, "edge0", "upload") == pytest.approx(0.5)
    assert timeline.busy_fraction(tl, "client0", "compute") == pytest.approx(1 / 6)
    # round 2: the edge's send to client0 never arrives before the round ends
    tl2 = timeline.load(str(tmp_path), 2)
    assert tl2.in_flight == 1
    assert B("client0", "download", 7.0, 7.5, "edge0") in tl2.bars
    assert tl2.nodes == ["cloud", "edge0", "client0"] and tl2.clients == {"client0"}
    assert timeline.load(str(tmp_path), 3) is None


# ------------------------------------------------------------------------------ the browser
CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")


def chromium(tmp_path, url: str, *extra: str) -> subprocess.CompletedProcess:
    cmd = [CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu",
           "--disable-background-networking", "--disable-component-update", "--disable-sync",
           "--no-first-run", f"--user-data-dir={tmp_path / 'profile'}", "--enable-logging=stderr",
           "--v=0", *extra, url]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=120)


def render_check(dom: str) -> dict[str, str]:
    m = re.search(r'<p id="render-check"([^>]*)>', dom)
    assert m, "the render-check marker is missing from the dumped DOM"
    return dict(re.findall(r'(data-[a-z]+)="([^"]*)"', m.group(1)))


@pytest.mark.skipif(CHROMIUM is None, reason="chromium is not installed (make test installs it "
                    "with apt-get when run as root)")
def test_report_html_renders_in_headless_chromium(runs, tmp_path):
    _, s0, _ = runs
    page = s0 / "report.html"
    n_img = page.read_text().count("<img ")
    assert n_img >= 10
    p = chromium(tmp_path, page.as_uri(), "--dump-dom")
    assert p.returncode == 0, p.stderr[-2000:]
    check = render_check(p.stdout)
    assert check == {"data-status": "ok", "data-images": str(n_img), "data-loaded": str(n_img),
                     "data-errors": "0", "data-small": "0"}, check
    console = [ln for ln in p.stderr.splitlines() if ":CONSOLE" in ln]
    assert console == []
    shot = tmp_path / "report.png"
    p = chromium(tmp_path, page.as_uri(), "--window-size=1280,2200", f"--screenshot={shot}",
                 "--hide-scrollbars")
    assert p.returncode == 0, p.stderr[-2000:]
    from PIL import Image
    with Image.open(shot) as im:
        assert im.size == (1280, 2200)
        colours = im.convert("RGB").getcolors(maxcolors=1 << 20)
    assert colours is not None and len(colours) > 200      # figures, not a blank page
    # the check is not vacuous: a page with one undecodable figure reports it
    broken = tmp_path / "broken.html"
    broken.write_text(re.sub(r'data:image/png;base64,[^"]+', "data:image/png;base64,AAAA",
                             page.read_text(), count=1))
    bad = render_check(chromium(tmp_path, broken.as_uri(), "--dump-dom").stdout)
    assert bad["data-status"] == "bad" and bad["data-loaded"] == str(n_img - 1)


def test_timeline_figure_stays_the_same_size_at_any_scale(tmp_path):
    """A round over 300 edges with 2 clients each: the figure draws the cloud, the first 24
    aggregators and 40 clients, those under the drawn edges first, and says what it left out;
    its size does not grow with the system (it drew every aggregator: ~1,000 rows at W8)."""
    import matplotlib.image as mpimg

    from hierfl.report.plots.timeline import _rows, timeline_figure
    lines = ["time_s,node,kind,peer,value", "0.0,cloud,round_start,,1"]
    for e in range(300):
        lines.append(f"0.0,cloud,send,edge{e},100")
        lines.append(f"1.0,edge{e},recv,cloud,100")
        for c in (2 * e, 2 * e + 1):
            lines += [f"1.0,edge{e},send,client{c},100", f"2.0,client{c},recv,edge{e},100",
                      f"2.0,client{c},compute_start,,5", f"3.0,client{c},compute_end,,5",
                      f"3.0,client{c},send,edge{e},50", f"4.0,edge{e},recv,client{c},50"]
        lines += [f"4.0,edge{e},aggregate,,2", f"4.0,edge{e},send,cloud,50",
                  f"5.0,cloud,recv,edge{e},50"]
    lines += ["5.0,cloud,aggregate,,1", "5.0,cloud,round_end,,1"]
    (tmp_path / "trace.csv").write_text("\n".join(lines) + "\n")
    tl = timeline.load(str(tmp_path), 1)
    rows, more_aggs, more_clients = _rows(tl, 24, 40)
    assert rows[:25] == ["cloud"] + [f"edge{e}" for e in range(24)]
    assert rows[25:] == [f"client{c}" for c in range(40)]     # under edge0..edge19
    assert (more_aggs, more_clients) == (276, 560)
    wide = mpimg.imread(timeline_figure(tl, "wide", str(tmp_path / "wide.png")))
    tl.nodes = tl.nodes[:25] + [f"client{c}" for c in range(40)]
    few = mpimg.imread(timeline_figure(tl, "few", str(tmp_path / "few.png")))
    assert wide.shape == few.shape


def test_timeline_joins_a_rows_overlapping_bars_when_there_are_many():
    """Above MERGE_FROM bars of a kind each row's overlapping bars are drawn as one polygon
    (an aggregator's row holds one transfer per client), disjoint ones stay apart."""
    from hierfl.report.plots.timeline import _merged
    items = [(0.0, 2.0, 1.0, 0.4), (1.0, 3.0, 1.0, 0.4), (5.0, 1.0, 1.0, 0.4),
             (4.5, 0.2, 2.0, 0.8), (0.5, 0.5, 1.0, 0.4), (6.0, 1.0, 1.0, 0.4)]
    got = _merged(items)
    want = [(0.0, 4.0, 1.0, 0.4), (5.0, 2.0, 1.0, 0.4), (4.5, 0.2, 2.0, 0.8)]
    assert len(got) == len(want) and all(a == pytest.approx(b) for a, b in zip(got, want))


def test_a_diverged_series_has_no_final_score_and_sets_no_target():
    """A reader's lr 1e6 run diverged at round 1 after round 0's evaluation: its "final
    acc" was round 0's 0.078, pooled over seeds with the others' finals."""
    from hierfl.outputs import Series
    from hierfl.report.stats import target_of
    from hierfl.report.tables import numbers
    nan = math.nan
    b = {"bytes_up": 1.0, "bytes_down": 1.0}
    ok = Series("ok", [{"round": 0, "test_acc": 0.1, "diverged": 0, "sim_time_s": 0.0, **b},
                       {"round": 1, "test_acc": 0.6, "diverged": 0, "sim_time_s": 1.0, **b}])
    gone = Series("gone", [{"round": 0, "test_acc": 0.9, "diverged": 0, "sim_time_s": 0.0, **b},
                           {"round": 1, "test_acc": nan, "diverged": 1, "sim_time_s": 1.0, **b}])
    assert numbers(ok, 0.5)["final_acc"] == 0.6
    assert math.isnan(numbers(gone, 0.5)["final_acc"])
    assert target_of([ok, gone], None) == pytest.approx(0.54)      # 0.9 x 0.6, not x 0.9


def test_the_report_of_a_run_and_hierfl_report_are_the_same_bytes(tmp_path):
    """Scenario 'tiny' run into folder s0: the run titled its report 'tiny', `hierfl report`
    'tiny (s0)' (so report.md and report.html changed when regenerated). Both now say the
    name and the folder, wherever the folder lies. (Its own run: other tests rewrite the
    shared runs' reports.) Its own target too: `hierfl report` took 0.9 x the best final
    accuracy where the run had used the scenario's report.target_accuracy."""
    scen = tmp_path / "tiny.yaml"
    scen.write_text(SCENARIO + "report: {target_accuracy: 0.3}\n")
    s0 = tmp_path / "first" / "s0"
    assert main(["run", str(scen), "--out", str(s0), "--quiet"]) == 0
    copy = tmp_path / "again" / "s0"
    shutil.copytree(s0, copy)
    for f in ("report.md", "report.html"):
        os.unlink(copy / f)
    assert main(["report", str(copy)]) == 0
    assert (s0 / "report.md").read_text().splitlines()[0] == "# hierfl report: tiny (s0)"
    md = (copy / "report.md").read_text()
    assert "Target accuracy for the table: 0.300 (given)" in md
    # no gamma target: the caption promised a dashed target line all the same
    assert "Achieved γ per client and round" in md and "dashed: target" not in md
    for f in ("report.md", "report.html", "table.csv"):
        assert (copy / f).read_bytes() == (s0 / f).read_bytes(), f


def test_steps_vs_speed_of_clients_that_never_trained_is_no_figure(tmp_path):
    """Every round empty (nobody ever available): the figure put a log axis over nothing,
    and the report printed "could not be drawn: ValueError: Data cannot be log-scaled"."""
    from hierfl.outputs import Series
    from hierfl.report.plots.stragglers import steps_speed_figure
    from hierfl.report.stats import Group
    g = Group("fedavg", [Series("fedavg", [{"round": 0}])], "fedavg")
    summary = {"topology": {"nodes": {"name": ["cloud", "edge0", "client0", "client1"],
                                      "flops": [0.0, 0.0, 1e9, 2e9],
                                      "role": ["cloud", "edge", "client", "client"]}}}
    empty = {"fedavg": {"client": np.zeros(0), "steps": np.zeros(0)}}
    assert steps_speed_figure([g], {"fedavg": "C0"}, empty, summary,
                              str(tmp_path / "s.png")) is None
    some = {"fedavg": {"client": np.array([0.0, 1.0]), "steps": np.array([3.0, 5.0])}}
    assert steps_speed_figure([g], {"fedavg": "C0"}, some, summary,
                              str(tmp_path / "s.png")) is not None


def test_compare_marks_an_interrupted_run_in_the_table(runs, tmp_path):
    """Issue 42 item 7: a run paused (run.json: finished false) before its planned rounds is
    marked in the table's algorithm cell, and its note names the run folder; a finished run's
    row of the same report is unmarked."""
    root, s0, _ = runs
    scen = tmp_path / "tiny4.yaml"
    scen.write_text(SCENARIO.replace("  rounds: 2\n", "  rounds: 4\n  checkpoint_every: 1\n"))
    cut = tmp_path / "cut"
    assert main(["run", str(scen), "--out", str(cut), "--quiet", "--stop-after", "2"]) == 0
    out = tmp_path / "cmp"
    assert main(["compare", str(s0), str(cut), "--out", str(out)]) == 0
    md = (out / "report.md").read_text()
    row = md_row(md, "cut/hierfavg (interrupted)")
    assert row[-1] == f"interrupted at round 2 of 4 (or still running): run folder {cut}"
    assert md_row(md, "s0/fedavg")[-1] == ""
