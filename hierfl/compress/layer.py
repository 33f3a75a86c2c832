"""Compression as a layer on messages, for every algorithm: the round runner (exec/round.py)
hands it what a sender is about to send and passes on what the receiver decodes.

- `up` (client -> edge): every model-sized tensor of a round's uploads, all clients at once (one
  codec call per group of alike tensors, their (C, P) matrices stacked). A tensor that is a
  model is sent as its difference from the model the client started from (the receiver sent
  it, so holds it); the tensors an algorithm names in `upload_as_is` (differences already, as
  SCAFFOLD's two, or sparse payloads, as pFedMac-SH's theta / increment uploads) are coded as
  they are. Small header tensors pass uncompressed (4 bytes per entry). With error feedback a
  (N, P) residual per tensor keeps what each client did not send, added to its next message
  (checkpointed with the run: `tensors` / `load`).
- `down` (edge -> client): the model the clients start from (the algorithm's other broadcast
  tensors, such as SCAFFOLD's server control variate, are delivered exactly and counted dense).
- `edge_up` (aggregator -> parent): the aggregator's upload as its difference from the model it
  received; `edge_down` (parent -> aggregator): the model the parent sends.

Random kinds draw from a counter-based hash (draws.Draws) of a key drawn from the scenario seed
for (direction, round, edge round, tensor), the sender and a counter (qsgd: the entry's index,
randk: the draw's number), all rows at once: the same message gives the same result in every
algorithm and every batch, and the receiver can regenerate the draws from the 4-byte key."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import torch

from ..data.streams import first_u32, seed_words
from ..seeding import rng
from ..sim import messages
from .draws import Draws
from . import native
from .kinds import Coded, compress, row_bytes, sizes
from .registry import seeded
from .spec import CodecSpec, CompressSpec

KEY_BLOCK = 64          # rounds whose upload keys are made at once


@dataclass
class EdgeState:
    """An aggregator's state (the algorithm's own, opaque) and the model it received (the
    reference of its compressed upload)."""

    inner: Any
    ref: torch.Tensor


@dataclass
class Sent:
    """A compressed upload: the tensors the receiver decodes, each row's bytes and wire names."""

    tensors: tuple[torch.Tensor, ...]
    bytes: np.ndarray
    wire: list[str]


class Compressor:
    """One algorithm run's codecs and error-feedback residuals."""

    def __init__(self, spec: CompressSpec, seed: int, n_clients: int, n_params: int,
                 upload_tensors: int, as_is: tuple[int, ...] = ()):
        self.spec, self.seed = spec, seed
        self.as_is = frozenset(as_is)
        self.residual: dict[str, torch.Tensor] = {}
        self._keys: dict[tuple[int, int, int], np.ndarray] = {}     # _up_keys' blocks
        self._buf: torch.Tensor | None = None                       # _message's buffer
        if spec.up.error_feedback:      # created with the run (a checkpoint restores them)
            self.residual = {f"up.{j}": torch.zeros(n_clients, n_params)
                             for j in range(upload_tensors)}

    # ------------------------------------------------------------------ random draws
    def _key(self, direction: str, ids: tuple[int, ...]) -> int:
        return int(rng(self.seed, f"compress.{direction}", *ids).integers(0, 2 ** 32))

    def _draws(self, codec: CodecSpec, direction: str, senders: np.ndarray,
               ids: tuple[int, ...]) -> Draws | None:
        if not seeded(codec.kind):
            return None
        return Draws(self._key(direction, ids), senders)

    # ------------------------------------------------------------------ client -> edge
    def uploads(self, t: int, r: int, clients: np.ndarray, start: torch.Tensor,
                tensors: tuple[torch.Tensor, ...], header: int,
                silent: np.ndarray | None = None) -> Sent:
        """Compress a round's uploads (rows: `clients`); `start`: the model they started from
        ((P,) or (C, P)); `silent` rows train but send nothing (their residuals stay). Tensors
        alike (shape, dtype, coded as they are or not) are coded in one call on their rows
        stacked (every codec works row by row and draws by (key, sender, counter): the same
        results as one call each, in fewer, larger passes)."""
        n = len(clients)
        body = len(tensors) - header
        out: list[Any] = [None] * body
        sizes: list[Any] = [None] * body
        wires: list[Any] = [None] * body
        keep = None if silent is None or not silent.any() else ~silent
        groups: dict[tuple, list[int]] = {}
        for j, x in enumerate(tensors[:body]):
            groups.setdefault((j in self.as_is, x.dtype, tuple(x.shape)), []).append(j)
        for js in groups.values():
            self._code(t, r, clients, start, tensors, js, body, keep, (out, sizes, wires))
        nbytes = np.zeros(n)
        for size in sizes:
            nbytes += size
        for x in tensors[body:]:            # headers: dense
            out.append(x)
            nbytes += float(messages.DENSE * x.shape[1])
            wires.append(["dense"] * n)
        return Sent(tuple(out), nbytes, _joined(wires, n))

    def _code(self, t: int, r: int, clients: np.ndarray, start: torch.Tensor,
              tensors: tuple[torch.Tensor, ...], js: list[int], body: int,
              keep: np.ndarray | None, into: tuple[list, list, list]) -> None:
        """Code the tensors `js` (alike) of a round's uploads in one call on their rows stacked;
        their decoded tensors, each row's bytes and wire names go to `into` at their places.
        Whole-stack operations only (the message, the residuals' rows, what was left, the
        decode: a few calls each, whatever the number of tensors; each call inside a run
        costs ~10 us of dispatch besides its pass)."""
        n, x0 = len(clients), tensors[js[0]]
        ref = None if js[0] in self.as_is else \
            (start if start.dtype == x0.dtype else start.to(x0.dtype))
        res = [self.residual[f"up.{j}"] for j in js] if self.residual else None
        xs = [tensors[j] for j in js]
        msg, out = self._native(t, r, clients, xs, js, body, ref, res, keep)
        if out is not None:         # the C kernels: coded, residuals written, decoded + ref
            nbytes, wire = sizes(self.spec.up, len(js) * n, x0.shape[1])
        else:
            msg = self._message(xs, ref, res, clients) if msg is None else msg
            coded = compress(msg, self.spec.up, self._up_draws(t, r, clients, js, body))
            out = self._settle(coded, msg, ref, res, clients, keep, x0, len(js))
            nbytes, wire = coded.bytes, coded.wire
        if len(js) == 1:
            into[0][js[0]], into[1][js[0]], into[2][js[0]] = out, nbytes, wire
            return
        for b, j in enumerate(js):
            into[0][j] = out[b * n:(b + 1) * n]
            into[1][j] = nbytes[b * n:(b + 1) * n]
            into[2][j] = wire[b * n:(b + 1) * n]

    def _native(self, t: int, r: int, clients: np.ndarray, xs: list[torch.Tensor],
                js: list[int], body: int, ref: torch.Tensor | None,
                res: list[torch.Tensor] | None, keep: np.ndarray | None
                ) -> tuple[torch.Tensor | None, torch.Tensor | None]:
        """The C kernels' go at a group of uploads (native.py): (the message, where it was
        made for them; what the receiver decodes + ref, or None where the torch path codes
        it). topk and randk make each row of the message as they go; qsgd and sign take it
        made as the torch path has it (one C pass; a lone upload sent as it is is its own)."""
        spec = self.spec.up
        if not native.takes(spec):
            return None, None
        msg = absolute = None
        if not native.makes_message(spec):      # (topk, randk: made row by row in the call)
            if ref is None and res is None and len(xs) == 1:
                msg = xs[0]             # (as _message: a lone as-is upload is its message)
            else:                       # _message's, in C (and sign's |msg|)
                shape = (len(xs) * len(clients), xs[0].shape[1])
                absolute = torch.empty(shape, dtype=xs[0].dtype) \
                    if spec.kind == "sign" else None
                msg = native.message(xs, ref, res, clients,
                                     self._scratch(shape, xs[0].dtype), absolute)
                if msg is None:         # (not float32 in CPU memory: torch makes it)
                    return None, None
        keys = self._up_keys(t, r, body)[js] if seeded(spec.kind) else None
        return msg, native.code(spec, msg, xs, keys, ref, res, clients, keep, absolute)

    @staticmethod
    def _settle(coded: Coded, msg: torch.Tensor, ref: torch.Tensor | None,
                res: list[torch.Tensor] | None, clients: np.ndarray, keep: np.ndarray | None,
                x0: torch.Tensor, blocks: int) -> torch.Tensor:
        """The torch path after the codec: each sender's residual (what was not sent) to its
        table's row (not the rows `keep` leaves out), and what the receiver decodes + ref."""
        n = len(clients)
        if res is not None:         # numpy: a faster row scatter
            left = coded.left_(msg).numpy()
            rows = clients if keep is None else clients[keep]
            for b, table in enumerate(res):
                part = left[b * n:(b + 1) * n]
                table.numpy()[rows] = part if keep is None else part[keep]
        if ref is None:             # (a lone input passed on as it is: a copy, as ever)
            out = coded.decoded
            return out.clone() if out is msg and msg is x0 else out
        if blocks == 1 or ref.dim() == 1:
            return coded.plus(ref, inplace=True)
        return coded.plus(ref.repeat(blocks, 1), inplace=True)   # (C, P) refs: each block's

    def _message(self, xs: list[torch.Tensor], ref: torch.Tensor | None,
                 res: list[torch.Tensor] | None, clients: np.ndarray) -> torch.Tensor:
        """The stacked (len(xs) C, P) message: each x - ref (or x), plus its residual's rows
        ((x - ref) + e, the same sums as one tensor at a time), written into a buffer kept
        from round to round (a new 0.25-0.5 MB block each round costs page faults; the
        codecs never hand it on: `none`, which decodes to its input, gets a new one). A lone
        tensor sent as it is without error feedback is the message itself (the codecs never
        write their input). (_native has the C kernels make the same bits in one pass.)"""
        n, x0 = len(clients), xs[0]
        if res is None and ref is None and len(xs) == 1:
            return x0
        shape = (len(xs) * n, x0.shape[1])
        msg = torch.empty(shape, dtype=x0.dtype) if self.spec.up.kind == "none" else \
            self._scratch(shape, x0.dtype)
        blocks = [msg] if len(xs) == 1 else [msg[b * n:(b + 1) * n] for b in range(len(xs))]
        if res is None:
            if ref is None:
                return torch.cat(xs, out=msg)
            for x, blk in zip(xs, blocks):
                torch.sub(x, ref, out=blk)
            return msg
        rows = torch.from_numpy(clients)
        for x, blk, table in zip(xs, blocks, res):
            if table.dtype == x.dtype:
                torch.index_select(table, 0, rows, out=blk)
            else:
                blk.copy_(table.index_select(0, rows))
            blk.add_(x if ref is None else torch.sub(x, ref))
        return msg

    def _scratch(self, shape: tuple[int, int], dtype: torch.dtype) -> torch.Tensor:
        """The message buffer of this shape and dtype (the last one made is kept)."""
        buf = self._buf
        if buf is None or tuple(buf.shape) != shape or buf.dtype != dtype:
            buf = self._buf = torch.empty(shape, dtype=dtype)
        return buf

    def _up_draws(self, t: int, r: int, clients: np.ndarray, js: list[int],
                  body: int) -> Draws | None:
        """The draws of the uploads `js` stacked (rows: each tensor's clients), each tensor
        under its key for ("up", t, r, j)."""
        if not seeded(self.spec.up.kind):
            return None
        keys = self._up_keys(t, r, body)
        if len(js) == 1:
            return Draws(int(keys[js[0]]), clients)
        return Draws(np.repeat(keys[js], len(clients)), np.concatenate((clients,) * len(js)))

    def _up_keys(self, t: int, r: int, body: int) -> np.ndarray:
        """(body,) uint32: the keys of round (t, r)'s uploads, int(rng(seed, "compress.up", t,
        r, j).integers(0, 2**32)) for each tensor j, made for KEY_BLOCK rounds at a time on
        arrays (streams.seed_words; a generator each costs ~40 us)."""
        block = (t // KEY_BLOCK, r, body)
        keys = self._keys.get(block)
        if keys is None:
            t0 = block[0] * KEY_BLOCK
            if t0 < 0 or r < 0 or max(t0 + KEY_BLOCK, r, body) > 0xFFFFFFFF:
                return np.array([self._key("up", (t, r, j)) for j in range(body)], np.uint32)
            ids = np.stack(np.broadcast_arrays(np.arange(t0, t0 + KEY_BLOCK)[:, None], r,
                                               np.arange(body)[None, :]), -1).reshape(-1, 3)
            keys = first_u32(seed_words(self.seed, "compress.up", ids)).reshape(KEY_BLOCK, body)
            self._keys = {b: k for b, k in self._keys.items() if b[0] == block[0]}
            self._keys[block] = keys
        return keys[t - block[0] * KEY_BLOCK]

    # ------------------------------------------------------------------ models sent down
    def model(self, direction: str, w: torch.Tensor, ids: tuple[int, ...] = (),
              sender: int = 0) -> Coded:
        """One model `w` (P,) sent in `direction` (down, edge_down): decoded, and its bytes."""
        codec = getattr(self.spec, direction)
        draws = self._draws(codec, direction, np.array([sender]), ids)
        coded = compress(w.reshape(1, -1), codec, draws)
        return Coded(coded.decoded.reshape(w.shape), coded.bytes, coded.wire)

    def model_bytes(self, direction: str, tensors: tuple[torch.Tensor, ...]) -> float:
        """A broadcast's size: its first tensor (the model) coded, the others dense."""
        codec = getattr(self.spec, direction)
        if not codec.active:
            return messages.message_bytes([x.numel() for x in tensors])
        first = row_bytes(codec, tensors[0].numel())
        return first + messages.message_bytes([x.numel() for x in tensors[1:]])

    # ------------------------------------------------------------------ aggregator -> parent
    def edge_upload(self, ref: torch.Tensor,
                    msg: tuple[torch.Tensor, ...]) -> tuple[tuple[torch.Tensor, ...], float]:
        """An aggregator's upload: its first tensor as the difference from the model it
        received, coded; the others dense. Returns (decoded message, bytes)."""
        coded = compress((msg[0] - ref.to(msg[0].dtype)).reshape(1, -1), self.spec.edge_up)
        first = coded.decoded.reshape(msg[0].shape) + ref.to(msg[0].dtype)
        nbytes = float(coded.bytes[0]) + messages.message_bytes([x.numel() for x in msg[1:]])
        return (first,) + tuple(msg[1:]), nbytes

    # ------------------------------------------------------------------ checkpoints
    def tensors(self) -> dict[str, torch.Tensor]:
        return dict(self.residual)

    def load(self, tensors: dict[str, torch.Tensor]) -> None:
        for k in self.residual:
            if k in tensors:
                self.residual[k] = tensors[k].clone().to(self.residual[k].dtype)


def _joined(wires: list[list[str]], n: int) -> list[str]:
    """Each row's wire names of its tensors joined by '+' (one join when every row is alike)."""
    if all(len(set(w)) <= 1 for w in wires):
        return ["+".join(w[0] for w in wires)] * n if n and wires else [""] * n
    return ["+".join(names) for names in zip(*wires)]


def build(spec: CompressSpec | None, seed: int, n_clients: int, n_params: int,
          algo: Any) -> Compressor | None:
    """The run's compressor, or None when nothing is compressed (then nothing changes)."""
    if spec is None or not spec.active:
        return None
    return Compressor(spec, seed, n_clients, n_params, algo.upload_tensors,
                      tuple(getattr(algo, "upload_as_is", ())))
