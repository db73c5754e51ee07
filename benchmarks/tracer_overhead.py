"""What the culprit tracer costs: forward + backward plain, traced, and traced in fail-fast mode
(median of N runs after warm-up), and what `pytest --torchlint-inplace` adds to a test run.

    python benchmarks/tracer_overhead.py [--runs 30] [--device cpu|cuda] [--threads N]
                                         [--timm resnet18 ...] [--fixtures] [--plugin]

Without options it times a small ResNet-style model (`small_resnet`). `--timm NAME` times timm
models (timm must be importable), batch 8 at the model's own input size. `--fixtures` times one
pass over every driver in fixtures/ (the raising ones until their error), plain and traced.
`--plugin` runs fresh pytest processes (CPU seconds, median of 5): over the fixture drivers as
tests, with and without the plugin (its cost in a test suite), and over one test that imports
nothing, with the plugin not loaded and loaded but not enabled (its cost when unused).
"""

from __future__ import annotations

import argparse
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from contextlib import AbstractContextManager, nullcontext, suppress
from pathlib import Path

import torch
from torch import nn

from torchlint_inplace.runtime import trace

ROOT = Path(__file__).resolve().parent.parent


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


CONTEXTS: dict[str, Callable[[], AbstractContextManager]] = {
    "plain": nullcontext,
    "traced": trace,
    "traced fail-fast": lambda: trace(fail_fast=True),
}


def median_ms(
    step: Callable[[], None], runs: int, sync: Callable[[], None], clock: Callable[[], float]
) -> dict[str, float]:
    """Median time per context; the contexts take turns run by run, so load from other processes
    on the machine hits all of them alike instead of whichever ran during the spike. On CPU the
    clock is the process's CPU time, which other processes on a shared machine barely move."""
    times: dict[str, list[float]] = {label: [] for label in CONTEXTS}
    for index in range(runs + 3):  # three warm-up rounds (the first traced run builds caches)
        for label, context in CONTEXTS.items():
            sync()
            start = clock()
            with context():
                step()
            sync()
            if index >= 3:
                times[label].append((clock() - start) * 1000)
    return {label: statistics.median(values) for label, values in times.items()}


def print_medians(title: str, medians: dict[str, float]) -> None:
    print(title)
    for label, median in medians.items():
        print(f"  {label:<16} {median:9.2f} ms   x{median / medians['plain']:.2f}")


def model_step(model: nn.Module, images: torch.Tensor) -> Callable[[], None]:
    def step() -> None:
        model.zero_grad()
        model(images).float().logsumexp(dim=-1).mean().backward()

    return step


def fixture_pass() -> Callable[[], None]:
    """One call of every fixture driver; a raising one stops at its error, as it would in a test."""
    sys.path.insert(0, str(ROOT / "tests"))
    from test_fixtures import DRIVER_CASES, load_fixture

    drivers = [getattr(load_fixture(path), name) for path, name in DRIVER_CASES]

    def step() -> None:
        torch.manual_seed(0)
        for driver in drivers:
            with suppress(RuntimeError):
                driver()

    return step


PLUGIN_TESTS = """\
import sys
import pytest
sys.path.insert(0, {tests!r})
from test_fixtures import DRIVER_CASES, _kind, load_fixture, run_driver
import torch


@pytest.mark.parametrize(("path", "name"), DRIVER_CASES)
def test_driver(path, name):
    run_driver(torch, getattr(load_fixture(path), name), _kind(name))
"""


TRIVIAL_TESTS = """\
def test_arithmetic():
    assert 1 + 1 == 2
"""


def _pytest_cpu_seconds(tests: Path, extra: list[str]) -> float:
    """CPU seconds (user + system: the figure a machine shared with other work does not skew)
    of a fresh pytest over `tests`."""
    command = [
        sys.executable,
        "-m",
        "pytest",
        "-q",
        "-p",
        "no:cacheprovider",
        "-p",
        "no:xdist",
        "-o",
        "addopts=",
        *extra,
        str(tests),
    ]
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    done = subprocess.run(command, cwd=tests.parent, capture_output=True, text=True)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if done.returncode != 0:
        sys.exit(f"pytest failed ({' '.join(extra)}):\n{done.stdout[-3000:]}")
    return after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime


def plugin_seconds(runs: int) -> dict[str, float]:
    """Median CPU seconds of fresh pytest runs: over the fixture drivers as tests without the
    plugin and with it (warn mode, so that silent drivers pass as they do without it), and over
    one test that imports nothing without the plugin loaded and loaded but not enabled."""
    with tempfile.TemporaryDirectory() as folder:
        drivers, trivial = Path(folder) / "test_drivers.py", Path(folder) / "trivial" / "test_trivial.py"
        drivers.write_text(PLUGIN_TESTS.format(tests=str(ROOT / "tests")), encoding="utf-8")
        trivial.parent.mkdir()
        trivial.write_text(TRIVIAL_TESTS, encoding="utf-8")
        variants = {
            "drivers, plugin not loaded": (drivers, ["-p", "no:torchlint-inplace"]),
            "drivers, --torchlint-inplace=warn": (drivers, ["--torchlint-inplace=warn"]),
            "one test, plugin not loaded": (trivial, ["-p", "no:torchlint-inplace"]),
            "one test, loaded, not enabled": (trivial, []),
        }
        seconds: dict[str, list[float]] = {label: [] for label in variants}
        for _ in range(runs):
            for label, (tests, extra) in variants.items():
                seconds[label].append(_pytest_cpu_seconds(tests, extra))
    return {label: statistics.median(values) for label, values in seconds.items()}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=30)
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--threads", type=int, default=None)
    parser.add_argument("--timm", nargs="*", default=[], metavar="NAME", help="timm models to time")
    parser.add_argument("--fixtures", action="store_true", help="time one pass over every fixture driver")
    parser.add_argument(
        "--plugin", action="store_true", help="time pytest over the fixture drivers with and without the plugin"
    )
    options = parser.parse_args()
    if options.threads:
        torch.set_num_threads(options.threads)
    device = torch.device(options.device)
    sync = torch.cuda.synchronize if device.type == "cuda" else (lambda: None)
    clock = time.perf_counter if device.type == "cuda" else time.process_time
    print(
        f"device {device}, {torch.get_num_threads()} threads, median of {options.runs} runs, {'wall' if device.type == 'cuda' else 'CPU'} ms"
    )
    images = torch.randn(8, 3, 32, 32, device=device)
    print_medians(
        "small_resnet, batch 8x3x32x32",
        median_ms(model_step(small_resnet().to(device), images), options.runs, sync, clock),
    )
    for name in options.timm:
        import timm

        model = timm.create_model(name).to(device)
        size = model.default_cfg.get("input_size", (3, 224, 224))
        parameters = sum(parameter.numel() for parameter in model.parameters()) / 1e6
        step = model_step(model, torch.randn(8, *size, device=device))
        print_medians(
            f"timm {name} ({parameters:.1f} M parameters), batch 8x{'x'.join(map(str, size))}",
            median_ms(step, options.runs, sync, clock),
        )
    if options.fixtures:
        print_medians("fixtures/: one pass over every driver", median_ms(fixture_pass(), options.runs, sync, clock))
    if options.plugin:
        seconds = plugin_seconds(runs=5)
        print("fresh pytest processes, CPU seconds, median of 5")
        for label, value in seconds.items():
            base = seconds[label.split(",")[0] + ", plugin not loaded"]
            print(f"  {label:<34} {value:6.2f} s   {value - base:+6.2f} s")


if __name__ == "__main__":
    main()
