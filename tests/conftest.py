import os

import pytest

# The suite compiles kernels in the foreground, at the first backward that wants them,
# so that what a test sees does not depend on a background compile's progress
# (tests/test_background.py starts that compile on purpose; subprocesses inherit this).
os.environ.setdefault("TAPEGRAD_BACKGROUND_COMPILE", "0")
# Every program a test generates (fused replays, tangent programs) compiles with Numba's
# bounds checks: an index outside its array fails the test where the program runs, in this
# pass (CI's NUMBA_BOUNDSCHECK=1 pass then checks the kernels, and leaves out the files that
# test the program generators: tapegrad/kernels/loops.py).  Set before tapegrad is imported.
os.environ.setdefault("TAPEGRAD_BOUNDSCHECK_PROGRAMS", "1")


@pytest.fixture(autouse=True)
def _fused_compiles_finish_in_their_test():
    """A test that replays a large recording often enough starts fuse="auto"'s compile in a
    thread (and one that walks a tape for second derivatives often enough, its tangent
    program's); wait for it at the test's end, so that it never runs (and allocates) inside the
    next tests' measurements (the memory-flatness tests trace every thread)."""
    yield
    import threading
    for t in threading.enumerate():
        if t.name in ("tapegrad-fuse", "tapegrad-tangent"):
            t.join(120)


@pytest.fixture(autouse=True)
def _torch_default_dtype_restored():
    """Tests that compare with PyTorch set its default dtype to float64 (tapegrad's); put
    back what it was, so that no test sees the one before it set (the whole suite runs the
    comparison files in one process: CI's bounds-checked run)."""
    import sys
    torch = sys.modules.get("torch")
    before = torch.get_default_dtype() if torch is not None else None
    yield
    torch = sys.modules.get("torch")
    if torch is not None:
        torch.set_default_dtype(before if before is not None else torch.float32)


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


@pytest.fixture(params=["never", "always"])
def reverse(request, monkeypatch):
    """The reverse sweep a test's backward passes take: "never" the compiled kernels,
    "always" the NumPy walk (``engine.INTERPRET``).  Under TAPEGRAD_INTERPRET=always (CI's
    interpreted run) "never" is skipped: it would repeat the default run on the same kernels."""
    from tapegrad.autograd import engine
    if request.param == "never" and os.environ.get("TAPEGRAD_INTERPRET") == "always":
        pytest.skip("the compiled sweep: tested in the default run (this one interprets every backward)")
    monkeypatch.setattr(engine, "INTERPRET", [request.param])
    return request.param
