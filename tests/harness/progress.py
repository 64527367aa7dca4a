"""Progress a person can follow in a long run (scripts/test.sh): the number of tests and files at
the start, then a line for each test file that took long once its last test is done, with the
CPU it spent and the count done so far, and at the end the CPU the whole run spent. pytest's own
dots and closing line ("N passed in S s") stay as they are.

CPU is what makes the suite slow on 2 cores (several tarsd, tarsctl and pip processes per test):
each test's phases carry the CPU seconds their process and its finished children (a tarsd once
stopped, a tarsctl, a pip install) spent since the phase before (CpuMeter, in every process that
runs tests), and the files' lines add them up.

Its hooks are tests/conftest.py's (imported there). It runs where the terminal is: in the main
process, which under pytest-xdist collects nothing itself and gets every worker's reports.
"""

from __future__ import annotations

import resource
from collections import Counter, defaultdict

import pytest

# A file that ran longer than this gets its line (--file-seconds). Most files take a few seconds;
# the few daemons-and-installs files that take minutes are the ones to see go by.
FILE_SECONDS = 20.0
CPU_PROPERTY = "cpu_seconds"  # the name of a report's user property that CpuMeter adds


def _cpu_seconds() -> float:
    """CPU spent so far by this process and by its children that have ended and been waited for."""
    own, children = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + children.ru_utime + children.ru_stime


class CpuMeter:
    """Puts on each test phase's report the CPU seconds spent since the report before (in this process)."""

    def __init__(self) -> None:
        self.last = _cpu_seconds()

    @pytest.hookimpl(tryfirst=True)
    def pytest_runtestloop(self, session: pytest.Session) -> None:
        self.last = _cpu_seconds()  # from the first test on: collecting is no file's

    @pytest.hookimpl(wrapper=True)
    def pytest_runtest_makereport(self, item: pytest.Item, call: pytest.CallInfo) -> pytest.TestReport:
        report = yield
        now = _cpu_seconds()
        report.user_properties.append((CPU_PROPERTY, now - self.last))
        self.last = now
        return report


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption(
        "--file-seconds",
        type=float,
        default=FILE_SECONDS,
        help=f"print a line for each test file that ran longer than this many seconds (default {FILE_SECONDS:.0f})",
    )


class FileProgress:
    def __init__(self, config: pytest.Config):
        self.config = config
        self.threshold: float = config.getoption("file_seconds")
        self.left: Counter[str] = Counter()  # tests not yet done, per file
        self.tests: Counter[str] = Counter()
        self.seconds: defaultdict[str, float] = defaultdict(float)  # setup + call + teardown, per file
        self.cpu: defaultdict[str, float] = defaultdict(float)  # CPU seconds (CpuMeter), per file
        self.total = 0
        self.done = 0

    def _collected(self, node_ids: list[str]) -> None:
        if self.total:
            return  # every xdist worker collects the same tests: the first one's list is enough
        for node_id in node_ids:
            self.left[_file(node_id)] += 1
        self.tests = Counter(self.left)
        self.total = len(node_ids)
        self._say(
            f"{_count(self.total, 'test')} in {_count(len(self.left), 'file')}; a line for each file that takes over {self.threshold:g} s",
        )

    @pytest.hookimpl(trylast=True)
    def pytest_collection_finish(self, session: pytest.Session) -> None:
        if session.items:  # without xdist: this process collected the tests
            self._collected([item.nodeid for item in session.items])

    @pytest.hookimpl(optionalhook=True)
    def pytest_xdist_node_collection_finished(self, node, ids: list[str]) -> None:
        self._collected(list(ids))

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        path = _file(report.nodeid)
        self.seconds[path] += report.duration
        # (name, value) pairs; xdist sends them as lists.
        self.cpu[path] += sum(float(value) for name, value in report.user_properties if name == CPU_PROPERTY)
        if report.when != "teardown" or path not in self.left:
            return
        self.done += 1
        self.left[path] -= 1
        if self.left[path] == 0:
            del self.left[path]
            if self.seconds[path] > self.threshold:
                tests, seconds, cpu = _count(self.tests[path], "test"), self.seconds[path], self.cpu[path]
                self._say(f"{path}: {tests} in {seconds:.0f} s, {cpu:.0f} s of CPU; {self.done}/{self.total} tests done")

    def pytest_terminal_summary(self) -> None:
        if self.cpu:
            heaviest = sorted(self.cpu.items(), key=lambda item: -item[1])[:5]
            files = ", ".join(f"{path} {cpu:.0f} s" for path, cpu in heaviest)
            self._say(f"CPU spent by the tests and the processes they ran: {sum(self.cpu.values()):,.0f} s; the most: {files}")

    def _say(self, line: str) -> None:
        reporter = self.config.pluginmanager.get_plugin("terminalreporter")
        if reporter is None:
            return
        if reporter._tw.width_of_current_line:  # after pytest's dots: a line of its own
            reporter._tw.line()
        reporter.write_line(line)


def _count(number: int, noun: str) -> str:
    return f"{number} {noun}{'s' * (number != 1)}"


def _file(node_id: str) -> str:
    return node_id.split("::", 1)[0]


def pytest_configure(config: pytest.Config) -> None:
    # Only where the terminal is: an xdist worker's reports go to the main process, which says it.
    if not hasattr(config, "workerinput"):
        config.pluginmanager.register(FileProgress(config), "tars-file-progress")
    # Wherever tests run: in each xdist worker, or in this process without xdist.
    config.pluginmanager.register(CpuMeter(), "tars-cpu-meter")
