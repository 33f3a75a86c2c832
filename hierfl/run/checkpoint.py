"""Checkpoints: everything needed to continue a run bit-for-bit, as plain arrays in one npz,
sealed: the sha256 of every array (the `checksums` entry) and of the output files' first bytes
it vouches for (meta's `outputs_sha256`, up to its `offsets`), checked by --resume, which
refuses a checkpoint or output file that changed after it was written, naming it."""
from __future__ import annotations

import hashlib
import json
import sys
import os
import zipfile

import numpy as np
import torch

from ..algorithms.base import Algorithm
from ..exec.protect import load_state as load_protect, state_of as protect_state
from ..config.errors import ScenarioError
from ..outputs import Background, atomic_npz
from ..outputs.files import TEMP_PREFIX
from ..sim.engine import Simulation

CHECKPOINT = "checkpoint.npz"


CHECKSUMS = "checksums"      # the npz entry holding {array name: sha256} (json, as bytes)


def array_sha256(a: np.ndarray) -> str:
    """sha256 of an array's dtype, shape and bytes."""
    h = hashlib.sha256(f"{a.dtype.str}{a.shape}".encode())
    h.update(np.ascontiguousarray(a).reshape(-1).view(np.uint8))
    return h.hexdigest()


class Prefix:
    """The running sha256 of an output file's first `at` bytes, carried from checkpoint to
    checkpoint (the files only grow between them), so each reads back only what was appended."""

    def __init__(self) -> None:
        self.h = hashlib.sha256()
        self.at = 0

    def advance(self, path: str, size: int) -> str | None:
        """The hex digest of path's first `size` bytes (None: the file is shorter)."""
        with open(path, "rb") as fh:
            fh.seek(self.at)
            while self.at < size:
                chunk = fh.read(min(size - self.at, 1 << 22))
                if not chunk:
                    return None
                self.h.update(chunk)
                self.at += len(chunk)
        return self.h.hexdigest()


def sealed(arrays: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    """`arrays` with the sha256 of each (the CHECKSUMS entry)."""
    sums = {k: array_sha256(v) for k, v in arrays.items()}
    return {**arrays, CHECKSUMS: np.frombuffer(json.dumps(sums).encode(), dtype=np.uint8)}


def checkpoint_arrays(t: int, algo: Algorithm, sim: Simulation, offsets: dict[str, int],
                      fingerprint: dict | None = None,
                      digests: dict[str, str] | None = None) -> dict[str, np.ndarray]:
    """Everything needed to continue bit-for-bit, as plain arrays (copies, taken now): the
    algorithm's state tensors, the clock, the byte ledger and the output files' lengths (and
    `digests`, the sha256 of their first `offsets` bytes), and the run's fingerprint
    (run/fingerprint.py: what resume must find unchanged). Random draws are keyed by (seed,
    purpose, ids), so no generator state is needed."""
    meta = {"round": t, "now": sim.env.now, "ledger": sim.ledger.as_list(), "offsets": offsets,
            "trace_count": sim.trace.count}
    if digests is not None:
        meta["outputs_sha256"] = digests
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
    protect = getattr(sim.runner, "protect", None)    # privacy spent, adaptive clip
    if protect is not None and protect.active:
        meta["protect"], parts = protect_state(protect)
        arrays.update({f"protect/{k}": v for k, v in parts.items()})
    if getattr(sim, "asynchronous", False) and getattr(sim, "_a", None) is not None:
        meta["async"], handles = sim.async_state()      # at a quiescent point (async_drain)
        for i, (x, start) in enumerate(handles):        # FedBuff's buffered updates
            arrays[f"async/x{i}"] = x.detach().cpu().numpy().copy()
            arrays[f"async/start{i}"] = start.detach().cpu().numpy().copy()
    arrays["meta"] = np.frombuffer(json.dumps(meta).encode(), dtype=np.uint8)
    return arrays


def save_checkpoint(path: str, t: int, algo: Algorithm, sim: Simulation,
                    offsets: dict[str, int], writer: Background | None = None,
                    fingerprint: dict | None = None,
                    digests: dict[str, str] | None = None) -> None:
    """The checkpoint as one atomic npz, sealed (`sealed`); with `writer`, the snapshot is
    taken now and the checksums and the file written in its thread (the previous checkpoint
    stays valid until the rename)."""
    arrays = checkpoint_arrays(t, algo, sim, offsets, fingerprint, digests)
    if writer is None:
        atomic_npz(path, sealed(arrays))
    else:
        writer.submit(lambda: atomic_npz(path, sealed(arrays)))


AGAIN = "delete it (and this algorithm's folder) to run the algorithm again"


def load_checkpoint(path: str, note: bool = False) -> tuple[dict, dict[str, torch.Tensor]]:
    """The checkpoint's meta and state tensors, each array checked against the sha256 recorded
    when it was written. An unreadable file (cut short, overwritten) or an array that changed
    is a ScenarioError naming the file (and the array). A checkpoint of a hierfl that recorded
    no checksums is accepted unchecked (`note`: saying so on stderr)."""
    try:
        with np.load(path, allow_pickle=False) as z:
            arrays = {k: z[k] for k in z.files}
    except (OSError, ValueError, KeyError, EOFError, zipfile.BadZipFile) as exc:
        raise ScenarioError.one(path, "--resume", path, f"unreadable checkpoint "
                                f"({type(exc).__name__}: {exc}); {AGAIN}") from None
    _check_arrays(path, arrays, note)
    try:
        meta = json.loads(bytes(arrays["meta"]).decode())
    except (KeyError, ValueError) as exc:
        raise ScenarioError.one(path, "--resume", path, f"unreadable checkpoint (its meta: "
                                f"{type(exc).__name__}: {exc}); {AGAIN}") from None
    state = {k[len("state/"):]: _tensor(v) for k, v in arrays.items() if k.startswith("state/")}
    state.update({k: _tensor(v) for k, v in arrays.items()
                  if k.startswith(("compress/", "async/", "local/", "protect/"))})   # by prefix
    return meta, state


def _tensor(a: np.ndarray) -> torch.Tensor:
    """An array read from the npz as a tensor (no second copy: np.load's arrays are new)."""
    return torch.from_numpy(a if a.flags.writeable and a.flags.c_contiguous else a.copy())


def _check_arrays(path: str, arrays: dict[str, np.ndarray], note: bool) -> None:
    if CHECKSUMS not in arrays:
        if note:
            print(f"note: {path} was written by a hierfl that recorded no checksums: resumed "
                  "without checking its arrays", file=sys.stderr)
        return
    try:
        sums = json.loads(bytes(arrays.pop(CHECKSUMS)).decode())
        assert isinstance(sums, dict)
    except (ValueError, AssertionError):
        raise ScenarioError.one(path, "--resume", path, f"the checkpoint's {CHECKSUMS} entry "
                                f"is damaged; {AGAIN}") from None
    for k in sorted(set(sums) | set(arrays)):
        if k not in arrays or k not in sums or array_sha256(arrays[k]) != sums[k]:
            what = ("is missing" if k not in arrays else "was not there when it was written"
                    if k not in sums else "differs from the one written (its sha256)")
            raise ScenarioError.one(path, "--resume", path, f"the checkpoint's array {k!r} "
                                    f"{what}: the file changed after it was written; "
                                    f"{AGAIN}")


def check_outputs(paths: dict[str, str], meta: dict) -> dict[str, Prefix]:
    """The output files a checkpoint vouches for, as it found them: each at least as long as
    its offset (`cut_to`'s check) and, when the checkpoint recorded them, with the same sha256
    of its first `offset` bytes. Returns their digests so far, to go on from; a file that
    changed is a ScenarioError naming it."""
    offsets, sums, round_ = meta["offsets"], meta.get("outputs_sha256"), meta["round"]
    _check_lengths(paths, offsets, round_)
    out = {}
    for k, size in offsets.items():
        out[k] = Prefix()
        got = out[k].advance(paths[k], size)
        if sums is not None and got != sums.get(k):
            raise ScenarioError.one(paths[k], "--resume", paths[k], f"its first {size} bytes "
                                    f"differ from those the checkpoint of round {round_} "
                                    "recorded (sha256): the file changed after it was written;"
                                    " delete this algorithm's folder to run it again")
    return out


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
    protect = getattr(sim.runner, "protect", None)
    if protect is not None and "protect" in meta and state is not None:
        load_protect(protect, meta["protect"], {k[len("protect/"):]: v for k, v in state.items()
                                                if k.startswith("protect/")})
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
    _check_lengths(paths, offsets, round_)
    for k, size in offsets.items():
        with open(paths[k], "r+b") as fh:
            fh.truncate(size)


def _check_lengths(paths: dict[str, str], offsets: dict[str, int], round_: int) -> None:
    for k, size in offsets.items():
        have = os.path.getsize(paths[k]) if os.path.isfile(paths[k]) else -1
        if have < size:
            raise ScenarioError.one(paths[k], "--resume", have, f"the checkpoint of round "
                                    f"{round_} expects at least {size} bytes here: the file "
                                    "lost its end; delete this algorithm's folder to run it "
                                    "again")
