"""Train a character-level language model on a public-domain text with tapegrad.

    python examples/char_model.py [--epochs N] [--batch-size B] [--lr LR] [--context K]
                                  [--embed D] [--hidden H] [--seed S] [--plot PATH] [--sample N]

The text is ``examples/data/genesis.txt``: the first eleven chapters of Genesis in the
King James Version (1611, public domain), 35 KB, taken from Debian's
``bible-kjv-text`` package without the verse numbers.  The model reads the ``K``
previous characters and predicts the next one (Bengio et al.'s neural language
model, as in makemore): each character's embedding (a row of a learned table),
concatenated, through a tanh hidden layer to the logits of the next character.

The training loop is a PyTorch one with the import changed: a ``Dataset`` of
(context, next character) pairs split by ``random_split``, a shuffling
``DataLoader``, ``AdamW`` with ``clip_grad_norm_``, and a ``OneCycleLR`` schedule
stepped every batch.  It prints the loss per epoch, writes the curves to a PNG, and
ends by sampling text from the model.
"""
import argparse
import math
import os
import sys
from time import perf_counter

import numpy as np

import tapegrad as tg
import tapegrad.nn as nn
import tapegrad.nn.functional as F
from tapegrad.utils.data import DataLoader, Dataset, random_split

TEXT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "data", "genesis.txt")


class CharWindows(Dataset):
    """Sample ``i``: the ``context`` characters before position ``i + context`` (as
    indices into the vocabulary) and the character at it."""

    def __init__(self, text, context):
        self.vocab = sorted(set(text))
        self.index = {c: i for i, c in enumerate(self.vocab)}
        self.codes = tg.tensor([self.index[c] for c in text])
        self.context = context

    def __len__(self):
        return len(self.codes) - self.context

    def __getitem__(self, i):
        return self.codes[i:i + self.context], self.codes[i + self.context]


class CharMLP(nn.Module):
    """Embeddings of the context characters, concatenated, to a tanh layer, to logits."""

    def __init__(self, vocab, context, embed, hidden):
        super().__init__()
        self.embed = nn.Parameter(tg.randn(vocab, embed))      # (nn.Embedding's N(0, 1) initialisation)
        self.hidden = nn.Linear(context * embed, hidden)
        self.out = nn.Linear(hidden, vocab)

    def forward(self, x):                                      # x: (batch, context) character indices
        e = self.embed[x].flatten(1)                           # (batch, context * embed)
        return self.out(tg.tanh(self.hidden(e)))


def evaluate(model, loader):
    """Mean cross-entropy (nats per character) over a loader."""
    total, count = 0.0, 0
    with tg.no_grad():
        for x, y in loader:
            total += F.cross_entropy(model(x), y, reduction="sum").item()
            count += len(y)
    return total / count


def sample(model, data, n, seed_text, generator):
    """``n`` characters drawn one at a time from the model's distribution, after ``seed_text``."""
    context = [data.index[c] for c in seed_text[-data.context:]]
    out = []
    with tg.no_grad():
        for _ in range(n):
            probs = F.softmax(model(tg.tensor([context])), dim=-1)
            nxt = tg.multinomial(probs[0], 1, generator=generator).item()
            out.append(data.vocab[nxt])
            context = context[1:] + [nxt]
    return seed_text + "".join(out)


def save_plot(history, path):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(9, 3.5))
    steps = np.arange(1, len(history["batch_loss"]) + 1)
    ax1.plot(steps, history["batch_loss"], lw=0.6, alpha=0.5, label="training batch")
    per_epoch = len(history["batch_loss"]) // len(history["val_loss"])
    ends = per_epoch * np.arange(1, len(history["val_loss"]) + 1)
    ax1.plot(ends, history["train_loss"], "o-", label="training (epoch mean)")
    ax1.plot(ends, history["val_loss"], "s-", label="validation")
    ax1.axhline(math.log(history["vocab"]), color="gray", ls=":", label="uniform guess")
    ax1.set_xlabel("step"); ax1.set_ylabel("cross-entropy (nats / char)"); ax1.legend()
    ax2.plot(steps, history["lr"])
    ax2.set_xlabel("step"); ax2.set_ylabel("learning rate (OneCycleLR)")
    fig.suptitle("tapegrad character model on Genesis 1-11 (KJV)")
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)


def parse_args(argv):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--epochs", type=int, default=6)
    p.add_argument("--batch-size", type=int, default=128)
    p.add_argument("--lr", type=float, default=1e-2, help="OneCycleLR's peak learning rate")
    p.add_argument("--context", type=int, default=8)
    p.add_argument("--embed", type=int, default=16)
    p.add_argument("--hidden", type=int, default=128)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--sample", type=int, default=300, help="characters to generate at the end")
    p.add_argument("--plot", default="char_model.png", help="PNG path for the curves ('' to skip)")
    p.add_argument("--blas-threads", type=int, default=1,
                   help="BLAS threads (the matrices are small: one is fastest, and more wait for each other on a "
                        "busy machine); 0 leaves BLAS as it is")
    return p.parse_args(argv)


def blas_threads(n):
    """A context limiting NumPy's BLAS to ``n`` threads (threadpoolctl, which scikit-learn
    brings, when installed; else a context that does nothing)."""
    import contextlib
    try:
        from threadpoolctl import threadpool_limits
    except ImportError:
        return contextlib.nullcontext()
    return threadpool_limits(n, user_api="blas") if n > 0 else contextlib.nullcontext()


def main(argv=None):
    """Train; return a dict of the history, final losses, sample and timings."""
    args = parse_args(argv)
    with blas_threads(args.blas_threads):
        return train(args)


def train(args):
    tg.manual_seed(args.seed)
    with open(TEXT, encoding="utf-8") as f:
        text = f.read()
    data = CharWindows(text, args.context)
    split = tg.Generator().manual_seed(args.seed)
    train_set, val_set = random_split(data, [0.9, 0.1], generator=split)
    train = DataLoader(train_set, batch_size=args.batch_size, shuffle=True, drop_last=True,
                       generator=tg.Generator().manual_seed(args.seed + 1))
    val = DataLoader(val_set, batch_size=1024)

    model = CharMLP(len(data.vocab), args.context, args.embed, args.hidden)
    opt = tg.optim.AdamW(model.parameters(), lr=args.lr, weight_decay=1e-4)
    sched = tg.optim.lr_scheduler.OneCycleLR(opt, max_lr=args.lr, epochs=args.epochs, steps_per_epoch=len(train))

    history = {"batch_loss": [], "lr": [], "train_loss": [], "val_loss": [], "vocab": len(data.vocab)}
    t0 = perf_counter()
    print(f"{len(text)} characters, vocabulary {len(data.vocab)}, {len(train_set)} training and {len(val_set)} "
          f"validation windows of {args.context}; {sum(p.numel() for p in model.parameters())} parameters")
    for epoch in range(args.epochs):
        model.train()
        total = 0.0
        for x, y in train:
            loss = F.cross_entropy(model(x), y)
            opt.zero_grad()
            loss.backward()
            nn.utils.clip_grad_norm_(model.parameters(), 1.0)
            opt.step()
            history["lr"].append(sched.get_last_lr()[0])
            sched.step()
            history["batch_loss"].append(loss.item())
            total += loss.item()
        model.eval()
        history["train_loss"].append(total / len(train))
        history["val_loss"].append(evaluate(model, val))
        print(f"epoch {epoch + 1}: train {history['train_loss'][-1]:.4f}  validation {history['val_loss'][-1]:.4f} "
              f"nats/char  ({perf_counter() - t0:.1f} s)")
    seconds = perf_counter() - t0
    text_out = sample(model, data, args.sample, "In the beginning", tg.Generator().manual_seed(args.seed))
    print("sample:\n" + text_out)
    if args.plot:
        save_plot(history, args.plot)
        print(f"curves saved to {args.plot}")
    return {"history": history, "val_loss": history["val_loss"][-1], "train_loss": history["train_loss"][-1],
            "uniform": math.log(len(data.vocab)), "sample": text_out, "seconds": seconds, "vocab": data.vocab}


if __name__ == "__main__":
    main(sys.argv[1:])
