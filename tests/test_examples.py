"""The scripts in examples/ run (shortened) and reach their figures; the tour's digits demo runs or skips."""
import importlib.util
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

EXAMPLES = Path(__file__).resolve().parent.parent / "examples"


def _load(name):
    spec = importlib.util.spec_from_file_location(f"_example_{name}", EXAMPLES / f"{name}.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_digits_mlp(tmp_path):
    pytest.importorskip("sklearn")
    pytest.importorskip("tqdm")
    pytest.importorskip("matplotlib")
    png = tmp_path / "curves.png"
    res = _load("digits_mlp").main(["--epochs", "4", "--lr", "3e-3", "--no-progress", "--plot", str(png)])
    assert res["test_acc"] >= 0.90
    assert len(res["history"]["test_acc"]) == 4
    assert png.is_file() and png.stat().st_size > 0
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_char_model(tmp_path, capsys):
    """One epoch: below the uniform guess by far, text from the vocabulary, the curves drawn."""
    pytest.importorskip("matplotlib")
    png = tmp_path / "char.png"
    res = _load("char_model").main(["--epochs", "1", "--hidden", "64", "--sample", "60", "--plot", str(png)])
    assert res["uniform"] == pytest.approx(np.log(59)) and len(res["vocab"]) == 59
    assert res["val_loss"] < 2.0 < res["uniform"]
    assert len(res["history"]["batch_loss"]) == len(res["history"]["lr"]) == 244
    assert max(res["history"]["lr"]) == pytest.approx(1e-2, rel=1e-3)         # (OneCycleLR's peak)
    assert res["sample"].startswith("In the beginning") and len(res["sample"]) == 16 + 60
    assert set(res["sample"]) <= set(res["vocab"])
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert "validation" in capsys.readouterr().out


def test_digits_cnn(tmp_path):
    pytest.importorskip("sklearn")
    pytest.importorskip("tqdm")
    pytest.importorskip("matplotlib")
    png = tmp_path / "curves.png"
    res = _load("digits_cnn").main(["--epochs", "4", "--no-progress", "--plot", str(png)])
    assert res["test_acc"] >= 0.85
    assert res["history"]["train_loss"][-1] < res["history"]["train_loss"][0]
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_rosenbrock_lbfgs(capsys):
    res = _load("rosenbrock_lbfgs").main(["--n", "50"])
    assert res["max_err"] < 1e-3
    assert res["fun"] < 1e-8
    out = capsys.readouterr().out
    assert "iterations:" in out and "max |x - 1|" in out


def test_ode_fit(capsys):
    res = _load("ode_fit").main(["--steps", "200", "--iters", "80", "--lr", "0.02"])
    zeta_true, omega_true = res["true"]
    assert res["zeta"] == pytest.approx(zeta_true, rel=0.05)
    assert res["omega"] == pytest.approx(omega_true, rel=0.05)
    assert "time per gradient" in capsys.readouterr().out


def _tour(*pre):
    code = "; ".join([*pre, "import runpy", "runpy.run_module('tapegrad', run_name='__main__')"])
    p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=600)
    assert p.returncode == 0, p.stdout + p.stderr
    return p.stdout


def test_tour_digits_demo():
    pytest.importorskip("sklearn")
    accs = [float(a) for a in re.findall(r"test accuracy (\S+)", _tour())]
    assert len(accs) == 3 and accs[-1] >= 0.90


def test_tour_skips_digits_without_sklearn():
    out = _tour("import sys", "sys.modules['sklearn'] = None")   # makes `import sklearn` fail
    assert "skipped: scikit-learn is not installed" in out
    assert "loss after:" in out


def test_dask_logreg(capsys):
    """Shortened; needs the dask extra (runs in .ci/run's distributed block)."""
    pytest.importorskip("distributed")
    res = _load("dask_logreg").main(["--rows", "20000", "--cols", "8", "--chunks", "3", "--hand-evals", "1"])
    assert res["success"]
    np.testing.assert_allclose(res["x"], res["x_single"], rtol=1e-8, atol=1e-10)
    assert abs(res["fun"] - res["fun_single"]) <= 1e-10 * res["fun_single"]
    # the fit recovers the generating weights, and the hand-written Dask gradient agrees
    assert np.max(np.abs(res["x"][:8] - res["w_true"])) < 0.1
    assert res["hand_rel"] < 1e-12
    np.testing.assert_allclose(res["hand_grad"], res["grad"], rtol=1e-9, atol=1e-9)
    out = capsys.readouterr().out
    assert "s per evaluation" in out and "speed-up per evaluation" in out
    assert "dask-ml is not installed" in out or "dask-ml LogisticRegression" in out


def test_newton_trust_ncg(capsys):
    ex = _load("newton_trust_ncg")
    res = ex.main(["--n", "60"])["tapegrad"]
    assert res["success"] and res["first_success"] and res["nhvp"] > 0
    np.testing.assert_allclose(res["x"], 1.0, atol=1e-6)
    assert "Hessian-vector products" in capsys.readouterr().out
    # the tape's H p is the Hessian of Rosenbrock written out (scipy.optimize.rosen_hess_prod)
    from scipy.optimize import rosen_hess_prod
    fun, hessp = ex.tapegrad_oracles(np.full(60, 0.5))
    x, p = np.linspace(0.1, 1.9, 60), np.cos(np.arange(60.0))
    np.testing.assert_allclose(hessp(x, p), rosen_hess_prod(x, p), rtol=1e-12, atol=1e-10)
