"""A damaged Numba cache (files truncated, as a killed process or a full disk leaves
them, or zeroed) is detected, removed with one warning per file, and compiled anew,
instead of failing every later compiled backward with ``_pickle.UnpicklingError``."""
import glob
import os
import re
import subprocess
import sys
import textwrap

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

# (an indexing tape: its shape+linalg variant is the quickest of the sweep to compile)
CODE = """
    import warnings
    warnings.simplefilter("always")
    import tapegrad as tg
    from tapegrad.kernels import sweep as K
    from tapegrad.core.registry import SHAPE
    x = tg.tensor([1.0, 2.0, 3.0], requires_grad=True)
    x[1].backward()
    print(x.grad.tolist())
    r = K.run_for(1 << SHAPE)
    print("variant", len(r.stats.cache_hits), len(r.stats.cache_misses))
"""


def _run(cache):
    env = dict(os.environ, TAPEGRAD_INTERPRET="never", NUMBA_CACHE_DIR=str(cache), TAPEGRAD_QUIET="1",
               PYTHONPATH=ROOT)
    r = subprocess.run([sys.executable, "-c", textwrap.dedent(CODE)], capture_output=True, text=True, env=env,
                       timeout=600, cwd=ROOT)
    assert r.returncode == 0, r.stderr[-4000:]
    assert "UnpicklingError" not in r.stderr.replace("UnpicklingError: ", "")  # (only inside the warnings)
    damaged = re.findall(r"RuntimeWarning: tapegrad: Numba's cache file (\S+) was damaged \((\w+): ", r.stderr)
    return r.stdout.splitlines(), damaged


def _files(cache, pattern):
    return sorted(glob.glob(os.path.join(str(cache), "**", pattern), recursive=True))


pytestmark = pytest.mark.skipif(os.environ.get("TAPEGRAD_INTERPRET") == "always" or
                                os.environ.get("NUMBA_BOUNDSCHECK") == "1",
                                reason="cache files, not kernels: tested once, in the default pass")


def test_truncated_and_zeroed_cache_files_are_removed_and_compiled_again(tmp_path):
    cache = tmp_path / "numba-cache"
    out, damaged = _run(cache)                  # empty cache: compiles and writes it
    assert out == ["[0.0, 1.0, 0.0]", "variant 0 1"] and damaged == []

    # truncated: the sweep variant's index to half its size, a data file of layout's to 10 bytes
    index, = [p for p in _files(cache, "sweep._make_run.locals.run-*.nbi")]
    data, = _files(cache, "sweep.layout-*.nbc")
    for path, size in ((index, os.path.getsize(index) // 2), (data, 10)):
        with open(path, "r+b") as fh:
            fh.truncate(size)
    out, damaged = _run(cache)
    assert out == ["[0.0, 1.0, 0.0]", "variant 0 1"]           # the variant compiled again
    assert sorted(p for p, _ in damaged) == sorted([index, data])
    assert {e for _, e in damaged} <= {"UnpicklingError", "EOFError"}

    # the cache it rewrote is whole: loaded, no warning
    out, damaged = _run(cache)
    assert out == ["[0.0, 1.0, 0.0]", "variant 1 0"] and damaged == []

    # zeroed: every index and data file, sizes kept
    files = _files(cache, "*.nbi") + _files(cache, "*.nbc")
    for path in files:
        size = os.path.getsize(path)
        with open(path, "r+b") as fh:
            fh.write(b"\0" * size)
    out, damaged = _run(cache)
    assert out == ["[0.0, 1.0, 0.0]", "variant 0 1"]
    assert damaged and all(p in files and e == "UnpicklingError" for p, e in damaged)
    assert len({p for p, _ in damaged}) == len(damaged)        # one warning per file
    assert index in [p for p, _ in damaged]
    out, damaged = _run(cache)
    assert out == ["[0.0, 1.0, 0.0]", "variant 1 0"] and damaged == []


def test_a_cache_filled_from_other_kernel_sources_is_flushed(tmp_path):
    # each NUMBA_CACHE_DIR keeps the stamp of the sources it was filled from: a cache last
    # filled by another version of the kernels (another stamp) is emptied and compiled anew,
    # whatever another cache's stamp says (a sweep variant embeds the kernels it calls)
    from tapegrad.kernels import sweep
    cache = tmp_path / "cache"
    cache.mkdir()
    out, _ = _run(cache)
    assert out[0] == "[0.0, 1.0, 0.0]" and out[1] == "variant 0 1"
    stamp = cache / "tapegrad-kernels.stamp"
    assert stamp.read_text() == sweep.SOURCE_HASH
    out, _ = _run(cache)
    assert out[1] == "variant 1 0"              # (the same sources: loaded from the cache)
    stamp.write_text("0123456789abcdef")        # (filled by other sources)
    out, _ = _run(cache)
    assert out[0] == "[0.0, 1.0, 0.0]" and out[1] == "variant 0 1"     # flushed, compiled again
    assert stamp.read_text() != "0123456789abcdef"


def test_the_stamp_is_kept_in_the_numba_cache_it_describes(tmp_path, monkeypatch):
    from tapegrad.kernels import codegen
    gen = str(tmp_path / "generated")
    monkeypatch.delenv("NUMBA_CACHE_DIR", raising=False)      # (the package's __pycache__ qualifies in this checkout)
    assert codegen._stamp_path(gen) == os.path.join(gen, "kernels.stamp")
    for name in ("a", "b"):
        d = tmp_path / name
        d.mkdir()
        monkeypatch.setenv("NUMBA_CACHE_DIR", str(d))
        assert codegen._stamp_path(gen) == os.path.join(str(d), "tapegrad-kernels.stamp")
    # a cache directory that does not exist yet is made (as Numba makes it), so that the stamp
    # the first run writes is the one the second run reads
    monkeypatch.setenv("NUMBA_CACHE_DIR", str(tmp_path / "missing"))
    assert codegen._stamp_path(gen) == os.path.join(str(tmp_path / "missing"), "tapegrad-kernels.stamp")
    assert (tmp_path / "missing").is_dir()
    # one that cannot be made (a file where its parent should be): one warning, and the cache,
    # with its stamp, in the user cache instead
    (tmp_path / "file").write_text("")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    monkeypatch.setenv("NUMBA_CACHE_DIR", str(tmp_path / "file" / "cache"))
    with pytest.warns(RuntimeWarning, match=r"NUMBA_CACHE_DIR=\S+/file/cache is not used: it cannot be made"):
        path = codegen._stamp_path(gen)
    assert path == os.path.join(str(tmp_path / "xdg"), "tapegrad", "numba", "tapegrad-kernels.stamp")
