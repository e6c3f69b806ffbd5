"""Reports: the result of a command as pictures, in one self-contained HTML file.

A :class:`~accelmap.report.document.Report` holds what a command printed with ``--json`` (the
``result``), what only the running process knew (``detail``: the per-operator roofline, the
best plan's estimate, the pipeline timeline), the inputs and the accelmap version.
``report.figures`` turns it into plotly figures and ``report.html`` into one HTML page with
plotly's JavaScript embedded, so the file opens from disk with no network.

Importing this package is cheap: plotly loads only when figures are drawn.
"""

from __future__ import annotations

from accelmap.report.document import KINDS, Report, kind_of

__all__ = ["KINDS", "Report", "kind_of"]
