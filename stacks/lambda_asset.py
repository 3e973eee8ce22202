"""The functions' one asset directory, from this checkout or from the installed wheel (`make dist`).

In a checkout the code is lambdas/ and the dependency versions are uv.lock's (scripts/build_lambda_asset.py). An
installed wheel has neither: the code is the installed `hookrelay` package, and the versions are the ones uv.lock
held when the wheel was built, written into it as REQUIREMENTS_FILE (`python -m stacks.lambda_asset
--write-requirements`, run by `make dist`). Either way the asset is built with uv (on PATH when installed), offline
from its cache when it can.
"""

from __future__ import annotations

import argparse
import os
from pathlib import Path

import hookrelay
from scripts import build_lambda_asset

REQUIREMENTS_FILE = Path(__file__).with_name("lambda-requirements.txt")
# An installed wheel builds the asset under the CDK app's directory (its site-packages is not ours to write to).
ASSET_DIR_ENV = "HOOKRELAY_ASSET_DIR"


def in_checkout() -> bool:
    """This code runs from a hookrelay checkout (uv.lock and lambdas/ beside it), not from an installed wheel."""
    root = build_lambda_asset.ROOT
    return (root / "uv.lock").is_file() and (build_lambda_asset.CODE_ROOT / "hookrelay").is_dir()


def packaged_requirements() -> list[str]:
    if not REQUIREMENTS_FILE.is_file():
        raise build_lambda_asset.AssetBuildError(
            f"{REQUIREMENTS_FILE} is missing: this hookrelay was not built by `make dist`, which writes it"
        )
    return [line for line in REQUIREMENTS_FILE.read_text().splitlines() if line.strip()]


def build(python_version: str, architecture: str) -> Path:
    """The asset for the runtime and architecture, built or reused."""
    if in_checkout():
        return build_lambda_asset.build(python_version, architecture)
    output = Path(os.environ.get(ASSET_DIR_ENV) or Path.cwd() / "build" / "hookrelay-lambda-asset")
    return build_lambda_asset.build(
        python_version,
        architecture,
        output,
        code_root=Path(hookrelay.__file__).resolve().parents[1],
        requirements=packaged_requirements(),
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--write-requirements", action="store_true", help=f"write {REQUIREMENTS_FILE.name}")
    if parser.parse_args().write_requirements:
        REQUIREMENTS_FILE.write_text("\n".join(build_lambda_asset.locked_requirements()) + "\n")
        print(REQUIREMENTS_FILE)


if __name__ == "__main__":
    main()
