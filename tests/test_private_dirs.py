"""Nothing tapegrad runs, unpickles or appends to comes from a directory another user
can write (``tapegrad/_private.py``), and a directory that cannot be used is one
warning and a fall back, never an exception from ``import`` or ``backward``.

Other users are simulated by files handed to another uid (the suite runs as root,
whom modes do not stop: the checks read ownership and modes themselves), modes that
let others write, symbolic links and files placed where a directory is expected, in
scratch directories (``TMPDIR``, ``XDG_CACHE_HOME``, ``NUMBA_CACHE_DIR``, a copy of the
package).  A planted file, if it were run or unpickled, would create a marker file."""
import errno
import importlib.util
import os
import pickle
import shutil
import stat
import subprocess
import sys
import textwrap
import warnings

import pytest

from tapegrad import _background, _jit, _private
from tapegrad.kernels import codegen

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
OTHER = 54321       # (a uid no one here has)


def give_away(path):
    """Make ``path`` another user's (needs root: skipped otherwise)."""
    try:
        os.chown(path, OTHER, OTHER)
    except PermissionError:
        pytest.skip("handing a file to another user needs root")


class _Plant:
    """A pickle that creates ``marker`` when unpickled."""

    def __init__(self, marker):
        self.marker = str(marker)

    def __reduce__(self):
        return (open, (self.marker, "w"))


def planted_code(marker):
    return "open(%r, 'w').close()\n" % str(marker)


@pytest.fixture
def scratch(tmp_path, monkeypatch):
    """A user cache and a Numba cache of this test's own, and warnings seen again."""
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    monkeypatch.delenv("NUMBA_CACHE_DIR", raising=False)
    monkeypatch.setattr(_private, "_WARNED", set())
    return tmp_path


# -- the checks ------------------------------------------------------------------------------
def test_what_a_directory_must_be(tmp_path):
    ok = tmp_path / "ok"
    ok.mkdir(mode=0o700)
    assert _private.problem(str(ok)) is None
    (tmp_path / "file").write_text("")
    assert _private.problem(str(tmp_path / "file")) == "it is not a directory"
    assert _private.problem(str(tmp_path / "nothing")) == "it does not exist"
    os.symlink(str(ok), str(tmp_path / "link"))
    assert _private.problem(str(tmp_path / "link")) == "it is a symbolic link"
    for mode, why in ((0o770, "others can write to it (mode 770)"), (0o777, "others can write to it (mode 777)"),
                      (0o755, None), (0o500, None)):
        os.chmod(str(ok), mode)
        assert _private.problem(str(ok)) == why
    os.chmod(str(ok), 0o700)
    give_away(str(ok))
    assert _private.problem(str(ok)) == "it belongs to another user (uid %d)" % OTHER
    # a parent others may write: fine when sticky (as /tmp), not otherwise (they could rename it away)
    shared = tmp_path / "shared"
    shared.mkdir()
    give_away(str(shared))
    mine = shared / "mine"
    mine.mkdir(mode=0o700)
    os.chown(str(mine), os.geteuid(), os.getegid())
    os.chmod(str(shared), 0o1777)
    assert _private.problem(str(mine)) is None
    os.chmod(str(shared), 0o777)
    assert _private.problem(str(mine)).startswith("others can rename it: its parent")


def test_ensure_makes_private_directories_and_refuses_others(tmp_path):
    d = _private.ensure(str(tmp_path / "a" / "b"))
    assert stat.S_IMODE(os.stat(d).st_mode) == 0o700
    (tmp_path / "f").write_text("")
    with pytest.raises(_private.Refused, match="it cannot be made"):
        _private.ensure(str(tmp_path / "f" / "sub"))
    w = tmp_path / "w"
    w.mkdir()
    os.chmod(str(w), 0o777)
    with pytest.raises(_private.Refused, match="others can write to it"):
        _private.ensure(str(w))


# -- generated modules -------------------------------------------------------------------------
def _package(tmp_path, monkeypatch, generated="file"):
    """``_private.PACKAGE`` pointed at a scratch directory whose ``_generated`` is a file
    (``generated="file"``) or a directory of another user's."""
    pkg = tmp_path / "pkg"
    pkg.mkdir()
    if generated == "file":
        (pkg / "_generated").write_text("")
    else:
        (pkg / "_generated").mkdir()
        give_away(str(pkg / "_generated"))
    monkeypatch.setattr(_private, "PACKAGE", str(pkg))
    return pkg


def test_generated_modules_fall_back_to_the_user_cache_then_to_memory(scratch, monkeypatch):
    _package(scratch, monkeypatch)
    with warnings.catch_warnings():
        warnings.simplefilter("error")          # (a read-only installation: no warning for that)
        assert codegen._writable_dir() == str(scratch / "xdg" / "tapegrad")
    assert stat.S_IMODE(os.stat(str(scratch / "xdg" / "tapegrad")).st_mode) == 0o700
    # the user cache's directory another user's, with a module planted in it: not used at all
    shutil.rmtree(str(scratch / "xdg" / "tapegrad"))
    (scratch / "xdg" / "tapegrad").mkdir()
    marker = scratch / "ran"
    (scratch / "xdg" / "tapegrad" / "tangent_feed.py").write_text(planted_code(marker))
    give_away(str(scratch / "xdg" / "tapegrad"))
    with pytest.warns(RuntimeWarning, match=r"no private directory for its generated kernels \(.*_generated: it is not "
                                             r"a directory; .*tapegrad: it belongs to another user .*they are run from "
                                             r"memory"):
        assert codegen._writable_dir() is None
    mod = codegen.load_tape_module("tangent", "feed", "VALUE = 7\n")
    try:
        assert mod.VALUE == 7 and mod.__file__ == "<tapegrad generated tangent_feed.py>"
        assert not marker.exists()
    finally:
        sys.modules.pop("tapegrad_tangent_feed", None)


def test_a_planted_module_or_bytecode_is_never_run(scratch, monkeypatch):
    d = scratch / "gen"
    d.mkdir(mode=0o700)
    monkeypatch.setattr(codegen, "_writable_dir", lambda: str(d))
    marker = scratch / "ran"
    # a module of the right name with another text: replaced by the text generated here
    (d / "fused_abcd.py").write_text(planted_code(marker))
    try:
        mod = codegen.load_tape_module("fused", "abcd", "VALUE = 1\n")
        assert mod.VALUE == 1 and not marker.exists()
        assert (d / "fused_abcd.py").read_text() == "VALUE = 1\n"
    finally:
        sys.modules.pop("tapegrad_fused_abcd", None)
    # Python's bytecode of it planted in a __pycache__ others can write: the text runs, not the .pyc
    evil = scratch / "evil.py"
    evil.write_text(planted_code(marker))
    st = os.stat(str(d / "fused_abcd.py"))
    os.utime(str(evil), ns=(st.st_atime_ns, st.st_mtime_ns))
    pyc = importlib.util.cache_from_source(str(d / "fused_abcd.py"))
    os.makedirs(os.path.dirname(pyc), exist_ok=True)
    import py_compile
    py_compile.compile(str(evil), cfile=pyc)
    with open(pyc, "r+b") as fh:             # (its header made to match the real source's mtime and size)
        fh.seek(8)
        fh.write(int(st.st_mtime).to_bytes(4, "little") + (st.st_size & 0xFFFFFFFF).to_bytes(4, "little"))
    os.chmod(os.path.dirname(pyc), 0o777)
    try:
        mod = codegen.load_tape_module("fused", "abcd", "VALUE = 1\n")
        assert mod.VALUE == 1 and not marker.exists()
    finally:
        sys.modules.pop("tapegrad_fused_abcd", None)


def test_a_module_that_cannot_be_written_runs_from_memory(scratch, monkeypatch):
    d = scratch / "gen"
    d.mkdir(mode=0o700)
    monkeypatch.setattr(codegen, "_writable_dir", lambda: str(d))

    def full(*a, **k):
        raise OSError(errno.ENOSPC, "No space left on device")
    monkeypatch.setattr(codegen, "_write_text", full)
    try:
        with pytest.warns(RuntimeWarning, match="cannot write its generated kernels in .*No space left"):
            mod = codegen.load_tape_module("tangent", "beef", "VALUE = 3\n")
        assert mod.VALUE == 3 and mod.__file__.startswith("<tapegrad generated")
        assert os.listdir(str(d)) == []
    finally:
        sys.modules.pop("tapegrad_tangent_beef", None)


# -- Numba's cache ------------------------------------------------------------------------------
def _kernel(tmp_path, name="plus_one"):
    """A tiny function of a module file of its own, as tapegrad's jit makes kernels."""
    src = tmp_path / "kernelsrc" / (name + ".py")
    src.parent.mkdir(exist_ok=True)
    src.write_text("def %s(a):\n    return a + 1\n" % name)
    spec = importlib.util.spec_from_file_location("tg_test_" + name, str(src))
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    _jit.load()
    return getattr(mod, name), src


def _cache_files(d):
    return sorted(f for _, _, fs in os.walk(str(d)) for f in fs if f.endswith((".nbi", ".nbc")))


def test_the_numba_cache_is_in_a_checked_directory(scratch, monkeypatch):
    fn, src = _kernel(scratch)
    nc = scratch / "nc"
    monkeypatch.setenv("NUMBA_CACHE_DIR", str(nc))
    monkeypatch.setattr(_jit, "_ALL", list(_jit._ALL))
    d = _jit._njit(fn, {})
    assert d(1) == 2
    sub = nc / _private.subdir(str(src.parent))
    assert stat.S_IMODE(os.stat(str(nc)).st_mode) == 0o700 and stat.S_IMODE(os.stat(str(sub)).st_mode) == 0o700
    assert _cache_files(sub) and _cache_files(sub)[0].startswith("plus_one.plus_one-1.py")
    again = _jit._njit(fn, {})          # (a new dispatcher: as a new process would)
    assert again(1) == 2 and len(again.stats.cache_hits) == 1


def test_a_numba_cache_dir_of_another_user_is_refused_and_never_read(scratch, monkeypatch):
    fn, src = _kernel(scratch)
    nc = scratch / "nc"
    sub = nc / _private.subdir(str(src.parent))
    sub.mkdir(parents=True)
    marker = scratch / "unpickled"
    # Numba's index and data files as a planted cache would have them: pickles
    for f in ("plus_one.plus_one-1.py%d%d.nbi" % sys.version_info[:2], "plus_one.plus_one-1.py%d%d.1.nbc"
              % sys.version_info[:2]):
        (sub / f).write_bytes(pickle.dumps(_Plant(marker)))
    give_away(str(nc))
    monkeypatch.setenv("NUMBA_CACHE_DIR", str(nc))
    monkeypatch.setattr(_jit, "_ALL", list(_jit._ALL))
    with pytest.warns(RuntimeWarning, match=r"NUMBA_CACHE_DIR=\S+ is not used: it belongs to another user"):
        d = _jit._njit(fn, {})
    assert d(1) == 2 and not marker.exists()
    assert _cache_files(scratch / "xdg" / "tapegrad" / "numba")        # (the user cache instead)


@pytest.mark.parametrize("what", ["file", "under_a_file", "symlink", "world_writable"])
def test_an_unusable_numba_cache_dir_is_one_warning_and_a_fall_back(scratch, monkeypatch, what):
    fn, _ = _kernel(scratch)
    nc = scratch / "nc"
    if what == "file":
        nc.write_text("")
    elif what == "under_a_file":
        (scratch / "f").write_text("")
        nc = scratch / "f" / "nc"
    elif what == "symlink":
        (scratch / "elsewhere").mkdir(mode=0o700)
        os.symlink(str(scratch / "elsewhere"), str(nc))
    else:
        nc.mkdir()
        os.chmod(str(nc), 0o777)
    monkeypatch.setenv("NUMBA_CACHE_DIR", str(nc))
    monkeypatch.setattr(_jit, "_ALL", list(_jit._ALL))
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        d = _jit._njit(fn, {})
        assert d(1) == 2 and d(2.5) == 3.5
    assert [str(x.message) for x in w if issubclass(x.category, RuntimeWarning)] == [
        "tapegrad: NUMBA_CACHE_DIR=%s is not used: %s" % (nc, {"file": "it is not a directory",
                                                               "under_a_file": "it cannot be made (Not a directory)",
                                                               "symlink": "it is a symbolic link",
                                                               "world_writable": "others can write to it (mode 777)"}
                                                          [what])]
    assert _cache_files(scratch / "xdg" / "tapegrad" / "numba")
    assert not (what == "symlink" and _cache_files(scratch / "elsewhere"))


def test_no_directory_at_all_compiles_in_memory(scratch, monkeypatch):
    fn, src = _kernel(scratch)
    (scratch / "xdg").mkdir()
    (scratch / "xdg" / "tapegrad").write_text("")         # (a file where the user cache should be)
    monkeypatch.setenv("NUMBA_CACHE_DIR", str(scratch / "xdg" / "tapegrad" / "nc"))
    monkeypatch.setattr(_jit, "_ALL", list(_jit._ALL))
    with pytest.warns(RuntimeWarning) as w:
        d = _jit._njit(fn, {})
    assert d(1) == 2
    assert type(d._cache).__name__ == "NullCache"
    msgs = [str(x.message) for x in w]
    assert any("no private directory for Numba's cache of its kernels" in m and "compiled without a disk cache" in m
               for m in msgs)
    assert _background.cache_dir() is None          # (and no background compile: nowhere to leave it)


def test_damaged_cache_files_are_removed_and_compiled_again(scratch, monkeypatch):
    # the load path of the background thread and of the foreground compile alike: dispatcher.compile
    from numba.core import types
    fn, src = _kernel(scratch)
    nc = scratch / "nc"
    monkeypatch.setenv("NUMBA_CACHE_DIR", str(nc))
    monkeypatch.setattr(_jit, "_ALL", list(_jit._ALL))
    assert _jit._njit(fn, {})(1) == 2
    sub = nc / _private.subdir(str(src.parent))
    for damage in ("truncate", "zero"):
        for f in _cache_files(sub):
            p = sub / f
            data = p.read_bytes()
            p.write_bytes(data[:len(data) // 2] if damage == "truncate" else b"\0" * len(data))
        d = _jit._njit(fn, {})
        monkeypatch.setattr(_jit, "_DAMAGED", set())        # (one warning per file and process)
        with pytest.warns(RuntimeWarning, match="Numba's cache file .* was damaged .*removed it and compiling"):
            d.compile((types.int64,))       # (what the background load does, with the stamp's types)
        assert d(1) == 2 and len(d.stats.cache_misses) == 1
        again = _jit._njit(fn, {})
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            assert again(1) == 2 and len(again.stats.cache_hits) == 1      # (written whole again)


def test_a_cache_that_cannot_be_written_leaves_the_kernel_in_memory(scratch, monkeypatch):
    from numba.core import caching
    fn, src = _kernel(scratch)
    monkeypatch.setenv("NUMBA_CACHE_DIR", str(scratch / "nc"))
    monkeypatch.setattr(_jit, "_ALL", list(_jit._ALL))

    def read_only(self, path):
        raise OSError(errno.EROFS, "Read-only file system", path)
    monkeypatch.setattr(caching.IndexDataCacheFile, "_open_for_write", read_only)
    d = _jit._njit(fn, {})
    with pytest.warns(RuntimeWarning, match=r"cannot write Numba's cache in .*Read-only file system.*compiled in "
                                            r"memory"):
        assert d(1) == 2
    with warnings.catch_warnings():
        warnings.simplefilter("error")          # (one warning per directory)
        assert d(2.5) == 3.5


def test_a_full_disk_while_compiling_is_no_error(tmp_path):
    # a file size limit: Numba's writes fail with "File too large", as on a full disk
    code = textwrap.dedent("""
        import resource, signal, warnings, sys
        warnings.simplefilter("always")
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
        import importlib.util
        spec = importlib.util.spec_from_file_location("k", sys.argv[1])
        mod = importlib.util.module_from_spec(spec); spec.loader.exec_module(mod)
        from tapegrad import _jit
        _jit.load()
        resource.setrlimit(resource.RLIMIT_FSIZE, (64, 64))
        d = _jit._njit(mod.plus_one, {})
        print(d(41), d(0.5))
    """)
    src = tmp_path / "k.py"
    src.write_text("def plus_one(a):\n    return a + 1\n")
    env = dict(os.environ, NUMBA_CACHE_DIR=str(tmp_path / "nc"), XDG_CACHE_HOME=str(tmp_path / "xdg"),
               PYTHONPATH=ROOT, TAPEGRAD_QUIET="1")
    r = subprocess.run([sys.executable, "-c", code, str(src)], capture_output=True, text=True, env=env,
                       timeout=300, cwd=str(tmp_path))
    assert r.returncode == 0, r.stderr[-3000:]
    assert r.stdout.split() == ["42", "1.5"]
    assert r.stderr.count("RuntimeWarning: tapegrad: cannot write Numba's cache in") == 1
    assert "File too large" in r.stderr


def test_a_cache_directory_swapped_for_a_link_is_not_used_any_more(scratch, monkeypatch):
    fn, src = _kernel(scratch)
    nc = scratch / "nc"
    monkeypatch.setenv("NUMBA_CACHE_DIR", str(nc))
    monkeypatch.setattr(_jit, "_ALL", list(_jit._ALL))
    d = _jit._njit(fn, {})
    sub = nc / _private.subdir(str(src.parent))
    os.rename(str(sub), str(scratch / "moved"))
    (scratch / "planted").mkdir(mode=0o700)
    os.symlink(str(scratch / "planted"), str(sub))
    with pytest.warns(RuntimeWarning, match="Numba's cache directory .* is not used any more: it is a symbolic link"):
        assert d(1) == 2
    assert _cache_files(scratch / "planted") == []


# -- the background compile's stamp, lock and log ---------------------------------------------------
def test_the_stamp_is_plain_data_read_back_by_name():
    import numba
    from numba.core import types
    sigs = [(types.Array(types.float64, 1, "C"), types.int64, types.boolean, types.literal(78),
             types.Omitted(1.0), types.Array(types.uint8, 2, "A", readonly=True))]
    data = _background._signatures_data(sigs)
    assert data == [[["array", "float64", 1, "C", False], "int64", "boolean", ["literal", 78], ["omitted", 1.0],
                     ["array", "uint8", 2, "A", True]]]
    assert tuple(_background._type_from(t) for t in data[0]) == sigs[0]
    for junk in ("os.system", "__import__", ["array", "float64", 1, "C"], ["reduce", "os", "system"],
                 ["array", ["literal", 1], 1, "C", False], 3, None):
        with pytest.raises(ValueError, match="not a kernel argument type"):
            _background._type_from(junk)
    assert _background._signatures_data([(numba.typeof((1, 2.0)),)]) == []     # (a type it does not keep)


def test_a_planted_pickle_stamp_is_never_unpickled(scratch, monkeypatch):
    nc = scratch / "nc"
    nc.mkdir(mode=0o700)
    monkeypatch.setenv("NUMBA_CACHE_DIR", str(nc))
    marker = scratch / "unpickled"
    (nc / _background.STAMP).write_bytes((_background.key() + " groups=select\n").encode()
                                         + pickle.dumps(_Plant(marker)))
    assert not _background.stamp_valid() and _background._read_stamp() is None
    assert not marker.exists()


def test_a_log_planted_as_a_link_is_not_written_through(scratch, monkeypatch):
    nc = scratch / "nc"
    nc.mkdir(mode=0o700)
    monkeypatch.setenv("NUMBA_CACHE_DIR", str(nc))
    target = scratch / "victim"
    target.write_text("untouched\n")
    os.symlink(str(target), str(nc / _background.LOG))
    started = []
    monkeypatch.setattr(subprocess, "Popen", lambda *a, **k: started.append(a))
    monkeypatch.setattr(_background, "_phase", [None])
    with pytest.warns(RuntimeWarning, match="cannot start the background compile"):
        _background._start_compiling()
    assert started == [] and target.read_text() == "untouched\n" and _background._phase[0] == "failed"


def test_the_lock_is_not_taken_through_a_link(scratch, monkeypatch):
    nc = scratch / "nc"
    nc.mkdir(mode=0o700)
    monkeypatch.setenv("NUMBA_CACHE_DIR", str(nc))
    os.symlink(str(scratch / "elsewhere"), str(nc / _background.LOCK))
    with pytest.raises(OSError):
        _background.lock()
    assert not (scratch / "elsewhere").exists()
    os.remove(str(nc / _background.LOCK))
    fh = _background.lock()
    fh.close()
    assert stat.S_IMODE(os.stat(str(nc / _background.LOCK)).st_mode) == 0o600


# -- a whole process, everything shared or unusable ---------------------------------------------------
def _plant_old_fixed_names(tmp, marker):
    """What another user could leave under $TMPDIR for the fixed names tapegrad used to take."""
    gen = tmp / "tapegrad-generated"
    (gen / "__pycache__").mkdir(parents=True)
    (gen / "elementwise_kernels.py").write_text(planted_code(marker))
    (gen / "fused_0123456789abcdef.py").write_text(planted_code(marker))
    nc = tmp / "tapegrad-numba-cache"
    nc.mkdir()
    (nc / "tapegrad-kernels.ready").write_bytes(b"x groups=select\n" + pickle.dumps(_Plant(marker)))
    (nc / "tapegrad-warmup.log").symlink_to(tmp / "victim")
    for d in (gen, gen / "__pycache__", nc):
        os.chmod(str(d), 0o777)
        give_away(str(d))


@pytest.mark.skipif(os.environ.get("NUMBA_BOUNDSCHECK") == "1", reason="a compile of its own: the default pass")
def test_a_process_with_nothing_private_runs_and_touches_nothing_shared(tmp_path):
    # the package copy's _generated and kernels/__pycache__ are files, HOME's cache is a file,
    # NUMBA_CACHE_DIR is a file: no private directory anywhere; $TMPDIR holds what another user
    # planted under the names tapegrad used to fall back to.  Compiled (in memory), no exception
    pkg = tmp_path / "site" / "tapegrad"
    shutil.copytree(os.path.join(ROOT, "tapegrad"), str(pkg),
                    ignore=shutil.ignore_patterns("__pycache__", "_generated", "*.nbi", "*.nbc"))
    (pkg / "_generated").write_text("")
    for sub in ("", "kernels", "ops", "core", "autograd"):
        (pkg / sub / "__pycache__").write_text("")
    home = tmp_path / "home"
    home.mkdir()
    (home / ".cache").write_text("")
    tmp = tmp_path / "tmp"
    tmp.mkdir()
    marker = tmp_path / "planted-code-ran"
    _plant_old_fixed_names(tmp, marker)
    before = {p: os.lstat(os.path.join(dp, p)).st_mtime_ns for dp, _, fs in os.walk(str(tmp)) for p in fs}
    code = textwrap.dedent("""
        import warnings
        warnings.simplefilter("always")
        import tapegrad as tg
        from tapegrad.kernels import sweep as K
        from tapegrad.core.registry import SHAPE
        x = tg.tensor([1.0, 2.0, 3.0], requires_grad=True)
        x[1].backward()
        print(x.grad.tolist(), type(K.run_for(1 << SHAPE)._cache).__name__)
    """)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("NUMBA_", "PYTHON", "XDG_"))}
    (tmp_path / "not-a-dir").write_text("")
    env.update(HOME=str(home), PYTHONPATH=str(tmp_path / "site"), TMPDIR=str(tmp), TAPEGRAD_INTERPRET="never",
               NUMBA_CACHE_DIR=str(tmp_path / "not-a-dir"),
               TAPEGRAD_BACKGROUND_COMPILE="1", TAPEGRAD_QUIET="1", PYTHONDONTWRITEBYTECODE="1")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=900,
                       cwd=str(tmp_path))
    assert r.returncode == 0, r.stderr[-4000:]
    assert r.stdout.split("\n")[0] == "[0.0, 1.0, 0.0] NullCache"
    warned = "\n".join(ln for ln in r.stderr.splitlines() if "RuntimeWarning: tapegrad:" in ln)
    assert warned.count("RuntimeWarning") == 3, r.stderr[-4000:]      # (one each)
    assert "NUMBA_CACHE_DIR=%s is not used: it is not a directory" % (tmp_path / "not-a-dir") in warned
    assert "no private directory for its generated kernels" in warned
    assert "no private directory for Numba's cache of its kernels" in warned
    assert not marker.exists() and not (tmp / "victim").exists()
    after = {p: os.lstat(os.path.join(dp, p)).st_mtime_ns for dp, _, fs in os.walk(str(tmp)) for p in fs}
    assert after == before          # (nothing read into, written to or added under $TMPDIR)
