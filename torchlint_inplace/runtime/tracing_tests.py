"""The hooks `pytest --torchlint-inplace` registers (loaded only with the option: imports torch).

Each test's call runs under a fresh tracer; where torch modules are built is recorded for the
whole session (at collection, in fixtures), so an in-place module's build line can be named. The tracer's
errors become the failure's whole text: the explanation already names the user's lines, and the
frames of torch, pluggy and pytest between them say nothing to the user. A failure for any other
reason keeps pytest's report, with the silent corruption seen (if any) as an extra section.
"""

from __future__ import annotations

import warnings
from collections.abc import Generator
from types import TracebackType

import pytest

from .construction import recording_builds
from .refusals import InplaceRefusalError
from .report import InplaceCulpritError
from .sites import frame_site, is_internal
from .tracer import Tracer

_SECTION = "torchlint-inplace"
_HARNESS = ("/_pytest/", "/pluggy/")


class TracedTests:
    def __init__(self, warn: bool, warning: type[Warning]) -> None:
        self.warn = warn
        self.warning = warning
        self._builds = recording_builds()

    def pytest_configure(self, config: pytest.Config) -> None:
        """Module builds are recorded for the whole session (collection and fixtures included):
        switching the recording per test costs more than it."""
        self._builds.__enter__()

    def pytest_unconfigure(self, config: pytest.Config) -> None:
        self._builds.__exit__(None, None, None)

    @pytest.hookimpl(wrapper=True)
    def pytest_runtest_call(self, item: pytest.Item) -> Generator[None, None, None]:
        tracer = Tracer()
        try:
            with tracer:
                result = yield
        except BaseException:
            self._attach(item, tracer)
            raise
        reports = tracer.reports
        if reports and not self.warn:
            pytest.fail("\n\n".join(f"torchlint-inplace: {report.render()}" for report in reports), pytrace=False)
        for report in reports:
            # Located at the user's line, as pytest's summary lists it.
            warnings.warn_explicit(
                self.warning(f"torchlint-inplace: {report.render()}"),
                self.warning,
                report.write.file,
                report.write.line,
            )
        return result

    def _attach(self, item: pytest.Item, tracer: Tracer) -> None:
        if tracer.reports:
            item.add_report_section("call", _SECTION, "\n\n".join(report.render() for report in tracer.reports))

    @pytest.hookimpl(wrapper=True)
    def pytest_runtest_makereport(
        self, item: pytest.Item, call: pytest.CallInfo[None]
    ) -> Generator[None, pytest.TestReport, pytest.TestReport]:
        report = yield
        excinfo = call.excinfo
        if excinfo is not None and isinstance(excinfo.value, InplaceRefusalError):
            report.longrepr = f"torchlint-inplace: {excinfo.value}"  # it lists the user's frames itself
        elif excinfo is not None and isinstance(excinfo.value, InplaceCulpritError):
            report.longrepr = _explained(excinfo)
        return report


def _explained(excinfo: pytest.ExceptionInfo[BaseException]) -> str:
    """The tracer's explanation, then the user's frames that led to backward() (the test's own line first)."""
    frames = []
    tb: TracebackType | None = excinfo.tb
    while tb is not None:
        if not is_internal(tb.tb_frame) and not any(harness in tb.tb_frame.f_code.co_filename for harness in _HARNESS):
            site = frame_site(tb.tb_frame, None, tb.tb_lineno)
            frames.append(f"    {site.location} in {site.function}: {site.code}")
        tb = tb.tb_next
    text = f"torchlint-inplace: {excinfo.value}"
    return text + ("\n\n  raised in:\n" + "\n".join(frames) if frames else "")
