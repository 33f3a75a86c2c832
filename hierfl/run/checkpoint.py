"""Checkpoints: everything needed to continue a run bit-for-bit, as plain arrays in one npz."""
from __future__ import annotations

import json
import os
import zipfile

import numpy as np
import torch

from ..algorithms.base import Algorithm
from ..config.errors import ScenarioError
from ..outputs import Background, atomic_npz
from ..outputs.files import TEMP_PREFIX
from ..sim.engine import Simulation

CHECKPOINT = "checkpoint.npz"


def checkpoint_arrays(t: int, algo: Algorithm, sim: Simulation, offsets: dict[str, int],
                      fingerprint: dict | None = None) -> dict[str, np.ndarray]:
    """Everything needed to continue bit-for-bit, as plain arrays (copies, taken now): the
    algorithm's state tensors, the clock, the byte ledger and the output files' lengths, and
    the run's fingerprint (run/fingerprint.py: what resume must find unchanged). Random draws
    are keyed by (seed, purpose, ids), so no generator state is needed."""
    meta = {"round": t, "now": sim.env.now, "ledger": sim.ledger.as_list(), "offsets": offsets,
            "trace_count": sim.trace.count}
    if fingerprint is not None:
        meta["fingerprint"] = fingerprint
    arrays = {f"state/{k}": v.detach().cpu().numpy().copy()
              for k, v in algo.state_tensors().items()}
    codec = getattr(sim.runner, "codec", None)        # compression's error-feedback residuals
    if codec is not None:
        arrays.update({f"compress/{k}": v.numpy().copy() for k, v in codec.tensors().items()})
    carry = getattr(sim.runner, "carry", None)        # kept optimizer state, statistics
    if carry is not None:
        arrays.update({f"local/{k}": v.detach().cpu().numpy().copy()
                       for k, v in carry.tensors().items()})
    if getattr(sim, "asynchronous", False) and getattr(sim, "_a", None) is not None:
        meta["async"], handles = sim.async_state()      # at a quiescent point (async_drain)
        for i, (x, start) in enumerate(handles):        # FedBuff's buffered updates
            arrays[f"async/x{i}"] = x.detach().cpu().numpy().copy()
            arrays[f"async/start{i}"] = start.detach().cpu().numpy().copy()
    arrays["meta"] = np.frombuffer(json.dumps(meta).encode(), dtype=np.uint8)
    return arrays


def save_checkpoint(path: str, t: int, algo: Algorithm, sim: Simulation,
                    offsets: dict[str, int], writer: Background | None = None,
                    fingerprint: dict | None = None) -> None:
    """The checkpoint as one atomic npz; with `writer`, the snapshot is taken now and the file
    written in its thread (the previous checkpoint stays valid until the rename)."""
    arrays = checkpoint_arrays(t, algo, sim, offsets, fingerprint)
    if writer is None:
        atomic_npz(path, arrays)
    else:
        writer.submit(lambda: atomic_npz(path, arrays))


def load_checkpoint(path: str) -> tuple[dict, dict[str, torch.Tensor]]:
    """The checkpoint's meta and state tensors; an unreadable file (cut short, overwritten)
    is a ScenarioError naming it (it was numpy's or zipfile's traceback)."""
    try:
        with np.load(path, allow_pickle=False) as z:
            meta = json.loads(bytes(z["meta"]).decode())
            state = {k[len("state/"):]: torch.from_numpy(z[k].copy()) for k in z.files
                     if k.startswith("state/")}
            state.update({k: torch.from_numpy(z[k].copy()) for k in z.files
                          if k.startswith(("compress/", "async/", "local/"))})   # by prefix
    except (OSError, ValueError, KeyError, EOFError, zipfile.BadZipFile) as exc:
        raise ScenarioError.one(path, "--resume", path, f"unreadable checkpoint "
                                f"({type(exc).__name__}: {exc}); delete it (and this "
                                "algorithm's folder) to run the algorithm again") from None
    return meta, state


def restore(sim: Simulation, meta: dict, state: dict[str, torch.Tensor] | None = None) -> None:
    """Put a new simulation where the checkpoint left off: the byte ledger and trace count
    (the clock is its start time), and compression's residuals (`compress/` in `state`)."""
    sim.ledger.restore(meta["ledger"])
    sim.trace.count = meta["trace_count"]
    if "async" in meta and state is not None:       # an asynchronous run's bookkeeping
        n = len(meta["async"]["buffer"])
        sim.async_resume = (meta["async"], [(state[f"async/x{i}"], state[f"async/start{i}"])
                                            for i in range(n)])
    carry = getattr(sim.runner, "carry", None)
    if carry is not None and state is not None:
        carry.load({k[len("local/"):]: v for k, v in state.items() if k.startswith("local/")})
    codec = getattr(sim.runner, "codec", None)
    if codec is not None and state is not None:
        codec.load({k[len("compress/"):]: v for k, v in state.items()
                    if k.startswith("compress/")})


def remove_stale_temps(folder: str) -> list[str]:
    """Temporary files an interrupted atomic write left (outputs.files.atomic_write names them
    `.tmp-*`): nothing reads them, so a resume removes them."""
    gone = []
    for name in sorted(os.listdir(folder)) if os.path.isdir(folder) else []:
        path = os.path.join(folder, name)
        if name.startswith(TEMP_PREFIX) and os.path.isfile(path):
            os.unlink(path)
            gone.append(path)
    return gone


def cut_to(paths: dict[str, str], offsets: dict[str, int], round_: int) -> None:
    """Cut each output file back to where the checkpoint of `round_` found it. A file shorter
    than that lost its end (damaged, or a crash before its tail reached the disk): refused,
    nothing cut (it was padded with NUL bytes, and the run appended after them)."""
    for k, size in offsets.items():
        have = os.path.getsize(paths[k]) if os.path.isfile(paths[k]) else -1
        if have < size:
            raise ScenarioError.one(paths[k], "--resume", have, f"the checkpoint of round "
                                    f"{round_} expects at least {size} bytes here: the file "
                                    "lost its end; delete this algorithm's folder to run it "
                                    "again")
    for k, size in offsets.items():
        with open(paths[k], "r+b") as fh:
            fh.truncate(size)
