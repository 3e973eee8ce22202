"""Cold start: import time of each handler module as a ratio to `import boto3`, and the size of the Lambda asset.

    python bench/cold_start.py [--runs N] [--before DIR] [--python EXE]

`import boto3` alone (the floor: every function makes AWS calls, and the runtime provides boto3) and each
handler module (`hookrelay.functions.FUNCTIONS`) are imported in fresh interpreters, N rounds, interleaved (each
round imports boto3 and then every handler once, so the machine's load drifts alike for all); min and median
are reported, and each handler's as a ratio to boto3's of the same run. Targets (issue 12): the authorizer
≤ 1.3x, every other function ≤ 1.6x. With bytecode (what the asset ships when its build finds an interpreter
of the runtime's version) and, medians only, with no bytecode at all (an empty `-X pycache_prefix`, writes
off, the standard library and boto3 compiled too: more than the asset's source-only fallback costs, measured apart
below).
`--before DIR` also times another checkout's handlers (its `lambdas/` directory) in the same rounds: the before
column of bench/README.md. The imports run here, on
this machine's Python and the project's environment (.venv), not on Lambda's arm64 runtime: the asset's
compiled wheels are for aarch64.

The asset is `build/lambda-asset` (built with scripts/build_lambda_asset.py if absent, for cdk.json's runtime),
measured unzipped and zipped (deflate, as the CDK zips a directory asset), with its biggest packages.

What the asset's source-only fallback costs (the build ships no `.pyc` when it finds no interpreter of the
runtime's version): the asset is built twice for `--python` (default: this interpreter) and this machine's
architecture, with bytecode and source only, and each handler is imported from each (PYTHONDONTWRITEBYTECODE, as
Lambda's read-only code directory keeps nothing), beside `import boto3` from the SDK at its locked version
compiled as the runtime image ships it, with no site-packages (`-S`): only the asset and the SDK, as on Lambda.
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
from hookrelay.functions import DELIVERY, FUNCTIONS, INGEST, INTERPRETER_ENVIRONMENT
from scripts import build_lambda_asset

ASSET = ROOT / "build" / "lambda-asset"
# Lambda's limits for a function's deployment package (https://docs.aws.amazon.com/lambda/latest/dg/gettingstarted-limits.html).
UNZIPPED_LIMIT_MB = 250
ZIPPED_UPLOAD_LIMIT_MB = 50
LAMBDA_ENV = {
    "AWS_DEFAULT_REGION": "us-east-1",
    "POWERTOOLS_SERVICE_NAME": "bench",
    "POWERTOOLS_METRICS_NAMESPACE": METRICS_NAMESPACE,
    "POWERTOOLS_TRACE_DISABLED": "true",  # no X-Ray daemon here
    **INTERPRETER_ENVIRONMENT,  # as every function's environment sets it
}
TIMED_IMPORT = (
    "import importlib, time; started = time.perf_counter(); importlib.import_module({module!r}); "
    "print(time.perf_counter() - started)"
)


def import_seconds(module: str, *, cached: bool, code: Path = ROOT / "lambdas") -> float:
    env = {**os.environ, **LAMBDA_ENV, "PYTHONPATH": str(code)}
    args = [sys.executable]
    with tempfile.TemporaryDirectory(prefix="bench-pycache-") as empty:
        if cached:  # bytecode written where it is missing (a shell may forbid it), as the asset ships it
            env.pop("PYTHONDONTWRITEBYTECODE", None)
        else:
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


# This machine's architecture as Lambda names it: the asset built for it can be imported here.
HOST_ARCHITECTURE = {"x86_64": "x86_64", "aarch64": "arm64", "arm64": "arm64"}


def asset_import_rounds(python: str, runs: int) -> dict[str, list[float]]:
    """label -> seconds of each round: boto3, then each handler from the bytecode and the source-only asset."""
    version = build_lambda_asset.interpreter_version(python)
    if version is None:
        raise SystemExit(f"{python} is not a CPython interpreter that runs")
    architecture = HOST_ARCHITECTURE[os.uname().machine]
    with tempfile.TemporaryDirectory(prefix="bench-assets-") as scratch:
        assets = {
            "bytecode": build_lambda_asset.build(
                version, architecture, Path(scratch) / "bytecode", find=lambda _: python
            ),
            "source only": build_lambda_asset.build(
                version, architecture, Path(scratch) / "source", find=lambda _: None, announce=lambda _: None
            ),
        }
        sdk = Path(scratch) / "sdk"  # boto3 as the runtime provides it: beside the code, with its bytecode
        sdk.mkdir()
        (Path(scratch) / "sdk.txt").write_text("\n".join(build_lambda_asset.locked_requirements(runtime_provided=True)))
        build_lambda_asset.install(Path(scratch) / "sdk.txt", sdk, build_lambda_asset.Target(version, architecture))
        build_lambda_asset.compile_tree(sdk, sdk, python)
        modules = [(BOTO3, BOTO3, assets["bytecode"])] + [
            (f"{f.name}, {kind}", f.handler.rpartition(".")[0], asset)
            for kind, asset in assets.items()
            for f in FUNCTIONS
        ]
        times: dict[str, list[float]] = {label: [] for label, _, _ in modules}
        env = {**os.environ, **LAMBDA_ENV, "PYTHONDONTWRITEBYTECODE": "1"}
        for _ in range(runs):
            for label, module, asset in modules:
                output = subprocess.run(  # noqa: S603 - a checked interpreter, a fixed program
                    [python, "-S", "-c", TIMED_IMPORT.format(module=module)],
                    env={**env, "PYTHONPATH": f"{asset}:{sdk}"},
                    capture_output=True,
                    text=True,
                    check=True,
                ).stdout
                times[label].append(float(output.strip().splitlines()[-1]))
    return times


def source_only_cost(python: str, runs: int) -> None:
    heading(f"The asset with bytecode and source only, {runs} interleaved rounds ({python})")
    times = asset_import_rounds(python, runs)
    floor = median(times[BOTO3])
    rows = [[BOTO3, f"{1000 * floor:.0f}", "", "1.00", "", ""]]
    ratios = []
    for function in FUNCTIONS:
        compiled, source = median(times[f"{function.name}, bytecode"]), median(times[f"{function.name}, source only"])
        ratios.append(source / compiled)
        rows.append(
            [
                function.name,
                f"{1000 * compiled:.0f}",
                f"{1000 * source:.0f}",
                f"{compiled / floor:.2f}",
                f"{source / floor:.2f}",
                f"{source / compiled:.2f}",
            ]
        )
    headers = ["import", "bytecode ms", "source only ms", "ratio to boto3", "source only", "source / bytecode"]
    print(table(headers, rows, align="lrrrrr"))
    print(
        f"\nsource-only asset: each handler's import {min(ratios):.2f}-{max(ratios):.2f}x (median "
        f"{median(ratios):.2f}x) the bytecode asset's, medians of {runs} rounds "
        f"(scripts/build_lambda_asset.py says: {build_lambda_asset.SOURCE_ONLY_COST})"
    )


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


BOTO3 = "boto3"
TARGETS = {"authorizer": 1.3}  # and every other function's:
DEFAULT_TARGET = 1.6


def timed_rounds(modules: list[tuple[str, str, Path]], runs: int, *, cached: bool) -> dict[str, list[float]]:
    """label -> seconds of each round; a round imports every module once, in a fresh interpreter each."""
    times: dict[str, list[float]] = {label: [] for label, _, _ in modules}
    for _ in range(runs):
        for label, module, code in modules:
            times[label].append(import_seconds(module, cached=cached, code=code))
    return times


def ratio_rows(times: dict[str, list[float]], labels: dict[str, str]) -> list[list[str]]:
    """`labels`: each timed handler's label and its function's name (whose target applies)."""
    floor_min, floor_median = min(times[BOTO3]), median(times[BOTO3])
    rows = [[BOTO3, f"{1000 * floor_min:.0f}", f"{1000 * floor_median:.0f}", "1.00", "1.00", "", ""]]
    for label, name in labels.items():
        target = TARGETS.get(name, DEFAULT_TARGET)
        best, middle = min(times[label]), median(times[label])
        ratio = middle / floor_median
        rows.append(
            [
                label,
                f"{1000 * best:.0f}",
                f"{1000 * middle:.0f}",
                f"{best / floor_min:.2f}",
                f"{ratio:.2f}",
                f"≤ {target}",
                "met" if ratio <= target else "NOT met",
            ]
        )
    return rows


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=5, help="fresh interpreters per module and mode (default 5)")
    parser.add_argument("--before", type=Path, help="another checkout's lambdas/ directory, timed in the same rounds")
    parser.add_argument(
        "--python", default=sys.executable, help="the interpreter the asset's two builds are imported with"
    )
    args = parser.parse_args(argv)
    print(f"# Cold start ({machine()})")
    checkouts = [("", ROOT / "lambdas"), *([(" (before)", args.before)] if args.before else [])]
    labels = {f"{f.name}{suffix}": f.name for suffix, _ in checkouts for f in FUNCTIONS}
    handlers = [
        (f"{f.name}{suffix}", f.handler.rpartition(".")[0], code) for suffix, code in checkouts for f in FUNCTIONS
    ]
    modules = [(BOTO3, BOTO3, ROOT / "lambdas"), *handlers]
    headers = ["import", "min ms", "median ms", "ratio (min)", "ratio (median)", "target", ""]
    heading(f"Import time as a ratio to `import boto3`, with bytecode, {args.runs} interleaved rounds")
    for _, module, code in modules:  # an untimed round first: it writes the bytecode the timed rounds read
        import_seconds(module, cached=True, code=code)
    rows = ratio_rows(timed_rounds(modules, args.runs, cached=True), labels)
    print(table(headers, rows, align="lrrrrll"))
    print()
    for row in rows[1:]:
        print(f"issue 12: import ratio to boto3, {row[0]}: {row[4]} median, {row[3]} min (target {row[5]}: {row[6]})")
    heading(f"The same with no bytecode (each module compiled at import), {args.runs} rounds")
    print(table(headers, ratio_rows(timed_rounds(modules, args.runs, cached=False), labels), align="lrrrrll"))
    for function in (DELIVERY, INGEST):
        module = function.handler.rpartition(".")[0]
        print(f"\nWhere {module}'s import time goes (self time by top-level package, bytecode cached, one run):\n")
        print(table(["package", "ms"], [[name, f"{1000 * s:.0f}"] for name, s in heaviest_imports(module)]))

    source_only_cost(args.python, args.runs)

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
