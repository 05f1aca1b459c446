import os

import pytest

# The suite compiles kernels in the foreground, at the first backward that wants them,
# so that what a test sees does not depend on a background compile's progress
# (tests/test_background.py starts that compile on purpose; subprocesses inherit this).
os.environ.setdefault("TAPEGRAD_BACKGROUND_COMPILE", "0")


@pytest.fixture
def fast_only(monkeypatch):
    """Fail if tg.autograd.functional falls back to its reverse-mode path instead of walking
    the tape in forward mode (tests/test_tangent*.py)."""
    from tapegrad.autograd import functional

    def must(f, *args):
        out = f(*args)
        assert out is not None, "the tape was not walked in forward mode"
        return out
    monkeypatch.setattr(functional, "_on_tape", must)
