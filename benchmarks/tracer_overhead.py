"""What the culprit tracer costs: forward + backward of a small ResNet-style model, plain, traced,
and traced in fail-fast mode (median of N runs after warm-up).

    python benchmarks/tracer_overhead.py [--runs 30] [--device cpu|cuda] [--threads N]
"""

from __future__ import annotations

import argparse
import statistics
import time
from collections.abc import Callable
from contextlib import AbstractContextManager, nullcontext

import torch
from torch import nn

from torchlint_inplace.runtime import trace


class Block(nn.Module):
    def __init__(self, channels: int) -> None:
        super().__init__()
        self.body = nn.Sequential(
            nn.Conv2d(channels, channels, 3, padding=1, bias=False),
            nn.BatchNorm2d(channels),
            nn.ReLU(inplace=True),
            nn.Conv2d(channels, channels, 3, padding=1, bias=False),
            nn.BatchNorm2d(channels),
        )
        self.act = nn.ReLU(inplace=True)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.act(self.body(x) + x)


def small_resnet(channels: int = 32, blocks: int = 4, classes: int = 10) -> nn.Module:
    return nn.Sequential(
        nn.Conv2d(3, channels, 3, padding=1, bias=False),
        nn.BatchNorm2d(channels),
        nn.ReLU(inplace=True),
        *(Block(channels) for _ in range(blocks)),
        nn.AdaptiveAvgPool2d(1),
        nn.Flatten(),
        nn.Linear(channels, classes),
    )


def median_ms(step: Callable[[], None], contexts: dict[str, Callable[[], AbstractContextManager]], runs: int, sync: Callable[[], None]) -> dict[str, float]:
    """Median time per context; the contexts take turns run by run, so load from other processes
    on the machine hits all of them alike instead of whichever ran during the spike."""
    times: dict[str, list[float]] = {label: [] for label in contexts}
    for index in range(runs + 3):  # three warm-up rounds (the first traced run builds caches)
        for label, context in contexts.items():
            sync()
            start = time.perf_counter()
            with context():
                step()
            sync()
            if index >= 3:
                times[label].append((time.perf_counter() - start) * 1000)
    return {label: statistics.median(values) for label, values in times.items()}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=30)
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--threads", type=int, default=None)
    options = parser.parse_args()
    if options.threads:
        torch.set_num_threads(options.threads)
    device = torch.device(options.device)
    model = small_resnet().to(device)
    images = torch.randn(8, 3, 32, 32, device=device)
    labels = torch.randint(0, 10, (8,), device=device)
    sync = torch.cuda.synchronize if device.type == "cuda" else (lambda: None)

    def step() -> None:
        model.zero_grad()
        nn.functional.cross_entropy(model(images), labels).backward()

    medians = median_ms(
        step,
        {"plain": nullcontext, "traced": trace, "traced fail-fast": lambda: trace(fail_fast=True)},
        options.runs,
        sync,
    )
    print(f"device {device}, {torch.get_num_threads()} threads, batch 8x3x32x32, median of {options.runs} runs")
    for label, median in medians.items():
        print(f"  {label:<16} {median:8.2f} ms   x{median / medians['plain']:.2f}")

if __name__ == "__main__":
    main()
