"""Fixtures of the fault suite: a small tmpfs to fill up (root only), and every server process
a test starts killed at teardown.

The suite's fast slice runs in ``make test``; ``make faults`` runs the same tests with more
rounds (``JETPY_FAULT_RUNS``)."""

from __future__ import annotations

import os
import signal
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from conftest import Proc


@pytest.fixture
def procs() -> Iterator[list[Proc]]:
    """Servers a test starts (append them): killed with SIGKILL at teardown, whatever happened."""
    started: list[Proc] = []
    yield started
    for p in started:
        p.stop(signal.SIGKILL)


@pytest.fixture
def tiny_fs(tmp_path: Path) -> Iterator[Path]:
    """A 2 MiB tmpfs mounted for the test and unmounted after it: a disk that fills up."""
    if os.geteuid() != 0:
        pytest.skip("mounting a tmpfs needs root (the disk-full faults run as root)")
    mnt = tmp_path / "tmpfs"
    mnt.mkdir()
    try:
        r = subprocess.run(
            ["mount", "-t", "tmpfs", "-o", "size=2m", "tmpfs", str(mnt)], capture_output=True, timeout=10
        )
    except (OSError, subprocess.SubprocessError) as exc:
        pytest.skip(f"cannot mount a tmpfs: {exc}")
    if r.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs: {r.stderr.decode(errors='replace').strip()}")
    try:
        yield mnt
    finally:
        subprocess.run(["umount", "-l", str(mnt)], capture_output=True, timeout=10)
