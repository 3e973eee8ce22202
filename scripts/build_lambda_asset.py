"""Build the one Lambda asset directory (the `hookrelay` package + its runtime dependencies), with no Docker.

    python scripts/build_lambda_asset.py [--python-version 3.13] [--architecture arm64]

The dependency names come from pyproject's `[project].dependencies` and their versions from uv.lock
(`uv export`), less what the Lambda runtime already provides. They are installed as binary wheels for the
target platform (manylinux aarch64 for arm64), so compiled packages such as pydantic-core get the Lambda's
binaries, not this machine's. The dependency layer of the directory is rebuilt only when its fingerprint
(locked requirements + target) changes; the code is re-copied on every build. The first build needs PyPI,
later ones run offline from uv's cache.

Every module is shipped compiled (`__pycache__/*.cpython-3XY.pyc`, unchecked-hash: Lambda's code directory is
read-only, so without them every cold start compiles everything it imports, about 1.4x the import time, and
never keeps the result; unchecked, so the runtime does not stat the source for an mtime either). Bytecode only
loads on the Python version that wrote it, so the build refuses a target version other than its own interpreter's:
the stack's runtime is chosen to match (stacks/constructs/functions.py).
"""

from __future__ import annotations

import argparse
import compileall
import fcntl
import hashlib
import py_compile
import shutil
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
CODE_ROOT = ROOT / "lambdas"
PACKAGES = ("hookrelay",)  # top-level packages under lambdas/ that the functions import
DEFAULT_OUTPUT = ROOT / "build" / "lambda-asset"

# Distributions every Lambda Python runtime ships: packaging them again only adds ~100 MB of botocore.
RUNTIME_PROVIDED = frozenset({"boto3", "botocore", "s3transfer"})

# Lambda architecture -> the wheel platform pip/uv installs for (glibc 2.17 wheels run on every Lambda OS).
WHEEL_PLATFORMS = {"arm64": "aarch64-manylinux2014", "x86_64": "x86_64-manylinux2014"}

_BUILDER_VERSION = "2"  # bump to force a rebuild when this script's layout changes


class AssetBuildError(RuntimeError):
    pass


@dataclass(frozen=True)
class Target:
    python_version: str  # "3.13"
    architecture: str  # "arm64" | "x86_64"

    @property
    def wheel_platform(self) -> str:
        try:
            return WHEEL_PLATFORMS[self.architecture]
        except KeyError:
            raise AssetBuildError(f"no wheel platform known for architecture {self.architecture!r}") from None


def uv_executable() -> str:
    bundled = ROOT / ".tools" / "bin" / "uv"
    found = str(bundled) if bundled.exists() else shutil.which("uv")
    if not found:
        raise AssetBuildError("uv not found: run `make install` (it installs uv into .tools/)")
    return found


def distribution_name(requirement_line: str) -> str:
    """`pydantic-core==2.50.5 ; python_version >= '3.11'` -> `pydantic-core` (normalised)."""
    name = requirement_line.split(";", 1)[0].split("==", 1)[0].split("[", 1)[0].strip()
    return name.lower().replace("_", "-").replace(".", "-")


def locked_requirements() -> list[str]:
    """Every runtime distribution (transitively) at its uv.lock version, less what the runtime provides."""
    exported = subprocess.run(  # noqa: S603 (a fixed command line)
        [
            uv_executable(),
            "export",
            "--frozen",
            "--no-dev",
            "--no-hashes",
            "--no-emit-project",
            "--no-header",
            "--no-annotate",
        ],
        cwd=ROOT,
        check=True,
        capture_output=True,
        text=True,
    ).stdout
    lines = [line.strip() for line in exported.splitlines() if line.strip() and not line.startswith(("#", "-"))]
    return sorted(line for line in lines if distribution_name(line) not in RUNTIME_PROVIDED)


def fingerprint(requirements: list[str], target: Target) -> str:
    material = "\n".join([_BUILDER_VERSION, target.python_version, target.wheel_platform, *requirements])
    return hashlib.sha256(material.encode()).hexdigest()


def _install(requirements_file: Path, output: Path, target: Target) -> None:
    command = [
        uv_executable(),
        "pip",
        "install",
        "--quiet",
        "--target",
        str(output),
        "--python-platform",
        target.wheel_platform,
        "--python-version",
        target.python_version,
        "--only-binary",
        ":all:",
        "--no-deps",  # the list is already the full locked closure
        "--requirement",
        str(requirements_file),
    ]
    # Offline first (fast, and works without a network once uv's cache has the wheels), then PyPI.
    offline = subprocess.run([*command, "--offline"], capture_output=True, text=True)  # noqa: S603
    if offline.returncode == 0:
        return
    online = subprocess.run(command, capture_output=True, text=True)  # noqa: S603
    if online.returncode != 0:
        raise AssetBuildError(f"installing the Lambda dependencies failed:\n{online.stderr}")


def build_python_version() -> str:
    return f"{sys.version_info.major}.{sys.version_info.minor}"


def check_compilable(target: Target) -> None:
    """The asset's bytecode is this interpreter's: it must be the runtime's Python."""
    if target.python_version != build_python_version():
        raise AssetBuildError(
            f"the asset is for Python {target.python_version}, but this build runs Python {build_python_version()}: "
            "its .pyc files would not load there. Build with that interpreter, or choose the runtime this machine "
            "can compile for (Functions.RUNTIME in stacks/constructs/functions.py)."
        )


def compile_tree(directory: Path) -> None:
    """Bytecode for every module under `directory`, beside it, as the runtime's import system looks for it."""
    compiled = compileall.compile_dir(
        directory,
        quiet=1,
        workers=1,
        invalidation_mode=py_compile.PycInvalidationMode.UNCHECKED_HASH,
    )
    if not compiled:
        raise AssetBuildError(f"compiling {directory} failed")


def _install_dependencies(output: Path, requirements: list[str], target: Target) -> None:
    shutil.rmtree(output, ignore_errors=True)
    output.mkdir(parents=True)
    requirements_file = output.parent / f"{output.name}.requirements.txt"
    requirements_file.write_text("\n".join(requirements) + "\n")
    _install(requirements_file, output, target)
    shutil.rmtree(output / "bin", ignore_errors=True)  # console scripts: useless in a Lambda
    compile_tree(output)


def _copy_code(output: Path) -> None:
    for package in PACKAGES:
        shutil.rmtree(output / package, ignore_errors=True)
        shutil.copytree(CODE_ROOT / package, output / package, ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
        compile_tree(output / package)


def build(python_version: str, architecture: str, output: Path = DEFAULT_OUTPUT) -> Path:
    """Make `output` hold the code and its dependencies for the target; returns it."""
    target = Target(python_version, architecture)
    check_compilable(target)
    requirements = locked_requirements()
    wanted = fingerprint(requirements, target)
    marker = output.parent / f"{output.name}.dependencies.sha256"  # beside the asset, not shipped in it
    with _exclusive(output.parent / f"{output.name}.lock"):
        if not marker.exists() or marker.read_text().strip() != wanted:
            _install_dependencies(output, requirements, target)
            marker.write_text(wanted + "\n")  # written last: an interrupted install is redone next time
        _copy_code(output)
    return output


@contextmanager
def _exclusive(lock_file: Path) -> Iterator[None]:
    """One build of an asset at a time: synths running side by side (the test suite's workers, two `cdk synth`s)
    would otherwise delete and copy the same tree under each other. The kernel drops the lock if a build dies."""
    lock_file.parent.mkdir(parents=True, exist_ok=True)
    with lock_file.open("w") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--python-version", default=build_python_version())
    parser.add_argument("--architecture", default="arm64", choices=sorted(WHEEL_PLATFORMS))
    parser.add_argument("--output", type=Path, default=DEFAULT_OUTPUT)
    args = parser.parse_args()
    print(build(args.python_version, args.architecture, args.output))


if __name__ == "__main__":
    main()
