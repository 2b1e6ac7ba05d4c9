"""``benchmarks/suite_time.py``: the test suite's size and time from a JUnit XML file."""

from __future__ import annotations

from pathlib import Path
from types import ModuleType

from tests.scripts import benchmark_script

JUNIT = """<?xml version="1.0" encoding="utf-8"?>
<testsuites><testsuite name="pytest" errors="1" failures="1" skipped="2" tests="7" time="1014.237"
 timestamp="2026-01-02T03:04:05.000000+00:00" hostname="h">
<testcase classname="tests.unit.test_a" name="test_one" time="0.010" />
<testcase classname="tests.unit.test_a" name="test_two" time="2.500" />
<testcase classname="tests.engine.test_b" name="test_slow[opensearch]" time="61.250" />
<testcase classname="tests.engine.test_b" name="test_fails" time="3.000"><failure message="no">x</failure></testcase>
<testcase classname="tests.engine.test_b" name="test_breaks" time="0.500"><error message="no">x</error></testcase>
<testcase classname="tests.engine.test_c" name="test_skipped" time="0.000"><skipped message="no engine" /></testcase>
<testcase classname="tests.engine.test_c" name="test_skipped_too" time="0.000"><skipped message="no" /></testcase>
</testsuite></testsuites>
"""
CPUINFO = ("processor\t: 0\nmodel name\t: AMD EPYC 7B13\nflags\t\t: fpu sse avx avx2 fma\n\n"
           "processor\t: 1\nmodel name\t: AMD EPYC 7B13\nflags\t\t: fpu sse avx avx2 fma\n")


def _suite_time() -> ModuleType:
    return benchmark_script("suite_time")


def test_the_run_is_read_from_the_junit_file(tmp_path: Path) -> None:
    st = _suite_time()
    (tmp_path / "junit.xml").write_text(JUNIT, encoding="utf-8")
    suite = st.read_junit(tmp_path / "junit.xml")
    assert (suite.tests, suite.passed, suite.failed, suite.errors, suite.skipped) == (7, 3, 1, 1, 2)
    assert suite.seconds == 1014.237 and suite.timestamp.startswith("2026-01-02T03:04:05")
    assert suite.cases[0] == ("tests.engine.test_b::test_slow[opensearch]", 61.25)
    assert [s for _, s in suite.cases] == sorted((s for _, s in suite.cases), reverse=True)


def test_a_bare_testsuite_is_read_too(tmp_path: Path) -> None:
    st = _suite_time()
    bare = JUNIT.replace("<testsuites>", "").replace("</testsuites>", "")
    (tmp_path / "junit.xml").write_text(bare, encoding="utf-8")
    assert st.read_junit(tmp_path / "junit.xml").tests == 7


def test_the_cpu_and_its_vector_extensions() -> None:
    st = _suite_time()
    assert st.cpu(CPUINFO) == ("AMD EPYC 7B13", True, False)
    assert st.cpu(CPUINFO.replace("avx2", "avx2 avx512f")) == ("AMD EPYC 7B13", True, True)
    assert st.cpu_line(CPUINFO, 2) == "AMD EPYC 7B13, 2 cores, AVX2, no AVX-512"
    assert st.cpu("") == ("unknown", False, False)


def test_the_report_and_its_summary(tmp_path: Path) -> None:
    st = _suite_time()
    (tmp_path / "junit.xml").write_text(JUNIT, encoding="utf-8")
    text = st.report(st.read_junit(tmp_path / "junit.xml"), "cpu: AMD EPYC, cores: 2", CPUINFO, 2, "pytest",
                     slowest=2)
    assert ("Summary: 7 tests (3 passed, 1 failed, 1 with errors, 2 skipped) in 16 min 54 s on AMD EPYC 7B13, "
            "2 cores, AVX2, no AVX-512\n") in text
    assert "| 7 | 3 | 1 | 1 | 2 | 1014.2 s (16 min 54 s) |" in text
    assert "Machine: cpu: AMD EPYC, cores: 2." in text and "Command: `pytest`." in text
    assert "The 2 slowest tests:" in text
    assert "| `tests.engine.test_b::test_slow[opensearch]` | 61.2 |" in text
    assert "test_one" not in text
    assert "first run" not in text
    first = st.report(st.read_junit(tmp_path / "junit.xml"), "cpu: AMD EPYC, cores: 2", CPUINFO, 2, "pytest",
                      first_run=True)
    assert ("in 16 min 54 s on AMD EPYC 7B13, 2 cores, AVX2, no AVX-512, its first run on the machine "
            "(`$ESBRIDGE_HOME` empty: every download, build and embedding included)\n") in first


def test_durations_and_the_readme_command() -> None:
    st = _suite_time()
    assert [st.duration(s) for s in (45.4, 60, 1014.237)] == ["45 s", "1 min 0 s", "16 min 54 s"]
    assert "pytest" in st.readme_test_command()
