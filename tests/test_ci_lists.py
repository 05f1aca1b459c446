"""CI runs the comparisons with PyTorch: every test file that imports torch (they skip
those comparisons without it, as the main suite runs) is in ``.ci/run``'s torch step."""
import os
import re

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
_IMPORTS_TORCH = re.compile(r'importorskip\(\s*"torch"|^\s*import torch\b|^\s*from torch\b', re.M)


def test_every_file_comparing_with_torch_runs_in_the_torch_step():
    with open(os.path.join(ROOT, ".ci", "run"), encoding="utf-8") as f:
        listed = re.search(r'^TORCH_TESTS="([^"]*)"', f.read(), re.M)
    assert listed is not None, ".ci/run no longer sets TORCH_TESTS"
    listed = set(listed.group(1).split())
    tests = os.path.join(ROOT, "tests")
    comparing = set()
    for name in sorted(os.listdir(tests)):
        if name.startswith("test_") and name.endswith(".py"):
            with open(os.path.join(tests, name), encoding="utf-8") as f:
                if _IMPORTS_TORCH.search(f.read()):
                    comparing.add("tests/" + name)
    assert len(comparing) > 20         # (the pattern still finds them)
    assert comparing - listed == set(), "compare with torch but never run with it in CI"
    assert listed - comparing == set(), "in the torch step without comparing with torch"
