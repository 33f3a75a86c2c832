"""The upload codecs in C (kernels.c), loaded with ctypes: Compressor's fast path for topk, randk,
qsgd and sign on float32 rows in CPU memory, one call per group of uploads (the message's
coding, error feedback's residual write and the decode in one pass per row; the torch path
costs a dozen whole-batch passes and ~10 us of dispatch each).

setuptools builds `_kernels` when `pip install` finds a C compiler (pyproject.toml:
ext-modules, optional); without it, with HIERFL_NATIVE=0, or for any other dtype or device,
kinds.py's torch ops do the same work. Both give the same bits (tests/test_compress_native.py
compares them on every kind); topk rows that tie for the last place are left to the torch
path whole."""
from __future__ import annotations

import ctypes
import importlib.machinery
import os
from typing import Any

import numpy as np
import torch

from .spec import CodecSpec, kept

VERSION = 1                 # kernels.c's HIERFL_KERNELS_VERSION: a stale build is not used
KINDS = {"topk": 1, "randk": 2, "qsgd": 3, "sign": 4}
ROW_BY_ROW = ("topk", "randk")      # kinds whose message the kernels make as they go
ENABLED = os.environ.get("HIERFL_NATIVE", "1") != "0"
_FN: Any = False            # hierfl_code, None where it cannot be had, False before a look


def library_path() -> str | None:
    """The built `_kernels` shared library beside this module, if there is one."""
    here = os.path.dirname(os.path.abspath(__file__))
    for suffix in importlib.machinery.EXTENSION_SUFFIXES:
        path = os.path.join(here, "_kernels" + suffix)
        if os.path.exists(path):
            return path
    return None


def _load() -> Any:
    path = library_path()
    if path is None:
        return None
    try:
        lib = ctypes.CDLL(path)
    except OSError:
        return None
    if lib.hierfl_kernels_version() != VERSION:
        return None
    fn = lib.hierfl_code
    fn.restype = ctypes.c_int
    i64, ptr = ctypes.c_int64, ctypes.c_void_p
    fn.argtypes = [ctypes.c_int, ptr, ptr, i64, i64, i64, ptr, ptr, ptr, ptr, i64, ptr, i64,
                   ptr, ptr, ptr]
    lib.hierfl_message.restype = None
    lib.hierfl_message.argtypes = [ptr, i64, i64, ptr, i64, ptr, i64, ptr, ptr, ptr]
    fn.message = lib.hierfl_message
    lib.hierfl_kernels_simd.restype = ctypes.c_int
    lib.hierfl_kernels_simd.argtypes = [ctypes.c_int]
    fn.simd = lib.hierfl_kernels_simd
    return fn


def available() -> bool:
    """The kernels are built, current and turned on."""
    global _FN
    if _FN is False:
        _FN = _load()
    return ENABLED and _FN is not None


def simd(on: bool) -> bool:
    """Turn the kernels' AVX2 paths on (where the processor has them) or off (the portable
    loops); returns whether they are on. For tests: both give the same bits."""
    return available() and bool(_FN.simd(int(on)))


def takes(spec: CodecSpec) -> bool:
    """The kernels code this kind (and are built, current and turned on)."""
    return spec.kind in KINDS and available()


def makes_message(spec: CodecSpec) -> bool:
    """The kernels make this kind's message row by row themselves (code with msg None)."""
    return spec.kind in ROW_BY_ROW


def _ptr(x: torch.Tensor | np.ndarray | None) -> int | None:
    if x is None:
        return None
    return x.data_ptr() if isinstance(x, torch.Tensor) else x.ctypes.data


def message(xs: list[torch.Tensor], ref: torch.Tensor | None,
            tables: list[torch.Tensor] | None, senders: np.ndarray, into: torch.Tensor,
            absolute: torch.Tensor | None = None) -> torch.Tensor | None:
    """layer.Compressor._message's stacked message, the same bits, written to `into` in one
    pass (each x - ref, + its sender's residual), and |message| to `absolute` if given
    (sign's, for torch's mean); None where torch must make it."""
    extra = [into] if absolute is None else [into, absolute]
    if not available() or not _fits(list(xs) + extra, ref, tables):
        return None
    n, p = len(senders), xs[0].shape[1]
    who = np.ascontiguousarray(senders, np.int64)
    _FN.message(_pointers(xs), n * len(xs), p, _ptr(ref), _ref_rows(ref), _pointers(tables), n,
                who.ctypes.data, into.data_ptr(), _ptr(absolute))
    return into


def code(spec: CodecSpec, msg: torch.Tensor | None, xs: list[torch.Tensor],
         keys: np.ndarray | None, ref: torch.Tensor | None, tables: list[torch.Tensor] | None,
         senders: np.ndarray, keep: np.ndarray | None,
         absolute: torch.Tensor | None = None) -> torch.Tensor | None:
    """What the receiver decodes + `ref` for each row of a round's message, a new (rows, P)
    tensor. The message: `msg` as layer.Compressor._message makes it (the same tensor the
    torch path codes: qsgd's norms and sign's means are torch's reductions of it, which give
    a row's bits only for the same shape), or None for the kernels to make each row from the
    uploads `xs`, `ref` and the residual `tables` as they go (topk and randk). The rows are
    blocks of len(senders), one per x; the random kinds draw as draws.Draws(keys[block],
    sender). Error feedback's residuals (msg - decoded) go to `tables` at the senders' rows
    (not the rows `keep` leaves out). sign: `absolute` holds |msg| already (message()'s), and
    becomes the result. None where the torch path must do it (nothing is then written)."""
    kind = KINDS.get(spec.kind)
    if kind is None or not available() or (msg is None and not makes_message(spec)) or \
            not _fits(list(xs) + ([] if msg is None else [msg]), ref, tables):
        return None
    n, p = len(senders), xs[0].shape[1]
    if tables is not None and not _distinct(senders):
        return None                 # (residual rows are written in place: senders distinct)
    k, a, b = 0, None, None
    if kind in (1, 2):
        k = kept(spec, p)
    if kind == 2:
        a = torch.tensor([p / k], dtype=torch.float32)          # as torch's mul_(p / k)
    elif kind == 3:                 # as codecs/qsgd.py: the norm and its factors from torch
        norm = torch.linalg.vector_norm(msg, dim=1, keepdim=True)
        safe = torch.where(norm > 0, norm, 1.0)
        a, b = (spec.levels / safe).contiguous(), (norm / spec.levels).contiguous()
    out = absolute if kind == 4 and absolute is not None else \
        torch.empty((n * len(xs), p), dtype=torch.float32)
    if kind == 4:                   # msg.abs().mean(1), |msg| in out (written over below)
        a = (out if absolute is not None else torch.abs(msg, out=out)).mean(1)
    hashes = None if keys is None else np.ascontiguousarray(keys, np.uint32)
    who = np.ascontiguousarray(senders, np.int64)
    kept_rows = None if keep is None else np.ascontiguousarray(keep, np.uint8)
    status = _FN(kind, _ptr(msg), _pointers(xs), n * len(xs), p, k, _ptr(hashes), _ptr(a),
                 _ptr(b), _ptr(ref), _ref_rows(ref), _pointers(tables), n, who.ctypes.data,
                 _ptr(kept_rows), out.data_ptr())
    return out if status == 0 else None


def _ref_rows(ref: torch.Tensor | None) -> int:
    return 0 if ref is None or ref.dim() == 1 else ref.shape[0]


def _pointers(tensors: list[torch.Tensor] | None) -> Any:
    if tensors is None:
        return None
    return (ctypes.c_void_p * len(tensors))(*[t.data_ptr() for t in tensors])


def _fits(tensors: list[torch.Tensor], ref: torch.Tensor | None,
          tables: list[torch.Tensor] | None) -> bool:
    """float32, contiguous, in CPU memory: what the kernels read and write."""
    for group in (tensors, () if ref is None else (ref,), tables or ()):
        for t in group:
            if t.dtype != torch.float32 or not t.is_cpu or not t.is_contiguous():
                return False
    return True


def _distinct(senders: np.ndarray) -> bool:
    """No sender twice (the engine's are sorted: one comparison; else a sort)."""
    if len(senders) < 2 or bool((senders[1:] > senders[:-1]).all()):
        return True
    return len(np.unique(senders)) == len(senders)
