"""constraints-min.txt pins exactly the lower bounds pyproject.toml declares, so that
``make test-min`` tests the versions the package says it works with."""

from __future__ import annotations

from pathlib import Path

import pytest
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name
from packaging.version import Version

tomllib = pytest.importorskip("tomllib")  # Python 3.11 on

ROOT = Path(__file__).resolve().parents[1]
#: The extras `make test-min` installs beside the dependencies.
EXTRAS = ("test", "formats")


def _lower_bounds() -> dict[str, str]:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    declared = list(project["dependencies"])
    for extra in EXTRAS:
        declared += project["optional-dependencies"][extra]
    bounds = {}
    for text in declared:
        requirement = Requirement(text)
        lower = [spec.version for spec in requirement.specifier if spec.operator == ">="]
        if lower:
            bounds[canonicalize_name(requirement.name)] = lower[0]
    return bounds


def _pins() -> dict[str, str]:
    pins = {}
    for line in (ROOT / "constraints-min.txt").read_text().splitlines():
        line = line.split("#", 1)[0].strip()
        if line:
            name, version = line.split("==")
            pins[canonicalize_name(name)] = version
    return pins


def test_every_lower_bound_is_pinned_as_declared():
    """Each package pyproject.toml bounds from below (dependencies, the test and formats
    extras) is pinned at that bound in constraints-min.txt, and nothing else is pinned."""
    bounds, pins = _lower_bounds(), _pins()
    assert set(pins) == set(bounds)
    moved = {name: (pins[name], lower) for name, lower in bounds.items()
             if Version(pins[name]) != Version(lower)}
    assert not moved, f"pinned, declared: {moved}"
