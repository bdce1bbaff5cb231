"""Every command's --json output is typed: it validates against the command's JSON Schema
(lakestats/schemas/<command>.json, draft 2020-12) on tables of every type at its edges, holds no
NaN or Infinity token, and a field that is a number in one row is a number or null in all."""
from __future__ import annotations

import contextlib
import io
import json
import os
import shutil
from importlib import resources
from pathlib import Path

import jsonschema
import pytest

from lakestats import arguments
from lakestats.cli import main
from tests.oracle_data import adversarial, write

GOLDEN = Path(__file__).parent / "golden"
SCHEMAS = resources.files("lakestats") / "schemas"
# low thresholds: near-unique columns leave values seen once out, and get sketch quantiles
COMPUTE = ["--json", "--quiet", "--workers", "2", "--low-distinct-max", "100",
           "--low-duplicate-max", "200"]
RANKED = ["f64", "i64", "dec38", "text"]


def json_commands() -> set[str]:
    """The commands that take --json, from the parser itself."""
    sub = next(a for a in arguments.parser()._actions if a.dest == "command")
    return {name for name, c in sub.choices.items() if "--json" in c._option_string_actions}


def schema(command: str) -> dict:
    return json.loads((SCHEMAS / f"{command}.json").read_text(encoding="utf-8"))


def strict(text: str):
    """JSON as the standard has it: NaN and Infinity are not numbers."""
    def reject(token):
        raise ValueError(f"not JSON: {token}")
    return json.loads(text, parse_constant=reject)


def lakestats(*argv: str) -> tuple[int, str, str]:
    stdout, stderr = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(stdout), contextlib.redirect_stderr(stderr):
        code = main([str(a) for a in argv])
    return code, stdout.getvalue(), stderr.getvalue()


def iceberg_table(warehouse: Path) -> str:
    """An Iceberg table (two appends) of the adversarial columns Iceberg can store."""
    from tests.test_formats import partitioned_iceberg
    _, table = partitioned_iceberg(warehouse, "edges")
    return table.location().removeprefix("file://")


@pytest.fixture(scope="module")
def outputs(tmp_path_factory) -> list[tuple[str, list[str], object]]:
    """(command, argv, parsed output) of every --json command on tables at their edges: ±inf,
    NaN and -0.0, int64 and decimal extremes, zoned timestamps, unicode and empty strings,
    nulls, all-null and nested columns, and an empty data file."""
    work = tmp_path_factory.mktemp("schemas")
    t, u = work / "t", work / "u"
    for i, rel in enumerate(["p=a/0.parquet", "p=a/1.parquet", "p=b/2.parquet"]):
        write(t / rel, adversarial(i))
    write(t / "p=b/empty.parquet", adversarial(0).schema.empty_table())
    shutil.copytree(t, u)
    (u / "p=b" / "bad.parquet").write_bytes(b"PAR1 not really parquet")
    lake = iceberg_table(work)
    saved = os.environ.pop("REDIS_URL", None)
    runs: list[tuple[str, list[str], object]] = []

    def run(*argv, ok: bool = True) -> object:
        code, text, errors = lakestats(*argv, "--json")
        assert code == 0 or not ok, (argv, errors)
        out = strict(text) if text.strip() else None
        if out is not None:
            runs.append((argv[0], [str(a) for a in argv], out))
        return out

    try:
        indexed = ["--value-index", "auto,text,i64"]
        run("compute", t, *COMPUTE, *indexed, "--ranks", ",".join(RANKED))
        run("compute", t, *COMPUTE, *indexed)                        # unchanged
        run("compute", u, *COMPUTE, ok=False)                        # fails: nothing published
        run("show", u, "--partition", "p=a/0.parquet")               # computed, not published
        run("compute", u, *COMPUTE, "--allow-partial")
        run("compute", lake, *COMPUTE)
        shown = run("show", t)
        run("show", t, "--partition", "p=b/2.parquet")
        run("show", t, "--partition", "p=b/empty.parquet")
        run("show", t, "--columns", "f64,i64,nothing")
        run("show", u)
        run("show", lake)
        for table in (t, u, lake):
            run("partitions", table)
            run("status", table)           # u: a missing file; lake: a table format's
        write(work / "fresh" / "f.parquet", adversarial(1))
        run("status", work / "fresh")      # no statistics yet: every file pending
        columns = {c["column"]: c for c in shown["columns"]}
        for name, c in columns.items():
            if c["histogram_exponent"] is not None:
                run("histogram", t, name)
            if c["distinct_count"] is not None:
                run("frequencies", t, name, "--top", "5")
                run("quantiles", t, name, "0", "0.5", "1", ok=False)   # some have no sketch
        run("histogram", t, "f64", "--range", "-1e300..")
        run("histogram", t, "ts_ny", "--partition", "p=a/1.parquet")
        run("frequencies", t, "text")
        run("frequencies", t, "f64", "--partition", "p=a/0.parquet")
        for name in RANKED:
            run("quantiles", t, name, "0.001", "0.5", "1", "--exact")
        for name, value in (("i64", "-9223372036854775808"), ("f64", "inf"), ("dec38", "0.001"),
                            ("text", "")):
            run("rank", t, name, value)
        for name, value in (("text", ""), ("text", "😀"), ("i64", "-9223372036854775808"),
                            ("flag", "true")):
            run("where", t, name, value)
        for where in ("f64 > 1e300", "text = ''", "nothing IS NULL", "i64 = 0 OR isnan(f64)",
                      "ts_ny < TIMESTAMP '1970-01-02 00:00:00'"):
            run("prune", t, "--where", where)
        run("prune", t, "--order-by", "f64 DESC", "--limit", "2")
        run("prune", u, "--where", "p = 'b'")
        run("prune-query", "--sql", "SELECT * FROM a JOIN b ON a.i64 = b.i64 WHERE b.f64 > 1e300",
            "--table", f"a={t}", "--table", f"b={u}")
        run("export", "iceberg", lake, "--catalog", f"sqlite:///{work}/catalog.db",
            "--table-name", "lake.edges", "--catalog-name", "test")
        run("manifests", lake)
        run("manifests", lake, "--columns", "f64,text,dec38", "--where", "part = 1 AND f64 > 0")
    finally:
        if saved is not None:
            os.environ["REDIS_URL"] = saved
    return runs


def test_each_json_command_has_a_valid_schema():
    names = {p.name.removesuffix(".json") for p in SCHEMAS.iterdir() if p.name.endswith(".json")}
    assert names == json_commands()
    for name in names:
        jsonschema.Draft202012Validator.check_schema(schema(name))


@pytest.mark.services         # compute on the command's embedded Redis
def test_every_output_matches_its_schema(outputs):
    assert {command for command, _, _ in outputs} == json_commands()
    validators = {name: jsonschema.Draft202012Validator(schema(name)) for name in json_commands()}
    wrong = [f"{' '.join(argv)}: {e.json_path}: {e.message}" for command, argv, out in outputs
             for e in validators[command].iter_errors(out)]
    assert not wrong, "\n".join(wrong[:20])


@pytest.mark.services         # compute on the command's embedded Redis
def test_non_finite_moments_are_null(outputs):
    """f64 holds +inf and -inf (and NaN): its mean and stddev are no number; min, max and
    nan_count say why. Partition 2 holds +inf alone: an infinite mean is null too."""
    shown = {tuple(argv[2:]): out for command, argv, out in outputs if command == "show"
             and Path(argv[1]).name == "t"}
    table = {c["column"]: c for c in shown[()]["columns"]}["f64"]
    assert (table["min"], table["max"], table["mean"], table["stddev"]) == \
        ("-inf", "inf", None, None)
    assert table["nan_count"] > 0
    part = {c["column"]: c for c in shown[("--partition", "p=b/2.parquet")]["columns"]}["f64"]
    assert (part["max"], part["mean"], part["stddev"]) == ("inf", None, None)


@pytest.mark.services         # compute on the command's embedded Redis
def test_a_field_has_one_type_in_every_row(outputs):
    """Across all column rows of every show --json, each field is of one JSON type or null."""
    kinds: dict[str, set[str]] = {}
    for command, _, out in outputs:
        for row in out["columns"] if command == "show" else []:
            for key, value in row.items():
                if value is not None:
                    kinds.setdefault(key, set()).add(
                        "boolean" if isinstance(value, bool) else
                        "number" if isinstance(value, (int, float)) else type(value).__name__)
    assert {k: v for k, v in kinds.items() if len(v) > 1} == {}
    assert {k for k, v in kinds.items() if v == {"number"}} >= {
        "row_count", "null_count", "nan_count", "distinct_count", "mean", "stddev", "avg_length"}


def test_recorded_outputs_match_the_schemas():
    """The golden outputs of tests/test_cli_contract.py are typed by the same schemas."""
    commands = json_commands()
    checked = set()
    for path in sorted(GOLDEN.glob("*.json")):
        command = max((c for c in commands if path.stem == c or path.stem.startswith(c + "-")),
                      key=len)
        text = path.read_text(encoding="utf-8").partition("\n")[2]
        errors = list(jsonschema.Draft202012Validator(schema(command)).iter_errors(strict(text)))
        assert not errors, f"{path.name}: {errors[0].json_path}: {errors[0].message}"
        checked.add(command)
    assert len(checked) >= 8
