"""What a client carries from one of its rounds to the next outside the algorithm's State: its
optimizer's state (train.local.optimizer.state: keep) and its model's running statistics
(BatchNorm), with the statistics the server holds for the global model.

Both are client state in the paper sense (kept on the device, never sent unless the model is):
tables of N rows, written for the clients that finished their work (a client that crashed
before finishing keeps its rows, as the algorithm's client tables do), checkpointed with the
run (`tensors` / `load`, prefix "local/").

Statistics, two policies (an algorithm's `Capabilities.local_norm`):
- global (FedAvg's state_dict averaging): a round's clients start from the server's statistics;
  they travel down and up with the model (counted in the ledger: 4 Q bytes a message); the
  server's become the n_k-weighted mean of the statistics of the clients whose uploads it
  aggregated in the cloud round (through every edge round and tier of a hierarchy);
- local (FedBN): each client starts from its own (fresh at its first round) and nothing is
  sent; evaluation of a client's personal model uses its own."""
from __future__ import annotations

import numpy as np
import torch

from ..learn.batches import dropout_keys


class ClientCarry:
    """The per-client tables of one algorithm's run (see the module docstring)."""

    def __init__(self, model, n_clients: int, optimizer=None, keep_opt: bool = False,
                 local_norm: bool = False):
        self.model = model
        self.n = n_clients
        self.stateful = bool(getattr(model, "stateful", False))
        self.q = int(getattr(model, "n_buffers", 0))
        self.local_norm = local_norm
        self.optimizer = optimizer if keep_opt else None
        self.opt: tuple[torch.Tensor, ...] | None = None  # (N, ...) each: zero = fresh
        self.clients: torch.Tensor | None = None         # (N, Q) each client's statistics
        self.server: torch.Tensor | None = None          # (Q,) the global model's
        self._sum: torch.Tensor | None = None            # this cloud round's weighted sums
        self._weight = 0.0
        if self.q:
            fresh = model.init_buffers()
            self.server = fresh.clone()
            self.clients = fresh.expand(n_clients, -1).clone()

    # ------------------------------------------------------------------ before a round
    @property
    def sent_bytes(self) -> float:
        """Bytes the statistics add to a message carrying the model (global policy)."""
        return 0.0 if self.local_norm else 4.0 * self.q

    def program_fields(self, sel: np.ndarray, start_w: torch.Tensor, seed: int, t: int,
                       r: int) -> dict:
        """The fields of a TermsProgram for clients `sel` (dataclasses.replace keywords)."""
        out: dict = {}
        idx = torch.from_numpy(np.asarray(sel, dtype=np.int64))
        if self.optimizer is not None:
            fresh = self.optimizer.init(start_w)
            if self.opt is None:
                self.opt = tuple(torch.zeros((self.n, *f.shape[1:]), dtype=f.dtype)
                                 for f in fresh)     # a fresh state is all zeros (optim.py)
            out["opt0"] = tuple(table.index_select(0, idx) for table in self.opt)
        if self.stateful:
            out["keys"] = dropout_keys(seed, t, r, sel)
            if self.q and not self.local_norm:
                out["buffers0"] = self.server.expand(len(sel), -1).clone()
            elif self.q:
                out["buffers0"] = self.clients.index_select(0, idx)
            else:
                out["buffers0"] = start_w.new_zeros(len(sel), 0)
        return out

    # ------------------------------------------------------------------ after a round
    def finish(self, sel: np.ndarray, state: tuple[torch.Tensor, ...], program,
               doomed: np.ndarray | None) -> None:
        """Write the rows of the clients that finished (not `doomed`) from a solved State."""
        if self.optimizer is None and not self.q:
            return
        keep = np.ones(len(sel), bool) if doomed is None else ~np.asarray(doomed, bool)
        if not keep.any():
            return
        pos = torch.from_numpy(np.flatnonzero(keep))
        idx = torch.from_numpy(np.asarray(sel, dtype=np.int64)[keep])
        _, opt, ms = program.parts(state)
        if self.optimizer is not None:
            for table, rows in zip(self.opt, opt):
                table.index_copy_(0, idx, rows.index_select(0, pos).to(table.dtype))
        if self.q:
            self.clients.index_copy_(0, idx, ms[0].index_select(0, pos))

    def arrived(self, clients: np.ndarray, weights: np.ndarray) -> None:
        """Clients whose uploads an aggregator took (weights: their sample counts)."""
        if not self.q or self.local_norm or len(clients) == 0:
            return
        idx = torch.from_numpy(np.asarray(clients, dtype=np.int64))
        w = torch.from_numpy(np.asarray(weights, dtype=np.float64))
        part = w @ self.clients.index_select(0, idx).double()
        self._sum = part if self._sum is None else self._sum + part
        self._weight += float(w.sum())

    def close(self) -> None:
        """The cloud aggregated: the server's statistics become the mean of the arrivals'."""
        if self._sum is not None and self._weight > 0:
            self.server = (self._sum / self._weight).to(self.server.dtype)
        self._sum, self._weight = None, 0.0

    # ------------------------------------------------------------------ evaluation
    def global_buffers(self) -> torch.Tensor | None:
        return self.server

    def personal_buffers(self) -> torch.Tensor | None:
        if not self.q:
            return None
        return self.clients if self.local_norm else self.server

    # ------------------------------------------------------------------ checkpoints
    def tensors(self) -> dict[str, torch.Tensor]:
        out: dict[str, torch.Tensor] = {}
        if self.opt is not None:
            out.update({f"opt{i}": t for i, t in enumerate(self.opt)})
        if self.q:
            out["clients"] = self.clients
            out["server"] = self.server
        return out

    def load(self, tensors: dict[str, torch.Tensor]) -> None:
        opts = sorted((k for k in tensors if k.startswith("opt")), key=lambda k: int(k[3:]))
        if opts:
            self.opt = tuple(tensors[k].clone() for k in opts)
        if self.q and "clients" in tensors:
            self.clients = tensors["clients"].clone()
            self.server = tensors["server"].clone()
