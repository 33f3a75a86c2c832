"""`hierfl trace convert`: FedScale's device traces to hierfl's trace CSVs.

FedScale (Lai et al., ICML 2022) publishes two per-client traces as Python pickles, which hierfl
never opens (unpickling runs code). Export them once to JSON in your own environment
(`json.dump({str(k): v for k, v in pickle.load(f).items()}, out)`) and convert the JSON:

- `fedscale-capacity` (`client_device_capacity`): {client_id: {"computation": ms per sample of
  inference, "communication": kbit/s}} -> devices CSV `client,compute_flops,uplink_Bps,
  downlink_Bps,latency_s`. FedScale prices a training sample at 3x its inference latency and a
  model of B bytes at B * 8 / 1024 kbit; so a device does `--flops-per-sample` training FLOPs in
  3 * computation / 1000 s (compute_flops = F * 1000 / (3 * computation)) and sends
  communication * 1024 / 8 bytes a second, both ways; latency 0 (FedScale has none).
- `fedscale-behave` (`client_behave_trace`): {client_id: {"active": [s], "inactive": [s],
  "finish_time": s, ...}} -> availability CSV `client,start_s,end_s`: client k is available in
  [active[i], inactive[i]] of every period of finish_time seconds (FedScale repeats the trace
  modulo finish_time), up to `--horizon-s`.

Clients are numbered 0.. in increasing FedScale client id; `--clients N` keeps the first N."""
from __future__ import annotations

import json
import math
import os
from typing import Any

from ..config.errors import Problem, ScenarioError

KINDS = ("fedscale-capacity", "fedscale-behave")


def _load(path: str) -> list[tuple[Any, dict]]:
    if not os.path.isfile(path):
        raise ScenarioError.one(path, "input", path, "file not found")
    try:
        with open(path, encoding="utf-8") as fh:
            data = json.load(fh)
    except (ValueError, UnicodeDecodeError) as e:
        raise ScenarioError.one(path, "input", path,
                                f"not JSON ({e}); export FedScale's pickle to JSON first") from None
    if not isinstance(data, dict) or not data:
        raise ScenarioError.one(path, "input", type(data).__name__,
                                "expected a non-empty mapping client id -> record")

    def order(k: str) -> tuple:
        return (0, int(k), "") if k.lstrip("-").isdigit() else (1, 0, k)
    return [(k, data[k]) for k in sorted(data, key=order)]


def _num(path: str, cid: Any, rec: Any, key: str, positive: bool = True) -> float:
    v = rec.get(key) if isinstance(rec, dict) else None
    ok = isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)
    if not ok or (positive and v <= 0) or v < 0:
        raise ScenarioError.one(path, f"{cid}.{key}", v,
                                f"expected a finite number {'> 0' if positive else '>= 0'}")
    return float(v)


def capacity_rows(path: str, flops_per_sample: float, clients: int | None) -> list[str]:
    rows = []
    for k, (cid, rec) in enumerate(_load(path)[:clients]):
        ms = _num(path, cid, rec, "computation")
        kbps = _num(path, cid, rec, "communication")
        bps, flops = kbps * 1024 / 8, flops_per_sample * 1000 / (3 * ms)
        for key, v, col, got in (("computation", ms, "compute_flops", flops),
                                 ("communication", kbps, "uplink_Bps, downlink_Bps", bps)):
            if not 0 < got < math.inf:     # the devices trace loader would refuse the row
                raise ScenarioError.one(path, f"{cid}.{key}", v, f"converts to {col} {got!r}, "
                                        "not a finite number > 0: out of range for a device")
        rows.append(f"{k},{flops_per_sample * 1000 / (3 * ms)!r},{bps!r},{bps!r},0.0")
    return ["client,compute_flops,uplink_Bps,downlink_Bps,latency_s"] + rows


MAX_INTERVALS = 10_000_000     # intervals a conversion may write (the periods repeat to the
#                                horizon: a tiny finish_time or a huge horizon is refused)


def behave_rows(path: str, horizon_s: float, clients: int | None) -> list[str]:
    rows = ["client,start_s,end_s"]
    written = 0
    for k, (cid, rec) in enumerate(_load(path)[:clients]):
        period = _num(path, cid, rec, "finish_time")
        act, ina = rec.get("active"), rec.get("inactive")
        if not (isinstance(act, list) and isinstance(ina, list) and len(act) == len(ina)):
            raise ScenarioError.one(path, f"{cid}.active", act,
                                    "expected lists active and inactive of the same length")
        spans = sorted((_num(path, cid, {"t": a}, "t", False), _num(path, cid, {"t": b}, "t",
                                                                   False)) for a, b in zip(act, ina))
        if not spans:                  # never up: no rows (and no periods to walk)
            continue
        written += len(spans) * math.ceil(horizon_s / period)
        if written > MAX_INTERVALS:
            raise ScenarioError.one(path, f"{cid}.finish_time", period, f"repeating every "
                                    f"{period!r} s to --horizon-s {horizon_s!r} writes over "
                                    f"{MAX_INTERVALS:,} intervals: give a shorter horizon")
        merged: list[list[float]] = []
        base = 0.0
        while base < horizon_s:
            for a, b in spans:
                a, b = base + min(a, period), base + min(b, period)
                if b <= a or a >= horizon_s:
                    continue
                if merged and a <= merged[-1][1]:
                    merged[-1][1] = max(merged[-1][1], b)
                else:
                    merged.append([a, b])
            base += period
        rows += [f"{k},{a!r},{min(b, horizon_s)!r}" for a, b in merged]
    return rows


def convert(kind: str, src: str, *, flops_per_sample: float | None = None,
            horizon_s: float | None = None, clients: int | None = None) -> list[str]:
    """The lines of the converted CSV (header first)."""
    if kind == "fedscale-capacity":
        if flops_per_sample is None or not 0 < flops_per_sample < math.inf:
            raise ScenarioError([Problem("", "--flops-per-sample", flops_per_sample,
                                         "give the training FLOPs of one sample (> 0)")])
        return capacity_rows(src, flops_per_sample, clients)
    if horizon_s is None or not 0 < horizon_s < math.inf:
        raise ScenarioError([Problem("", "--horizon-s", horizon_s,
                                     "give the simulated seconds to cover (> 0, finite)")])
    return behave_rows(src, horizon_s, clients)
