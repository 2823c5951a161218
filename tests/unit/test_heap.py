"""``jetpy.heap.keep_heap``: glibc's ``malloc`` keeps freed memory for the next large buffer.
Checked in fresh processes by what it is for: the page faults of making and dropping 1 MiB
buffers (none once kept; a thousand per round of four with glibc's defaults), and an operator's
own ``MALLOC_*`` setting left alone."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from heap_probe import CHURN

PROBE = (
    CHURN
    + """
import sys
from jetpy.heap import keep_heap
kept = keep_heap() if sys.argv[1] == "keep" else False
print(kept, churn_faults())
"""
)

pytestmark = pytest.mark.skipif(
    not (os.confstr("CS_GNU_LIBC_VERSION") or "").startswith("glibc"), reason="glibc's malloc only"
)


def _probe(mode: str, **env: str) -> tuple[bool, int]:
    out = subprocess.run(
        [sys.executable, "-c", PROBE, mode],
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
        env={k: v for k, v in os.environ.items() if not k.startswith("MALLOC_")} | env,
    )
    kept, faults = out.stdout.split()
    return kept == "True", int(faults)


def test_kept_heap_reuses_its_pages() -> None:
    kept, faults = _probe("keep")
    assert kept
    # 50 rounds of 4 MiB made and dropped: 51,200 pages if each were new
    assert faults < 2_000, faults


def test_glibc_defaults_fault_every_page_anew() -> None:
    """The cost the module avoids, shown on this machine's glibc."""
    kept, faults = _probe("defaults")
    assert not kept
    assert faults > 25_000, faults


def test_an_operators_setting_is_left_alone() -> None:
    kept, faults = _probe("keep", MALLOC_TRIM_THRESHOLD_="131072")
    assert not kept
    assert faults > 25_000, faults
    kept, _ = _probe("keep", GLIBC_TUNABLES="glibc.malloc.trim_threshold=131072")
    assert not kept
