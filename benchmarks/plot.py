"""Draw the JSON of ``benchmarks/compare.py --json`` as a grouped bar chart.

    python benchmarks/plot.py [docs/img/benchmarks.json] [-o docs/img/benchmarks.png] [--table]

One group of bars per workload (tapegrad eager, replayed and fused, PyTorch, JAX and
the value and gradient written by hand in NumPy and in Numba, where the run has them), milliseconds on a log
scale, the setting and the measured commit in the caption.
"""
import argparse
import json
import os
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SIDES = ["tapegrad eager", "tapegrad replayed", "tapegrad fused", "PyTorch", "JAX", "hand-written",
         "hand-written Numba"]
COLOURS = {"tapegrad eager": "#1f77b4", "tapegrad replayed": "#2ca02c", "tapegrad fused": "#17becf",
           "PyTorch": "#d62728", "JAX": "#9467bd", "hand-written": "#7f7f7f", "hand-written Numba": "#bcbd22"}
LABELS = {"chain": "chain\n500 steps on shape (1,)", "mlp": "mlp\n64x64 batch, 64-128-10",
          "rosen": "rosen\n10^6 elements", "hvp": "hvp\nRosenbrock, 10^4 elements",
          "lj": "lj\n384 atoms, all pairs", "logreg": "logreg\n200,000 x 32"}


def plot(data, out):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    groups = data["groups"]
    names = [n for n in ("chain", "mlp", "rosen", "hvp") if n in groups] + \
            [n for n in groups if n not in ("chain", "mlp", "rosen", "hvp")]
    sides = [s for s in SIDES if any(s in groups[n] for n in names)]
    width = 0.8 / len(sides)
    fig, ax = plt.subplots(figsize=(9, 4.8), dpi=110)
    for j, side in enumerate(sides):
        xs = [i + (j - (len(sides) - 1) / 2) * width for i, n in enumerate(names) if side in groups[n]]
        ys = [groups[n][side] for n in names if side in groups[n]]
        bars = ax.bar(xs, ys, width, label=side, color=COLOURS.get(side))
        for b, y in zip(bars, ys):
            ax.annotate("%.3g" % y, (b.get_x() + b.get_width() / 2, y), ha="center", va="bottom",
                        fontsize=7, xytext=(0, 2), textcoords="offset points")
    ax.set_yscale("log")
    ax.set_ylabel("ms per value and gradient (median, log scale)")
    ax.set_xticks(range(len(names)))
    ax.set_xticklabels([LABELS.get(n, n) for n in names], fontsize=9)
    ax.legend(fontsize=8, ncol=len(sides), loc="upper center", bbox_to_anchor=(0.5, -0.16), frameon=False)
    ax.grid(axis="y", which="both", alpha=0.25)
    ax.set_axisbelow(True)
    meta = data.get("meta", {})
    setting, versions = meta.get("setting", {}), meta.get("versions", {})
    commit = (meta.get("commit") or "unknown")[:10] + (" + changes" if meta.get("uncommitted_changes") else "")
    ax.set_title("tapegrad %s, float64, 1 thread, median of %s runs; PyTorch %s; commit %s, %s"
                 % (versions.get("tapegrad"), setting.get("repeat"), versions.get("torch") or "n/a",
                    commit, (meta.get("date") or "")[:10]), fontsize=9)
    fig.tight_layout()
    fig.savefig(out)
    plt.close(fig)


def table(data):
    """The same figures as a Markdown table (for README.md and docs/performance.md)."""
    groups = data["groups"]
    sides = [s for s in SIDES if any(s in g for g in groups.values())]
    lines = ["| workload | " + " | ".join(sides) + " |", "|---|" + "---:|" * len(sides)]
    for name, g in groups.items():
        cells = ["%.3g" % g[s] if s in g else "-" for s in sides]
        lines.append("| %s | %s |" % (LABELS.get(name, name).replace("\n", ": "), " | ".join(cells)))
    return "\n".join(lines)


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("json", nargs="?", default=os.path.join(ROOT, "docs", "img", "benchmarks.json"))
    p.add_argument("-o", "--out", default=None, help="PNG to write (default: next to the JSON)")
    p.add_argument("--table", action="store_true", help="also print the figures as a Markdown table")
    args = p.parse_args(argv)
    with open(args.json) as f:
        data = json.load(f)
    if args.table:
        print(table(data))
    out = args.out or os.path.splitext(args.json)[0] + ".png"
    plot(data, out)
    print("wrote", out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
