"""The shipped scenarios' outputs are byte-identical to the recorded fingerprints
(tests/golden.py): a refactor or a new feature never changes an existing number silently.
One test per scenario (each a command-line run), so that test processes share them out."""
import json

import pytest

import golden

with open(golden.HASHES) as _fh:
    RECORDED = json.load(_fh)


def test_the_fingerprinted_scenarios_are_the_shipped_ones():
    assert RECORDED["rounds"] == golden.ROUNDS
    assert sorted(golden.shipped()) == sorted(RECORDED["scenarios"]), \
        "a shipped scenario was added or removed: --update"


@pytest.mark.slow
@pytest.mark.parametrize("scenario", golden.shipped())
def test_shipped_scenario_matches_its_fingerprints(scenario, tmp_path):
    want = RECORDED["scenarios"].get(scenario)
    assert want is not None, f"{scenario} has no fingerprints: --update"
    got = golden.scenario_digests(scenario, str(tmp_path / "out"))
    differ = [k for k in sorted(want) if got.get(k) != want[k]]
    differ += [f"{k} (new)" for k in got if k not in want and not golden.added_column(k, want)]
    assert not differ, (f"{scenario}: outputs changed (tests/golden.py --update if meant):\n"
                        + "\n".join(differ))
