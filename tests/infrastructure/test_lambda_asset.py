"""The deployed asset holds everything the handlers import that the Lambda runtime lacks, built for arm64.

Checked statically (aarch64 binaries cannot be imported on this machine): every module under `hookrelay` is
parsed for its imports; each third-party top-level module must be in the asset, and every runtime dependency
in pyproject (with its extras) must be installed there together with its own requirements, transitively.
"""

from __future__ import annotations

import ast
import sys
import tomllib
from email.parser import Parser
from pathlib import Path

from packaging.markers import default_environment
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

from hookrelay.handlers.portal import ASSETS, PAGE_DIRECTORY
from scripts import build_lambda_asset
from scripts.build_lambda_asset import RUNTIME_PROVIDED
from tests.support.synth import ROOT, Synthesized

PACKAGE_DIR = ROOT / "lambdas" / "hookrelay"
# What every Lambda Python runtime provides besides the standard library.
RUNTIME_MODULES = {"boto3", "botocore", "s3transfer"}
ELF_MACHINE_AARCH64 = 183


def _asset_dir(synthesized: Synthesized) -> Path:
    (code,) = {props["Code"]["S3Key"] for props in synthesized.properties("AWS::Lambda::Function")}
    return synthesized.asset_path(code.removesuffix(".zip"))


def _runtime_version(synthesized: Synthesized) -> str:
    """The Python version every function runs on, as deployed ("3.13")."""
    (runtime,) = {props["Runtime"] for props in synthesized.properties("AWS::Lambda::Function")}
    return runtime.removeprefix("python")


def _imported_top_level_modules() -> set[str]:
    modules: set[str] = set()
    for source in PACKAGE_DIR.rglob("*.py"):
        for node in ast.walk(ast.parse(source.read_text(), filename=str(source))):
            if isinstance(node, ast.Import):
                modules.update(alias.name.split(".")[0] for alias in node.names)
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                modules.add(node.module.split(".")[0])
    return modules


def _installed_distributions(asset: Path) -> dict[str, Path]:
    return {
        canonicalize_name(Parser().parsestr((info / "METADATA").read_text())["Name"]): info
        for info in asset.glob("*.dist-info")
    }


def _lambda_marker_environment(version: str) -> dict[str, str]:
    return default_environment() | {
        "python_version": version,
        "python_full_version": f"{version}.0",
        "implementation_name": "cpython",
        "platform_python_implementation": "CPython",
        "sys_platform": "linux",
        "platform_system": "Linux",
        "platform_machine": "aarch64",
        "os_name": "posix",
    }


def test_the_asset_holds_the_code(synthesized: Synthesized) -> None:
    asset = _asset_dir(synthesized)
    for source in PACKAGE_DIR.rglob("*.py"):
        relative = source.relative_to(PACKAGE_DIR.parent)
        assert (asset / relative).read_bytes() == source.read_bytes(), relative


def test_every_third_party_import_is_in_the_asset(synthesized: Synthesized) -> None:
    asset = _asset_dir(synthesized)
    third_party = _imported_top_level_modules() - set(sys.stdlib_module_names) - {"hookrelay"} - RUNTIME_MODULES
    assert third_party, "expected the handlers to import third-party packages"
    for module in sorted(third_party):
        assert (asset / module).is_dir() or (asset / f"{module}.py").is_file(), f"{module} is not in the asset"


def test_every_runtime_dependency_is_installed_with_its_requirements(synthesized: Synthesized) -> None:
    installed = _installed_distributions(_asset_dir(synthesized))
    environment = _lambda_marker_environment(_runtime_version(synthesized))
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    pending = [Requirement(line) for line in project["dependencies"]]
    seen: set[tuple[str, frozenset[str]]] = set()
    while pending:
        requirement = pending.pop()
        name = canonicalize_name(requirement.name)
        if name in RUNTIME_PROVIDED or (name, frozenset(requirement.extras)) in seen:
            continue
        seen.add((name, frozenset(requirement.extras)))
        assert name in installed, f"{requirement} is needed at runtime but not in the asset"
        version = Parser().parsestr((installed[name] / "METADATA").read_text())["Version"]
        assert requirement.specifier.contains(version, prereleases=True), (
            f"{name} {version} does not satisfy {requirement}"
        )
        metadata = Parser().parsestr((installed[name] / "METADATA").read_text())
        for line in metadata.get_all("Requires-Dist") or []:
            dependency = Requirement(line)
            wanted_extras = requirement.extras or {""}
            if dependency.marker is None or any(
                dependency.marker.evaluate(environment | {"extra": extra}) for extra in wanted_extras
            ):
                pending.append(dependency)
    assert ("aws-lambda-powertools", frozenset({"tracer"})) in seen  # Tracer needs aws-xray-sdk in Lambda


def test_the_runtime_provided_sdk_is_not_packaged_again(synthesized: Synthesized) -> None:
    installed = _installed_distributions(_asset_dir(synthesized))
    assert not set(installed) & RUNTIME_PROVIDED


def test_compiled_extensions_are_built_for_the_lambda_python_on_aarch64(synthesized: Synthesized) -> None:
    asset = _asset_dir(synthesized)
    extensions = sorted(asset.rglob("*.so"))
    pydantic_core = [path for path in extensions if path.parent.name == "pydantic_core"]
    assert len(pydantic_core) == 1
    tag = "cpython-" + _runtime_version(synthesized).replace(".", "") + "-aarch64-linux-gnu"
    assert tag in pydantic_core[0].name
    for extension in extensions:
        header = extension.read_bytes()[:20]
        assert header[:4] == b"\x7fELF", extension
        machine = int.from_bytes(header[18:20], "little")
        assert machine == ELF_MACHINE_AARCH64, f"{extension.relative_to(asset)} is not an aarch64 binary"


def test_the_asset_fits_in_a_lambda(synthesized: Synthesized) -> None:
    asset = _asset_dir(synthesized)
    size = sum(path.stat().st_size for path in asset.rglob("*") if path.is_file())
    assert size < 250 * 1024 * 1024  # Lambda's unzipped code size limit


def test_the_asset_ships_the_runtime_s_bytecode_for_every_module_or_none(synthesized: Synthesized) -> None:
    """Lambda's code directory is read-only: a module without its .pyc is compiled again at every cold start. The
    build writes bytecode when it has an interpreter of the runtime's version, else ships source only (and says
    so): never a mix, never another version's bytecode (it would not load)."""
    asset = _asset_dir(synthesized)
    version = _runtime_version(synthesized)
    tag = "cpython-" + version.replace(".", "")
    sources = list(asset.rglob("*.py"))
    assert sources
    compiled = [source.parent / "__pycache__" / f"{source.stem}.{tag}.pyc" for source in sources]
    shipped = {path.name.split(".")[-2] for path in asset.rglob("*.pyc")}
    if build_lambda_asset.find_interpreter(version) is None:
        assert shipped == set()
    else:
        assert shipped == {tag}
        assert [path for path in compiled if not path.exists()] == []
        header = (asset / "hookrelay" / "__pycache__" / f"wiring.{tag}.pyc").read_bytes()[:8]
        assert int.from_bytes(header[4:8], "little") == 0b01  # hash-based, unchecked: no stat of the source


def test_the_asset_holds_the_portal_page(synthesized: Synthesized) -> None:
    """The portal function serves files packaged beside the code: each one it may serve is in the asset."""
    packaged = _asset_dir(synthesized) / "hookrelay" / PAGE_DIRECTORY.name
    for name in ASSETS:
        assert (packaged / name).read_bytes() == (PAGE_DIRECTORY / name).read_bytes(), name
