"""The tour ``python -m tapegrad`` and ``python -m tapegrad warmup`` run and print real values."""
import os
import re
import subprocess
import sys

import pytest


def _run(*args):
    p = subprocess.run([sys.executable, "-m", "tapegrad", *args], capture_output=True, text=True, timeout=600)
    assert p.returncode == 0, p.stdout + p.stderr
    return p.stdout


@pytest.fixture(scope="module")
def tour():
    return _run()


def _squash(s):
    return re.sub(r"\s+", "", s)


def test_seed_examples(tour):
    assert "tensor([[5., 5.]], grad_fn=<MmBackward0>)" in tour
    assert "grad can be implicitly created only for scalar outputs" in tour
    assert "(w.grad = None)" in tour
    assert "tensor([[3.]], grad_fn=<MmBackward0>)" in tour and "tensor([[1., 1.]])" in tour
    assert "tensor(5., grad_fn=<SelectBackward0>)" in tour
    grads = [_squash(g) for g in re.findall(r"w\.grad = tensor\((\[\[.*?\]\])\)", tour)]
    assert grads == ["[[1.,1.]]", "[[2.,4.]]", "[[4.,8.]]", "[[5.,10.]]", "[[6.,12.]]"]


def test_optimization_decreases_loss(tour):
    before = float(re.search(r"loss before:\s*(\S+)", tour).group(1))
    after = float(re.search(r"loss after:\s*(\S+)", tour).group(1))
    assert before == pytest.approx(12.5)
    assert after < before / 10
    assert re.search(r"per iteration afterwards: [\d.]+ ms", tour)


def test_warmup():
    out = _run("warmup")
    # one line per group with its time (tqdm's bar, on a terminal only, goes to stderr)
    for group in ("numba", "select", "elementwise", "more elementwise", "reductions", "indexing/shape", "matmul",
                  "replay", "sweep: unary+binary", "sweep: reduce", "sweep: shape+linalg",
                  "sweep: unary+binary+reduce+shape+linalg"):
        assert re.search(r"^  %s +[\d.]+ s$" % re.escape(group), out, re.M), group
    assert out.count(" s\n") == 1 + 7 + 8 + 1        # numba, seven families, eight variants, the total
    assert re.search(r"warmup done in [\d.]+ s", out)


def test_version():
    import tomllib
    import tapegrad
    with open(os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "pyproject.toml"), "rb") as fh:
        version = tomllib.load(fh)["project"]["version"]
    assert tapegrad.__version__ == version
    assert _run("--version") == "tapegrad %s\n" % version


def test_bad_argument():
    p = subprocess.run([sys.executable, "-m", "tapegrad", "nonsense"], capture_output=True, text=True)
    assert p.returncode != 0 and "usage" in p.stderr
