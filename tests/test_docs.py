"""The generated list of supported operations (docs/ops.md) is up to date.

Runs ``docs/gen_ops.py --check`` in a fresh interpreter (the generator calls every
public operation, and its tape state must not mix with other tests'); mkdocs is not
needed.  After adding or changing an op: ``python docs/gen_ops.py``.
"""
import os
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _run(*args):
    return subprocess.run([sys.executable, os.path.join(ROOT, "docs", "gen_ops.py"), *args],
                          capture_output=True, text=True, cwd=ROOT, timeout=300)


def test_ops_page_is_up_to_date():
    r = _run("--check")
    assert r.returncode == 0, r.stderr + r.stdout


def test_ops_page_lists_the_registry_and_public_names():
    with open(os.path.join(ROOT, "docs", "ops.md"), encoding="utf-8") as f:
        page = f.read()
    import tapegrad as tg
    from tapegrad.core.registry import META, OP_NAMES
    for code, name in OP_NAMES.items():
        if code >> 6 != META:
            assert "| `%s` |" % name in page, name
    for name in ("sum", "matmul", "log_softmax", "where", "cat"):
        assert callable(getattr(tg, name))
        assert "| `%s` |" % name in page
    assert "| `Tensor.backward`" not in page       # bookkeeping, listed apart
    assert "| `sin` | `x` | `SinBackward0` | `sin` | yes |" in page
    assert "| `clamp` | `x, 0.5, 1.5` | `ClampBackward1` | `clamp` | yes |" in page
    assert "| `argmax` | `x` | not differentiable |" in page


def test_check_fails_when_the_page_is_stale(tmp_path):
    with open(os.path.join(ROOT, "docs", "ops.md"), encoding="utf-8") as f:
        good = f.read()
    stale = tmp_path / "ops.md"
    stale.write_text(good.replace("SinBackward0", "SineBackward0"), encoding="utf-8")
    r = _run("--check", "--page", str(stale))
    assert r.returncode == 1
    assert "out of date" in r.stderr
    stale.write_text(good, encoding="utf-8")
    assert _run("--check", "--page", str(stale)).returncode == 0
