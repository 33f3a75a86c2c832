"""Where outputs may go: a folder the user clearly asked for. The rule (README, "Outputs"):
an output folder is a non-empty path to a folder that exists or can be created (no existing
file on the way), and not inside a system folder (below): relative paths and absolute paths
anywhere else (a home, a project, /tmp, a mounted disk) are fine."""
from __future__ import annotations

import os

SYSTEM_DIRS = ("/proc", "/sys", "/dev", "/etc", "/bin", "/sbin", "/boot", "/lib", "/lib32",
               "/lib64", "/libx32", "/usr", "/run", "/var/lib", "/var/run", "/snap")


def _inside(path: str, top: str) -> bool:
    return path == top or path.startswith(top.rstrip("/") + "/")


def output_problem(path: str, what: str = "output folder") -> str | None:
    """Why `path` cannot be an output folder, or None."""
    if not isinstance(path, str) or not path.strip():
        return f"an empty {what}: give a folder (e.g. reports/NAME)"
    if "\0" in path:
        return f"the {what} holds a NUL character"
    real = os.path.realpath(os.path.abspath(path))
    if real == "/" or any(_inside(real, d) for d in SYSTEM_DIRS):
        return (f"{real} is a system folder: write under a home, a project or /tmp "
                f"(not {', '.join(SYSTEM_DIRS)} or /)")
    cur = file_on_the_way(real)
    if cur is not None:
        return (f"{cur} exists and is not a folder" if cur == real else
                f"{cur} is a file, so {real} cannot be created")
    return None


def file_on_the_way(folder: str) -> str | None:
    """The existing non-folder (a file) at `folder` or on the way to it, or None: where
    os.makedirs(folder) would fail with a bare 'File exists' or 'Not a directory'."""
    cur = os.path.realpath(os.path.abspath(folder))
    while not os.path.exists(cur):
        parent = os.path.dirname(cur)
        if parent == cur:
            break
        cur = parent
    return None if os.path.isdir(cur) else cur


def folder_problem(folder: str) -> str | None:
    """Why a folder cannot be made at `folder` because a file is in the way, or None."""
    cur = file_on_the_way(folder)
    if cur is None:
        return None
    real = os.path.realpath(os.path.abspath(folder))
    return f"{cur} is a file, not a folder" + ("" if cur == real else
                                               f", so {real} cannot be created")


def figure_problem(path: str, suffixes: tuple[str, ...] = (".png", ".svg", ".pdf")) -> str | None:
    """Why `path` cannot be a figure file to write, or None."""
    if not path.lower().endswith(suffixes):
        return f"a figure file ends in {', '.join(suffixes)}"
    folder = os.path.dirname(os.path.abspath(path))
    if not os.path.isdir(folder):
        return f"no such folder: {folder}"
    if os.path.isdir(path):
        return "is a folder"
    return output_problem(folder, "figure folder")


def not_a_file(path: str) -> str | None:
    """What `path` is where it exists but is no regular file ("a directory", "a FIFO (named
    pipe)", "a symlink loop", ...), or None (a regular file, or nothing there: the caller says
    "not found"). Every input file (scenario, topology, data, trace, plugin) is checked with it,
    so that none of them says "not found" of something that is there."""
    import errno
    import stat

    try:
        mode = os.stat(path).st_mode
    except ValueError:                  # a NUL in the path: nothing there
        return None
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            return "a symlink loop"
        if os.path.islink(path):
            return f"a dangling symlink (to {os.readlink(path)})"
        if exc.errno in (errno.ENOENT, errno.ENOTDIR):
            return None
        return f"unreadable ({exc.strerror})"
    if stat.S_ISREG(mode):
        return None
    for test, what in ((stat.S_ISDIR, "a directory"), (stat.S_ISFIFO, "a FIFO (named pipe)"),
                       (stat.S_ISSOCK, "a socket"), (stat.S_ISCHR, "a character device"),
                       (stat.S_ISBLK, "a block device")):
        if test(mode):
            return what
    return "not a regular file"
