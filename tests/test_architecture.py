"""The structure the code promises: one import namespace (lakestats.*) whatever the folders,
layers that a linter enforces (and that break when an upward import is added), settings read
only by entry points, modules of one role and modest size, every dotted name resolvable, every
module in the README's code map."""
from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from lakestats.fleet import protocol

from tests.layout import FOLDERS, FORMER_TOP_LEVEL, PACKAGES, ROOT, SETUPTOOLS, installed_layout

ENTRY_POINTS = ("lakestats", "spark_bridge", "functions")


def modules(*roots: str) -> list[Path]:
    return sorted(p for r in roots for p in (ROOT / r).rglob("*.py"))


def lint_imports(cwd: Path) -> subprocess.CompletedProcess:
    lint = Path(sys.executable).with_name("lint-imports")
    return subprocess.run([str(lint), "--no-cache"], cwd=cwd, capture_output=True, text=True,
                          env={"PYTHONPATH": str(cwd), "PATH": "/usr/bin:/bin"}, timeout=120)


def test_the_layers_hold():
    done = lint_imports(ROOT)                 # the repository, as `lint-imports` reads it
    assert done.returncode == 0, done.stdout[-3000:]
    assert "Contracts: 5 kept, 0 broken." in done.stdout, done.stdout[-3000:]


@pytest.mark.parametrize("module, upward", [
    ("core/types.py", "from lakestats.monostore import compute"),   # the bottom, the top
    ("algorithms/ranks/steps.py", "from lakestats.fleet import fanout"),  # a step, the coordinator
    ("fleet/protocol.py", "from lakestats.fleet import jobs"),      # a cycle inside a layer
    ("lakestats/new_command.py", "import json"),                    # a module without a layer
])
def test_the_contract_breaks_on_a_wrong_import(tmp_path, module, upward):
    installed = installed_layout(tmp_path)
    with open(installed / "lakestats" / module.removeprefix("lakestats/"), "a") as f:
        f.write(f"\n\ndef _added():\n    {upward}  # noqa\n")    # lazy imports count too
    done = lint_imports(installed)
    assert done.returncode != 0 and "BROKEN" in done.stdout, done.stdout[-2000:]


def test_lakestats_links_every_layer_folder():
    """lakestats/<folder> links ../<folder> for every mapped folder, so that the repository
    reads as the installed package (a bare `lint-imports` at its root checks the layers)."""
    for name, folder in FOLDERS.items():
        if name != "lakestats":
            link = ROOT / name.replace(".", "/")
            assert link.is_symlink() and link.resolve() == (ROOT / folder).resolve(), name


def test_every_package_folder_installs():
    """Each folder with an __init__.py is a package setuptools installs, under lakestats."""
    found = {"lakestats." * (folder != "lakestats") + str(init.parent.relative_to(ROOT))
             .replace("/", ".") for folder in PACKAGES for init in (ROOT / folder).rglob(
                 "__init__.py")}
    assert found == set(SETUPTOOLS["packages"])


def test_only_lakestats_imports_from_anywhere(tmp_path):
    """From a neutral folder, the installed project is lakestats alone."""
    code = ("import importlib.util, lakestats\n"
            f"print([n for n in {FORMER_TOP_LEVEL!r} if importlib.util.find_spec(n)])")
    done = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, capture_output=True,
                          text=True, timeout=60, env={"PATH": "/usr/bin:/bin"})
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.strip() == "[]"


def test_only_entry_points_read_the_environment():
    readers = []
    for path in modules(*(p for p in PACKAGES if p not in ENTRY_POINTS)):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Attribute) and node.attr in ("environ", "getenv") \
                    and isinstance(node.value, ast.Name) and node.value.id == "os":
                readers.append(f"{path.relative_to(ROOT)}:{node.lineno}")
    assert readers == []


def test_no_module_is_over_400_lines():
    long = {str(p.relative_to(ROOT)): n for p in modules(*PACKAGES, "tests", "benchmarks")
            if (n := len(p.read_text().splitlines())) > 400}
    assert long == {}


def test_every_dotted_name_resolves():
    for step in protocol.STEPS:
        assert callable(protocol.resolve(step)), step
    assert callable(protocol.resolve(protocol.WORKER_ENTRY))
    assert callable(protocol.resolve(protocol.WORKER_WARM))
    from lakestats.infra.faults import WORKER_HOOK               # the local stack's, never shipped
    from lakestats.local_lambda import ENTRY, SQS_BATCH
    for name in (WORKER_HOOK, ENTRY, SQS_BATCH):
        assert callable(protocol.resolve(name)), name
    template = yaml.load((ROOT / "template.yaml").read_text(), Loader=_CloudFormation)
    handlers = [r["Properties"]["Handler"] for r in template["Resources"].values()
                if r["Type"] == "AWS::Serverless::Function"]
    assert len(handlers) == 4
    for handler in handlers:
        assert callable(protocol.resolve(handler)), handler


def test_the_code_map_names_every_module():
    readme = (ROOT / "README.md").read_text()
    missing = [str(p.relative_to(ROOT)) for p in modules(*PACKAGES)
               if p.name != "__init__.py" and f"`{p.relative_to(ROOT)}`" not in readme]
    assert missing == []


def test_every_test_has_one_kind():
    """unit, services or spark (tests/conftest.py), so that `make test-fast` and `-m` select
    every test by what it needs; two kinds on one test fail the collection."""
    done = subprocess.run([sys.executable, "-m", "pytest", "-q", "--collect-only",
                           "-p", "no:cacheprovider", "-m", "not (unit or services or spark)",
                           "tests"], cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert done.returncode == 5 and "no tests collected" in done.stdout, done.stdout[-3000:]


class _CloudFormation(yaml.SafeLoader):
    """Reads the template's short-form intrinsic functions (!Ref, !Sub, ...) as plain data."""


_CloudFormation.add_multi_constructor("!", lambda loader, suffix, node: None)
