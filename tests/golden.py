"""Fingerprints of the shipped scenarios' outputs (the ns-3 / OMNeT++ regression habit).

Every shipped scenario is run through the command line for a few rounds; the SHA-256 of its
metrics.csv, clients.csv, trace.csv and clients_eval.csv, column by column (the header name and every value of the
column, in row order: a new column is an addition, not a change), and of final_params.npz's
arrays (names, dtypes, shapes and bytes: the zip container is not hashed) are compared with
tests/golden_hashes.json. A change to any number or any timing is then a deliberate, reviewed
change:

    .venv/bin/python tests/golden.py --update     # after a change that is meant to move numbers

The same code gives the same bytes on one kind of machine, not on every kind: torch's CPU kernels
(MKL, oneDNN) pick their code path by the processor's vendor and vector instructions, and the last
bits of a sum depend on it (an AMD EPYC with AVX2 and the earlier machines differ in every training
column, from the same commit). So the fingerprints are kept per platform (`platform()`: vendor,
torch's CPU capability, torch's version). `--update` (numbers meant to move) records this
platform's and drops the others, which no longer hold; `--pin-platform` adds this platform's from a
checkout known to be right (one whose outputs another platform's fingerprints confirm), keeping
the others. On a platform with none the check says so and which command pins it.
"""
from __future__ import annotations

import csv
import glob
import hashlib
import json
import os
import subprocess
import sys
import tempfile

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
HASHES = os.path.join(ROOT, "tests", "golden_hashes.json")
ROUNDS = 4
FILES = ("metrics.csv", "clients.csv", "trace.csv", "clients_eval.csv")


def platform() -> str:
    """The arithmetic's platform: the processor's vendor, the vector instructions torch's CPU
    kernels use, and torch's version (the things that choose a kernel's summation order)."""
    import platform as _platform

    import torch

    vendor = _platform.processor() or _platform.machine()
    try:
        with open("/proc/cpuinfo") as fh:
            vendor = next((ln.split(":", 1)[1].strip() for ln in fh
                           if ln.startswith("vendor_id")), vendor)
    except OSError:
        pass
    return f"{vendor} {torch.backends.cpu.get_cpu_capability()} torch {torch.__version__}"


def recorded() -> tuple[int, dict[str, dict[str, dict[str, str]]]]:
    """(rounds, {platform: {scenario: digests}})."""
    with open(HASHES) as fh:
        data = json.load(fh)
    return data["rounds"], data["platforms"]


def npz_digest(path: str) -> str:
    h = hashlib.sha256()
    with np.load(path, allow_pickle=False) as z:
        for name in sorted(z.files):
            a = np.ascontiguousarray(z[name])
            h.update(f"{name}|{a.dtype.str}|{a.shape}|".encode())
            h.update(a.tobytes())
    return h.hexdigest()


def column_digests(path: str) -> dict[str, str]:
    """SHA-256 of each column of a CSV file: its values in row order, exactly as written."""
    with open(path, newline="") as fh:
        rows = list(csv.reader(fh))
    header, body = rows[0], rows[1:]
    out = {}
    for j, name in enumerate(header):
        h = hashlib.sha256(f"{name}|{len(body)}|".encode())
        for r in body:
            h.update(r[j].encode() + b"\x1f")
        out[name] = h.hexdigest()
    return out


def scenario_digests(scenario: str, out: str) -> dict[str, str]:
    env = dict(os.environ, PYTHONPATH=ROOT + os.pathsep + os.environ.get("PYTHONPATH", ""))
    cmd = [sys.executable, "-m", "hierfl", "run", scenario, "--rounds", str(ROUNDS),
           "--out", out, "--quiet", "--no-report"]
    proc = subprocess.run(cmd, capture_output=True, text=True, env=env, cwd=ROOT)
    if proc.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)} failed:\n{proc.stderr[-3000:]}")
    digests = {}
    for label in sorted(os.listdir(out)):
        d = os.path.join(out, label)
        if not os.path.isfile(os.path.join(d, "metrics.csv")):
            continue
        for f in FILES:
            for col, dig in column_digests(os.path.join(d, f)).items():
                digests[f"{label}/{f}:{col}"] = dig
        digests[f"{label}/final_params.npz"] = npz_digest(os.path.join(d, "final_params.npz"))
    return digests


def added_column(key: str, recorded: dict[str, str]) -> bool:
    """A new column of a file whose other columns are recorded, or a file first written after
    the run's other files were recorded (clients_eval.csv): an addition, not a change."""
    if ":" not in key:
        return False
    prefix = key.split(":", 1)[0] + ":"
    label = key.split("/", 1)[0] + "/"
    return any(k.startswith(prefix) for k in recorded) or \
        any(k.startswith(label) for k in recorded)


NEEDS_DATA = "# needs-data:"


def needs_data(path: str) -> bool:
    """A scenario on a data set that is not shipped (LEAF, CIFAR, ...) says so on its first
    line, `# needs-data: ...`; it is never fingerprinted (its files are not here)."""
    with open(path, encoding="utf-8") as fh:
        return fh.readline().startswith(NEEDS_DATA)


GOLDEN_SKIP = "# golden: skip"


def golden_skip(path: str) -> bool:
    """A scenario too large to run here in seconds (city_scale: a million clients) says so on
    its first line, `# golden: skip (reason)`; it is never fingerprinted."""
    with open(path, encoding="utf-8") as fh:
        return fh.readline().startswith(GOLDEN_SKIP)


def shipped() -> list[str]:
    """The shipped scenarios that run offline and in seconds (those marked `# needs-data:` or
    `# golden: skip` are left out)."""
    paths = glob.glob(os.path.join(ROOT, "scenarios", "*.yaml"))
    return sorted(os.path.relpath(p, ROOT) for p in paths
                  if not needs_data(p) and not golden_skip(p))


def all_digests(scenarios: list[str] | None = None) -> dict[str, dict[str, str]]:
    """Every scenario's digests; two at a time (each run is a subprocess: the machine's two
    cores), the report left out (its figures are not fingerprinted)."""
    from concurrent.futures import ThreadPoolExecutor

    names = scenarios or shipped()
    with tempfile.TemporaryDirectory() as tmp, ThreadPoolExecutor(2) as pool:
        got = pool.map(lambda a: scenario_digests(a[1], os.path.join(tmp, str(a[0]))),
                       enumerate(names))
        return dict(zip(names, got))


def write(platforms: dict) -> None:
    with open(HASHES, "w") as fh:
        json.dump({"rounds": ROUNDS, "platforms": platforms}, fh, indent=1, sort_keys=True)
        fh.write("\n")


def compare(want: dict[str, dict[str, str]], got: dict[str, dict[str, str]]) -> list:
    bad = [(s, k) for s in want for k in want[s] if got.get(s, {}).get(k) != want[s][k]]
    bad += [(s, "(new)") for s in got if s not in want]
    bad += [(s, f"{k} (new)") for s in got if s in want for k in got[s]
            if k not in want[s] and not added_column(k, want[s])]
    return bad


if __name__ == "__main__":
    here = platform()
    _, pins = recorded()
    if "--update" in sys.argv or "--pin-platform" in sys.argv:
        got = all_digests()
        pins = {**pins, here: got} if "--pin-platform" in sys.argv else {here: got}
        write(pins)
        print(f"wrote {HASHES} for {here}")
        sys.exit(0)
    if here not in pins:
        print(f"no fingerprints for this platform ({here}); recorded: {sorted(pins)}.\n"
              "From a checkout known to be right: tests/golden.py --pin-platform")
        sys.exit(2)
    bad = compare(pins[here], all_digests())
    for s, k in bad:
        print(f"DIFFERS: {s} {k}")
    print("all identical" if not bad else f"{len(bad)} differ")
    sys.exit(1 if bad else 0)
