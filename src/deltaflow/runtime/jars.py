"""JVM artifacts: resolved once from Maven Central into a local cache, found there at run time.

Two groups, each described by a Maven POM shipped in ``runtime/jvm/``:

* ``spark``: Delta Lake, the Spark Kafka connector and Hadoop's S3A, loaded into the Spark driver, plus
  deltaflow's own classes (``runtime/jvm/java``: its S3 log store, the state of an incremental view's
  distinct counts, its optimizer rule ``ParseJsonOnce``), compiled here with the JDK's ``javac``; its
  local file system (``InProcess*``) in a jar of its own for the driver's class path
  (:func:`driver_class_path`), as Spark reads ``spark.jars`` through the file system before it loads
  them;
* ``kafka-broker``: the Apache Kafka broker that ``deltaflow kafka start`` runs on loopback.

``deltaflow setup`` (run by ``make setup``) calls :func:`resolve_jars`; nothing is downloaded at run time.
The cache lives in ``$DELTAFLOW_HOME/jars`` (default ``~/.cache/deltaflow/jars``).

Examples:
    >>> from deltaflow.runtime.jars import jar_dir
    >>> jar_dir("spark").name
    'spark'

"""

from __future__ import annotations

import hashlib
import os
import re
import shutil
import subprocess
import tempfile
from collections.abc import Callable
from importlib import resources
from pathlib import Path

from deltaflow.errors import SetupError

GROUPS = ("spark", "kafka-broker")
_POMS = {"spark": "spark-jars.pom.xml", "kafka-broker": "kafka-broker.pom.xml"}
_STAMP = ".resolved"
_VERSION_SUFFIX = re.compile(r"-\d[\w.\-]*\.jar$")


def home() -> Path:
    """Root of deltaflow's machine-wide cache and state (``$DELTAFLOW_HOME`` or ``~/.cache/deltaflow``)."""
    return Path(os.environ.get("DELTAFLOW_HOME") or Path.home() / ".cache" / "deltaflow")


def jar_dir(group: str) -> Path:
    """Folder that holds the resolved jars of ``group``."""
    return home() / "jars" / group


def _pom_text(group: str) -> str:
    return (resources.files("deltaflow.runtime") / "jvm" / _POMS[group]).read_text()


def _java_sources() -> list[Path]:
    return sorted(Path(str(resources.files("deltaflow.runtime") / "jvm" / "java")).rglob("*.java"))


def _stamp_for(group: str) -> str:
    text = _pom_text(group)
    if group == "spark":  # deltaflow's classes, and where their jars go
        text += "".join(p.read_text() for p in _java_sources()) + driver_class_path().name
    return hashlib.sha256(text.encode()).hexdigest()


def is_resolved(group: str) -> bool:
    """True when the cache holds the jars of the POM this package ships."""
    stamp = jar_dir(group) / _STAMP
    return stamp.is_file() and stamp.read_text().strip() == _stamp_for(group)


def _artifact(jar: str) -> str:
    return _VERSION_SUFFIX.sub("", jar)


def _pyspark_artifacts() -> set[str]:
    import pyspark

    return {_artifact(p.name) for p in (Path(pyspark.__file__).parent / "jars").glob("*.jar")}


def resolve_jars(force: bool = False, log: Callable[[str], None] = print) -> None:
    """Resolve every JVM group into the cache with Maven; a group already resolved is skipped.

    Jars that pyspark already ships (Scala, Hadoop, Jackson, Parquet...) are left out of the ``spark``
    group so that the driver has one copy of each class.

    Raises:
        SetupError: Maven is missing or cannot resolve an artifact.

    """
    mvn = shutil.which("mvn")
    for group in GROUPS:
        if is_resolved(group) and not force:
            log(f"jars: {group} already resolved in {jar_dir(group)}")
            continue
        if mvn is None:
            raise SetupError("Maven ('mvn') is not on PATH", hint="install Maven, then run 'make setup'")
        log(f"jars: resolving {group} from Maven Central...")
        with tempfile.TemporaryDirectory(prefix="deltaflow-jars-") as tmp:
            pom = Path(tmp) / "pom.xml"
            pom.write_text(_pom_text(group))
            out = Path(tmp) / "jars"
            proc = subprocess.run(
                [mvn, "-q", "-B", "-f", str(pom), "dependency:copy-dependencies",
                 "-DincludeScope=runtime", f"-DoutputDirectory={out}"],
                capture_output=True, text=True, check=False,
            )
            if proc.returncode != 0:
                errors = [ln for ln in proc.stdout.splitlines() if "ERROR" in ln][:1]
                raise SetupError(f"Maven could not resolve the {group} jars: {' '.join(errors)[:400]}")
            if group == "spark":
                provided = _pyspark_artifacts()
                for jar in out.glob("*.jar"):
                    if _artifact(jar.name) in provided:
                        jar.unlink()
                _compile_java(out, Path(tmp) / "classes")
            (out / _STAMP).write_text(_stamp_for(group))
            target = jar_dir(group)
            shutil.rmtree(target, ignore_errors=True)
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.move(str(out), target)
        log(f"jars: {group} -> {target} ({len(list(target.glob('*.jar')))} jars)")


def driver_class_path() -> Path:
    """The jar of deltaflow's classes that go on the driver's class path, not in ``spark.jars``.

    Examples:
        >>> driver_class_path().name
        'deltaflow-local-fs.jar'

    """
    return jar_dir("spark") / "driver" / "deltaflow-local-fs.jar"


def _compile_java(jar_folder: Path, classes: Path) -> None:
    """Compile deltaflow's JVM classes against the jars in ``jar_folder`` and pyspark's, into jars there.

    The local file system's classes need only Hadoop's, which the driver's class path holds; the others
    need Delta's, which only ``spark.jars`` holds.
    """
    import pyspark

    javac, jar = shutil.which("javac"), shutil.which("jar")
    if javac is None or jar is None:
        raise SetupError("the JDK's 'javac' and 'jar' are not on PATH", hint="install a JDK 17+, not a JRE")
    spark = (Path(pyspark.__file__).parent / "jars").glob("*.jar")  # Hadoop's, Spark SQL's (the state API)
    classpath = [*jar_folder.glob("*.jar"), *spark]

    def run(command: list[str]) -> None:
        proc = subprocess.run(command, capture_output=True, text=True, check=False)
        if proc.returncode != 0:
            raise SetupError(f"{Path(command[0]).name} failed: {(proc.stderr or proc.stdout).strip()[:400]}")

    run([javac, "--release", "17", "-d", str(classes), "-cp", ":".join(map(str, classpath)),
         *map(str, _java_sources())])
    local_fs = classes.with_name("local-fs")
    for compiled in (classes / "io" / "deltaflow" / "storage").glob("InProcess*.class"):  # nested ones too
        target = local_fs / compiled.relative_to(classes)
        target.parent.mkdir(parents=True, exist_ok=True)
        compiled.rename(target)
    driver_jar = jar_folder / driver_class_path().relative_to(jar_dir("spark"))
    driver_jar.parent.mkdir(exist_ok=True)
    run([jar, "cf", str(driver_jar), "-C", str(local_fs), "."])
    run([jar, "cf", str(jar_folder / "deltaflow.jar"), "-C", str(classes), "."])


def jars(group: str) -> list[Path]:
    """The cached jars of ``group``, sorted.

    Raises:
        SetupError: The group was never resolved (``make setup`` not run) or is out of date.

    """
    if not is_resolved(group):
        raise SetupError(
            f"the {group} jars are missing or out of date in {jar_dir(group)}",
            hint="run 'make setup' or 'deltaflow setup'",
        )
    return sorted(jar_dir(group).glob("*.jar"))
