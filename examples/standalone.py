"""A throwaway Spark standalone cluster (one master, one worker) on 127.0.0.1, from the pyspark
package's own jars, so a job can be shown running with ``--master spark://...``.

    with standalone_cluster(tmpdir) as master_url:
        subprocess.run([python, "examples/answers_report.py", "--master", master_url])
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pyspark


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _spark_class() -> str:
    return str(Path(pyspark.__file__).parent / "bin" / "spark-class")


def _start(args: list[str], log: Path, ready: str, timeout: float = 90.0) -> subprocess.Popen[bytes]:
    env = {**os.environ, "SPARK_LOCAL_IP": "127.0.0.1", "PYSPARK_PYTHON": sys.executable}
    with open(log, "wb") as f:
        p = subprocess.Popen(
            [_spark_class(), *args], stdout=f, stderr=subprocess.STDOUT, env=env, start_new_session=True
        )
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if ready in log.read_text(errors="replace"):
            return p
        if p.poll() is not None:
            break
        time.sleep(0.2)
    _stop(p)
    raise RuntimeError(f"{args[0]} did not start:\n{log.read_text(errors='replace')[-3000:]}")


def _stop(p: subprocess.Popen[bytes]) -> None:
    if p.poll() is None:
        os.killpg(p.pid, signal.SIGTERM)
        try:
            p.wait(15)
        except subprocess.TimeoutExpired:
            os.killpg(p.pid, signal.SIGKILL)
            p.wait()


@contextmanager
def standalone_cluster(workdir: Path, cores: int = 2, memory: str = "1g") -> Iterator[str]:
    """Start a master and a worker; yields the master URL; stops both (and their executors)."""
    workdir.mkdir(parents=True, exist_ok=True)
    port = _free_port()
    url = f"spark://127.0.0.1:{port}"
    master = _start(
        [
            "org.apache.spark.deploy.master.Master",
            "--host",
            "127.0.0.1",
            "--port",
            str(port),
            "--webui-port",
            str(_free_port()),
        ],
        workdir / "master.log",
        "I have been elected leader",
    )
    try:
        worker = _start(
            [
                "org.apache.spark.deploy.worker.Worker",
                url,
                "--host",
                "127.0.0.1",
                "--cores",
                str(cores),
                "--memory",
                memory,
                "--webui-port",
                str(_free_port()),
                "--work-dir",
                str(workdir / "work"),
            ],
            workdir / "worker.log",
            "Successfully registered with master",
        )
        try:
            yield url
        finally:
            _stop(worker)
    finally:
        _stop(master)
