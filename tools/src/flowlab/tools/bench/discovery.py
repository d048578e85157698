"""Find scenarios registered under the `flowlab.benchmarks` entry point group and select them by pattern."""

from __future__ import annotations

import fnmatch
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from importlib.metadata import entry_points

from flowlab.core.bench import SUITES, Scenario

BENCHMARKS_GROUP = "flowlab.benchmarks"


class SelectionError(ValueError):
    """A bad `--only` pattern or suite name (reported as a one-line message)."""


@dataclass(frozen=True)
class Discovery:
    """Registered scenarios sorted by name, and entry points that failed to load (name -> one-line message)."""

    scenarios: list[Scenario]
    failures: dict[str, str]


def discover(group: str = BENCHMARKS_GROUP) -> Discovery:
    """Load every entry point of `group`; a package whose scenarios fail to import is reported, not fatal."""
    found: dict[str, Scenario] = {}
    failures: dict[str, str] = {}
    for ep in entry_points(group=group):
        try:
            loaded = list(ep.load())
        except Exception as err:  # a broken package must not hide the others' scenarios
            failures[ep.name] = f"{ep.value}: {type(err).__name__}: {err}"
            continue
        for scenario in loaded:
            if not isinstance(scenario, Scenario):
                raise TypeError(f"entry point {ep.name} = {ep.value} yielded {type(scenario).__name__}, not a Scenario")
            if scenario.name in found:
                raise ValueError(f"duplicate scenario name {scenario.name!r} (entry point {ep.name})")
            found[scenario.name] = scenario
    return Discovery([found[k] for k in sorted(found)], failures)


def _matches(name: str, pattern: str) -> bool:
    if any(c in pattern for c in "*?["):
        return fnmatch.fnmatchcase(name, pattern)
    return name == pattern or name.startswith(pattern + ".") or pattern in name


def check_suite(suite: str) -> None:
    """`SelectionError` naming the suites unless `suite` is one (checked before any scenario is imported)."""
    if suite not in SUITES:
        raise SelectionError(f"unknown suite {suite!r}; expected one of {', '.join(SUITES)}")


def select(scenarios: Sequence[Scenario], only: Iterable[str] | None, suite: str) -> list[Scenario]:
    """The scenarios a suite runs, narrowed to those whose name matches any pattern (glob, exact, dotted prefix or
    substring). `default` is each method's headline case, unless patterns name the scenarios; every other suite
    takes the scenarios that have its variant (see `SUITES`)."""
    check_suite(suite)
    chosen = list(scenarios)
    patterns = [p for spec in (only or ()) for p in spec.split(",") if p.strip()]
    if patterns:
        chosen = [s for s in chosen if any(_matches(s.name, p.strip()) for p in patterns)]
        if not chosen:
            known = ", ".join(s.name for s in scenarios) or "none registered"
            raise SelectionError(f"no scenario matches {', '.join(patterns)!r} (known: {known})")
    elif suite == "default":
        chosen = [s for s in chosen if s.headline]
    return [s for s in chosen if SUITES[suite] in s.variants]
