"""The Lambda package holds no test-only code: no fault injection (a worker killing itself),
no local stand-in step, nothing of the local stack. Its files are the ones
deploy/lambda/Makefile copies, read here without building it."""
from __future__ import annotations

import ast
import json
import os
import re
import subprocess
import sys
from pathlib import Path

from lakestats.fleet import protocol

ROOT = Path(__file__).resolve().parent.parent
MAKEFILE = ROOT / "deploy" / "lambda" / "Makefile"

# what only the local stack and the tests use
TEST_ONLY_NAMES = {"faults", "FaultPlan", "worker_hook", "SIGKILL", "sqs_batch", "SQS_BATCH",
                   "LocalContext", "BatchTask", "BatchResult"}
TEST_ONLY_TEXT = re.compile(r"\bfaults\b|LAKESTATS_FAULTS|\binfra\.|sqs_batch|local_lambda")


def shipped() -> list[Path]:
    """The Python files of the Lambda package: the folders of PACKAGES, copied whole into
    lakestats/, and the single modules of MODULES."""
    text = MAKEFILE.read_text()
    packages, modules = (re.search(rf"^{name}\s*:=\s*(.+)$", text, re.M).group(1).split()
                         for name in ("PACKAGES", "MODULES"))
    files = [p for package in packages for p in (ROOT / package).rglob("*.py")]
    return sorted(files + [ROOT / f for f in modules])


def test_the_package_is_the_makefiles():
    names = {str(p.relative_to(ROOT)) for p in shipped()}
    assert {"functions/worker.py", "functions/lambda_handlers.py", "fleet/protocol.py",
            "lakestats/udf.py"} <= names
    assert not any(n.startswith(("infra/", "tests/", "spark_bridge/", "pruning/")) for n in names)
    assert not {"lakestats/watch.py", "lakestats/local_lambda.py", "lakestats/cli.py"} & names


def _docstrings(tree: ast.AST) -> set[int]:
    return {id(node.body[0].value) for node in ast.walk(tree)
            if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef,
                                 ast.AsyncFunctionDef))
            and node.body and isinstance(node.body[0], ast.Expr)
            and isinstance(node.body[0].value, ast.Constant)}


def find_test_only_code(paths: list[Path], sources: dict[str, str] | None = None) -> list[str]:
    """Where the files (or the sources, by name) define, import or name test-only code."""
    sources = dict(sources or {}) | {str(p.relative_to(ROOT)): p.read_text() for p in paths}
    found = []
    for file, source in sources.items():
        tree = ast.parse(source)
        docstrings = _docstrings(tree)
        for node in ast.walk(tree):
            where = f"{file}:{getattr(node, 'lineno', 0)}"
            if isinstance(node, (ast.Import, ast.ImportFrom)):
                modules = [a.name for a in node.names] + [getattr(node, "module", None) or ""]
                names = {part for m in modules for part in m.split(".") if part}
                names |= {a.asname or a.name for a in node.names}
                if names & (TEST_ONLY_NAMES | {"infra", "signal"}):
                    found.append(f"{where} imports {sorted(names)}")
            elif isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) \
                    and (node.value.id, node.attr) in (("os", "kill"), ("os", "killpg")):
                found.append(f"{where} calls os.{node.attr}")
            elif isinstance(node, (ast.Name, ast.Attribute, ast.FunctionDef, ast.ClassDef)):
                name = getattr(node, "id", None) or getattr(node, "attr", None) or node.name
                if name in TEST_ONLY_NAMES:
                    found.append(f"{where} names {name}")
            elif isinstance(node, ast.Constant) and isinstance(node.value, str) \
                    and id(node) not in docstrings and TEST_ONLY_TEXT.search(node.value):
                found.append(f"{where} has {node.value!r}")
    return found


def test_no_shipped_module_defines_or_imports_test_only_code():
    assert find_test_only_code(shipped()) == []


def test_the_check_finds_the_fault_injection_a_worker_once_shipped():
    fault = "import os, signal\n\ndef kill():\n    os.kill(os.getpid(), signal.SIGKILL)\n"
    worker = ("from lakestats.functions import faults\n\n"
              "def run(call):\n    faults.at(call, 'before')\n")
    steps = "STEPS = {'lakestats.functions.local.sqs_batch': None}\n"
    found = find_test_only_code([], {"faults.py": fault, "worker.py": worker, "protocol.py": steps})
    assert sorted(found) == ["faults.py:1 imports ['os', 'signal']",
                             "faults.py:4 calls os.kill", "faults.py:4 names SIGKILL",
                             "protocol.py:1 has 'lakestats.functions.local.sqs_batch'",
                             "worker.py:1 imports ['faults', 'functions', 'lakestats']",
                             "worker.py:4 names faults"]


def test_every_registered_step_ships():
    packages = {p.relative_to(ROOT).parts[0] for p in shipped()}
    for step in (*protocol.STEPS, protocol.WORKER_ENTRY):
        assert step.startswith("lakestats.") and step.split(".")[1] in packages, step


def test_the_lambda_handlers_import_nothing_of_the_local_stack():
    env = {k: v for k, v in os.environ.items()
           if k not in ("LAKESTATS_WORKER_HOOKS", "LAKESTATS_FAULTS")}
    code = ("import json, sys\nimport lakestats.functions.lambda_handlers\n"
            "from lakestats.functions import worker\n"
            "print(json.dumps({'modules': sorted(sys.modules), 'hooks': len(worker.HOOKS)}))")
    done = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True,
                          text=True, timeout=120,
                          env={**env, "PYTHONPATH": str(ROOT), "AWS_DEFAULT_REGION": "us-east-1"})
    assert done.returncode == 0, done.stderr[-2000:]
    loaded = json.loads(done.stdout.splitlines()[-1])
    assert loaded["hooks"] == 0
    test_only = [m for m in loaded["modules"]
                 if m.startswith(("lakestats.infra", "tests", "lakestats.spark_bridge",
                                  "lakestats.pruning"))
                 or "faults" in m.split(".") or m == "lakestats.local_lambda"]
    assert test_only == []
