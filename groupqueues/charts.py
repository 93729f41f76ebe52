"""Server-side SVG line charts for the admin dashboard: no JavaScript, no
library, nothing fetched, so the charts render offline and in any browser.
Pure functions of their input (no Django, no database)."""

from __future__ import annotations

from dataclasses import dataclass
from html import escape

WIDTH = 560
HEIGHT = 170
PAD_LEFT = 52
PAD_RIGHT = 10
PAD_TOP = 22
PAD_BOTTOM = 22

# One colour per series name (stable across charts); unknown names cycle.
COLOURS = {
    "ready": "#2b7bb9", "delayed": "#9467bd", "claimed": "#ff7f0e", "dead": "#d62728",
    "enqueued": "#2ca02c", "acked": "#17becf",
}  # fmt: skip
FALLBACK = ("#8c564b", "#e377c2", "#7f7f7f", "#bcbd22")


@dataclass(frozen=True)
class Series:
    """A named line: ``points`` are (x, y) with x in seconds from the window's
    start, in increasing x."""

    name: str
    points: list[tuple[float, float]]


def line_chart(*, title: str, series: list[Series], span: float, unit: str = "") -> str:
    """An ``<svg class="chart">`` with one ``<polyline class="series"
    data-series="NAME" data-points="N">`` per series that has points, a
    legend, the y axis' maximum and the time labels; "no samples yet" when
    nothing has points. ``span``: the window's length in seconds."""
    drawn = [s for s in series if s.points]
    top = max((y for s in drawn for _, y in s.points), default=0.0)
    top = _nice(top)
    plot_w = WIDTH - PAD_LEFT - PAD_RIGHT
    plot_h = HEIGHT - PAD_TOP - PAD_BOTTOM
    parts = [
        f'<svg class="chart" xmlns="http://www.w3.org/2000/svg" width="{WIDTH}" '
        f'height="{HEIGHT}" viewBox="0 0 {WIDTH} {HEIGHT}" role="img" '
        f'aria-label="{escape(title)}" data-title="{escape(title)}">',
        f"<title>{escape(title)}</title>",
        f'<text x="{PAD_LEFT}" y="14" font-size="12" font-weight="bold">{escape(title)}</text>',
        f'<rect x="{PAD_LEFT}" y="{PAD_TOP}" width="{plot_w}" height="{plot_h}" '
        'fill="none" stroke="#ccc"/>',
        _label(PAD_LEFT - 4, PAD_TOP + 4, f"{_fmt(top)}{unit}", "end"),
        _label(PAD_LEFT - 4, PAD_TOP + plot_h, "0", "end"),
        _label(PAD_LEFT, HEIGHT - 6, f"-{_duration(span)}", "start"),
        _label(WIDTH - PAD_RIGHT, HEIGHT - 6, "now", "end"),
    ]
    if not drawn:
        parts.append(_label(PAD_LEFT + plot_w / 2, PAD_TOP + plot_h / 2, "no samples yet",
                            "middle", cls="empty"))  # fmt: skip
    for i, s in enumerate(drawn):
        colour = COLOURS.get(s.name, FALLBACK[i % len(FALLBACK)])
        coords = " ".join(
            f"{PAD_LEFT + plot_w * min(max(x / span, 0.0), 1.0):.1f},"
            f"{PAD_TOP + plot_h - (plot_h * y / top if top else 0.0):.1f}"
            for x, y in s.points
        )
        parts.append(
            f'<polyline class="series" data-series="{escape(s.name)}" '
            f'data-points="{len(s.points)}" data-last="{_fmt(s.points[-1][1])}" fill="none" '
            f'stroke="{colour}" stroke-width="1.5" points="{coords}"/>'
        )
        lx = PAD_LEFT + 150 + i * 75
        parts.append(f'<rect x="{lx}" y="6" width="10" height="10" fill="{colour}"/>')
        parts.append(_label(lx + 13, 15, s.name, "start"))
    parts.append("</svg>")
    return "".join(parts)


def _label(x: float, y: float, text: str, anchor: str, cls: str = "") -> str:
    klass = f' class="{cls}"' if cls else ""
    return (
        f'<text{klass} x="{x:.1f}" y="{y:.1f}" font-size="10" fill="#555" '
        f'text-anchor="{anchor}">{escape(text)}</text>'
    )


def _nice(value: float) -> float:
    """A round upper bound for the y axis (1, 2 or 5 times a power of ten)."""
    if value <= 0:
        return 0.0
    step = 1.0
    while step * 10 <= value:
        step *= 10
    for m in (1, 2, 5, 10):
        if value <= m * step:
            return m * step
    return value  # pragma: no cover - the loop always returns


def _fmt(value: float) -> str:
    return f"{value:.0f}" if value >= 10 or value == int(value) else f"{value:.1f}"


def _duration(seconds: float) -> str:
    if seconds >= 86400:
        return f"{seconds / 86400:.0f}d"
    if seconds >= 3600:
        return f"{seconds / 3600:.0f}h"
    return f"{seconds / 60:.0f}m"
