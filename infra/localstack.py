"""localstack's S3 and SQS on a free loopback port, started and stopped by the tests, and by
`lakestats local up --localstack` (`detached`: left running until `lakestats local down`).

moto's server (infra/local_stack.py) serves most tests; the serverless flow is also checked
against localstack, a second implementation of S3 object events to SQS. It runs in host mode,
without Docker, from a venv of its own (`.localstack-venv`, made by `make test`): 4.13.1, its
last release for Python 3.11, needs dependencies resolved as of its release date, which
lakestats' venv does not hold. The server gets a clean environment (none of the caller's AWS_*
variables, no ~/.localstack profile), a temporary FILESYSTEM_ROOT and a process group of its
own, so that stopping it ends its children too. Its default (twisted) server listens on every
interface whatever GATEWAY_LISTEN says; the endpoint handed out is the loopback one.
"""
from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import tempfile
import urllib.request
from pathlib import Path

from lakestats.core.errors import ServiceUnavailable
from lakestats.infra.local_stack import free_port, wait_for

VENV = Path(__file__).resolve().parent.parent / ".localstack-venv"
SERVICES = ("s3", "sqs", "events")


def localstack_python(venv: Path = VENV) -> Path | None:
    """The venv's python, None if the venv is not there."""
    python = venv / "bin" / "python"
    return python if python.exists() else None


class LocalstackMissing(ServiceUnavailable):
    """localstack's venv is not installed."""


def installed() -> Path:
    """The venv's python; LocalstackMissing, saying how to install it, if it is not there."""
    python = localstack_python(VENV)
    if python is None:
        raise LocalstackMissing(f"{VENV} is missing: run `make .localstack-venv/.installed` in "
                                f"{VENV.parent} to install localstack there (make test does too)")
    return python


def detached(python: Path) -> dict:
    """localstack for `lakestats local up --localstack`, left running when this process ends:
    once it serves, its endpoint and what `local down` stops (its process group, with its
    children) and removes (its folder, its log inside)."""
    stack = Localstack(python).start()
    return {"AWS_ENDPOINT_URL": stack.endpoint, "groups": [stack.process.pid],
            "dirs": [str(stack.dir)]}


class Localstack:
    def __init__(self, python: Path):
        self.python = python
        self.dir = Path(tempfile.mkdtemp(prefix="lakestats-localstack-"))
        self.log = self.dir / "localstack.log"
        self.address = f"127.0.0.1:{free_port()}"
        self.endpoint = f"http://{self.address}"
        self.process: subprocess.Popen | None = None

    def start(self, seconds: float = 60) -> "Localstack":
        env = {"PATH": f"{self.python.parent}{os.pathsep}{os.defpath}",
               "OVERRIDE_IN_DOCKER": "0",            # /.dockerenv may exist: host mode anyway
               "FILESYSTEM_ROOT": str(self.dir / "root"), "CONFIG_DIR": str(self.dir / "config"),
               "GATEWAY_LISTEN": self.address, "LOCALSTACK_HOST": self.address,
               "SERVICES": ",".join(SERVICES), "EAGER_SERVICE_LOADING": "1",
               "SKIP_SSL_CERT_DOWNLOAD": "1", "DISABLE_EVENTS": "1", "DNS_ADDRESS": "0",
               "SQS_ENDPOINT_STRATEGY": "path", "PYTHONUNBUFFERED": "1"}   # a log up to date
        with open(self.log, "ab") as out:
            self.process = subprocess.Popen(
                [str(self.python), "-m", "localstack.runtime.main"], env=env, cwd=self.dir,
                stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT,
                start_new_session=True)
        try:
            wait_for(self._ready, f"localstack on {self.address}", seconds)
        except BaseException as e:                   # not up in time, exited, or Ctrl-C
            tail = "\n".join(self.log.read_text(errors="replace").splitlines()[-30:])
            self.stop()
            if isinstance(e, RuntimeError):
                raise RuntimeError(f"{e}; the end of its log ({self.log.name}):\n{tail}") from None
            raise
        return self

    def _ready(self) -> bool:
        if self.process.poll() is not None:
            raise RuntimeError(f"localstack exited with code {self.process.returncode}")
        with urllib.request.urlopen(f"{self.endpoint}/_localstack/health", timeout=2) as r:
            try:
                services = json.load(r).get("services", {})
            except ValueError:                       # not JSON yet
                return False
        return all(services.get(s) == "running" for s in SERVICES)

    def stop(self, seconds: float = 20) -> None:
        """SIGTERM to its process group, SIGKILL after `seconds`; its folder is removed."""
        if self.process is not None:
            self._signal_group(signal.SIGTERM)
            try:
                self.process.wait(seconds)
            except subprocess.TimeoutExpired:
                pass
            self._signal_group(signal.SIGKILL)      # a hung server, or children left behind
            self.process.wait()
            self.process = None
        shutil.rmtree(self.dir, ignore_errors=True)

    def _signal_group(self, sig: int) -> None:
        try:
            os.killpg(self.process.pid, sig)         # start_new_session: the group's id
        except ProcessLookupError:
            pass

    def __enter__(self) -> "Localstack":
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()
