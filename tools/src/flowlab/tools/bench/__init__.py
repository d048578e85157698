"""The cross-package benchmark runner behind `flowlab bench`."""

from flowlab.core.lazy import lazy_exports

__getattr__, __dir__, __all__ = lazy_exports(
    __name__,
    {
        "flowlab.tools.bench.case": ["Record", "run_one"],
        "flowlab.tools.bench.discovery": ["Discovery", "discover", "select"],
        "flowlab.tools.bench.report": ["write_report"],
        "flowlab.tools.bench.runner": ["run_all"],
    },
)
