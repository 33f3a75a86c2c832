"""`hierfl data fetch` on its offline paths only (never the network): checksum verification of
files already in the folder, unpacking only the named members of an archive, the errors (exit 2,
naming the file) and the printed scenario snippet; the official table is checked for shape."""
from __future__ import annotations

import hashlib
import io
import os
import re
import tarfile

import pytest

from hierfl.cli import main
from hierfl.data.fetch import SOURCES, Remote, fetch, md5_of, snippet
from hierfl.data.files import DataFileError


def test_official_table():
    assert [r.name for r in SOURCES["mnist"]] == [
        "train-images-idx3-ubyte.gz", "train-labels-idx1-ubyte.gz", "t10k-images-idx3-ubyte.gz",
        "t10k-labels-idx1-ubyte.gz"]
    assert SOURCES["mnist"][0].md5 == "f68b3c2dcbeaaa9fbdd348bbdeb94873"
    assert SOURCES["fashion_mnist"][3].md5 == "bb300cfdad3c16e7a12a480ee83cd310"
    assert SOURCES["cifar10"][0].name == "cifar-10-binary.tar.gz"
    assert SOURCES["cifar10"][0].md5 == "c32a1d4ab5d03f1284b67883e8d87530"
    assert SOURCES["cifar100"][0].md5 == "03b5dce01913d631647c71ecec9e9cb8"
    for remotes in SOURCES.values():
        for r in remotes:
            assert re.fullmatch(r"[0-9a-f]{32}", r.md5)
            assert all(m.startswith(("http://", "https://")) and m.endswith("/")
                       for m in r.mirrors)


def test_md5_of_matches_hashlib(tmp_path):
    p = tmp_path / "f"
    p.write_bytes(b"hierfl" * 100_000)
    assert md5_of(str(p)) == hashlib.md5(b"hierfl" * 100_000).hexdigest()


def _tar(path, members: dict[str, bytes]) -> None:
    with tarfile.open(path, "w:gz") as tf:
        for name, data in members.items():
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tf.addfile(info, io.BytesIO(data))


def test_verified_archive_gives_only_its_named_members(tmp_path):
    root = tmp_path / "c"
    root.mkdir()
    _tar(root / "set.tar.gz", {"set-bin/train.bin": b"T" * 3074, "set-bin/test.bin": b"t" * 3074,
                               "set-bin/readme.html": b"<html>", "../evil.bin": b"x"})
    table = {"fake": (Remote("set.tar.gz", md5_of(str(root / "set.tar.gz")), ("https://x/",),
                             ("set-bin/train.bin", "set-bin/test.bin")),)}
    said: list[str] = []
    fetch("fake", str(root), offline=True, sources=table, say=said.append)
    assert sorted(os.listdir(root)) == ["set.tar.gz", "test.bin", "train.bin"]
    assert (root / "train.bin").read_bytes() == b"T" * 3074
    assert not (tmp_path / "evil.bin").exists()
    assert any("MD5" in s and "ok" in s for s in said)
    table["fake"] = (Remote("set.tar.gz", table["fake"][0].md5, ("https://x/",),
                            ("set-bin/missing.bin",)),)
    with pytest.raises(DataFileError, match="no member 'set-bin/missing.bin'"):
        fetch("fake", str(root), offline=True, sources=table, say=said.append)


def test_offline_checks_exit_2_naming_the_file(tmp_path, capsys):
    root = tmp_path / "mn"
    root.mkdir()
    (root / "train-images-idx3-ubyte.gz").write_bytes(b"not the official file")
    assert main(["data", "fetch", "mnist", "--root", str(root), "--offline"]) == 2
    err = capsys.readouterr().err
    assert "Traceback" not in err
    assert f"{root}/train-images-idx3-ubyte.gz: MD5 " in err
    assert "the official file's is f68b3c2dcbeaaa9fbdd348bbdeb94873" in err
    os.remove(root / "train-images-idx3-ubyte.gz")
    assert main(["data", "fetch", "fashion_mnist", "--root", str(root), "--offline"]) == 2
    err = capsys.readouterr().err
    assert "train-images-idx3-ubyte.gz: not there (--offline downloads nothing)" in err
    assert "http://fashion-mnist.s3-website.eu-central-1.amazonaws.com/" \
           "train-images-idx3-ubyte.gz" in err
    assert main(["data", "fetch", "cifar10"]) == 2
    assert "--root" in capsys.readouterr().err


def test_a_root_that_is_a_file_is_named_as_one(tmp_path, capsys):
    """--root an existing file: a bare 'cannot read or write afile: File exists' before."""
    afile = tmp_path / "afile"
    afile.write_text("x")
    for root, words in ((afile, f"{afile} is a file, not a folder"),
                        (afile / "sub", f"{afile} is a file, not a folder, so {afile / 'sub'} "
                                        "cannot be created")):
        assert main(["data", "fetch", "mnist", "--root", str(root), "--offline"]) == 2
        err = capsys.readouterr().err
        assert "--root = " in err and f": {words}\n" in err and "Traceback" not in err, err
    assert afile.read_text() == "x"


def test_leaf_prints_how_and_help(capsys):
    assert main(["data", "fetch", "leaf"]) == 0
    out = capsys.readouterr().out
    assert "github.com/TalwalkarLab/leaf" in out and "preprocess.sh" in out
    assert "data: {name: leaf, path:" in out
    with pytest.raises(SystemExit) as exc:
        main(["data", "fetch", "--help"])
    assert exc.value.code == 0
    assert "--offline" in capsys.readouterr().out


def test_snippet():
    assert snippet("cifar100", "/data/c") == "data: {name: cifar100, root: /data/c}"


def test_offline_accepts_plain_idx_files_the_loader_reads(tmp_path, capsys):
    """Unpacked IDX files (as `mnist` reads them) are checked as the loader checks them, not
    refused for lacking the gzipped file's MD5; a damaged one is still exit 2 naming it."""
    import numpy as np

    from hierfl.data.idx import write_idx
    root = tmp_path / "mn"
    root.mkdir()
    g = np.random.default_rng(0)
    for stem, n in (("train", 12), ("t10k", 5)):
        write_idx(str(root / f"{stem}-images-idx3-ubyte"), g.integers(0, 255, (n, 28, 28)))
        write_idx(str(root / f"{stem}-labels-idx1-ubyte"), g.integers(0, 10, n))
    assert main(["data", "fetch", "mnist", "--root", str(root), "--offline"]) == 0
    out = capsys.readouterr().out
    assert "train-images-idx3-ubyte: not gzipped" in out
    assert "read as the mnist set reads them, ok" in out
    with open(root / "t10k-images-idx3-ubyte", "ab") as f:
        f.write(b"x")
    assert main(["data", "fetch", "mnist", "--root", str(root), "--offline"]) == 2
    err = capsys.readouterr().err
    assert "Traceback" not in err and "t10k-images-idx3-ubyte: too long" in err
