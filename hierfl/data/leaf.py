"""LEAF's federated sets (Caldas et al., 2018; https://github.com/TalwalkarLab/leaf), read from
the JSON files its preprocess.sh writes: `train/*.json` and `test/*.json`, each
{"users": [...], "num_samples": [...], "user_data": {user: {"x": [...], "y": [...]}}}.

The natural split: one LEAF user is one client. `data.users` (default: the topology's client
count) users are drawn from the training files (a seeded sample) and dealt round-robin to the
clients; a user's test rows are its rows of the test files (LEAF's `-t sample` split; users
that appear only in the test files are not used).

- FEMNIST: x is 784 floats in [0, 1] (a 28 x 28 image, 1.0 = white background), y in 0..61.
  LEAF writes pixel / 255, so rows are kept as uint8 pixels (scaled back per batch); input
  shape (1, 28, 28). A value outside [0, 1] (raw 0..255 pixels, standardised images) is an
  error naming the file, the user and the range found.
- Shakespeare: x an 80-character string, y the next character; both are encoded with LEAF's
  80-character vocabulary (`ALL_LETTERS` of its models/utils/language_utils.py): x becomes
  int64 indices (input shape (80,), vocab 80, for a model that embeds them), y the index of
  the next character (80 classes).
- Other sets of numeric vectors with integer labels (LEAF's synthetic) load as float32.
Every chosen user must have test rows (LEAF's `-t sample` split gives every user at least one;
its `-t user` split puts a user's rows in train or in test, and LEAF's own code fails on it).
Every defect (unreadable JSON, missing keys, a user without samples or without test rows,
ragged rows, a value beyond float32, a label out of range, a character outside the
vocabulary) is a DataFileError naming the file and user."""
from __future__ import annotations

import glob
import json
import os
from dataclasses import dataclass, field

import numpy as np

from .. import seeding
from .federated import FederatedData
from .files import DataFileError
from .real import FLOAT32_MAX

ALL_LETTERS = ("\n !\"&'(),-.0123456789:;>?ABCDEFGHIJKLMNOPQRSTUVWXYZ[]"
               "abcdefghijklmnopqrstuvwxyz}")
FEMNIST_DIM, FEMNIST_CLASSES = 784, 62
_CODE = np.full(256, -1, np.int64)
_CODE[np.frombuffer(ALL_LETTERS.encode("ascii"), np.uint8)] = np.arange(len(ALL_LETTERS))
HOW_TO = "`hierfl data fetch leaf` prints how to generate them"


def split_files(path: str, split: str) -> list[str]:
    """The JSON files of one split (train or test), sorted by name."""
    folder = os.path.join(path, split)
    if os.path.isfile(path):
        raise DataFileError(path, "is a file, not a folder: path: names the folder that holds "
                            "LEAF's train/ and test/")
    if not os.path.isdir(folder):
        raise DataFileError(folder, f"no such folder (LEAF writes train/ and test/); {HOW_TO}")
    names = sorted(glob.glob(os.path.join(glob.escape(folder), "*.json")))
    if not names:
        raise DataFileError(folder, f"holds no .json files; {HOW_TO}")
    return names


def read_json(path: str) -> dict:
    """One LEAF file, its structure checked (users, num_samples and user_data agree)."""
    try:
        with open(path, "rb") as f:
            doc = json.load(f)
    except (OSError, ValueError, RecursionError) as exc:
        raise DataFileError(path, f"not a readable JSON file ({exc})") from None
    if not isinstance(doc, dict) or not all(k in doc for k in ("users", "user_data")):
        raise DataFileError(path, "not a LEAF file: expected an object with users, "
                            "num_samples and user_data")
    users, data = doc["users"], doc["user_data"]
    counts = doc.get("num_samples", [None] * len(users) if isinstance(users, list) else None)
    if not isinstance(users, list) or not isinstance(data, dict) or \
            not isinstance(counts, list) or len(counts) != len(users):
        raise DataFileError(path, "users and num_samples must be lists of one length, "
                            "user_data an object")
    odd = [u for u in users if not isinstance(u, str)]
    if odd:
        raise DataFileError(path, f"user names must be strings (users holds {odd[0]!r})")
    if len(set(users)) != len(users):
        twice = next(u for i, u in enumerate(users) if u in users[:i])
        raise DataFileError(path, f"user {twice!r} is listed twice in users")
    for u, n in zip(users, counts):
        d = data.get(u)
        if not isinstance(d, dict) or not isinstance(d.get("x"), list) or \
                not isinstance(d.get("y"), list):
            raise DataFileError(path, f"user {u!r} has no samples (no x and y lists in "
                                "user_data)")
        if len(d["x"]) != len(d["y"]) or (n is not None and n != len(d["y"])):
            raise DataFileError(path, f"user {u!r}: {len(d['x'])} x, {len(d['y'])} y and "
                                f"num_samples {n} do not agree")
    return doc


@dataclass
class Rows:
    """One split's rows of the chosen users, converted (x, y) per user, and each user's file."""

    x: dict[str, np.ndarray] = field(default_factory=dict)
    y: dict[str, np.ndarray] = field(default_factory=dict)
    file: dict[str, str] = field(default_factory=dict)


def _text(xs: list, ys: list, path: str, user: str) -> tuple[np.ndarray, np.ndarray]:
    if not all(isinstance(s, str) for s in xs) or \
            not all(isinstance(c, str) and len(c) == 1 for c in ys):
        raise DataFileError(path, f"user {user!r}: text samples need string x and "
                            "one-character y")
    lengths = {len(s) for s in xs}
    if len(lengths) != 1 or 0 in lengths:
        raise DataFileError(path, f"user {user!r}: x strings must be non-empty and of one "
                            f"length (found lengths {sorted(lengths)[:4]})")
    codes = np.frombuffer("".join(xs + ys).encode("utf-32-le"), np.uint32)
    idx = _CODE[np.minimum(codes, 255)]
    bad = np.flatnonzero((codes > 255) | (idx < 0))
    if len(bad):
        ch = chr(int(codes[bad[0]]))
        raise DataFileError(path, f"user {user!r}: character {ch!r} is not in LEAF's "
                            f"{len(ALL_LETTERS)}-character vocabulary")
    n = len(xs)
    return idx[:-n].reshape(n, -1), idx[-n:]


def _vectors(xs: list, ys: list, path: str, user: str) -> tuple[np.ndarray, np.ndarray]:
    try:
        x = np.asarray(xs, np.float64)
        y = np.asarray(ys)
    except (ValueError, TypeError):
        raise DataFileError(path, f"user {user!r}: x must be lists of numbers of one "
                            "length") from None
    if x.ndim != 2 or not np.all(np.isfinite(x)):
        raise DataFileError(path, f"user {user!r}: x must be finite numbers, one list of "
                            "one length per sample")
    big = float(np.abs(x).max()) if x.size else 0.0
    if big > FLOAT32_MAX:
        raise DataFileError(path, f"user {user!r}: x holds values up to {big:.3g}, beyond "
                            f"float32's range ({FLOAT32_MAX:.3g}): rows are computed in float32")
    if y.ndim != 1 or y.dtype.kind not in "iu":
        raise DataFileError(path, f"user {user!r}: y must be integer labels")
    return x, y.astype(np.int64)


def convert(doc: dict, users: set[str], path: str, rows: Rows) -> None:
    """The rows of `users` in one file, added to `rows`."""
    for u in doc["users"]:
        if u not in users:
            continue
        d = doc["user_data"][u]
        if not d["y"]:
            raise DataFileError(path, f"user {u!r} has no samples")
        text = isinstance(d["x"][0], str)
        x, y = (_text if text else _vectors)(d["x"], d["y"], path, u)
        if u in rows.x:
            raise DataFileError(path, f"user {u!r} appears in two files of this split")
        rows.x[u], rows.y[u], rows.file[u] = x, y, path


def _index(files: list[str]) -> list[tuple[str, str]]:
    """(user, file) of every user of the training files, in file order."""
    seen: dict[str, str] = {}
    out = []
    for p in files:
        for u in read_json(p)["users"]:
            if u in seen:
                raise DataFileError(p, f"user {u!r} appears in two files ({seen[u]})")
            seen[u] = p
            out.append((u, p))
    return out


def choose(path: str, n_users: int, n_clients: int, seed: int) -> tuple[list[list[str]],
                                                                        dict[str, str]]:
    """Users per client (a seeded sample of n_users, dealt round-robin) and each user's file."""
    index = _index(split_files(path, "train"))
    if n_users > len(index):
        raise DataFileError(os.path.join(path, "train"), f"holds {len(index)} users, fewer "
                            f"than the {n_users} asked for (data.users, or one per client)")
    pick = seeding.rng(seed, "data/leaf/users").permutation(len(index))[:n_users]
    users = [index[i][0] for i in pick]
    return [users[k::n_clients] for k in range(n_clients)], dict(index)


def read_split(files: list[str], users: set[str]) -> Rows:
    rows = Rows()
    for p in files:
        convert(read_json(p), users, p, rows)
    return rows


def _check_labels(rows: Rows, n_classes: int) -> None:
    for u, y in rows.y.items():
        bad = np.flatnonzero((y < 0) | (y >= n_classes))
        if len(bad):
            raise DataFileError(rows.file[u], f"user {u!r}: label {int(y[bad[0]])} is out of "
                                f"range 0..{n_classes - 1}")


def _check_pixels(rows: Rows) -> None:
    """FEMNIST's values are pixel / 255: one outside [0, 1] is not LEAF's FEMNIST."""
    for u, x in rows.x.items():
        lo, hi = float(x.min()), float(x.max())
        if lo < 0 or hi > 1:
            raise DataFileError(rows.file[u], f"user {u!r}: values in [{lo:.4g}, {hi:.4g}], "
                                "but FEMNIST's pixels are in [0, 1] (LEAF writes pixel / 255): "
                                "rescale them (0..255 pixels: divide by 255), or load these "
                                "rows as a set of your own (hierfl.register_dataset)")


def _as_pixels(x: np.ndarray) -> np.ndarray | None:
    """FEMNIST rows (in [0, 1]) as uint8 pixels when every value is pixel / 255 (as LEAF
    writes them)."""
    p = np.rint(x * 255.0)
    return p.astype(np.uint8) if np.all(np.abs(x * 255.0 - p) < 1e-3) else None


def _assemble(per_client: list[list[str]], rows: Rows, dtype: np.dtype,
              width: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Clients' rows laid one after another (a client's users in the order dealt)."""
    users = [[u for u in us if u in rows.x] for us in per_client]
    flat = [u for us in users for u in us]
    x = np.concatenate([rows.x[u] for u in flat]).astype(dtype, copy=False) if flat else \
        np.zeros((0, width), dtype)
    y = np.concatenate([rows.y[u] for u in flat]) if flat else np.zeros(0, np.int64)
    sizes = [sum(len(rows.y[u]) for u in us) for us in users]
    off = np.concatenate([[0], np.cumsum(sizes)]).astype(np.int64)
    return np.ascontiguousarray(x), y, off


def load(path: str, n_users: int, n_clients: int, seed: int) -> FederatedData:
    """`n_users` users of the LEAF set in folder `path`, dealt to `n_clients` clients."""
    per_client, user_file = choose(path, n_users, n_clients, seed)
    chosen = {u for us in per_client for u in us}
    train = read_split(sorted({user_file[u] for u in chosen}), chosen)
    test = read_split(split_files(path, "test"), chosen)
    _check_tested([u for us in per_client for u in us], train, test, os.path.join(path, "test"))
    return _build(per_client, train, test)


def _check_tested(users: list[str], train: Rows, test: Rows, test_dir: str) -> None:
    """Every user has test rows: its client's own test set (personalised accuracy) and its
    share of the global one would otherwise be missing without a word."""
    missing = [u for u in users if u not in test.x]
    if not missing:
        return
    u = missing[0]
    if len(missing) == len(users):
        raise DataFileError(test_dir, f"holds no rows of the {len(users)} users drawn (e.g. "
                            f"{u!r} of {train.file[u]}): LEAF's -t sample split gives every "
                            "user test rows; these look like its -t user split (test users "
                            "apart), which hierfl does not read")
    raise DataFileError(train.file[u], f"user {u!r} has training rows here but none in "
                        f"{test_dir}/*.json ({len(missing)} of the {len(users)} users drawn "
                        "lack them): LEAF's -t sample split gives every user test rows (are "
                        "train/ and test/ from the same run?)")


def _what(width: int, text: bool) -> str:
    return f"{width} {'characters' if text else 'values'}"


def _kind(train: Rows, test: Rows) -> tuple[bool, int]:
    """(text?, row width), every user checked to agree with the first."""
    first = next(iter(train.x.values()))
    text, width = first.dtype == np.int64, first.shape[1]
    for split in (train, test):
        for u, x in split.x.items():
            if (x.dtype == np.int64) != text or x.shape[1] != width:
                raise DataFileError(split.file[u], f"user {u!r}: samples of "
                                    f"{_what(x.shape[1], x.dtype == np.int64)}, others of "
                                    f"{_what(width, text)}")
    return text, width


def _build(per_client: list[list[str]], train: Rows, test: Rows) -> FederatedData:
    text, width = _kind(train, test)
    vocab, dtype, shape = 0, np.dtype(np.float32), (width,)
    if text:
        n_classes = vocab = len(ALL_LETTERS)
        dtype = np.dtype(np.int64)
    elif width == FEMNIST_DIM:
        n_classes, shape = FEMNIST_CLASSES, (1, 28, 28)
        _check_pixels(train)
        _check_pixels(test)
        pixels = [{u: _as_pixels(x) for u, x in split.x.items()} for split in (train, test)]
        if all(p is not None for d in pixels for p in d.values()):
            train.x, test.x = pixels  # type: ignore[assignment]
            dtype = np.dtype(np.uint8)
    else:
        n_classes = int(max(int(y.max()) for y in train.y.values()) + 1)
    _check_labels(train, n_classes)
    _check_labels(test, n_classes)
    x, y, off = _assemble(per_client, train, dtype, width)
    xt, yt, toff = _assemble(per_client, test, dtype, width)
    return FederatedData(x, y, off, xt, yt, toff, n_classes, shape, vocab)
