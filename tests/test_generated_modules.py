"""The directory of per-tape generated modules (fused replays, tangent programs) stays
bounded: past ``codegen.MAX_TAPE_MODULES``, the least recently used go, with their
machine code in Numba's caches."""
import hashlib
import os
import sys

from tapegrad.kernels import codegen


def _module(d, stem, age, caches=()):
    p = os.path.join(d, stem + ".py")
    with open(p, "w") as f:
        f.write("VALUE = %r\n" % stem)
    os.utime(p, (age, age))
    for c in caches:
        os.makedirs(c, exist_ok=True)
        for suffix in (".run-12.py311.nbi", ".run-12.py311.1.nbc"):
            open(os.path.join(c, stem + suffix), "w").close()
    return p


def test_least_recently_used_modules_and_their_caches_are_evicted(tmp_path, monkeypatch):
    d = str(tmp_path / "gen")
    os.makedirs(d)
    user = tmp_path / "xdg"
    monkeypatch.setenv("XDG_CACHE_HOME", str(user))
    monkeypatch.setenv("NUMBA_CACHE_DIR", str(tmp_path / "nc"))
    sub = "gen_" + hashlib.sha1(os.path.abspath(d).encode()).hexdigest()
    caches = [os.path.join(d, "__pycache__"), str(tmp_path / "nc" / sub), str(user / "tapegrad" / "numba" / sub)]
    stems = ["fused_%04x" % i for i in range(4)] + ["tangent_%04x" % i for i in range(4)]
    for i, stem in enumerate(stems):
        _module(d, stem, 1_000_000 + i, caches)
    open(os.path.join(d, "elementwise_kernels.py"), "w").close()      # (not a per-tape module: kept)
    open(os.path.join(caches[0], "fused_00001.run-1.py311.nbi"), "w").close()   # (another stem's prefix)

    removed = codegen.evict_tape_modules(d, keep=os.path.join(d, "fused_0000.py"), limit=5)

    # the oldest three but the kept one go: fused_0001..0003
    assert sorted(os.path.basename(p) for p in removed) == ["fused_0001.py", "fused_0002.py", "fused_0003.py"]
    left = sorted(f for f in os.listdir(d) if f.endswith(".py"))
    assert left == ["elementwise_kernels.py", "fused_0000.py"] + ["tangent_%04x.py" % i for i in range(4)]
    for c in caches:
        stems_left = sorted({f.split(".")[0] for f in os.listdir(c)})
        expect = ["fused_0000"] + ["tangent_%04x" % i for i in range(4)]
        if c == caches[0]:
            expect = sorted(expect + ["fused_00001"])
        assert stems_left == expect, c
    assert codegen.evict_tape_modules(d, limit=5) == []          # at the limit: nothing more


def test_load_tape_module_refreshes_use_and_evicts_past_the_limit(tmp_path, monkeypatch):
    d = str(tmp_path)
    monkeypatch.setattr(codegen, "_writable_dir", lambda: d)
    monkeypatch.setattr(codegen, "MAX_TAPE_MODULES", 3)
    old = _module(d, "tangent_aaaa", 1_000_000)
    _module(d, "tangent_bbbb", 1_000_001)
    _module(d, "tangent_cccc", 1_000_002)
    try:
        # loading the oldest (its text the same) marks it used now ...
        mod = codegen.load_tape_module("tangent", "aaaa", "VALUE = 'tangent_aaaa'\n")
        assert mod.VALUE == "tangent_aaaa"
        assert os.stat(old).st_mtime > 2_000_000
        # ... so a new module evicts the next oldest instead
        mod = codegen.load_tape_module("tangent", "dddd", "VALUE = 4\n")
        assert mod.VALUE == 4
        assert sorted(f for f in os.listdir(d) if f.endswith(".py")) == \
            ["tangent_aaaa.py", "tangent_cccc.py", "tangent_dddd.py"]
    finally:
        for k in ("aaaa", "dddd"):
            sys.modules.pop("tapegrad_tangent_" + k, None)
