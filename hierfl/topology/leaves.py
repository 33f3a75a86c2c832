"""Maps of a built topology (Topology.from_tree) that store the cloud's and the aggregators'
entries only and answer for a client by its name: a million clients' dict entries took ~1 s
to insert, and nothing iterates over them."""
from __future__ import annotations


class Leaves(dict):
    """A map stored for the cloud and the aggregators only: every client (`is_client`) has the
    same value, `leaf` (a client's children, (); its depth)."""

    def __init__(self, is_client, leaf=()):
        super().__init__()
        self.is_client, self.leaf = is_client, leaf

    def __missing__(self, node: str):
        if self.is_client(node):
            return self.leaf
        raise KeyError(node)

    def get(self, node, default=None):
        return self[node] if node in self or self.is_client(node) else default


class ClientName:
    """Whether a name is a built tree's client: "client<k>" at row c0 + k (build_tree's
    layout), without a set of a million names."""

    def __init__(self, names: list[str], c0: int):
        assert names[c0] == "client0" and names[-1] == f"client{len(names) - c0 - 1}"
        self.names, self.c0 = names, c0

    def __call__(self, node) -> bool:
        if not isinstance(node, str) or not node.startswith("client") or \
                not node[6:].isdecimal():
            return False
        row = self.c0 + int(node[6:])
        return row < len(self.names) and self.names[row] == node
