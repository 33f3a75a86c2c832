"""What happens after every cloud round: the metrics row, clients.csv and trace.csv lines,
divergence, checkpoints and pauses."""
from __future__ import annotations

import dataclasses
import math
import os
import sys
from dataclasses import dataclass, field

import numpy as np
import torch

from ..algorithms.base import Algorithm
from ..config.schema import Scenario
from ..outputs import Background, CsvLog
from ..learn.evaluate import dissimilarity, global_metrics, personal_accuracy, sample_loss
from ..outputs import CLIENT_COLUMNS, METRIC_COLUMNS, client_lines
from ..outputs.columns import class_cells
from ..outputs.fairness import CLIENTS_EVAL_COLUMNS, eval_lines, fairness_cells
from ..outputs.stability import Stability, row_loss
from ..sim.engine import RoundInfo, Simulation
from ..sim.trace import Trace
from .checkpoint import Prefix, save_checkpoint
from .progress import Progress
from .world import World


@dataclass
class AlgoResult:
    label: str
    rows: list[dict] = field(default_factory=list)
    diverged_at: int | None = None
    trace: Trace | None = None
    paused_at: int | None = None
    nonfinite_clients: list[int] = field(default_factory=list)
    closed_form_rounds: int = 0     # rounds timed in closed form (sim/closed_form.py)


def sparsity(personal: torch.Tensor | None) -> float:
    if personal is None:
        return float("nan")
    return float((personal == 0).double().mean())


class OutputFiles:
    """OUT/<label>/{metrics,clients,trace,clients_eval}.csv, appended as the run goes
    (continued on resume)."""

    def __init__(self, paths: dict[str, str], append: bool,
                 metric_columns: list[str] = METRIC_COLUMNS,
                 prefixes: dict[str, Prefix] | None = None):
        self.paths = paths
        # the sha256 of each file's first bytes (a resumed run: of what its checkpoint vouched)
        # (a checkpoint older than a file vouches nothing for it: its digest is read afresh)
        self.prefixes = {k: (prefixes or {}).get(k) if append else None for k in paths}
        self.prefixes = {k: v if v is not None else Prefix() for k, v in self.prefixes.items()}
        self.metrics = CsvLog(paths["metrics"], metric_columns, append=append)
        self.clients = CsvLog(paths["clients"], CLIENT_COLUMNS, append=append)
        self.clients_eval = CsvLog(paths["clients_eval"], CLIENTS_EVAL_COLUMNS, append=append)
        self.trace = open(paths["trace"], "a" if append else "w", newline="")
        if not append:
            self.trace.write(",".join(Trace.HEADER) + "\n")

    def synced_offsets(self) -> dict[str, int]:
        """The files' lengths, their contents on disk first (fsync): the checkpoint that
        records them is fsynced, so after a power loss it must not outlive their tails."""
        for fh in (self.metrics.fh, self.clients.fh, self.trace, self.clients_eval.fh):
            fh.flush()
            os.fsync(fh.fileno())
        return self.offsets()

    def vouched(self) -> tuple[dict[str, int], dict[str, str]]:
        """What a checkpoint vouches for: the files' lengths (synced_offsets) and the sha256
        of each file's first that many bytes (only what was appended since is read back)."""
        offsets = self.synced_offsets()
        return offsets, {k: self.prefixes[k].advance(self.paths[k], n)
                         for k, n in offsets.items()}

    def offsets(self) -> dict[str, int]:
        return {"metrics": self.metrics.fh.tell(), "clients": self.clients.fh.tell(),
                "trace": self.trace.tell(), "clients_eval": self.clients_eval.fh.tell()}

    def close(self) -> None:
        self.metrics.close()
        self.clients.close()
        self.trace.close()
        self.clients_eval.close()


class RoundRecorder:
    """Called by the engine after every cloud round; returns False to stop the run."""

    def __init__(self, sc: Scenario, world: World, algo: Algorithm, sim: Simulation,
                 files: OutputFiles, result: AlgoResult, bar: Progress, ckpt_path: str,
                 writer: Background, stop_after: int | None):
        self.sc, self.world, self.algo, self.sim = sc, world, algo, sim
        self.files, self.result, self.bar = files, result, bar
        self.ckpt_path, self.writer, self.stop_after = ckpt_path, writer, stop_after
        self.rounds = sc.train.rounds
        self.fingerprint: dict | None = None    # recorded in every checkpoint
        self.stability = Stability.replay(row_loss(r) for r in result.rows)
        self.stability_before = self.stability      # before the last row (settle_end)
        last = result.rows[-1].get("energy_total_j", 0.0) if result.rows else 0.0
        self.energy_total = float(last) if last == last and last != "" else 0.0   # resumed
        # train.eval_every_s: the previous round's simulated time (a resumed run: its last row)
        self.prev_now = float(result.rows[-1]["sim_time_s"]) if result.rows else sim.env.now
        topo = world.topo     # clients.csv's class cells, one per client id
        self.class_cells = class_cells(topo.device_class, topo.link_class)

    def __call__(self, t: int, info: RoundInfo | None) -> bool:
        row, bad = self.row(t, info)
        self.add_levels_and_stability(row)
        self.last_at = self.files.metrics.fh.tell()      # where this row starts (settle_end)
        self.files.metrics.row(row)
        self._write_eval(t)
        self.files.clients.write(client_lines(info.clients + info.late if info else [],
                                              self.class_cells))
        self.sim.trace.flush_to(self.files.trace)
        self.result.rows.append(row)
        self.bar.update(t, row, final=bad or t == self.rounds or bool(info and info.last))
        if bad:
            self.diverged(t)
            return False
        return self.checkpoint(t)

    def settle_end(self) -> None:
        """A run that ended before its planned rounds without knowing it at its last round
        (an asynchronous server with no client available again, or train.duration_s with
        nothing in flight) wrote that round unevaluated: its model is the final one, so the
        row is rewritten with its scores (the file cut where the row began, then the row)."""
        res = self.result
        if (getattr(self, "last_at", None) is None or not res.rows or res.paused_at is not None
                or res.diverged_at is not None):
            return
        row = res.rows[-1]
        if row["round"] == self.rounds or math.isfinite(row.get("train_loss", math.nan)):
            return
        t = int(row["round"])
        loss, acc, p_acc, bad, _ = self._evaluate(t, self.algo.global_model(), True)
        row.update(train_loss=loss, test_acc=acc, personal_test_acc=p_acc, diverged=int(bad))
        row.update(self._fairness())
        if self.world.model.task != "classification":
            row["test_mse"], row["personal_test_mse"] = acc, p_acc
            row["test_acc"] = row["personal_test_acc"] = float("nan")
        row["round_loss"] = loss           # the round judged again, on its evaluation
        self.stability = dataclasses.replace(self.stability_before)
        row["unstable"] = self.stability.update(row_loss(row))
        fh = self.files.metrics.fh
        fh.seek(self.last_at)
        fh.truncate()
        self.files.metrics.row(row)
        self._write_eval(t)
        self.bar.update(t, row, final=True)
        if bad:
            self.diverged(t)

    def _evaluate(self, t: int, w: torch.Tensor, last: bool = False):
        """(loss, accuracy, personal accuracy, diverged, personal models) of the global model
        `w` and the personal models."""
        sc, world = self.sc, self.world
        by_time = self._time_to_evaluate()
        evaluate = t % sc.train.eval_every == 0 or t == self.rounds or t == 0 or last or by_time
        bad = not bool(torch.isfinite(w).all()) or float(w.norm()) > sc.train.divergence_bound
        carry = getattr(self.sim.runner, "carry", None)     # a stateful model's statistics
        loss, acc, hits = (global_metrics(world.model, w, world.data,
                                          carry.global_buffers() if carry else None,
                                          per_client=True)
                           if evaluate and not bad else (float("nan"), float("nan"), None))
        personal = self.algo.personal_models()
        p_acc, p_hits = (personal_accuracy(world.model, personal, world.data,
                                           buffers=carry.personal_buffers() if carry else None,
                                           per_client=True)
                         if evaluate and personal is not None and not bad
                         else (float("nan"), None))
        # each client's correct test rows (global, personal) of this evaluation: the fairness
        # columns and clients_eval.csv (outputs/fairness.py)
        self.hits = (hits, p_hits)
        if personal is not None and not bool(torch.isfinite(personal).all()):
            bad = True
        if evaluate and not math.isfinite(loss) and not bad:
            bad = True
        return loss, acc, p_acc, bad, personal

    def _time_to_evaluate(self) -> bool:
        """train.eval_every_s = e: this round is the first at or after a multiple of e (a
        multiple in (previous round's time, now])."""
        every, now = self.sc.train.eval_every_s, self.sim.env.now
        prev, self.prev_now = self.prev_now, now
        return every is not None and math.floor(now / every) > math.floor(prev / every)

    def row(self, t: int, info: RoundInfo | None) -> tuple[dict, bool]:
        """metrics.csv's row of round t, and whether the algorithm diverged."""
        w = self.algo.global_model()
        loss, acc, p_acc, bad, personal = self._evaluate(t, w, bool(info and info.last))
        lg = self.sim.ledger
        recs = info.clients if info else []
        gam = [r.gamma for r in recs if math.isfinite(r.gamma)]
        row = {"round": t, "sim_time_s": self.sim.env.now, "bytes_up": lg.bytes_up,
               "bytes_down": lg.bytes_down, "bytes_client_edge": lg.tier("client_edge"),
               "bytes_edge_cloud": lg.tier("edge_cloud"), "bytes_wasted": lg.wasted,
               "train_loss": loss, "test_acc": acc, "personal_test_acc": p_acc,
               "personal_sparsity": sparsity(personal),
               "selected": info.selected if info else 0,
               "reported": info.reported if info else 0, "failed": info.failed if info else 0,
               "stragglers": sum(r.straggler for r in recs),
               "mean_gamma": float(np.mean(gam)) if gam else float("nan"),
               "bytes_up_client_edge": lg.up["client_edge"],
               "bytes_down_client_edge": lg.down["client_edge"],
               "bytes_up_edge_cloud": lg.up["edge_cloud"],
               "bytes_down_edge_cloud": lg.down["edge_cloud"],
               "diverged": int(bad)}
        row["round_loss"] = loss if math.isfinite(loss) or bad else self._sample_loss(w)
        protect = getattr(self.sim.runner, "protect", None)
        row["epsilon"] = protect.epsilon if protect is not None else float("nan")
        row["energy_j"] = math.fsum(r.energy_j for r in recs + (info.late if info else []))
        self.energy_total += row["energy_j"]
        row["energy_total_j"] = self.energy_total
        row.update(self._fairness())
        if self.world.model.task != "classification":     # the score is an MSE: its columns
            row["test_mse"], row["personal_test_mse"] = acc, p_acc
            row["test_acc"] = row["personal_test_acc"] = float("nan")
        m_every = self.sc.monitor.dissimilarity_every
        if m_every and not bad and (t % m_every == 0 or t == self.rounds):
            row["dissimilarity_B"], row["grad_variance"] = dissimilarity(self.world.model, w,
                                                                         self.world.data)
        return row, bad

    def _fairness(self) -> dict[str, float]:
        """metrics.csv's client_acc_* cells of the last evaluation (none if not evaluated)."""
        hits, p_hits = getattr(self, "hits", (None, None))
        return fairness_cells(self.world.data.test_counts, hits, p_hits)

    def _write_eval(self, t: int) -> None:
        """clients_eval.csv's rows of round t's evaluation (none where it was not evaluated)."""
        hits, p_hits = getattr(self, "hits", (None, None))
        text = eval_lines(t, self.world.data.test_counts, hits, p_hits)
        if text:
            self.files.clients_eval.write(text)

    def _sample_loss(self, w: torch.Tensor) -> float:
        """The round's training loss on a fixed sample of rows (a round not evaluated)."""
        carry = getattr(self.sim.runner, "carry", None)
        return sample_loss(self.world.model, w, self.world.data,
                           carry.global_buffers() if carry else None)

    def add_levels_and_stability(self, row: dict) -> None:
        """The columns added to `row`: bytes per link level (levels that are legacy columns
        already keep their value) and `unstable` (outputs/stability.py's rule, every round)."""
        for k, v in self.sim.ledger.level_row().items():
            row.setdefault(k, v)
        self.stability_before = dataclasses.replace(self.stability)
        row["unstable"] = self.stability.update(row_loss(row))

    def diverged(self, t: int) -> None:
        self.result.diverged_at = t
        who = sorted(set(self.sim.nonfinite.get(t, [])))
        where = (f"; non-finite uploads from client(s) {', '.join(map(str, who[:20]))}"
                 f"{' ...' if len(who) > 20 else ''}" if who else "")
        print(f"warning: {self.result.label} diverged at round {t} (non-finite or norm > "
              f"{self.sc.train.divergence_bound:g}{where}); stopped, other algorithms continue",
              file=sys.stderr)
        if who:
            self.result.nonfinite_clients = who

    def checkpoint(self, t: int) -> bool:
        """A checkpoint every `checkpoint_every` rounds and at a pause (which stops the run)."""
        every, rounds = self.sc.train.checkpoint_every, self.rounds
        pause = self.stop_after is not None and t >= self.stop_after and t < rounds
        if ((every and t % every == 0) or pause) and 0 < t < rounds and self.sim.quiescent:
            offsets, digests = self.files.vouched()
            save_checkpoint(self.ckpt_path, t, self.algo, self.sim, offsets, self.writer,
                            self.fingerprint, digests)
            if pause:
                self.result.paused_at = t
                return False
        return True

    def quiescent(self, t: int, sim: Simulation) -> bool:
        """An asynchronous run's quiescent point after version t (sim/async_drain.py): a
        checkpoint (checkpoint_every > 0) or a pause (stop_after), as at a round boundary."""
        pause = self.stop_after is not None and t >= self.stop_after and t < self.rounds
        if not (self.sc.train.checkpoint_every or pause) or not 0 < t < self.rounds:
            return True
        sim.trace.flush_to(self.files.trace)        # the events so far belong before the cut
        offsets, digests = self.files.vouched()
        save_checkpoint(self.ckpt_path, t, self.algo, sim, offsets, self.writer,
                        self.fingerprint, digests)
        if pause:
            self.result.paused_at = t
        return not pause


def final_params(algo: Algorithm) -> dict[str, np.ndarray]:
    """final_params.npz: the global model and, for personalised algorithms, every client's."""
    arrays = {"global": algo.global_model().detach().double().numpy()}
    personal = algo.personal_models()
    if personal is not None:
        for k in range(personal.shape[0]):
            arrays[f"client_{k}"] = personal[k].detach().double().numpy()
    return arrays


def output_paths(out_dir: str) -> dict[str, str]:
    return {k: os.path.join(out_dir, f"{k}.csv")
            for k in ("metrics", "clients", "trace", "clients_eval")}
