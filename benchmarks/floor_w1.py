"""W1's floor as a whole process: the plainest honest batched torch loop a researcher would
write for FedProx's Synthetic(1,1) recipe with FedAvg, timed from python's start to its csv.

    python benchmarks/floor_w1.py [--rounds 200] [--out floor_w1.csv]

What it does, and nothing more: imports, the same data as hierfl (hierfl's Synthetic(1,1)
generator, numpy), the same client sample per round (hierfl's "sample" stream); per round the
selected clients' logistic-regression weights `[W | b]` stacked in one (C, K, D + 1) tensor,
each client's epoch-wise shuffled minibatches of 10 (`argsort` of uniform keys, the last batch
of an epoch short), ONE step for all the clients still training (clients sorted by their step
budget, so those still training are a prefix and the batch shrinks as the others finish):
`bmm`, `softmax`, `addcmul` (the 1/|batch| weights times softmax minus one-hot) and an
in-place `baddbmm_` (W -= lr dzᵀ x), the minibatches gathered 64 steps at a time; the
n_k-weighted mean. The global model is evaluated at round 0 and
at the end (training loss over all training rows, accuracy on all test rows), written to a csv.
benchmarks/run.py (`W1P`) runs this and `hierfl run` of the same scenario in fresh processes,
alternated, and compares wall and CPU seconds of the whole processes."""
from __future__ import annotations

import time

T_START = time.perf_counter()

import argparse  # noqa: E402
import csv  # noqa: E402
import os  # noqa: E402
import sys  # noqa: E402

import numpy as np  # noqa: E402
import torch  # noqa: E402

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from hierfl import seeding  # noqa: E402
from hierfl.data.registry import data_spec  # noqa: E402
from hierfl.data.synthetic import generate  # noqa: E402


def batches(gen: torch.Generator, n: np.ndarray, first: np.ndarray, epochs: int, b: int):
    """rows (C, S, B) and weights (C, S, B) of C clients' epochs of shuffled minibatches."""
    per_epoch = -(-n // b)
    s_max = int(epochs * per_epoch.max())
    rows = torch.zeros(len(n), s_max, b, dtype=torch.long)
    wts = torch.zeros(len(n), s_max, b)
    for k, (size, lo) in enumerate(zip(n.tolist(), first.tolist())):
        pe = -(-size // b)
        perm = torch.rand(epochs, size, generator=gen).argsort(1) + lo
        pad = torch.full((epochs, pe * b), -1, dtype=torch.long)
        pad[:, :size] = perm
        pad = pad.view(epochs * pe, b)
        valid = pad >= 0
        rows[k, :epochs * pe] = pad.clamp_min(0)
        wts[k, :epochs * pe] = valid / valid.sum(1, keepdim=True)
    return rows, wts


def local_sgd(w: torch.Tensor, x1: torch.Tensor, y: torch.Tensor, rows: torch.Tensor,
              wts: torch.Tensor, steps: np.ndarray, lr: float, chunk: int = 64) -> torch.Tensor:
    """C clients (sorted by steps, descending) from the global `[W | b]` (K, D + 1). The
    minibatches of `chunk` steps are gathered at once (step-major, so a step's batch is one
    contiguous (a, B, D + 1) block); a step is z = x Wᵀ, softmax, dz = m (p - onehot),
    W -= lr dzᵀ x."""
    k = w.shape[0]
    wk = w.expand(len(steps), *w.shape).clone()
    active = len(steps)
    for s0 in range(0, int(steps[0]), chunk):
        while steps[active - 1] <= s0:
            active -= 1
        idx = rows[:active, s0:s0 + chunk].transpose(0, 1)          # (S, a, B)
        xs = x1[idx]                                                 # (S, a, B, D + 1)
        m = wts[:active, s0:s0 + chunk].transpose(0, 1).unsqueeze(3)  # (S, a, B, 1)
        neg = torch.zeros(*idx.shape, k).scatter_(3, y[idx].unsqueeze(3), -m)   # -m onehot
        a = active
        for j in range(idx.shape[0]):
            while steps[a - 1] <= s0 + j:
                a -= 1
            xb, wa = xs[j, :a], wk[:a]
            p = torch.softmax(torch.bmm(xb, wa.transpose(1, 2)), 2)
            dz = torch.addcmul(neg[j, :a], p, m[j, :a])
            wa.baddbmm_(dz.transpose(1, 2), xb, alpha=-lr)
    return wk


@torch.no_grad()
def evaluate(w: torch.Tensor, x1: torch.Tensor, y: torch.Tensor, xt1: torch.Tensor,
             yt: torch.Tensor) -> tuple[float, float]:
    z = x1 @ w.T
    loss = float((torch.logsumexp(z, 1) - z.gather(1, y.unsqueeze(1)).squeeze(1)).mean())
    acc = float(((xt1 @ w.T).argmax(1) == yt).float().mean())
    return loss, acc


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=200)
    ap.add_argument("--out", default="floor_w1.csv")
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()
    torch.set_num_threads(1)
    clients, per_round, epochs, b, lr, seed = 30, 10, 20, 10, 0.01, args.seed
    d = generate(data_spec(name="synthetic", alpha=1.0, beta=1.0), clients, seed)
    t_data = time.perf_counter()

    def with_ones(a: np.ndarray) -> torch.Tensor:
        t = torch.from_numpy(a).float()
        return torch.cat([t, torch.ones(len(t), 1)], 1)
    x1, y = with_ones(d.x), torch.from_numpy(d.y).long()
    xt1, yt = with_ones(d.x_test), torch.from_numpy(d.y_test).long()
    k, dim = d.n_classes, x1.shape[1]
    bound = 1.0 / (dim - 1) ** 0.5                     # nn.Linear's default init
    w = torch.empty(k, dim).uniform_(-bound, bound, generator=torch.Generator().manual_seed(seed))
    counts, offsets = np.diff(d.offsets), d.offsets[:-1]
    gen = torch.Generator().manual_seed(seed)
    rows_out = [(0, *evaluate(w, x1, y, xt1, yt))]
    t_train = time.perf_counter()
    with torch.no_grad():
        for t in range(1, args.rounds + 1):
            sel = np.sort(seeding.rng(seed, "sample", t).choice(clients, per_round, replace=False))
            n = counts[sel]
            order = np.argsort(-n, kind="stable")            # longest budgets first
            sel, n = sel[order], n[order]
            steps = epochs * -(-n // b)
            rows, wts = batches(gen, n, offsets[sel], epochs, b)
            wk = local_sgd(w, x1, y, rows, wts, steps, lr)
            p = torch.from_numpy(n / n.sum()).float()
            w = torch.einsum("c,ckd->kd", p, wk)
    t_eval = time.perf_counter()
    rows_out.append((args.rounds, *evaluate(w, x1, y, xt1, yt)))
    with open(args.out, "w", newline="") as fh:
        wr = csv.writer(fh)
        wr.writerow(["round", "train_loss", "test_acc"])
        wr.writerows(rows_out)
    t_end = time.perf_counter()
    print(f"floor_w1: rounds {args.rounds} acc {rows_out[-1][2]:.3f} loss {rows_out[-1][1]:.4f} "
          f"import+data {t_data - T_START:.2f} s train {t_eval - t_train:.2f} s "
          f"eval+csv {t_end - t_eval:.2f} s in-process {t_end - T_START:.2f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
