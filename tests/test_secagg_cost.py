"""Secure aggregation's cost (hierfl/secagg/cost.py) counted by hand for four clients at one
server, a masked input of p = 10 entries, with and without dropouts, for secagg and for
secagg_plus with k = 2. Sizes at the defaults: public key K = 32, share S = 32, AE overhead
A = 28, client index I = 4, the agreed range r = 4 (range null), so
  one entry of a key list   I + 2K = 4 + 64 = 68
  one ciphertext E          2I + 2S + A = 8 + 64 + 28 = 100
  the masked input M        10 entries x 32 bits = 320 bits = 40 bytes."""
from __future__ import annotations

import subprocess
import sys

import pytest

from hierfl.config.errors import Problems
from hierfl.config.fields import build, is_fail
from hierfl.secagg.cost import Phase, harary, recovers, round_cost
from hierfl.secagg.spec import SecAggSpec

PLUS = SecAggSpec(protocol="secagg_plus", neighbours=2, threshold=0.25)   # k = 2, t = 1


def test_secagg_four_clients_no_dropout():
    c = round_cost(SecAggSpec(), 4, 0, 10)
    assert (c.peers, c.needed, c.recovered, c.masked_bytes) == (3, 3, True, 40)  # t = 2 + 1
    # 0: sends c_pk, s_pk, its max |x|: 64 + 4; receives 4 entries + the range: 272 + 4
    assert c.advertise == Phase(client_sent=68, client_received=276, server_sent=4 * 276,
                                server_received=4 * 68, messages=8, round_trips=1)
    # 1: three ciphertexts out, three in; the server relays 4 x 300
    assert c.share == Phase(300, 300, 1200, 1200, 8, 1)
    # 2: 40 bytes each, one-way
    assert c.masked == Phase(40, 0, 0, 160, 4, 0)
    # 4: a 1-byte bitmap of 4 survivors in; 4 b-shares (its own too) x 32 = 128 out
    assert c.unmask == Phase(128, 1, 4, 512, 8, 1)
    assert (c.client_sent, c.client_received) == (68 + 300 + 40 + 128, 276 + 300 + 1)
    assert (c.server_sent, c.server_received) == (1104 + 1200 + 4, 272 + 1200 + 160 + 512)
    assert (c.messages, c.round_trips) == (28, 3)


def test_secagg_four_clients_one_dropout():
    c = round_cost(SecAggSpec(), 4, 1, 10)
    assert (c.dropped, c.recovered) == (1, True)            # 3 survivors >= t = 3
    assert c.advertise == Phase(68, 276, 1104, 272, 8, 1)   # the dropped client took part
    assert c.share == Phase(300, 300, 1200, 1200, 8, 1)
    assert c.masked == Phase(40, 0, 0, 120, 3, 0)           # 3 masked inputs
    # 4: 1 share of the dropped s_sk + 3 b-shares = 4 x 32; 3 survivors answer
    assert c.unmask == Phase(128, 1, 3, 384, 6, 1)
    assert (c.dropped_sent, c.dropped_received) == (68 + 300, 276 + 300)
    assert (c.messages, c.round_trips) == (8 + 8 + 3 + 6, 3)


def test_secagg_aborts_below_the_threshold():
    c = round_cost(SecAggSpec(), 4, 2, 10)                  # 2 survivors < t = 3
    assert not c.recovered
    assert c.masked == Phase(40, 0, 0, 80, 2, 0)
    assert c.unmask == Phase()                              # the server stops after phase 2
    assert (c.messages, c.round_trips) == (18, 2)
    assert round_cost(SecAggSpec(threshold=0.25), 4, 2, 10).recovered     # t = 1 + 1 = 2


def test_secagg_plus_four_clients_k2():
    c = round_cost(PLUS, 4, 0, 10)
    assert (c.peers, c.needed, c.recovered) == (2, 1, True)  # t = floor(0.5) + 1
    # 0: its 2 neighbours' entries + the range: 136 + 4
    assert c.advertise == Phase(68, 140, 560, 272, 8, 1)
    assert c.share == Phase(200, 200, 800, 800, 8, 1)        # 2 ciphertexts each way
    assert c.masked == Phase(40, 0, 0, 160, 4, 0)
    assert c.unmask == Phase(64, 1, 4, 256, 8, 1)             # 2 neighbours' shares x 32
    assert (c.client_sent, c.client_received) == (68 + 200 + 40 + 64, 140 + 200 + 1)
    assert (c.messages, c.round_trips) == (28, 3)


def test_secagg_plus_four_clients_k2_one_dropout():
    c = round_cost(PLUS, 4, 1, 10)
    assert c.recovered                                      # 1 <= k - t = 1: certain
    assert c.masked == Phase(40, 0, 0, 120, 3, 0)
    assert c.unmask == Phase(64, 1, 3, 192, 6, 1)             # still one share per neighbour
    assert (c.server_sent, c.server_received) == (560 + 800 + 3, 272 + 800 + 120 + 192)
    assert (c.dropped_sent, c.dropped_received) == (268, 340)
    # at the default threshold t = floor(1) + 1 = 2: a dropped neighbour leaves 1 < 2
    c = round_cost(SecAggSpec(protocol="secagg_plus", neighbours=2), 4, 1, 10)
    assert (c.needed, c.recovered, c.unmask) == (2, False, Phase())


def test_a_given_range_is_not_sent():
    c = round_cost(SecAggSpec(range=1.0), 4, 0, 10)
    assert c.advertise == Phase(64, 272, 1088, 256, 8, 1)


def test_masked_input_packs_bits():
    assert round_cost(SecAggSpec(bits=12), 4, 0, 10).masked_bytes == 15    # 120 bits
    assert round_cost(SecAggSpec(bits=12), 4, 0, 3).masked_bytes == 5      # 36 bits -> 5 B
    assert round_cost(SecAggSpec(bits=8), 4, 0, 650).masked_bytes == 650


def test_harary_graph():
    assert harary(6, 2) == [{5, 1}, {0, 2}, {1, 3}, {2, 4}, {3, 5}, {4, 0}]
    assert harary(6, 4)[0] == {4, 5, 1, 2}
    assert harary(4, 3) == [{1, 2, 3}, {0, 2, 3}, {0, 1, 3}, {0, 1, 2}]


def test_secagg_plus_recovery_depends_on_where_the_dropped_sit():
    # 8 clients on a ring, k = 2, t = 1: two dropouts are not certain to be recoverable
    assert not round_cost(PLUS, 8, 2, 10).recovered
    assert recovers(PLUS, 8, [0, 4])        # every client keeps a surviving neighbour
    assert recovers(PLUS, 8, [0, 1])        # 0's s_sk from 7, 1's from 2
    assert not recovers(PLUS, 8, [1, 3])    # survivor 2's b_2 lived only with 1 and 3
    c = round_cost(PLUS, 8, [0, 4], 10)
    assert (c.dropped, c.recovered) == (2, True)
    assert c.unmask == Phase(64, 1, 6, 6 * 64, 12, 1)
    assert not recovers(SecAggSpec(), 4, [0, 1, 2, 3])


def test_default_neighbours():
    plus = SecAggSpec(protocol="secagg_plus")
    assert plus.peers(4) == 3               # 2 ceil(log2 4) = 4, capped at n - 1
    assert plus.peers(1000) == 20           # 2 x 10
    assert plus.peers(1025) == 22
    assert plus.peers(2) == 1
    assert SecAggSpec(protocol="secagg_plus", neighbours=6).peers(5) == 4
    assert SecAggSpec().peers(1000) == 999
    assert SecAggSpec().needed(4) == 3 and SecAggSpec().needed(5) == 3
    assert plus.needed(1000) == 11          # 20 holders: floor(10) + 1


@pytest.mark.parametrize("raw,key,msg", [
    ({"neighbours": 4}, "neighbours", "applies to secagg_plus"),
    ({"protocol": "secagg_plus", "neighbours": 3}, "neighbours", "even"),
    ({"bits": 49}, "bits", "8..48"),
    ({"bits": 4}, "bits", "8..48"),
    ({"threshold": 1.0}, "threshold", "[0, 1)"),
    ({"range": 0}, "range", "> 0"),
    ({"protocol": "secaggplus"}, "protocol", "did you mean 'secagg_plus'"),
])
def test_spec_refusals_name_the_key(raw, key, msg):
    p = Problems("s.yaml")
    assert is_fail(build(SecAggSpec, raw, p, "secure_aggregation"))
    assert [it.key for it in p.items] == [f"secure_aggregation.{key}"]
    assert msg in p.items[0].message


def test_bad_counts_are_refused():
    with pytest.raises(ValueError):
        round_cost(SecAggSpec(), 4, 5, 10)
    with pytest.raises(ValueError):
        round_cost(SecAggSpec(), 0, 0, 10)
    with pytest.raises(ValueError, match="0..7"):
        round_cost(PLUS, 8, [0, 8], 10)


def test_spec_and_cost_import_no_torch():
    code = ("import sys; import hierfl.secagg.cost, hierfl.secagg.spec; "
            "print('torch' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True).stdout.strip()
    assert out == "False"
