"""The `lakestats` data source's JVM half (jvm/Lakestats.scala), compiled into a jar.

It is built where it runs, against the installed PySpark's own jars, with the Scala compiler
those jars include and the Java that runs Spark: nothing to download, and a jar that matches
the Spark it is loaded into. Built once per source text and Spark version, in the user's cache
(`LAKESTATS_CACHE`, else $XDG_CACHE_HOME/lakestats or ~/.cache/lakestats); ~15 s.
"""
from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import tempfile
import zipfile
from pathlib import Path

SOURCE = Path(__file__).parent / "jvm" / "Lakestats.scala"
SOURCE_CLASS = "org.apache.spark.sql.lakestats.DefaultSource"
EXTENSIONS_CLASS = "org.apache.spark.sql.lakestats.Extensions"


def jar_path() -> Path:
    """The jar for this source and this PySpark, built if it is not there yet."""
    import pyspark
    digest = hashlib.sha1(SOURCE.read_bytes() + pyspark.__version__.encode()).hexdigest()[:12]
    jar = _cache() / f"lakestats-spark-{digest}.jar"
    if not jar.exists():
        _build(jar, Path(pyspark.__file__).parent / "jars")
    return jar


def _cache() -> Path:
    if os.environ.get("LAKESTATS_CACHE"):
        return Path(os.environ["LAKESTATS_CACHE"])
    return Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "lakestats"


def _java() -> str:
    home = os.environ.get("JAVA_HOME")
    java = os.path.join(home, "bin", "java") if home else shutil.which("java")
    if not java or not os.path.exists(java):
        raise RuntimeError("building the lakestats Spark jar needs Java (the one Spark runs on): "
                           "none on PATH and no JAVA_HOME")
    return java


def _build(jar: Path, spark_jars: Path) -> None:
    compiler = [str(next(spark_jars.glob(f"scala-{part}-2.*.jar")))
                for part in ("compiler", "library", "reflect")]
    jar.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="lakestats-jar-") as out:
        done = subprocess.run([_java(), "-cp", os.pathsep.join(compiler), "scala.tools.nsc.Main",
                               "-nowarn", "-classpath", str(spark_jars / "*"), "-d", out,
                               str(SOURCE)], capture_output=True, text=True)
        if done.returncode:
            raise RuntimeError(f"compiling {SOURCE.name} against {spark_jars} failed:\n"
                               f"{done.stdout}{done.stderr}")
        partial = jar.with_suffix(f".{os.getpid()}.part")
        try:
            with zipfile.ZipFile(partial, "w", zipfile.ZIP_DEFLATED) as z:
                z.writestr("META-INF/services/org.apache.spark.sql.sources.DataSourceRegister",
                           SOURCE_CLASS + "\n")
                for path in sorted(Path(out).rglob("*.class")):
                    z.write(path, path.relative_to(out).as_posix())
            os.replace(partial, jar)      # whole or absent, when two processes build at once
        finally:
            partial.unlink(missing_ok=True)
