"""CI runs the comparisons with PyTorch: the suite skips them without torch (as the README
run does), and ``.ci/run``'s bounds-checked run has torch on its path; nothing it leaves
out may be a test that compares with torch."""
import importlib
import inspect
import os
import re

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
_IMPORTS_TORCH = re.compile(r'importorskip\(\s*"torch"|^\s*import torch\b|^\s*from torch\b', re.M)


def _bounds_checked_run():
    """The pytest command of ``.ci/run``'s bounds-checked run, continuation lines joined."""
    with open(os.path.join(ROOT, ".ci", "run"), encoding="utf-8") as f:
        text = f.read().replace("\\\n", " ")
    runs = [ln for ln in text.splitlines() if "NUMBA_BOUNDSCHECK=1" in ln and "pytest" in ln]
    assert len(runs) == 1, ".ci/run no longer has one bounds-checked pytest run"
    return runs[0]


def test_the_bounds_checked_run_has_torch_and_leaves_out_no_comparison_with_it():
    run = _bounds_checked_run()
    assert re.search(r'PYTHONPATH="\$tmp/torch-site"', run), "the bounds-checked run no longer sees torch"
    left_out = re.findall(r"--deselect (\S+)", run)
    assert left_out, "the pattern no longer finds the run's --deselect arguments"
    tests = os.path.join(ROOT, "tests")
    comparing = []
    for name in sorted(os.listdir(tests)):
        if name.startswith("test_") and name.endswith(".py"):
            with open(os.path.join(tests, name), encoding="utf-8") as f:
                if _IMPORTS_TORCH.search(f.read()):
                    comparing.append("tests/" + name)
    assert len(comparing) > 20         # (the pattern still finds them)
    for item in left_out:
        path, _, test = item.partition("::")
        assert os.path.exists(os.path.join(ROOT, path)), item
        if path in comparing:
            # a single test may be left out of a file that compares elsewhere: not one that does
            assert test, "%s compares with torch and is left out of the bounds-checked run" % path
            module = importlib.import_module(os.path.basename(path)[:-3])
            body = inspect.getsource(getattr(module, test))      # (it may be made by a shared harness)
            assert "torch" not in body, "%s compares with torch and is left out" % item
