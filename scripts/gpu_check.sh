#!/usr/bin/env bash
# The CUDA checks of the runtime parts, in one command, for a machine with a GPU (CI has none,
# so there the CUDA tests skip). Run from anywhere:
#
#     bash scripts/gpu_check.sh            # on a GPU machine; exit 0 when every check passed
#     DEVICE=cpu bash scripts/gpu_check.sh # the same steps on CPU, to try the script without a GPU
#
# Needs a Python (PYTHON, default python3) with torch (a CUDA build), libcst, click and pytest;
# nothing is downloaded. A machine that lacks some (a GPU image usually has no libcst) gets them
# from wheels in .whl/ of the checkout, installed into a temporary folder first; fetch them
# where pip works, for that machine's Python (3.12 on the lent H200s):
#     python3 -m pip download --no-deps --only-binary=:all: --python-version 3.12 \
#         --implementation cp --platform manylinux_2_17_x86_64 -d .whl libcst
# The log is printed and kept in ${OUT:-$TMPDIR}/gpu_check.log. Steps:
#   1. the environment: torch, CUDA, the device;
#   2. the CUDA tests of the suite (tracer on CUDA tensors, --confirm --device auto), which must
#      run, not skip;
#   3. the culprit tracer on every `raises_*` fixture driver with CUDA as the default device: the
#      error (at backward, or autograd's refusal at the write) must name a fixture `# expect:`
#      line as the mutation and be raised for a CUDA tensor;
#   4. the tracer on every `silent_*` driver, default device CUDA: a silent report must name a
#      fixture `# expect:` line, and no `safe_*` driver may be reported off those lines;
#   5. `--confirm --device cpu,<device>` over the fixture folders: statuses per device, and every
#      finding whose status differs between the two devices.
set -uo pipefail

DEVICE=${DEVICE:-cuda}
PYTHON=${PYTHON:-python3}
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
LOG_DIR=${OUT:-${TMPDIR:-/tmp}}
LOG="$LOG_DIR/gpu_check.log"
FOLDERS=(control_flow seeds views tip001 tip002 tip003 tip004 tip005 tip006 tip007 tip008 tip009)
export PYTHONPATH="$ROOT${PYTHONPATH:+:$PYTHONPATH}"
cd "$ROOT" || exit 2
mkdir -p "$LOG_DIR"
exec > >(tee "$LOG") 2>&1
failed=0
if compgen -G "$ROOT/.whl/*.whl" > /dev/null; then
    SITE=$(mktemp -d)
    "$PYTHON" -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --target "$SITE" "$ROOT"/.whl/*.whl || exit 2
    export PYTHONPATH="$PYTHONPATH:$SITE"
fi

step() { printf '\n=== %s\n' "$*"; }

step "1. environment (device: $DEVICE)"
if ! "$PYTHON" - "$DEVICE" <<'EOF'
import sys
import torch
device = sys.argv[1]
print(f"python {sys.version.split()[0]}, torch {torch.__version__}, CUDA build {torch.version.cuda}, available {torch.cuda.is_available()}")
if device == "cuda":
    if not torch.cuda.is_available():
        sys.exit("no usable CUDA device: nothing to check (DEVICE=cpu tries the script on CPU)")
    print(f"device 0: {torch.cuda.get_device_name(0)}, capability {torch.cuda.get_device_capability(0)}")
EOF
then
    exit 2
fi

if [ "$DEVICE" = cuda ]; then
    step "2. the suite's CUDA tests (must pass, not skip)"
    "$PYTHON" -m pytest -q -p no:cacheprovider -o addopts= -rs \
        tests/test_runtime_tracer.py::test_cuda_tensors tests/test_confirm_cli.py::test_cuda_run \
        | tee "$LOG_DIR/gpu_check_pytest.txt"
    status=${PIPESTATUS[0]}
    if [ "$status" -ne 0 ] || grep -q "skipped" "$LOG_DIR/gpu_check_pytest.txt"; then
        echo "FAILED: the CUDA tests did not all pass"
        failed=1
    fi
else
    step "2. the suite's CUDA tests: not on $DEVICE"
fi

step "3. the culprit tracer on the raising fixture drivers, default device $DEVICE"
"$PYTHON" - "$DEVICE" <<'EOF' || failed=1
import sys
from collections import Counter

sys.path.insert(0, "tests")
import torch
from test_fixtures import FIXTURES, load_fixture
from test_runtime_tracer import RAISES, TRACER_GAPS, _expected_writes

from torchlint_inplace.runtime import InplaceCulpritError, InplaceRefusalError, trace

device = sys.argv[1]
torch.set_default_device(device)
outcomes = Counter()
for path, name in RAISES:
    case = f"{path.relative_to(FIXTURES).as_posix()}::{name}"
    expected = _expected_writes(path)
    torch.manual_seed(0)
    try:
        with trace():
            getattr(load_fixture(path), name)()
        outcome, detail = "did not raise", ""
    except InplaceCulpritError as error:
        lines = [site for write in error.writes for site in (write.site, write.built and write.built.site) if site]
        named = [f"{site.file}:{site.line}" for site in lines if (site.file, site.line) in expected]
        on_device = error.tensor.device.split(":")[0] == device
        outcome = "named" if named and on_device else "wrong line" if not named else "wrong device"
        detail = f"{error.tensor.device} {', '.join(named) or [f'{w.file}:{w.line}' for w in error.writes]}"
    except InplaceRefusalError as error:  # autograd's refusal at the write, explained
        lines = [site for site in (error.culprit, error.built and error.built.site) if site]
        named = [f"{site.file}:{site.line}" for site in lines if (site.file, site.line) in expected]
        on_device = error.tensor is None or error.tensor.device.split(":")[0] == device
        outcome = "named" if named and on_device else "wrong line" if not named else "wrong device"
        detail = f"refused ({error.refusal.key}) {', '.join(named) or f'{error.culprit.file}:{error.culprit.line}'}"
    except Exception as error:
        outcome, detail = "error", f"{type(error).__name__}: {str(error).splitlines()[0][:100] if str(error) else ''}"
    known = any(key[0] == case for key in TRACER_GAPS)
    outcomes[outcome + (" (known gap)" if known and outcome != "named" else "")] += 1
    print(f"{outcome:22} {case}  {detail}")
print(dict(outcomes))
bad = sum(count for outcome, count in outcomes.items() if outcome in ("did not raise", "wrong line", "wrong device", "error"))
print(f"{outcomes['named']}/{len(RAISES)} named their fixture's mutating line on {device}; {bad} unexplained")
sys.exit(1 if bad else 0)
EOF

step "4. the tracer's silent reports on the silent and safe fixture drivers, default device $DEVICE"
"$PYTHON" - "$DEVICE" <<'EOF' || failed=1
import sys

sys.path.insert(0, "tests")
import torch
from test_fixtures import DRIVER_CASES, FIXTURES, _kind, load_fixture
from test_runtime_tracer import _expected_writes

from torchlint_inplace.runtime import trace

torch.set_default_device(sys.argv[1])
bad = 0
for path, name in DRIVER_CASES:
    kind = _kind(name)
    if kind == "raises":
        continue
    case = f"{path.relative_to(FIXTURES).as_posix()}::{name}"
    expected = _expected_writes(path)
    torch.manual_seed(0)
    try:
        with trace() as tracer:
            getattr(load_fixture(path), name)()
    except Exception as error:
        print(f"{'error':22} {case}  {type(error).__name__}: {str(error).splitlines()[0][:100] if str(error) else ''}")
        bad += 1
        continue
    named = [{(site.file, site.line) for site in (report.write, report.built and report.built.site) if site} & set(expected) for report in tracer.reports]
    sites = [f"{report.write.file}:{report.write.line}" for report in tracer.reports]
    if kind == "silent":
        outcome = "reported" if any(named) else "not reported"
    else:
        outcome = "clean" if all(named) else "reported (false)"
    bad += outcome in ("not reported", "reported (false)")
    print(f"{outcome:22} {case}  {sites}")
print(f"{bad} silent or safe drivers misreported on {sys.argv[1]}")
sys.exit(1 if bad else 0)
EOF

step "5. --confirm --device cpu,$DEVICE over the fixtures"
paths=()
for folder in "${FOLDERS[@]}"; do paths+=("fixtures/$folder"); done
"$PYTHON" -m torchlint_inplace check --isolated --no-cache --confirm --device "cpu,$DEVICE" --confirm-timeout 120 \
    --format json "${paths[@]}" > "$LOG_DIR/gpu_check_confirm.json"
"$PYTHON" - "$LOG_DIR/gpu_check_confirm.json" "$DEVICE" <<'EOF' || failed=1
import json
import sys
from collections import Counter

findings = json.load(open(sys.argv[1], encoding="utf-8"))["findings"]
device = sys.argv[2]
statuses = Counter()
differing = []
for finding in findings:
    status = finding.get("confirmation", "(none)")
    kind = status.split(" (", 1)[0]
    if kind.startswith("cpu: "):  # the devices disagree: `cpu: <status>; <device>: <status>`
        differing.append(f"{finding['filename']}:{finding['location']['row']} {finding['code']}: {status}")
        kind = "differs between devices"
    elif kind.startswith("not run:"):
        kind = "not run"
    statuses[kind] += 1
print(f"{len(findings)} findings: {dict(statuses.most_common())}")
for line in differing:
    print(f"  {line}")
unavailable = [line for line in differing if f"{device}: not run: CUDA is not available" in line]
sys.exit(1 if unavailable else 0)
EOF

step "result"
if [ "$failed" -eq 0 ]; then echo "all checks passed on $DEVICE"; else echo "some checks FAILED on $DEVICE (see above)"; fi
echo "log: $LOG"
exit "$failed"
