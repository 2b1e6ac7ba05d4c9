"""How long the test suite took, and on which machine: ``results/test-suite.md`` from the JUnit XML
file of one pytest run.

Run the README's test command with pytest writing that file, then this script on the same machine::

    PYTEST_ADDOPTS=--junitxml=/tmp/suite.xml .venv/bin/python -m pytest
    python benchmarks/suite_time.py /tmp/suite.xml
    python benchmarks/doc_tables.py --write    # the README's sentence on the suite, from the file

The file holds the run's tests (passed, failed, with errors, skipped), the wall time pytest measured
for the session, the ten slowest tests, the machine (``common.machine()``) and the CPU's model and
vector extensions (AVX2, AVX-512), and a ``Summary:`` line the README cites
(``<!-- results-figure test-suite -->``).  ``--first-run`` says in that line that the run began with an
empty ``$ESBRIDGE_HOME`` (as on a fresh CI machine): every engine, model and client download, plugin
build and embedding of the test documents included, which a later run finds done.
"""

from __future__ import annotations

import argparse
import os
import re
import sys
import xml.etree.ElementTree as ET
from dataclasses import dataclass
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
OUT = HERE / "results" / "test-suite.md"


@dataclass(frozen=True)
class Suite:
    """One pytest run as its JUnit XML file tells it."""

    tests: int
    failed: int
    errors: int
    skipped: int
    seconds: float
    timestamp: str
    #: ``(test id, seconds)`` of every test case, slowest first.
    cases: list[tuple[str, float]]

    @property
    def passed(self) -> int:
        return self.tests - self.failed - self.errors - self.skipped


def read_junit(path: Path) -> Suite:
    """The run of a JUnit XML file as pytest writes it (``<testsuites>`` or a bare ``<testsuite>``)."""
    root = ET.parse(path).getroot()
    suites = [root] if root.tag == "testsuite" else root.findall("testsuite")
    if not suites:
        raise SystemExit(f"{path}: no <testsuite> in it; is it pytest's --junitxml file?")

    def total(attr: str) -> int:
        return sum(int(s.get(attr, "0")) for s in suites)

    cases = []
    for suite in suites:
        for case in suite.iter("testcase"):
            name = f"{case.get('classname', '')}::{case.get('name', '')}".strip(":")
            cases.append((name, float(case.get("time", "0"))))
    cases.sort(key=lambda c: (-c[1], c[0]))
    return Suite(tests=total("tests"), failed=total("failures"), errors=total("errors"), skipped=total("skipped"),
                 seconds=sum(float(s.get("time", "0")) for s in suites), timestamp=suites[0].get("timestamp", ""),
                 cases=cases)


def duration(seconds: float) -> str:
    """``16 min 54 s``, ``45 s``."""
    whole = round(seconds)
    return f"{whole // 60} min {whole % 60} s" if whole >= 60 else f"{whole} s"


def cpu(cpuinfo: str) -> tuple[str, bool, bool]:
    """``(model, AVX2, AVX-512)`` of a ``/proc/cpuinfo`` text (its first processor)."""
    model = re.search(r"^model name\s*:\s*(.+)$", cpuinfo, re.M)
    flags = re.search(r"^flags\s*:\s*(.+)$", cpuinfo, re.M)
    words = set(flags.group(1).split()) if flags else set()
    return (model.group(1).strip() if model else "unknown", "avx2" in words, "avx512f" in words)


def cpu_line(cpuinfo: str, cores: int | None) -> str:
    """The CPU as the summary writes it: ``AMD EPYC 7B13, 2 cores, AVX2, no AVX-512``."""
    model, avx2, avx512 = cpu(cpuinfo)
    parts = [model] + ([f"{cores} cores"] if cores else [])
    return ", ".join([*parts, "AVX2" if avx2 else "no AVX2", "AVX-512" if avx512 else "no AVX-512"])


def readme_test_command(readme: Path = ROOT / "README.md") -> str:
    """The README's test command: the second bash block of its "Two commands" section."""
    section = readme.read_text(encoding="utf-8").split("## Two commands", 1)[1].split("\n## ", 1)[0]
    blocks = re.findall(r"```bash\n(.*?)```", section, flags=re.S)
    return blocks[1].strip() if len(blocks) > 1 else ""


#: what ``--first-run`` adds to the summary
FIRST_RUN = ", its first run on the machine (`$ESBRIDGE_HOME` empty: every download, build and embedding included)"


def summary(suite: Suite, cpu_text: str, first_run: bool = False) -> str:
    """The sentence the README cites: ``1,854 tests (1,850 passed, 4 skipped) in 16 min 54 s on AMD EPYC
    7B13, 2 cores, AVX2, no AVX-512`` (and :data:`FIRST_RUN` after it for a first run)."""
    counts = [f"{suite.passed:,} passed"] + [f"{n:,} {what}" for n, what in
                                              ((suite.failed, "failed"), (suite.errors, "with errors"),
                                               (suite.skipped, "skipped")) if n]
    return (f"{suite.tests:,} tests ({', '.join(counts)}) in {duration(suite.seconds)} on {cpu_text}"
            + (FIRST_RUN if first_run else ""))


def report(suite: Suite, machine: str, cpuinfo: str, cores: int | None, command: str, slowest: int = 10,
           first_run: bool = False) -> str:
    """The Markdown of ``results/test-suite.md``."""
    cpu_text = cpu_line(cpuinfo, cores)
    lines = ["# The test suite", "",
             f"Machine: {machine}.", "",
             f"CPU: {cpu_text}.", "",
             f"Run: {suite.timestamp or 'time not recorded'}. Command: `{command}`.", "",
             f"Summary: {summary(suite, cpu_text, first_run)}", "",
             "| tests | passed | failed | errors | skipped | wall time |",
             "|---:|---:|---:|---:|---:|---|",
             f"| {suite.tests} | {suite.passed} | {suite.failed} | {suite.errors} | {suite.skipped} | "
             f"{suite.seconds:.1f} s ({duration(suite.seconds)}) |", "",
             f"The {min(slowest, len(suite.cases))} slowest tests:", "",
             "| test | s |", "|---|---:|"]
    lines += [f"| `{name}` | {seconds:.1f} |" for name, seconds in suite.cases[:slowest]]
    return "\n".join(lines) + "\n"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("junit", type=Path, help="the JUnit XML file of the run (pytest --junitxml)")
    ap.add_argument("--out", type=Path, default=OUT)
    ap.add_argument("--command", help="the command that ran the suite (default: the README's test command)")
    ap.add_argument("--first-run", action="store_true",
                    help="the run began with an empty $ESBRIDGE_HOME (said in the summary)")
    args = ap.parse_args()
    sys.path.insert(0, str(HERE))
    from common import machine

    try:
        cpuinfo = Path("/proc/cpuinfo").read_text(encoding="utf-8")
    except OSError:
        cpuinfo = ""
    suite = read_junit(args.junit)
    args.out.write_text(report(suite, machine(), cpuinfo, os.cpu_count(), args.command or readme_test_command(),
                               first_run=args.first_run), encoding="utf-8")
    print(f"wrote {args.out}: {summary(suite, cpu_line(cpuinfo, os.cpu_count()), args.first_run)}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
