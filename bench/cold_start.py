"""Cold start: import time of each handler module, and the size of the Lambda asset.

    python bench/cold_start.py [--runs N]

Each handler module (`hookrelay.functions.FUNCTIONS`) is imported in a fresh interpreter, N times,
and the median is reported, twice: with this checkout's bytecode cache, and with no bytecode at all
(an empty `-X pycache_prefix`, writes off), which is what a cold Lambda pays when its asset ships no
`.pyc` files (its code directory is read-only, so nothing it compiles is kept). The imports run here, on
this machine's Python and the project's environment (.venv), not on Lambda's arm64 runtime: the asset's
compiled wheels are for aarch64.

The asset is `build/lambda-asset` (built with scripts/build_lambda_asset.py if absent), measured
unzipped and zipped (deflate, as the CDK zips a directory asset), with its biggest packages.
"""

from __future__ import annotations

import argparse
import io
import os
import re
import subprocess
import sys
import tempfile
import zipfile
from collections import Counter
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.common import ROOT, heading, machine, median, table
from hookrelay.adapters.telemetry import METRICS_NAMESPACE
from hookrelay.functions import DELIVERY, FUNCTIONS

ASSET = ROOT / "build" / "lambda-asset"
# Lambda's limits for a function's deployment package (https://docs.aws.amazon.com/lambda/latest/dg/gettingstarted-limits.html).
UNZIPPED_LIMIT_MB = 250
ZIPPED_UPLOAD_LIMIT_MB = 50
LAMBDA_ENV = {
    "AWS_DEFAULT_REGION": "us-east-1",
    "POWERTOOLS_SERVICE_NAME": "bench",
    "POWERTOOLS_METRICS_NAMESPACE": METRICS_NAMESPACE,
    "POWERTOOLS_TRACE_DISABLED": "true",  # no X-Ray daemon here
}
TIMED_IMPORT = (
    "import importlib, time; started = time.perf_counter(); importlib.import_module({module!r}); "
    "print(time.perf_counter() - started)"
)


def import_seconds(module: str, *, cached: bool) -> float:
    env = {**os.environ, **LAMBDA_ENV, "PYTHONPATH": str(ROOT / "lambdas")}
    args = [sys.executable]
    with tempfile.TemporaryDirectory(prefix="bench-pycache-") as empty:
        if not cached:
            env["PYTHONDONTWRITEBYTECODE"] = "1"
            args += ["-X", f"pycache_prefix={empty}"]
        output = subprocess.run(  # noqa: S603 - our own interpreter, a fixed program
            [*args, "-c", TIMED_IMPORT.format(module=module)], env=env, capture_output=True, text=True, check=True
        ).stdout
    return float(output.strip().splitlines()[-1])


def heaviest_imports(module: str, top: int = 8) -> list[tuple[str, float]]:
    """Self import time by top-level package (`-X importtime`), cached bytecode: what the import costs are made of."""
    env = {**os.environ, **LAMBDA_ENV, "PYTHONPATH": str(ROOT / "lambdas")}
    stderr = subprocess.run(  # noqa: S603 - our own interpreter, a fixed program
        [sys.executable, "-X", "importtime", "-c", f"import {module}"],
        env=env,
        capture_output=True,
        text=True,
        check=True,
    ).stderr
    by_package: Counter[str] = Counter()
    for line in stderr.splitlines():
        found = re.match(r"import time:\s+(\d+) \|\s+\d+ \|\s*(\S+)", line)
        if found:
            by_package[found.group(2).split(".")[0]] += int(found.group(1)) / 1e6
    return by_package.most_common(top)


def ensure_asset() -> None:
    if not ASSET.is_dir():
        print("build/lambda-asset is missing: building it (scripts/build_lambda_asset.py)", flush=True)
        subprocess.run([sys.executable, str(ROOT / "scripts" / "build_lambda_asset.py")], check=True)  # noqa: S603


def asset_sizes() -> tuple[int, int, Counter[str], int]:
    """Unzipped bytes, zipped bytes, bytes per top-level entry, number of files."""
    unzipped = 0
    files = 0
    by_entry: Counter[str] = Counter()
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", compression=zipfile.ZIP_DEFLATED) as archive:
        for path in sorted(ASSET.rglob("*")):
            if path.is_file():
                size = path.stat().st_size
                unzipped += size
                files += 1
                relative = path.relative_to(ASSET)
                by_entry[package_of(relative.parts[0])] += size
                archive.write(path, relative.as_posix())
    return unzipped, buffer.getbuffer().nbytes, by_entry, files


def package_of(entry: str) -> str:
    """A distribution's metadata directory counts with its package (pydantic-2.x.dist-info -> pydantic)."""
    return re.sub(r"-[^-]+\.dist-info$", "", entry).lower().replace("-", "_")


def mb(size: float) -> str:
    return f"{size / 1e6:.1f}"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=3, help="fresh interpreters per module and mode (default 3)")
    args = parser.parse_args(argv)
    print(f"# Cold start ({machine()})")
    heading(f"Import time of each handler module, median of {args.runs} fresh interpreters")
    rows = []
    for function in FUNCTIONS:
        module = function.handler.rpartition(".")[0]
        cached = [import_seconds(module, cached=True) for _ in range(args.runs)]
        compiled = [import_seconds(module, cached=False) for _ in range(args.runs)]
        rows.append([function.name, module, f"{1000 * median(cached):.0f}", f"{1000 * median(compiled):.0f}"])
    print(
        table(["function", "module", "ms, bytecode cached", "ms, no bytecode (compiled each time)"], rows, align="llrr")
    )
    delivery = DELIVERY.handler.rpartition(".")[0]
    print(f"\nWhere {delivery}'s import time goes (self time by top-level package, bytecode cached, one run):\n")
    print(table(["package", "ms"], [[name, f"{1000 * s:.0f}"] for name, s in heaviest_imports(delivery)]))

    ensure_asset()
    unzipped, zipped, by_entry, files = asset_sizes()
    pyc = sum(1 for _ in ASSET.rglob("*.pyc"))
    heading("The Lambda asset (build/lambda-asset)")
    print(
        table(
            ["measure", "value"],
            [
                ["files", f"{files}"],
                ["unzipped", f"{mb(unzipped)} MB (Lambda's limit: {UNZIPPED_LIMIT_MB} MB)"],
                ["zipped (deflate)", f"{mb(zipped)} MB (direct upload limit: {ZIPPED_UPLOAD_LIMIT_MB} MB)"],
                [".pyc files shipped", f"{pyc}"],
            ],
        )
    )
    print("\nBiggest packages (unzipped, with their .dist-info):\n")
    print(
        table(
            ["package", "MB", "share"], [[n, mb(s), f"{100 * s / unzipped:.0f}%"] for n, s in by_entry.most_common(10)]
        )
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
