"""PNG charts of figures over time (matplotlib, Agg backend: no display needed): a column of panels sharing the
time axis, each with lines. The steps say what to draw; this module only draws it."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Sequence


@dataclass
class Line:
    label: str
    xs: Sequence[float]
    ys: Sequence[float | None]
    #: ``line`` or ``step`` (a value that holds until the next sample).
    style: str = "line"


@dataclass
class Panel:
    ylabel: str
    lines: list[Line]
    log_y: bool = False
    #: Horizontal reference lines: (value, label).
    marks: list[tuple[float, str]] = field(default_factory=list)


def time_series_png(path: Path, title: str, panels: Sequence[Panel], xlabel: str = "seconds since the workers started") -> Path:
    """Draw ``panels`` one above the other into ``path``; returns ``path``."""
    import matplotlib  # the benchmark's own virtualenv has it; the service's, where the tests import this, need not

    matplotlib.use("Agg")  # before pyplot: files only, never a window
    import matplotlib.pyplot as plt
    from matplotlib.ticker import ScalarFormatter

    figure, axes = plt.subplots(len(panels), 1, sharex=True, figsize=(10, 3.2 * len(panels)), squeeze=False)
    for axis, panel in zip(axes[:, 0], panels):
        for line in panel.lines:
            pairs = [(x, y) for x, y in zip(line.xs, line.ys) if y is not None]
            if not pairs:
                continue
            xs, ys = zip(*pairs)
            if line.style == "step":
                axis.step(xs, ys, where="post", label=line.label, linewidth=1.4)
            else:
                axis.plot(xs, ys, label=line.label, linewidth=1.2)
        for value, label in panel.marks:
            axis.axhline(value, color="grey", linestyle="--", linewidth=0.8, label=label)
        if panel.log_y:
            axis.set_yscale("log")
            axis.yaxis.set_major_formatter(ScalarFormatter())  # 20, 200, 2000 rather than 2×10¹
        axis.set_ylabel(panel.ylabel)
        axis.grid(True, alpha=0.3)
        if axis.get_legend_handles_labels()[0]:
            axis.legend(loc="upper right", fontsize="small")
    axes[-1, 0].set_xlabel(xlabel)
    figure.suptitle(title)
    figure.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    figure.savefig(path, dpi=100)
    plt.close(figure)
    return path
