"""Where tests find the real-broker fixtures: ``../shared/fixtures`` beside the repository root
(provenance in its PROVENANCE.md). Every test that reads them goes through this module, so a
checkout without ``../shared`` skips those tests with one reason naming the missing path.
(``tests/`` is on ``sys.path`` through pytest's ``pythonpath`` option in pyproject.toml.)"""

from __future__ import annotations

from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
FIXTURES = REPO.parent / "shared" / "fixtures"
PINTEREST = FIXTURES / "pinterest-tiered-storage"


def missing_reason(path: Path) -> str:
    return (f"real broker fixtures missing: {path} not found (the fixture folder ../shared/fixtures "
            f"beside the repository root {REPO} is absent)")


def needs_fixture(path: Path = FIXTURES) -> pytest.MarkDecorator:
    """A skip marker for tests (or a module, as ``pytestmark``) that read ``path``."""
    return pytest.mark.skipif(not path.exists(), reason=missing_reason(path))


def require_fixture(path: Path = FIXTURES) -> Path:
    """``path``, or skip the calling test (or module, at import) when it is absent."""
    if not path.exists():
        pytest.skip(missing_reason(path), allow_module_level=True)
    return path
