"""Fixtures the cluster tests share: three clustered JetStream servers (``JsCluster``) started
for a test and stopped after it."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from .jscluster import JsCluster


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[JsCluster]:
    """Three jetpy servers with clustered JetStream and fast Raft timers, every one routed to
    the others (a module with another cluster defines its own ``cluster``)."""
    c = JsCluster(tmp_path)
    try:
        c.start()
        yield c
    finally:
        c.stop()
