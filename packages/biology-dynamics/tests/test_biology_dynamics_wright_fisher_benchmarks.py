"""The Wright-Fisher scenarios: registered in the package's entry point with typed variants that round-trip through
what results.jsonl records, the smoke variant smaller than quick and quick smaller than full, one headline."""

from flowlab.biology_dynamics.benchmarks import SCENARIOS
from flowlab.biology_dynamics.wright_fisher.benchmarks.exactness import ExactnessBench
from flowlab.biology_dynamics.wright_fisher.benchmarks.motifs import MotifsBench
from flowlab.biology_dynamics.wright_fisher.benchmarks.simplex import SimplexBench


def test_scenarios_are_registered_with_typed_variants():
    by_name = {s.name: s for s in SCENARIOS if s.method == "wright_fisher"}
    kinds = {
        "bio.wright_fisher.exactness": (ExactnessBench, "draws"),
        "bio.wright_fisher.simplex": (SimplexBench, "steps"),
        "bio.wright_fisher.simplex100": (SimplexBench, "steps"),
        "bio.wright_fisher.motifs": (MotifsBench, "steps"),
    }
    assert set(by_name) == set(kinds)
    assert [s.name for s in by_name.values() if s.headline] == ["bio.wright_fisher.simplex"]
    for name, s in by_name.items():
        kind, size = kinds[name]
        assert {type(v) for v in s.variants.values()} == {kind}
        for variant in s.variants.values():
            assert kind.from_mapping(variant.to_dict()) == variant
        smoke, quick, full = (getattr(s.variants[v], size) for v in ("smoke", "quick", "full"))
        assert smoke < quick < full, name
        assert s.expected_seconds["quick"] <= 180  # the quick budget
