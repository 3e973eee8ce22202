"""The Lambda asset's build (scripts/build_lambda_asset.py) from the deployer's side: any supported Python can
build it, and one commit gives one asset hash wherever it is checked out.

This machine has one CPython (3.11), so another deployer's interpreter is simulated: the version the build
believes it runs on is replaced (`build_python_version`), and the bytecode it then writes, if any, is checked.
"""

from __future__ import annotations

import importlib.util
import marshal
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from aws_cdk import FileSystem

from scripts import build_lambda_asset
from stacks import config
from tests.support.synth import ROOT, stage_settings

# What a checkout needs to build the asset: the script, the lock it reads the dependencies from, and the code.
CHECKOUT_FILES = ("scripts/build_lambda_asset.py", "pyproject.toml", "uv.lock", "README.md")
CHECKOUT_DIRECTORIES = ("lambdas/hookrelay",)
RUNNING = f"{sys.version_info.major}.{sys.version_info.minor}"


def _checkout(at: Path) -> Path:
    """The files of this commit the build reads, copied to `at` (a checkout somewhere else on disk)."""
    for name in CHECKOUT_FILES:
        (at / name).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(ROOT / name, at / name)
    for name in CHECKOUT_DIRECTORIES:
        shutil.copytree(ROOT / name, at / name, ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
    (at / ".tools" / "bin").mkdir(parents=True)
    (at / ".tools" / "bin" / "uv").symlink_to(build_lambda_asset.uv_executable())
    return at


def _build_in(checkout: Path, python_version: str) -> Path:
    """Run the checkout's own build script, as `make synth` there would, into its own build/ directory."""
    subprocess.run(  # noqa: S603 (this interpreter, the checkout's script)
        [sys.executable, str(checkout / "scripts" / "build_lambda_asset.py"), "--python-version", python_version],
        cwd=checkout,
        env={key: value for key, value in os.environ.items() if key != "PYTHONPATH"},
        check=True,
        capture_output=True,
        text=True,
    )
    return checkout / "build" / "lambda-asset"


def test_two_checkouts_of_one_commit_build_the_same_asset_hash(tmp_path: Path) -> None:
    """The hash CDK gives the asset (its S3 key, and so every function's Code) must not depend on where the
    repository sits: CI and a laptop deploying one commit would otherwise re-upload it and update every function.
    Built with bytecode (for this interpreter's version), where the build path could leak into every .pyc."""
    one = _build_in(_checkout(tmp_path / "one"), RUNNING)
    two = _build_in(_checkout(tmp_path / "elsewhere" / "deeper" / "two"), RUNNING)
    assert any(one.rglob("*.pyc")), "expected bytecode: the build runs on the runtime's version here"
    differing = sorted(
        str(path.relative_to(one))
        for path in one.rglob("*")
        if path.is_file() and (two / path.relative_to(one)).read_bytes() != path.read_bytes()
    )
    hashes = (FileSystem.fingerprint(str(one)), FileSystem.fingerprint(str(two)))  # as CDK hashes a directory asset
    assert hashes[0] == hashes[1], f"{len(differing)} files differ, e.g. {differing[:3]}"
    assert differing == []
    bytecode = (one / "hookrelay" / "__pycache__" / f"wiring.cpython-{RUNNING.replace('.', '')}.pyc").read_bytes()
    assert bytecode[:4] == importlib.util.MAGIC_NUMBER  # written by an interpreter of the runtime's version
    assert int.from_bytes(bytecode[4:8], "little") == 0b01  # hash-based, unchecked: no mtime, no stat at import
    code = marshal.loads(bytecode[16:])  # noqa: S302 (this test's own build's output)
    assert code.co_filename == "/var/task/hookrelay/wiring.py"  # where Lambda has it, not where it was built


@pytest.mark.parametrize("deployer", ["3.12", "3.13", "3.14"])
def test_a_deployer_on_another_python_builds_the_asset(
    deployer: str, tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A deployer whose interpreter is not the runtime's version (Ubuntu 24.04's 3.12, Homebrew's 3.13) builds
    the asset: bytecode if an interpreter of the runtime's version is at hand, else source only, never a refusal.
    The runtime here is this machine's version, 3.11, so that bytecode, when written, is checked for real."""
    monkeypatch.setattr(build_lambda_asset, "build_python_version", lambda: deployer)
    output = tmp_path_factory.getbasetemp() / "another-python" / "lambda-asset"  # shared: dependencies once
    asset = build_lambda_asset.build(RUNNING, "arm64", output)
    assert (asset / "hookrelay" / "wiring.py").read_bytes() == (ROOT / "lambdas/hookrelay/wiring.py").read_bytes()
    tags = {path.name.split(".")[-2] for path in asset.rglob("*.pyc")}
    assert tags <= {f"cpython-{RUNNING.replace('.', '')}"}  # the runtime's bytecode or none, never the deployer's


# --- The plan: which wheels, bytecode or source only, and the line said about it ---

DEFAULT = config.LambdaRuntime(config.DEFAULT_LAMBDA_RUNTIME).python_version


def _deployer(monkeypatch: pytest.MonkeyPatch, version: str, path: Path) -> None:
    """Simulate a deployer's machine: the build runs on Python `version`, PATH is `path` (its only commands)."""
    monkeypatch.setattr(build_lambda_asset, "build_python_version", lambda: version)
    monkeypatch.setenv("PATH", str(path))


def _fake_python(directory: Path, name: str, script: str) -> Path:
    directory.mkdir(parents=True, exist_ok=True)
    executable = directory / name
    executable.write_text(f"#!/bin/sh\n{script}\n")
    executable.chmod(0o755)
    return executable


@pytest.mark.parametrize("deployer", ["3.11", "3.12", "3.13", "3.14"])
def test_any_supported_python_plans_the_default_runtime_s_asset(
    deployer: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """With nothing else installed, a deployer on the runtime's version compiles with its own interpreter; any
    other gets the same wheels, source only, and one line saying so and what it costs."""
    _deployer(monkeypatch, deployer, tmp_path / "empty")
    plan = build_lambda_asset.plan(DEFAULT, "arm64")
    assert (plan.target.python_version, plan.target.wheel_platform) == (DEFAULT, "aarch64-manylinux2014")
    if deployer == DEFAULT:
        assert (plan.compiler, plan.notice) == (sys.executable, None)
    else:
        assert plan.compiler is None
        assert plan.notice is not None
        assert f"python{DEFAULT}" in plan.notice and "source only" in plan.notice
        assert build_lambda_asset.SOURCE_ONLY_COST in plan.notice
        assert "\n" not in plan.notice


def test_an_interpreter_of_the_runtime_s_version_on_path_writes_the_bytecode(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    found = _fake_python(tmp_path / "bin", f"python{DEFAULT}", f'echo "cpython {DEFAULT}"')
    _deployer(monkeypatch, "3.12", tmp_path / "bin")
    assert build_lambda_asset.plan(DEFAULT, "arm64").compiler == str(found)


@pytest.mark.parametrize(
    "script",
    [
        f'echo "pyenv: python{DEFAULT}: command not found" >&2; exit 127',  # a shim for a version not selected
        'echo "cpython 3.12"',  # a name that lies
        f'echo "pypy {DEFAULT}"',  # PyPy's bytecode is not CPython's
    ],
)
def test_a_python_on_path_that_is_not_the_runtime_s_cpython_is_not_used(
    script: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _fake_python(tmp_path / "bin", f"python{DEFAULT}", script)
    _deployer(monkeypatch, "3.12", tmp_path / "bin")
    assert build_lambda_asset.plan(DEFAULT, "arm64").compiler is None


def test_the_build_says_once_that_it_ships_source_only(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The build itself, for a runtime it has no interpreter for: wheels for that version, no .pyc, one line."""
    said: list[str] = []
    asset = build_lambda_asset.build(
        DEFAULT, "arm64", tmp_path / "lambda-asset", find=lambda version: None, announce=said.append
    )
    assert said == [build_lambda_asset.plan(DEFAULT, "arm64", lambda version: None).notice]
    assert not any(asset.rglob("*.pyc"))
    (pydantic_core,) = (asset / "pydantic_core").glob("*.so")
    assert f"cpython-{DEFAULT.replace('.', '')}-aarch64-linux-gnu" in pydantic_core.name


def test_an_unknown_architecture_fails_before_anything_is_built() -> None:
    with pytest.raises(build_lambda_asset.AssetBuildError, match="riscv"):
        build_lambda_asset.plan(DEFAULT, "riscv")


# --- The setting ---


def test_the_runtime_defaults_to_cdk_json_s_and_every_supported_one_is_known_to_the_cdk() -> None:
    from aws_cdk import aws_lambda as lambda_

    assert stage_settings()[config.LAMBDA_RUNTIME_CONTEXT] == config.DEFAULT_LAMBDA_RUNTIME
    assert build_lambda_asset.configured_python_version() == DEFAULT
    known = {runtime.name for runtime in lambda_.Runtime.ALL}
    assert set(config.LAMBDA_PYTHON_RUNTIMES) <= known


class _Node:
    def __init__(self, context: dict[str, object]) -> None:
        self.context = context

    def try_get_context(self, key: str) -> object:
        return self.context.get(key)


@pytest.mark.parametrize("name", ["python3.12", "python3.14"])
def test_a_supported_runtime_is_taken(name: str) -> None:
    node: Any = _Node({config.LAMBDA_RUNTIME_CONTEXT: name})
    assert config.lambda_runtime(node).name == name
    assert config.lambda_runtime(_Node({})).name == config.DEFAULT_LAMBDA_RUNTIME  # type: ignore[arg-type]


@pytest.mark.parametrize("bad", ["python3.10", "python3.15", "3.13", "nodejs22.x", 3.13, ["python3.13"]])
def test_an_unsupported_runtime_fails_synth_with_a_clear_message(bad: object) -> None:
    node: Any = _Node({config.LAMBDA_RUNTIME_CONTEXT: bad})
    with pytest.raises(config.InvalidConfiguration, match=r"lambda_runtime=.*python3\.11, python3\.12, python3\.13"):
        config.lambda_runtime(node)
