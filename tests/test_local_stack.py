"""`lakestats local up` prints exports to eval and a watch command that runs as it is: its queue
is the one the bucket's object events go to, its table the bucket's prefix given by --table.
`local down` stops what up started, moto's server or localstack's."""
from __future__ import annotations

import contextlib
import io
import json
import os
import shlex
import subprocess

import boto3
import pytest

from lakestats import arguments
from lakestats.cli import main
from lakestats.functions.notifications import changes, table_of
from lakestats.infra import local_stack, localstack


def cli(*argv: str) -> tuple[int, str, str]:
    stdout, stderr = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(stdout), contextlib.redirect_stderr(stderr):
        try:
            code = main(list(argv))
        except SystemExit as e:               # argparse's usage errors
            code = e.code
    return code, stdout.getvalue(), stderr.getvalue()


def exported(text: str) -> dict[str, str]:
    """The variables a shell has after `eval "$(lakestats local up ...)"` (the watch command
    is a comment: eval does not run it)."""
    script = 'eval "$1"; for v in AWS_ENDPOINT_URL REDIS_URL AWS_ACCESS_KEY_ID ' \
             'AWS_SECRET_ACCESS_KEY AWS_DEFAULT_REGION; do printf "%s=%s\\n" $v "${!v}"; done'
    done = subprocess.run(["bash", "-c", script, "_", text], capture_output=True, text=True,
                          env={"PATH": os.environ["PATH"]}, timeout=30, check=True)
    return dict(line.split("=", 1) for line in done.stdout.splitlines())


def watch_command(text: str):
    """The printed watch command, parsed by the command line's own parser."""
    lines = [line for line in text.splitlines() if line.startswith("# lakestats watch ")]
    assert len(lines) == 1, text
    argv = shlex.split(lines[0].removeprefix("# "))
    assert argv[0] == "lakestats"
    args = arguments.parser().parse_args(argv[1:])
    assert args.command == "watch"
    return args


def check_wired(text: str, bucket: str, table: str) -> None:
    """A file landing in the table reaches the printed queue, and watch's own decoding of the
    event finds it in the printed table."""
    env = exported(text)
    args = watch_command(text)
    assert args.tables == f"s3://{bucket}/{table}"
    kwargs = dict(endpoint_url=env["AWS_ENDPOINT_URL"], region_name=env["AWS_DEFAULT_REGION"],
                  aws_access_key_id=env["AWS_ACCESS_KEY_ID"],
                  aws_secret_access_key=env["AWS_SECRET_ACCESS_KEY"])
    s3, sqs = boto3.client("s3", **kwargs), boto3.client("sqs", **kwargs)
    s3.put_object(Bucket=bucket, Key=f"{table}/part-0.parquet", Body=b"PAR1")
    found = []
    for _ in range(10):          # long polls of up to 2 s: until the event arrives
        for message in sqs.receive_message(QueueUrl=args.queue, WaitTimeSeconds=2,
                                           MaxNumberOfMessages=10).get("Messages", []):
            found += [c for c in changes(json.loads(message["Body"])) if c.created]
        if found:
            break
    assert [table_of(c.uri, (args.tables,)) for c in found] == \
        [(f"s3://{bucket}/{table}", "part-0.parquet")]


@pytest.mark.services          # starts moto's server and a Redis of its own
def test_up_prints_a_watch_command_that_runs_as_is(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    code, out, err = cli("local", "up", "--bucket", "lake", "--table", "sales/orders")
    try:
        assert code == 0, err
        check_wired(out, "lake", "sales/orders")
        assert cli("local", "up")[0] == 1                   # one stack at a time
    finally:
        code, down, _ = cli("local", "down")
    assert code == 0 and down.strip() == "stopped 2 processes"
    assert not (tmp_path / local_stack.STATE / "state.json").exists()


def test_up_refuses_what_it_cannot_do(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert cli("local", "up", "--table", "orders")[0] == 2        # a table in which bucket?
    assert cli("local", "up", "--bucket", "lake", "--table", "_hidden/t")[0] == 2
    monkeypatch.setattr(localstack, "VENV", tmp_path / "no-venv")
    code, out, err = cli("local", "up", "--localstack", "--bucket", "lake")
    assert code == 1 and "make .localstack-venv/.installed" in err and not out
    assert not (tmp_path / local_stack.STATE / "state.json").exists()


@pytest.mark.slow               # localstack takes about 15 s to start
@pytest.mark.services
def test_up_on_localstack(tmp_path, monkeypatch):
    if localstack.localstack_python() is None:
        pytest.fail(f"{localstack.VENV} is missing: run `make .localstack-venv/.installed`",
                    pytrace=False)
    monkeypatch.chdir(tmp_path)
    code, out, err = cli("local", "up", "--localstack", "--bucket", "lake")
    try:
        assert code == 0, err
        check_wired(out, "lake", "orders")                  # the default table
        group = json.loads((tmp_path / local_stack.STATE / "state.json").read_text())
    finally:
        code, down, _ = cli("local", "down")
    assert code == 0 and down.strip() == "stopped 2 processes"
    for pid in group["groups"]:            # localstack's process group is gone, children too
        with pytest.raises(ProcessLookupError):
            os.killpg(pid, 0)
    assert not any(os.path.exists(d) for d in group["dirs"])
