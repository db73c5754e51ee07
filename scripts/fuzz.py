"""The long fuzzing budget: tests/test_fuzz.py under the "long" hypothesis profile.

    python scripts/fuzz.py                 # 5,000 examples per generator (about an hour)
    python scripts/fuzz.py --examples 500  # a shorter run

CI runs the same tests with the "ci" profile (100 examples each). A failure prints the
minimal input hypothesis shrank it to: add it to REGRESSIONS in tests/test_fuzz.py.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
from pathlib import Path

TESTS = Path(__file__).resolve().parent.parent / "tests" / "test_fuzz.py"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--examples", type=int, default=5000, help="examples per hypothesis test (default: 5000)")
    args, pytest_args = parser.parse_known_args()
    environment = {**os.environ, "FUZZ_PROFILE": "long", "FUZZ_EXAMPLES": str(args.examples)}
    command = [sys.executable, "-m", "pytest", str(TESTS), "-q", "-x", "-W", "ignore::SyntaxWarning", *pytest_args]
    return subprocess.call(command, env=environment)


if __name__ == "__main__":
    sys.exit(main())
