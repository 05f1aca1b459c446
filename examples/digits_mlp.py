"""Train a small MLP on scikit-learn's 8x8 digits with tapegrad.

    pip install -e ".[examples]"
    python examples/digits_mlp.py [--epochs N] [--batch-size B] [--lr LR] [--hidden H] [--seed S] [--plot PATH]

Loads ``sklearn.datasets.load_digits`` (bundled with scikit-learn, no download),
standardises the pixels with the training split's statistics, trains a
64 -> H -> H -> 10 ReLU MLP with Adam on shuffled minibatches, shows a tqdm
progress bar with the running loss and accuracy, writes the training curves to a
PNG (matplotlib, Agg backend) and prints the final test accuracy and the time per
epoch.
"""
import argparse
import sys
from time import perf_counter

import numpy as np

import tapegrad as tg
import tapegrad.nn.functional as F


def load_data(seed):
    from sklearn.datasets import load_digits
    from sklearn.model_selection import train_test_split

    X, y = load_digits(return_X_y=True)
    X_train, X_test, y_train, y_test = train_test_split(
        X.astype(np.float64), y.astype(np.int64), test_size=0.25, random_state=seed, stratify=y)
    mean = X_train.mean(axis=0)
    std = X_train.std(axis=0)
    std[std == 0] = 1.0                        # a few border pixels are always 0 in training
    return (X_train - mean) / std, (X_test - mean) / std, y_train, y_test


def make_model(hidden):
    return tg.nn.Sequential(tg.nn.Linear(64, hidden), tg.nn.ReLU(),
                            tg.nn.Linear(hidden, hidden), tg.nn.ReLU(),
                            tg.nn.Linear(hidden, 10))


def make_step(model, opt):
    """One training step on a minibatch: returns (loss, number correct).

    The forward pass is ``tg.compile``d: recorded at the first batch (and at the
    shorter last one), replayed for the others, labels included; the optimizer step
    stays outside it.
    """
    forward = tg.compile(lambda xb, yb: (lambda logits: (F.cross_entropy(logits, yb), logits))(model(xb)))

    def step(xb, yb):
        opt.zero_grad()
        loss, logits = forward(xb, yb)
        loss.backward()
        opt.step()
        correct = int((logits.detach().numpy().argmax(axis=1) == yb.numpy()).sum())
        return loss.item(), correct
    return step


def evaluate(model, X, y):
    with tg.no_grad():
        logits = model(tg.from_numpy(X))
        loss = F.cross_entropy(logits, tg.from_numpy(y)).item()
    return loss, float((logits.numpy().argmax(axis=1) == y).mean())


def save_plot(history, path):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    epochs = np.arange(1, len(history["train_loss"]) + 1)
    fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(9, 3.5))
    ax1.plot(epochs, history["train_loss"], label="train")
    ax1.plot(epochs, history["test_loss"], label="test")
    ax1.set_xlabel("epoch"); ax1.set_ylabel("cross-entropy"); ax1.set_yscale("log"); ax1.legend()
    ax2.plot(epochs, history["train_acc"], label="train")
    ax2.plot(epochs, history["test_acc"], label="test")
    ax2.set_xlabel("epoch"); ax2.set_ylabel("accuracy"); ax2.legend()
    fig.suptitle("tapegrad MLP on sklearn digits")
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)


def parse_args(argv):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--epochs", type=int, default=20)
    p.add_argument("--batch-size", type=int, default=32)
    p.add_argument("--lr", type=float, default=1e-3)
    p.add_argument("--hidden", type=int, default=64)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--plot", default="digits_training.png", help="PNG path for the training curves ('' to skip)")
    p.add_argument("--no-progress", action="store_true", help="disable the tqdm progress bar")
    return p.parse_args(argv)


def main(argv=None):
    """Train and return a dict with test_acc, test_loss, epoch_time_s, history and plot path."""
    from tqdm import tqdm

    args = parse_args(argv)
    tg.manual_seed(args.seed)
    rng = np.random.default_rng(args.seed)
    X_train, X_test, y_train, y_test = load_data(args.seed)
    model = make_model(args.hidden)
    opt = tg.optim.Adam(model.parameters(), lr=args.lr)
    step = make_step(model, opt)

    n = len(X_train)
    history = {"train_loss": [], "train_acc": [], "test_loss": [], "test_acc": []}
    epoch_times = []
    bar = tqdm(range(args.epochs), desc="digits", unit="epoch", disable=args.no_progress)
    for _ in bar:
        t0 = perf_counter()
        perm = rng.permutation(n)
        total_loss, total_correct = 0.0, 0
        for i in range(0, n, args.batch_size):
            idx = perm[i:i + args.batch_size]
            loss, correct = step(tg.from_numpy(X_train[idx]), tg.from_numpy(y_train[idx]))
            total_loss += loss * len(idx)
            total_correct += correct
        epoch_times.append(perf_counter() - t0)
        test_loss, test_acc = evaluate(model, X_test, y_test)
        history["train_loss"].append(total_loss / n)
        history["train_acc"].append(total_correct / n)
        history["test_loss"].append(test_loss)
        history["test_acc"].append(test_acc)
        bar.set_postfix(loss=f"{total_loss / n:.4f}", train_acc=f"{total_correct / n:.3f}",
                        test_acc=f"{test_acc:.3f}")
    bar.close()

    if args.plot:
        save_plot(history, args.plot)
        print(f"training curves saved to {args.plot}")
    # The first epoch includes loading the compiled sweep from Numba's cache; report the rest.
    per_epoch = float(np.median(epoch_times[1:] if len(epoch_times) > 1 else epoch_times))
    print(f"train {len(X_train)} / test {len(X_test)} images, {args.epochs} epochs, batch {args.batch_size}")
    print(f"final test accuracy: {history['test_acc'][-1]:.4f}  (test loss {history['test_loss'][-1]:.4f})")
    print(f"time per epoch: {per_epoch * 1e3:.1f} ms (median; first epoch {epoch_times[0] * 1e3:.1f} ms)")
    return {"test_acc": history["test_acc"][-1], "test_loss": history["test_loss"][-1],
            "epoch_time_s": per_epoch, "history": history, "plot": args.plot}


if __name__ == "__main__":
    main(sys.argv[1:])
