"""The shipped scenarios' outputs are byte-identical to the recorded fingerprints
(tests/golden.py): a refactor or a new feature never changes an existing number silently.
One test per scenario (each a command-line run), so that test processes share them out."""
import pytest

import golden

ROUNDS, PLATFORMS = golden.recorded()


def pins() -> dict:
    """This platform's fingerprints (kernels pick their summation order by processor: see
    tests/golden.py); a platform with none skips, naming the command that pins it."""
    here = golden.platform()
    if here not in PLATFORMS:
        pytest.skip(f"no golden fingerprints for this platform ({here}); recorded: "
                    f"{sorted(PLATFORMS)}; from a checkout known to be right: "
                    "tests/golden.py --pin-platform")
    return PLATFORMS[here]


def test_the_fingerprinted_scenarios_are_the_shipped_ones():
    assert ROUNDS == golden.ROUNDS
    for name, recorded in PLATFORMS.items():
        assert sorted(golden.shipped()) == sorted(recorded), \
            f"{name}: a shipped scenario was added or removed: --update"


# columns no processor's arithmetic reaches: who trained, for how many steps, what was sent
STRUCTURE = ("clients.csv:client", "clients.csv:round", "clients.csv:device_class",
             "clients.csv:link_class", "clients.csv:budget", "clients.csv:steps",
             "clients.csv:straggler", "clients.csv:failed", "clients.csv:dropped",
             "metrics.csv:selected", "metrics.csv:reported", "metrics.csv:bytes_client_edge",
             "metrics.csv:bytes_edge_cloud", "trace.csv:kind", "trace.csv:node")


def test_platforms_agree_where_arithmetic_does_not_reach():
    """Fingerprints pinned on two platforms from a checkout known to be right differ only in
    numbers (a sum's last bits), never in who trained, how many steps, or the bytes sent: a
    platform pinned from a wrong checkout would show here."""
    sets = list(PLATFORMS.items())
    for name, other in sets[1:]:
        for scenario, want in sets[0][1].items():
            for key, digest in want.items():
                if key.split("/", 1)[-1] in STRUCTURE:
                    assert other[scenario][key] == digest, f"{name}: {scenario} {key}"


@pytest.mark.slow
@pytest.mark.parametrize("scenario", golden.shipped())
def test_shipped_scenario_matches_its_fingerprints(scenario, tmp_path):
    want = pins().get(scenario)
    assert want is not None, f"{scenario} has no fingerprints: --update"
    got = golden.scenario_digests(scenario, str(tmp_path / "out"))
    differ = [k for k in sorted(want) if got.get(k) != want[k]]
    differ += [f"{k} (new)" for k in got if k not in want and not golden.added_column(k, want)]
    assert not differ, (f"{scenario}: outputs changed (tests/golden.py --update if meant):\n"
                        + "\n".join(differ))
