"""CIFAR-10 and CIFAR-100, binary version (https://www.cs.toronto.edu/~kriz/cifar.html).

A file is a run of fixed-size records: CIFAR-10 one label byte, CIFAR-100 two (coarse, fine),
then 3072 pixel bytes: 1024 red, 1024 green, 1024 blue, each a 32 x 32 image row-major; so a
record's pixels are one (3, 32, 32) channels-first image, kept flat as it is. No pickles: the
Python version of the set is not read. Files are memory-mapped; labels are read first (a
strided column), pixels are then copied once, straight into their clients' rows."""
from __future__ import annotations

import os
from dataclasses import dataclass

import numpy as np

from .files import DataFileError, fetch_hint, find, require, scatter

PIXELS = 3 * 32 * 32
SHAPE = (3, 32, 32)


@dataclass(frozen=True)
class Layout:
    train: tuple[str, ...]
    test: tuple[str, ...]
    label_bytes: int
    subdir: str                      # the folder the official archive unpacks to


LAYOUTS = {
    "cifar10": Layout(tuple(f"data_batch_{i}.bin" for i in range(1, 6)), ("test_batch.bin",),
                      1, "cifar-10-batches-bin"),
    "cifar100": Layout(("train.bin",), ("test.bin",), 2, "cifar-100-binary"),
}


def classes(name: str, label: str) -> int:
    return 10 if name == "cifar10" else (20 if label == "coarse" else 100)


def files(name: str, root: str) -> tuple[list[str], list[str]]:
    """Paths of the train and test files (in root or in the archive's folder under it)."""
    lay = LAYOUTS[name]
    py = "cifar-10-batches-py" if name == "cifar10" else "cifar-100-python"
    for where in (os.path.join(root, py), root):    # the Python version (torchvision's)
        pickle = os.path.join(where, "data_batch_1" if name == "cifar10" else "train")
        if os.path.isfile(pickle) and not find_any(root, lay):
            raise DataFileError(pickle, f"is the Python version of {name} (pickles, as "
                                f"torchvision downloads it), which is never read (a pickle can "
                                f"run code): {fetch_hint(name, root)} (the binary version)")
    get = [require(root, f, name, (lay.subdir,), gz=False) for f in lay.train + lay.test]
    return get[:len(lay.train)], get[len(lay.train):]


def find_any(root: str, lay: Layout) -> bool:
    return any(find(root, f, (lay.subdir,), gz=False) for f in lay.train + lay.test)


def _records(path: str, label_bytes: int) -> np.ndarray:
    rec = label_bytes + PIXELS
    try:
        size = os.path.getsize(path)
    except OSError as exc:
        raise DataFileError(path, f"cannot read ({exc})") from None
    if size == 0 or size % rec:
        raise DataFileError(path, f"truncated or not a CIFAR binary file: {size} bytes is not a "
                            f"whole number of {rec}-byte records ({label_bytes} label "
                            f"byte{'s' if label_bytes > 1 else ''} + {PIXELS} pixels)")
    try:
        return np.memmap(path, np.uint8, "r", shape=(size // rec, rec))
    except (OSError, ValueError) as exc:
        raise DataFileError(path, f"cannot read ({exc})") from None


def check(paths: list[str], label_bytes: int) -> int:
    """Records in all of `paths` (each checked to be whole records)."""
    return sum(len(_records(p, label_bytes)) for p in paths)


def read_labels(paths: list[str], label_bytes: int, which: int, n_classes: int) -> np.ndarray:
    """The labels of every record of `paths`, in order: byte `which` of each record
    (CIFAR-100: 0 coarse, 1 fine), each checked to be in 0..n_classes-1."""
    out = []
    for p in paths:
        y = np.array(_records(p, label_bytes)[:, which])
        bad = np.flatnonzero(y >= n_classes)
        if len(bad):
            what = "" if label_bytes == 1 else (" (coarse)" if which == 0 else " (fine)")
            raise DataFileError(p, f"label{what} {int(y[bad[0]])} of record {int(bad[0])} is "
                                f"out of range 0..{n_classes - 1}")
        out.append(y.astype(np.int64))
    return np.concatenate(out)


def read_pixels(paths: list[str], label_bytes: int, pos: np.ndarray, n_dest: int,
                chunk: int = 2048) -> np.ndarray:
    """Pixels (n_dest, 3072) uint8: record i of the files laid end to end lands on row pos[i]."""
    dest = np.empty((n_dest, PIXELS), np.uint8)
    lo = 0
    for p in paths:
        mm = _records(p, label_bytes)
        for a in range(0, len(mm), chunk):
            block = mm[a:a + chunk, label_bytes:]
            scatter(dest, pos, lo + a, block)
        lo += len(mm)
    return dest


def write_cifar(path: str, labels: np.ndarray, pixels: np.ndarray) -> None:
    """Write records (labels (n,) or (n, 2) coarse + fine, pixels (n, 3072) or (n, 3, 32, 32))
    in the binary format: for tests and for users who convert their own images."""
    lab = np.asarray(labels, np.uint8).reshape(len(labels), -1)
    pix = np.asarray(pixels, np.uint8).reshape(len(pixels), PIXELS)
    with open(path, "wb") as f:
        f.write(np.concatenate([lab, pix], axis=1).tobytes())
