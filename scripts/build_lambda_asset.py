"""Build the one Lambda asset directory (the `hookrelay` package + its runtime dependencies), with no Docker.

    python scripts/build_lambda_asset.py [--python-version 3.13] [--architecture arm64] [--output DIR]

The target is the functions' runtime (CDK context `lambda_runtime`, stacks/config.py; the CLI's default is
cdk.json's), not the Python running this script: any Python 3.11+ builds the asset for any supported runtime.

The dependency names come from pyproject's `[project].dependencies` and their versions from uv.lock
(`uv export`), less what the Lambda runtime already provides. They are installed as binary wheels for the
target's Python version and platform (`uv pip install --python-version 3.13 --python-platform
aarch64-manylinux2014`), so compiled packages such as pydantic-core get the Lambda's binaries, not this
machine's. The dependency layer of the directory is rebuilt only when its fingerprint (locked requirements +
target + bytecode or not) changes; the code is copied again whenever it changes. The first build needs PyPI, later ones
run offline from uv's cache.

Bytecode: Lambda's code directory is read-only, so a module shipped without its `.pyc` is compiled again at every
cold start and the result never kept. Bytecode only loads on the Python version that wrote it, so the build
compiles with an interpreter of the runtime's version: this one if it is that version, else `python3.X` on PATH
or one uv knows (`uv python find`), each checked by running it. With none, the asset ships source only and the
build says so in one line (with what that costs: SOURCE_ONLY_COST). The `.pyc` files are unchecked-hash (the runtime
does not stat the source for an mtime), written with PYTHONHASHSEED=0 and the runtime's path for the code
(/var/task) as their file name, so that the same commit gives byte-identical files, and so the same CDK asset
hash, from any checkout path on any machine.
"""

from __future__ import annotations

import argparse
import fcntl
import hashlib
import os
import shutil
import subprocess
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

ROOT = Path(__file__).resolve().parents[1]
CODE_ROOT = ROOT / "lambdas"
PACKAGES = ("hookrelay",)  # top-level packages under lambdas/ that the functions import
DEFAULT_OUTPUT = ROOT / "build" / "lambda-asset"
# Where Lambda unpacks a function's code: the file name the bytecode records (tracebacks read the source beside
# it, the import system corrects the name to the real path anyway), and the same on every build machine.
LAMBDA_TASK_ROOT = "/var/task"

# Distributions every Lambda Python runtime ships: packaging them again only adds ~100 MB of botocore.
RUNTIME_PROVIDED = frozenset({"boto3", "botocore", "s3transfer"})

# Lambda architecture -> the wheel platform pip/uv installs for (glibc 2.17 wheels run on every Lambda OS).
WHEEL_PLATFORMS = {"arm64": "aarch64-manylinux2014", "x86_64": "x86_64-manylinux2014"}

# What shipping no bytecode costs, measured with bench/cold_start.py (its table of the asset with bytecode and
# source only: each handler's import from each, the standard library and boto3 compiled as in the runtime image;
# medians of 5 rounds on x86_64, 2026-12-02: 1.27-2.08x on CPython 3.11, 1.37-2.06x on 3.13). Printed by the
# build when it has to ship source only.
SOURCE_ONLY_COST = "every cold start compiles the code it imports, each handler's import 1.3-2.1x as long"

_BUILDER_VERSION = "3"  # bump to force a rebuild when this script's layout changes


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


@dataclass(frozen=True)
class Plan:
    """What a build makes: wheels for the target, and bytecode written by `compiler` (None: source only)."""

    target: Target
    compiler: str | None  # an interpreter of the target's Python version

    @property
    def notice(self) -> str | None:
        """The one line the build prints when it ships source only: what is missing, what it costs, the remedy."""
        if self.compiler is not None:
            return None
        version = self.target.python_version
        return (
            f"Lambda asset for python{version}: no Python {version} here to compile its bytecode (python{version} on "
            f"PATH, or `uv python install {version}`), so it ships source only: {SOURCE_ONLY_COST}."
        )


def uv_executable() -> str:
    bundled = ROOT / ".tools" / "bin" / "uv"
    found = str(bundled) if bundled.exists() else shutil.which("uv")
    if not found:
        raise AssetBuildError("uv not found: run `make install` (it installs uv into .tools/)")
    return found


def build_python_version() -> str:
    """The version of the Python running this build ("3.12")."""
    return f"{sys.version_info.major}.{sys.version_info.minor}"


def interpreter_version(executable: str) -> str | None:
    """`executable`'s CPython version ("3.13"), or None if it does not run (a pyenv shim for a version that is not
    selected exits 127) or is not CPython (PyPy's bytecode is not CPython's)."""
    try:
        reported = subprocess.run(  # noqa: S603 (a fixed program)
            [executable, "-c", "import sys; print(sys.implementation.name, '%d.%d' % sys.version_info[:2])"],
            capture_output=True,
            text=True,
            timeout=60,
        )
    except (OSError, subprocess.TimeoutExpired):
        return None
    name, _, version = reported.stdout.strip().partition(" ")
    return version if reported.returncode == 0 and name == "cpython" else None


def _uv_python(version: str) -> str | None:
    """The interpreter uv would pick for `version` (a managed one, or one on PATH), never downloading one."""
    try:
        found = subprocess.run(  # noqa: S603 (a fixed command line)
            [uv_executable(), "python", "find", "--no-python-downloads", "--no-project", version],
            capture_output=True,
            text=True,
            timeout=60,
        )
    except (OSError, subprocess.TimeoutExpired, AssetBuildError):
        return None
    return (found.stdout.strip() or None) if found.returncode == 0 else None


def find_interpreter(version: str) -> str | None:
    """An interpreter of `version` to compile the asset's bytecode with: this one, else one on PATH, else uv's."""
    if version == build_python_version():
        return sys.executable
    for candidate in (shutil.which(f"python{version}"), _uv_python(version)):
        if candidate and interpreter_version(candidate) == version:
            return candidate
    return None


def plan(python_version: str, architecture: str, find: Callable[[str], str | None] = find_interpreter) -> Plan:
    target = Target(python_version, architecture)
    target.wheel_platform  # noqa: B018 (an unknown architecture fails here, before anything is built)
    return Plan(target, find(python_version))


def distribution_name(requirement_line: str) -> str:
    """`pydantic-core==2.50.5 ; python_version >= '3.11'` -> `pydantic-core` (normalised)."""
    name = requirement_line.split(";", 1)[0].split("==", 1)[0].split("[", 1)[0].strip()
    return name.lower().replace("_", "-").replace(".", "-")


def locked_requirements(*, runtime_provided: bool = False) -> list[str]:
    """Every runtime distribution (transitively) at its uv.lock version, less what the runtime provides; or, with
    `runtime_provided`, only that (boto3 and its own: what bench/cold_start.py stands in for the runtime's)."""
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
    return sorted(line for line in lines if (distribution_name(line) in RUNTIME_PROVIDED) == runtime_provided)


def fingerprint(requirements: list[str], build: Plan) -> str:
    compiled = "bytecode" if build.compiler else "source"
    target = build.target
    material = "\n".join([_BUILDER_VERSION, target.python_version, target.wheel_platform, compiled, *requirements])
    return hashlib.sha256(material.encode()).hexdigest()


def install(requirements_file: Path, output: Path, target: Target) -> None:
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


def compile_tree(directory: Path, asset: Path, compiler: str) -> None:
    """Bytecode for every module under `directory` (inside `asset`), beside it, as the runtime's import system
    looks for it, written by `compiler` (an interpreter of the runtime's version) in a process of its own.

    Reproducible: each .pyc names its source as Lambda will see it (/var/task/..., not this checkout's path),
    files are compiled one by one in sorted order, the invalidation is by source hash (no mtime), and the hash
    seed is fixed (PYTHONHASHSEED=0), so nothing is left to the process. This shell's other PYTHON* settings are
    dropped: a pycache prefix, for one, would write the bytecode somewhere else."""
    in_lambda = str(PurePosixPath(LAMBDA_TASK_ROOT, directory.relative_to(asset).as_posix()))  # "." drops
    environment = {key: value for key, value in os.environ.items() if not key.startswith("PYTHON")}
    command = [compiler, "-m", "compileall", "-q", "-j", "1", "--invalidation-mode", "unchecked-hash"]
    compiled = subprocess.run(  # noqa: S603 (an interpreter we checked, the standard library's compileall)
        [*command, "-d", in_lambda, str(directory)],
        env={**environment, "PYTHONHASHSEED": "0"},
        capture_output=True,
        text=True,
    )
    if compiled.returncode != 0:
        raise AssetBuildError(f"compiling {directory} with {compiler} failed:\n{compiled.stdout}{compiled.stderr}")


def _install_dependencies(output: Path, requirements: list[str], build: Plan) -> None:
    (output.parent / f"{output.name}.code.sha256").unlink(missing_ok=True)  # the code goes with the tree
    shutil.rmtree(output, ignore_errors=True)
    output.mkdir(parents=True)
    requirements_file = output.parent / f"{output.name}.requirements.txt"
    requirements_file.write_text("\n".join(requirements) + "\n")
    install(requirements_file, output, build.target)
    shutil.rmtree(output / "bin", ignore_errors=True)  # console scripts: useless in a Lambda
    if build.compiler:
        compile_tree(output, output, build.compiler)


def code_fingerprint(code_root: Path) -> str:
    """The code's files (names and bytes): a build whose code is already in the asset leaves the tree alone, so a
    synth copying it (another test worker's, another `cdk synth`) never sees it half replaced."""
    digest = hashlib.sha256()
    for package in PACKAGES:
        for path in sorted((code_root / package).rglob("*")):
            if path.is_file() and "__pycache__" not in path.parts and path.suffix != ".pyc":
                digest.update(path.relative_to(code_root).as_posix().encode() + b"\0" + path.read_bytes() + b"\0")
    return digest.hexdigest()


def _copy_code(output: Path, build: Plan, code_root: Path = CODE_ROOT) -> None:
    marker = output.parent / f"{output.name}.code.sha256"
    wanted = f"{code_fingerprint(code_root)} {build.compiler is not None}"
    if marker.exists() and marker.read_text().strip() == wanted and all((output / p).is_dir() for p in PACKAGES):
        return
    marker.unlink(missing_ok=True)  # written again only once the copy is complete
    _replace_code(output, build, code_root)
    marker.write_text(wanted + "\n")


def _replace_code(output: Path, build: Plan, code_root: Path) -> None:
    for package in PACKAGES:
        shutil.rmtree(output / package, ignore_errors=True)
        shutil.copytree(code_root / package, output / package, ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
        if build.compiler:
            compile_tree(output / package, output, build.compiler)


def _print_to_stderr(line: str) -> None:
    print(line, file=sys.stderr, flush=True)  # stderr: `cdk synth` shows it, and stdout may be the template


def build(
    python_version: str,
    architecture: str,
    output: Path = DEFAULT_OUTPUT,
    *,
    find: Callable[[str], str | None] = find_interpreter,
    announce: Callable[[str], None] = _print_to_stderr,
    code_root: Path = CODE_ROOT,
    requirements: list[str] | None = None,
) -> Path:
    """Make `output` hold the code and its dependencies for the target; returns it. `find` locates an interpreter
    of the target's version for the bytecode; `announce` gets the one line said when there is none. `code_root`
    and `requirements` (default: this checkout's lambdas/ and uv.lock's) serve an installed wheel, which has
    neither (stacks/lambda_asset.py)."""
    chosen = plan(python_version, architecture, find)
    if chosen.notice:
        announce(chosen.notice)
    if requirements is None:
        requirements = locked_requirements()
    wanted = fingerprint(requirements, chosen)
    marker = output.parent / f"{output.name}.dependencies.sha256"  # beside the asset, not shipped in it
    with _exclusive(output.parent / f"{output.name}.lock"):
        if not marker.exists() or marker.read_text().strip() != wanted:
            _install_dependencies(output, requirements, chosen)
            marker.write_text(wanted + "\n")  # written last: an interrupted install is redone next time
        _copy_code(output, chosen, code_root)
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


def configured_python_version() -> str:
    """The runtime `cdk synth` deploys unless told otherwise: the default stage's `lambda_runtime` (deploy/*.json),
    else the setting's default ("python3.13")."""
    from stacks import config, stage

    runtime = stage.load(stage.stage_name(None)).get(config.LAMBDA_RUNTIME_CONTEXT, config.DEFAULT_LAMBDA_RUNTIME)
    return str(runtime).removeprefix("python")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--python-version", help="the runtime's Python, e.g. 3.13 (default: cdk.json's)")
    parser.add_argument("--architecture", default="arm64", choices=sorted(WHEEL_PLATFORMS))
    parser.add_argument("--output", type=Path, default=DEFAULT_OUTPUT)
    args = parser.parse_args()
    print(build(args.python_version or configured_python_version(), args.architecture, args.output))


if __name__ == "__main__":
    main()
