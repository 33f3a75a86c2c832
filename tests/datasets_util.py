"""Small data sets written in the real formats (IDX, CIFAR binary, LEAF JSON) for the data set
tests: scikit-learn's digits padded to 28 x 28 (MNIST-like), seeded random 32 x 32 x 3 images
(CIFAR), a few LEAF users of FEMNIST and Shakespeare. Nothing is downloaded."""
from __future__ import annotations

import json
import os

import numpy as np

from hierfl.data.cifar import write_cifar
from hierfl.data.idx import write_idx
from hierfl.data.leaf import ALL_LETTERS

TOPO = "edges: {count: 2}\nclients: {count: %d}\n"


def digits_28() -> tuple[np.ndarray, np.ndarray]:
    """scikit-learn's 1797 digits as 28 x 28 uint8 images (each pixel 3 x 3, padded by 2)."""
    from sklearn.datasets import load_digits

    d = load_digits()
    img = (d.images * (255 / 16)).round().astype(np.uint8)          # 0..16 -> 0..255
    big = np.zeros((len(img), 28, 28), np.uint8)
    big[:, 2:26, 2:26] = np.kron(img, np.ones((3, 3), np.uint8))
    return big, d.target.astype(np.uint8)


def write_mnist(root: str, gz: bool = False, n_test: int = 297) -> dict[str, np.ndarray]:
    """The four IDX files of an MNIST-like set in root: the last n_test digits are the test set."""
    os.makedirs(root, exist_ok=True)
    x, y = digits_28()
    parts = {"train-images-idx3-ubyte": x[:-n_test], "train-labels-idx1-ubyte": y[:-n_test],
             "t10k-images-idx3-ubyte": x[-n_test:], "t10k-labels-idx1-ubyte": y[-n_test:]}
    for name, a in parts.items():
        write_idx(os.path.join(root, name + (".gz" if gz else "")), a)
    return parts


def write_cifar_set(root: str, name: str = "cifar10", per_file: int = 40,
                    seed: int = 0) -> dict[str, tuple[np.ndarray, np.ndarray]]:
    """Random images in the CIFAR binary layout: file name -> (labels, pixels (n, 3, 32, 32))."""
    os.makedirs(root, exist_ok=True)
    g = np.random.default_rng(seed)
    names = ([f"data_batch_{i}.bin" for i in range(1, 6)] + ["test_batch.bin"]
             if name == "cifar10" else ["train.bin", "test.bin"])
    out = {}
    for f in names:
        n = per_file if name == "cifar10" else per_file * 5 if f == "train.bin" else per_file
        pix = g.integers(0, 256, (n, 3, 32, 32), dtype=np.uint8)
        if name == "cifar10":
            lab = g.integers(0, 10, n).astype(np.uint8)
        else:
            fine = g.integers(0, 100, n)
            lab = np.stack([fine // 5, fine], axis=1).astype(np.uint8)
        write_cifar(os.path.join(root, f), lab, pix)
        out[f] = (lab, pix)
    return out


def leaf_doc(users: dict[str, tuple[list, list]]) -> dict:
    return {"users": list(users), "num_samples": [len(v[1]) for v in users.values()],
            "user_data": {u: {"x": x, "y": y} for u, (x, y) in users.items()}}


def write_leaf(path: str, train: list[dict], test: list[dict]) -> None:
    for split, docs in (("train", train), ("test", test)):
        os.makedirs(os.path.join(path, split), exist_ok=True)
        for i, doc in enumerate(docs):
            with open(os.path.join(path, split, f"part_{i}.json"), "w") as f:
                json.dump(doc, f)


def femnist_users(n_users: int, seed: int = 0, rows: tuple[int, int] = (6, 12),
                  prefix: str = "f") -> dict:
    """user -> (x: lists of 784 floats pixel / 255, y: labels 0..61)."""
    g = np.random.default_rng(seed)
    out = {}
    for u in range(n_users):
        n = int(g.integers(*rows))
        pix = g.integers(0, 256, (n, 784))
        out[f"{prefix}{u:04d}_{u * 7 % 13:02d}"] = ((pix / 255).tolist(), g.integers(0, 62, n).tolist())
    return out


def shakespeare_users(n_users: int, seed: int = 0, rows: tuple[int, int] = (5, 9)) -> dict:
    """user -> (x: 80-character strings over LEAF's vocabulary, y: next characters)."""
    g = np.random.default_rng(seed)
    out = {}
    for u in range(n_users):
        n = int(g.integers(*rows))
        text = "".join(ALL_LETTERS[i] for i in g.integers(0, len(ALL_LETTERS), n + 80))
        out[f"THE_PLAY_{u}"] = ([text[i:i + 80] for i in range(n)],
                                [text[i + 80] for i in range(n)])
    return out


def scenario(folder: str, data: str, n_clients: int = 6, model: str = "{name: logreg}",
             rounds: int = 2, train: str = "") -> str:
    """A scenario file (and its topology) in folder; returns the scenario's path."""
    with open(os.path.join(folder, "topo.yaml"), "w") as f:
        f.write(TOPO % n_clients)
    path = os.path.join(folder, "s.yaml")
    with open(path, "w") as f:
        f.write(f"name: ds\ntopology: topo.yaml\ndata: {data}\nmodel: {model}\n"
                f"train: {{rounds: {rounds}, clients_per_round: {min(3, n_clients)}, "
                f"local: {{steps: 3, batch_size: 8, lr: 0.1}}, checkpoint_every: 0{train}}}\n"
                f"algorithms: [{{name: fedavg}}]\noutput: out\n")
    return path


def validate_exit2(capsys, path: str, *needles: str) -> str:
    """`hierfl validate path` exits 2 with a message (no traceback) holding every needle."""
    from hierfl.cli import main
    assert main(["validate", path]) == 2
    err = capsys.readouterr().err
    assert "Traceback" not in err
    for n in needles:
        assert n in err, (n, err)
    return err
