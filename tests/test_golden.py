"""The shipped scenarios' outputs are byte-identical to the recorded fingerprints
(tests/golden.py): a refactor or a new feature never changes an existing number silently."""
import json

import pytest

import golden


@pytest.mark.slow
def test_shipped_scenarios_match_their_fingerprints():
    with open(golden.HASHES) as fh:
        recorded = json.load(fh)
    assert recorded["rounds"] == golden.ROUNDS
    want = recorded["scenarios"]
    got = golden.all_digests()
    assert sorted(got) == sorted(want), "a shipped scenario was added or removed: --update"
    differ = [f"{s}: {k}" for s in want for k in sorted(want[s]) if got[s].get(k) != want[s][k]]
    differ += [f"{s}: {k} (new)" for s in got for k in got[s]
               if k not in want[s] and not golden.added_column(k, want[s])]
    assert not differ, "outputs changed (tests/golden.py --update if meant):\n" + "\n".join(differ)
