"""The command line's JSON is an interface other tools are built on: every command's --json
output on the committed test tables is compared, byte for byte, with the output recorded in
tests/golden/ (timings aside). LAKESTATS_WRITE_GOLDEN=1 records it anew, after a deliberate
change of the interface."""
from __future__ import annotations

import json
import os
import re
import shutil
from pathlib import Path

import pytest

from lakestats.cli import main

pytestmark = pytest.mark.services   # computes on the command's embedded Redis

GOLDEN = Path(__file__).parent / "golden"
THRESHOLDS = ["--low-distinct-max", "100", "--low-duplicate-max", "200", "--workers", "2"]

# (name, argv): run in order, in a directory holding the table "t" and its copy "u" with a bad file
COMMANDS = [
    ("compute", ["compute", "t", "--json", "--quiet", *THRESHOLDS, "--ranks", "qty,amount"]),
    ("compute-unchanged", ["compute", "t", "--json", "--quiet", *THRESHOLDS]),
    ("compute-forced", ["compute", "t", "--json", "--quiet", "--stats-root", "forced",
                        "--frequency-algorithm", "binned", "--all-values", "--bins", "64",
                        *THRESHOLDS]),
    ("compute-failed", ["compute", "u", "--json", "--quiet", *THRESHOLDS]),
    ("compute-partial", ["compute", "u", "--json", "--quiet", "--allow-partial", *THRESHOLDS]),
    ("show", ["show", "t", "--json"]),
    ("show-columns", ["show", "t", "--columns", "day,qty,price", "--json"]),
    ("show-partition", ["show", "t", "--partition", "p=a/f1.parquet", "--json"]),
    ("show-partial", ["show", "u", "--json"]),
    ("partitions", ["partitions", "t", "--json"]),
    ("partitions-partial", ["partitions", "u", "--json"]),
    *[(f"histogram-{c}", ["histogram", "t", c, "--json"])
      for c in ("qty", "price", "day", "ts", "amount", "big", "uid")],
    ("histogram-partition", ["histogram", "t", "qty", "--partition", "p=b/f3.parquet", "--json"]),
    ("histogram-forced", ["histogram", "t", "price", "--stats-root", "forced", "--json"]),
    *[(f"frequencies-{c}", ["frequencies", "t", c, "--json", "--top", "7"])
      for c in ("city", "id", "qty", "price", "day", "ts", "amount", "big", "blob", "flag",
                "nothing", "uid")],
    ("frequencies-all", ["frequencies", "t", "city", "--json"]),
    ("frequencies-partition", ["frequencies", "t", "city", "--partition", "p=a/f2.parquet",
                               "--json"]),
    ("frequencies-forced", ["frequencies", "t", "id", "--stats-root", "forced", "--top", "5",
                            "--json"]),
    ("quantiles-qty", ["quantiles", "t", "qty", "0", "0.25", "0.5", "0.999", "1", "--json"]),
    ("quantiles-day", ["quantiles", "t", "day", "0.1", "0.5", "--json"]),
    ("quantiles-uid", ["quantiles", "t", "uid", "0.1", "0.5", "0.9", "--json"]),
    ("quantiles-exact", ["quantiles", "t", "amount", "0", "0.5", "1", "--exact", "--json"]),
    ("quantiles-exact-price", ["quantiles", "t", "price", "0.01", "0.5", "0.99", "--exact",
                               "--json"]),
    ("rank-qty", ["rank", "t", "qty", "25", "--json"]),
    ("rank-amount", ["rank", "t", "amount", "-1234.50", "--json"]),
    ("prune-range", ["prune", "t", "--where", "qty > 45 AND day >= DATE '2024-06-01'", "--json"]),
    ("prune-hive", ["prune", "t", "--where", "p = 'b'", "--json"]),
    ("prune-member", ["prune", "t", "--where", "id = 10500", "--json"]),
    ("prune-city", ["prune", "t", "--where", "city IN ('Oslo', 'nowhere')", "--json"]),
    ("prune-limit", ["prune", "t", "--where", "price > 100", "--limit", "10", "--json"]),
    ("prune-topk", ["prune", "t", "--order-by", "day DESC", "--limit", "5", "--json"]),
    ("prune-none", ["prune", "t", "--where", "big < -9223372036854775808", "--json"]),
]
TIMINGS = re.compile(r'("(?:seconds|sort_and_sample|scatter|merge)": )[-0-9.e+]+')


@pytest.fixture(scope="module")
def outputs(tmp_path_factory):
    """Every command's exit code and standard output, run in order on fresh copies."""
    work = tmp_path_factory.mktemp("contract")
    for name, extra in (("t", None), ("u", b"PAR1 not really parquet")):
        shutil.copytree(GOLDEN / "table", work / name)
        if extra:
            (work / name / "p=b" / "bad.parquet").write_bytes(extra)
        for i, path in enumerate(sorted((work / name).rglob("*.parquet"))):
            os.utime(path, ns=(1_700_000_000_000_000_000 + i, 1_700_000_000_000_000_000 + i))
    saved_cwd, saved_redis = os.getcwd(), os.environ.pop("REDIS_URL", None)
    os.chdir(work)
    results = {}
    try:
        for name, argv in COMMANDS:
            out = _run(argv)
            results[name] = out
    finally:
        os.chdir(saved_cwd)
        if saved_redis is not None:
            os.environ["REDIS_URL"] = saved_redis
    return results


def _run(argv: list[str]) -> tuple[int, str]:
    import contextlib
    import io
    stdout, stderr = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(stdout), contextlib.redirect_stderr(stderr):
        code = main(argv)
    return code, TIMINGS.sub(r"\g<1>0", stdout.getvalue())


@pytest.mark.parametrize("name", [name for name, _ in COMMANDS])
def test_json_output_is_unchanged(outputs, name):
    code, text = outputs[name]
    path = GOLDEN / f"{name}.json"
    if os.environ.get("LAKESTATS_WRITE_GOLDEN"):
        path.write_text(json.dumps({"exit": code}) + "\n" + text)
    recorded = path.read_text()
    first, _, rest = recorded.partition("\n")
    assert code == json.loads(first)["exit"]
    assert text == rest
