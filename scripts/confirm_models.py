"""How many model-zoo models `--confirm`'s machinery builds and runs forward + backward with
inferred inputs (the closing figure of issue 5).

    python scripts/confirm_models.py --timm SRC [--torchvision SRC] [--deps DIR] [--timeout S] [--limit N]

SRC is a source checkout (`timm/` or `torchvision/` inside it), imported from there: neither is
installed here, and PyPI's torchvision does not import beside this torch. `--deps` is a folder
of extra pure dependencies put on sys.path (numpy for timm). Stubbed, and said so in the output:
when torchvision is not importable, `torchvision.ops.misc.FrozenBatchNorm2d` (timm imports it
for one norm layer) is a minimal re-implementation, and `timm.data` (whose package imports
torchvision's datasets and transforms) holds only its constants, all the models use from it;
torchvision's `_meta_registrations` is an empty module when its compiled `_C` cannot load
(a wheel built for CUDA beside a CPU torch): the ops themselves are not stubbed, so models
that need them fail honestly. `--results FILE` keeps every model's result (JSON), for
scripts/check_fixed_models.py to compare runs.

Each model is built with its zoo's own factory (`timm.create_model(name)`,
`torchvision.models.get_model(name)`) — the part a `[tool.torchlint-inplace.confirm]` entry
gives --confirm for a class whose constructor arguments cannot be guessed — and then fed exactly
as --confirm feeds a class: inputs inferred from the first consuming layer or searched on the
`meta` device, forward and backward on CPU under the culprit tracer (runtime/harness.py, run as
runtime/probe.py runs it). One model per architecture family (timm module / torchvision
builder), the smallest by name, each in a forked child with a timeout and a memory limit.
"""

from __future__ import annotations

import argparse
import inspect
import json
import os
import resource
import select
import signal
import sys
import tempfile
import textwrap
import time
import types
from collections import Counter
from collections.abc import Callable
from pathlib import Path

SIZE_WORDS = ("atto", "femto", "pico", "nano", "tiny", "mini", "small", "xs", "s_", "b0", "18", "lite", "050", "075", "100")
FROZEN_BN_STUB = '''
import torch
from torch import nn


class FrozenBatchNorm2d(nn.Module):
    """Stub of torchvision.ops.misc.FrozenBatchNorm2d (written by scripts/confirm_models.py)."""

    def __init__(self, num_features: int, eps: float = 1e-5) -> None:
        super().__init__()
        self.eps = eps
        self.register_buffer("weight", torch.ones(num_features))
        self.register_buffer("bias", torch.zeros(num_features))
        self.register_buffer("running_mean", torch.zeros(num_features))
        self.register_buffer("running_var", torch.ones(num_features))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        scale = self.weight * (self.running_var + self.eps).rsqrt()
        shift = self.bias - self.running_mean * scale
        return x * scale.reshape(1, -1, 1, 1) + shift.reshape(1, -1, 1, 1)
'''


def smallest(names: list[str]) -> str:
    return min(names, key=lambda name: (not any(word in name for word in SIZE_WORDS), len(name), name))


def in_child(work: Callable[[], str], timeout: float, memory_bytes: int) -> str:
    """`work()` in a forked child with a timeout and an address-space limit; its one-line result."""
    read_end, write_end = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.close(read_end)
        os.setpgid(0, 0)
        null = os.open(os.devnull, os.O_WRONLY)
        os.dup2(null, 1)
        os.dup2(null, 2)
        resource.setrlimit(resource.RLIMIT_AS, (memory_bytes, memory_bytes))
        try:
            result = work()
        except BaseException as error:  # noqa: BLE001 - everything is a result here
            result = f"{type(error).__name__}: {str(error).strip().splitlines()[0] if str(error).strip() else ''}"
        os.write(write_end, result.encode()[:2000])
        os._exit(0)
    os.close(write_end)
    ready, _, _ = select.select([read_end], [], [], timeout)
    data = os.read(read_end, 4096) if ready else b""
    os.close(read_end)
    try:
        os.killpg(pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    _, status = os.waitpid(pid, 0)
    if data:
        return data.decode()
    if not ready:
        return f"timeout after {timeout:g}s"
    return f"died ({'signal ' + signal.Signals(os.WTERMSIG(status)).name if os.WIFSIGNALED(status) else 'exit ' + str(os.WEXITSTATUS(status))})"


def confirm_like(build: Callable[[], object], name: str) -> str:
    """Feeds and runs a built model exactly as --confirm does, then once more without the
    tracer (which records an in-place error rather than raising it): "ok", the input shapes
    and the magnitude of its outputs and gradients (deterministic: fixed seeds, one thread,
    so two copies of a model can be compared), or the reason it could not run."""
    import torch

    from torchlint_inplace.runtime import inputs
    from torchlint_inplace.runtime.coverage import Outcome
    from torchlint_inplace.runtime.harness import Entry, Harness
    from torchlint_inplace.runtime.probe import _run_entry
    from torchlint_inplace.runtime.request import Request

    class ZooHarness(Harness):
        def build(self, device: str | None = None) -> object:
            torch.manual_seed(0)
            with torch.device(device or self.device):
                return build()

    torch.set_num_threads(1)
    model = build()
    request = Request(Path("<zoo>"), {}, "cpu")
    harness = ZooHarness(type(model), sys.modules[type(model).__module__], request, ((), {}))
    entry = Entry("forward", inputs.slots(model.forward, skip=0))
    outcome = Outcome("<zoo>", [], {}, name)
    try:
        layout = _run_entry(harness, entry, outcome)
    except inputs.NotRun as reason:
        return f"not run: {reason}"
    shapes = [shape for shape in (layout.shapes if layout else ()) if shape]
    try:
        tensors = harness.run(entry, layout)
    except Exception as error:  # noqa: BLE001 - the failure is the result
        return f"fed {json.dumps(shapes)}, but forward+backward raised {type(error).__name__}: {str(error).strip()[:300]}"
    magnitude = sum(float(tensor.detach().double().abs().sum()) for tensor in tensors if tensor is not None)
    return f"ok {json.dumps(shapes)} |outputs, gradients| = {magnitude:.6g}"


def stub_timm_data(source: Path) -> None:
    """timm's models import only constants from `timm.data`, whose package needs torchvision's
    datasets and transforms: `timm.data` becomes a module holding `timm/data/constants.py`."""
    stub = types.ModuleType("timm.data")
    exec(compile((source / "timm" / "data" / "constants.py").read_text(encoding="utf-8"), "timm/data/constants.py", "exec"), stub.__dict__)
    sys.modules["timm.data"] = stub


def timm_models(source: Path) -> dict[str, Callable[[], object]]:
    sys.path.insert(0, str(source))
    import timm
    from timm.models import _registry

    families: dict[str, list[str]] = {}
    for name in timm.list_models():
        families.setdefault(_registry._model_to_module.get(name, "?"), []).append(name)
    chosen = sorted(smallest(names) for names in families.values())
    return {f"timm:{name}": (lambda name=name: timm.create_model(name, pretrained=False)) for name in chosen}


def stub_meta_registrations() -> str | None:
    """torchvision registers fake kernels for its compiled ops (`torchvision::nms`, ...) when
    imported, which fails where its `_C` cannot load (a CUDA build beside a CPU torch): its
    `_meta_registrations` becomes an empty module. Returns what was stubbed, None when the
    real module imports."""
    try:
        import torchvision  # noqa: F401
    except RuntimeError as error:
        if "torchvision::" not in str(error):
            raise
        for name in [name for name in sys.modules if name == "torchvision" or name.startswith("torchvision.")]:
            del sys.modules[name]
        sys.modules["torchvision._meta_registrations"] = types.ModuleType("torchvision._meta_registrations")
        return "torchvision._meta_registrations (its compiled ops cannot load; models that need them fail)"
    return None


def torchvision_models(source: Path, stubs: list[str]) -> dict[str, Callable[[], object]]:
    sys.path.insert(0, str(source))
    if stub := stub_meta_registrations():
        stubs.append(stub)
    from torchvision import models

    builders: dict[str, list[str]] = {}
    for name in models.list_models():
        builder = models.get_model_builder(name)
        builders.setdefault(builder.__module__, []).append(name)
    chosen = sorted(smallest(names) for names in builders.values())
    return {f"torchvision:{name}": (lambda name=name: models.get_model(name, **no_weights(models.get_model_builder(name)))) for name in chosen}


def torchvision_family(name: str) -> str:
    """`ssd300_vgg16` -> `detection`: the subpackage of its builder; top-level builders classify."""
    from torchvision import models

    parts = models.get_model_builder(name).__module__.split(".")
    return parts[2] if len(parts) > 3 else "classification"


def no_weights(builder: Callable[..., object]) -> dict[str, None]:
    """`weights=None`, and `weights_backbone=None` where the builder takes it (its default
    downloads ImageNet weights for the backbone)."""
    return {name: None for name in ("weights", "weights_backbone") if name in inspect.signature(builder).parameters}


def stub_torchvision_ops(folder: Path) -> None:
    """timm imports `torchvision.ops.misc.FrozenBatchNorm2d`; without torchvision, a stub."""
    misc = folder / "torchvision" / "ops"
    misc.mkdir(parents=True)
    (folder / "torchvision" / "__init__.py").write_text('"""Stub (scripts/confirm_models.py)."""\n', encoding="utf-8")
    (misc / "__init__.py").write_text("", encoding="utf-8")
    (misc / "misc.py").write_text(textwrap.dedent(FROZEN_BN_STUB), encoding="utf-8")
    sys.path.insert(0, str(folder))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--timm", type=Path, help="a pytorch-image-models checkout")
    parser.add_argument("--torchvision", type=Path, help="a pytorch/vision checkout")
    parser.add_argument("--deps", type=Path, help="a folder of extra pure dependencies (numpy)")
    parser.add_argument("--timeout", type=float, default=120.0, help="seconds per model")
    parser.add_argument("--memory-gib", type=float, default=8.0)
    parser.add_argument("--limit", type=int, help="at most this many models per zoo")
    parser.add_argument("--verbose", action="store_true", help="one line per model")
    parser.add_argument("--results", type=Path, help="write every model's result here (JSON: name -> result)")
    args = parser.parse_args()
    if args.deps:
        sys.path.insert(0, str(args.deps))
    stubs = []
    with tempfile.TemporaryDirectory() as scratch:
        zoos: dict[str, dict[str, Callable[[], object]]] = {}
        if args.torchvision:
            zoos["torchvision"] = torchvision_models(args.torchvision, stubs)
        if args.timm:
            try:
                import torchvision  # noqa: F401
            except ImportError:
                stub_torchvision_ops(Path(scratch))
                stub_timm_data(args.timm)
                stubs += ["torchvision.ops.misc.FrozenBatchNorm2d (for timm)", "timm.data (its constants only)"]
            zoos["timm"] = timm_models(args.timm)
        import torch  # noqa: F401  (imported before forking, as the confirmation server does)

        every: dict[str, str] = {}
        for zoo, models in zoos.items():
            names = sorted(models)[: args.limit]
            results: dict[str, str] = {}
            started = time.monotonic()
            for name in names:
                results[name] = in_child(lambda: confirm_like(models[name], name), args.timeout, int(args.memory_gib * 1024**3))
                if args.verbose:
                    print(f"{name}: {results[name]}", flush=True)
            ok = sum(result.startswith("ok") for result in results.values())
            reasons = Counter(result.split(" (")[0][:90] for result in results.values() if not result.startswith("ok"))
            print(f"{zoo}: {ok}/{len(names)} architecture families built and ran forward+backward with inferred inputs ({time.monotonic() - started:.0f}s)")
            for reason, count in reasons.most_common(8):
                print(f"  {count:4d}  {reason}")
            if zoo == "torchvision":
                families = Counter(torchvision_family(name.split(":", 1)[1]) for name in names)
                ran = Counter(torchvision_family(name.split(":", 1)[1]) for name in names if results[name].startswith("ok"))
                print("  by family: " + ", ".join(f"{family} {ran[family]}/{count}" for family, count in sorted(families.items())))
            every.update(results)
    if args.results:
        args.results.write_text(json.dumps(every, indent=1), encoding="utf-8")
    print(f"stubbed: {', '.join(stubs) or 'nothing'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
