"""Train a small convolutional classifier on scikit-learn's 8x8 digits with tapegrad.

    pip install -e ".[examples]"
    python examples/digits_cnn.py [--epochs N] [--batch-size B] [--lr LR] [--seed S] [--plot PATH]

The images (``sklearn.datasets.load_digits``, bundled, no download) are standardised
with the training split's statistics and fed as (N, 1, 8, 8) to
Conv2d(1, 16, 3, padding=1) -> BatchNorm2d -> ReLU -> MaxPool2d(2) -> Conv2d(16, 32, 3,
padding=1) -> ReLU -> AdaptiveAvgPool2d(2) -> Flatten -> Dropout(0.2) -> Linear(128, 10),
trained with AdamW and a StepLR-style halving of the learning rate (set by hand on the
parameter group); ``model.train()`` / ``model.eval()`` switch BatchNorm and Dropout.  It
writes the loss and accuracy curves to a PNG (matplotlib, Agg backend) and prints the
final test accuracy and the time per epoch.
"""
import argparse
import sys
from time import perf_counter

import numpy as np

import tapegrad as tg
import tapegrad.nn as nn
import tapegrad.nn.functional as F


def load_data(seed):
    from sklearn.datasets import load_digits
    from sklearn.model_selection import train_test_split

    X, y = load_digits(return_X_y=True)
    X_train, X_test, y_train, y_test = train_test_split(
        X.astype(np.float64), y.astype(np.int64), test_size=0.25, random_state=seed, stratify=y)
    mean, std = X_train.mean(), X_train.std()
    shape = (-1, 1, 8, 8)
    return ((X_train - mean) / std).reshape(shape), ((X_test - mean) / std).reshape(shape), y_train, y_test


class DigitsCNN(nn.Module):
    def __init__(self):
        super().__init__()
        self.features = nn.Sequential(
            nn.Conv2d(1, 16, 3, padding=1), nn.BatchNorm2d(16), nn.ReLU(), nn.MaxPool2d(2),
            nn.Conv2d(16, 32, 3, padding=1), nn.ReLU(), nn.AdaptiveAvgPool2d(2))
        self.head = nn.Sequential(nn.Flatten(), nn.Dropout(0.2), nn.Linear(32 * 2 * 2, 10))

    def forward(self, x):
        return self.head(self.features(x))


def evaluate(model, X, y):
    model.eval()
    with tg.no_grad():
        logits = model(tg.from_numpy(X))
        loss = F.cross_entropy(logits, tg.from_numpy(y)).item()
    model.train()
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
    fig.suptitle("tapegrad CNN on sklearn digits")
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)


def parse_args(argv):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--epochs", type=int, default=15)
    p.add_argument("--batch-size", type=int, default=64)
    p.add_argument("--lr", type=float, default=3e-3)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--plot", default="digits_cnn_training.png", help="PNG path for the training curves ('' to skip)")
    p.add_argument("--no-progress", action="store_true", help="disable the tqdm progress bar")
    return p.parse_args(argv)


def main(argv=None):
    """Train and return a dict with test_acc, test_loss, epoch_time_s, history and plot path."""
    from tqdm import tqdm

    args = parse_args(argv)
    tg.manual_seed(args.seed)
    rng = np.random.default_rng(args.seed)
    X_train, X_test, y_train, y_test = load_data(args.seed)
    model = DigitsCNN()
    opt = tg.optim.AdamW(model.parameters(), lr=args.lr, weight_decay=1e-4)

    n = len(X_train)
    history = {"train_loss": [], "train_acc": [], "test_loss": [], "test_acc": []}
    epoch_times = []
    bar = tqdm(range(args.epochs), desc="digits cnn", unit="epoch", disable=args.no_progress)
    for epoch in bar:
        if epoch and epoch % 5 == 0:            # the learning rate halves every 5 epochs
            for group in opt.param_groups:
                group["lr"] *= 0.5
        t0 = perf_counter()
        perm = rng.permutation(n)
        total_loss, total_correct = 0.0, 0
        for i in range(0, n, args.batch_size):
            idx = perm[i:i + args.batch_size]
            xb, yb = tg.from_numpy(X_train[idx]), tg.from_numpy(y_train[idx])
            opt.zero_grad()
            logits = model(xb)
            loss = F.cross_entropy(logits, yb)
            loss.backward()
            opt.step()
            total_loss += loss.item() * len(idx)
            total_correct += int((logits.detach().numpy().argmax(axis=1) == y_train[idx]).sum())
        epoch_times.append(perf_counter() - t0)
        test_loss, test_acc = evaluate(model, X_test, y_test)
        history["train_loss"].append(total_loss / n)
        history["train_acc"].append(total_correct / n)
        history["test_loss"].append(test_loss)
        history["test_acc"].append(test_acc)
        bar.set_postfix(loss=f"{total_loss / n:.4f}", test_acc=f"{test_acc:.3f}")
    bar.close()

    if args.plot:
        save_plot(history, args.plot)
        print(f"training curves saved to {args.plot}")
    per_epoch = float(np.median(epoch_times[1:] if len(epoch_times) > 1 else epoch_times))
    print(f"train {len(X_train)} / test {len(X_test)} images, {args.epochs} epochs, batch {args.batch_size}")
    print(f"final test accuracy: {history['test_acc'][-1]:.4f}  (test loss {history['test_loss'][-1]:.4f})")
    print(f"time per epoch: {per_epoch * 1e3:.1f} ms (median; first epoch {epoch_times[0] * 1e3:.1f} ms)")
    return {"test_acc": history["test_acc"][-1], "test_loss": history["test_loss"][-1],
            "epoch_time_s": per_epoch, "history": history, "plot": args.plot}


if __name__ == "__main__":
    main(sys.argv[1:])
