#!/usr/bin/env bash
# Whole-process start-up figures for the README: a fresh `python` that imports
# tapegrad and computes one gradient, with Numba's cache warm and empty, by the
# default path (small backward passes interpreted) and with the compiled sweep
# forced (TAPEGRAD_INTERPRET=never).  "Empty" runs a copy of the package without
# its generated kernel module and with a new NUMBA_CACHE_DIR: a first run after
# installation.  Usage: bash benchmarks/startup.sh   (from the repository root)
set -euo pipefail
G='import tapegrad as tg
x = tg.tensor([1.0, 2.0], requires_grad=True)
(x * x).sum().backward()
assert x.grad.tolist() == [2.0, 4.0]'
here=$(pwd)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
secs() { /usr/bin/time -f %e "$@" 2>&1 >/dev/null | tail -1; }
median5() { for _ in 1 2 3 4 5; do "$@"; done | sort -n | sed -n 3p; }
fresh() {       # a pristine copy of the package and an empty Numba cache
    rm -rf "$tmp/pkg" "$tmp/nc" && mkdir -p "$tmp/pkg" "$tmp/nc"
    cp -r "$here/tapegrad" "$tmp/pkg/"
    rm -rf "$tmp/pkg/tapegrad/_generated"
    find "$tmp/pkg" -name __pycache__ -prune -exec rm -rf {} +
}
python -m tapegrad warmup >/dev/null
echo "warm cache, default:               $(median5 secs python -c "$G") s (median of 5)"
echo "warm cache, compiled sweep forced: $(TAPEGRAD_INTERPRET=never median5 secs python -c "$G") s (median of 5)"
cold() { fresh; (cd "$tmp" && PYTHONPATH="$tmp/pkg" NUMBA_CACHE_DIR="$tmp/nc" secs python -c "$G"); }
echo "empty cache, default:              $(median5 cold) s (median of 5)"
fresh
echo "empty cache, compiled sweep forced: $(cd "$tmp" && PYTHONPATH="$tmp/pkg" NUMBA_CACHE_DIR="$tmp/nc" \
    TAPEGRAD_INTERPRET=never secs python -c "$G") s (one run: it compiles every kernel)"
