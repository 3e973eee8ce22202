"""`make cli` and bin/hookrelay keep the CLI's documented exit codes (3: the API could not be reached)."""

from __future__ import annotations

import os
import socket
import subprocess
from pathlib import Path

from hookrelay_client.cli import EXIT_UNREACHABLE

ROOT = Path(__file__).resolve().parents[2]


def closed_port() -> int:
    """A port on 127.0.0.1 that nothing listens on (bound, then released)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def unreachable_env() -> dict[str, str]:
    return {**os.environ, "HOOKRELAY_URL": f"http://127.0.0.1:{closed_port()}", "HOOKRELAY_TOKEN": "hr_test"}


def test_bin_hookrelay_exits_with_the_clis_code() -> None:
    done = subprocess.run(  # noqa: S603 - our own script
        [str(ROOT / "bin" / "hookrelay"), "deliveries", "list"],
        env=unreachable_env(),
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == EXIT_UNREACHABLE, done.stderr


def test_make_cli_names_the_clis_code() -> None:
    """make exits 2 on any failed recipe; its "Error N" line carries the CLI's code, and the recipe execs the CLI."""
    done = subprocess.run(
        ["make", "--no-print-directory", "cli", "ARGS=deliveries list"],  # noqa: S607 - make, our own Makefile
        cwd=ROOT,
        env=unreachable_env(),
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode != 0
    assert f"] Error {EXIT_UNREACHABLE}" in done.stderr, done.stderr
    assert "cannot reach" in done.stderr
