"""Server-side plots as inline SVG markup (no script, no image library).

Examples:
    >>> svg = line_svg([("2026-12-01", 0.5), ("2026-12-02", 0.75)], label="hit rate")
    >>> svg.startswith("<svg") and "polyline" in svg
    True
"""

from __future__ import annotations

from markupsafe import Markup, escape

__all__ = ["line_svg"]


def line_svg(
    points: list[tuple[str, float]],
    *,
    label: str,
    percent: bool = False,
    width: int = 420,
    height: int = 140,
) -> Markup:
    """A line plot of ``(x label, value)`` points, first and last x labelled."""
    pad_l, pad_r, pad_t, pad_b = 48, 10, 18, 22
    w, h = width - pad_l - pad_r, height - pad_t - pad_b
    title = f'<text x="{pad_l}" y="12" class="t">{escape(label)}</text>'
    if not points:
        body = f'<text x="{pad_l}" y="{pad_t + h // 2}" class="t">no queries yet</text>'
        return Markup(_frame(width, height, label, title + body))
    values = [v for _, v in points]
    top = 1.0 if percent else max(max(values), 1.0)
    low = 0.0 if percent else min(min(values), 0.0)
    span = (top - low) or 1.0
    n = len(points)

    def xy(i: int, v: float) -> tuple[float, float]:
        x = pad_l + (w * i / (n - 1) if n > 1 else w / 2)
        return x, pad_t + h - (v - low) / span * h

    coords = " ".join(f"{x:.1f},{y:.1f}" for x, y in (xy(i, v) for i, v in enumerate(values)))
    dots = "".join(
        f'<circle cx="{x:.1f}" cy="{y:.1f}" r="2.5"/>'
        for x, y in (xy(i, v) for i, v in enumerate(values))
    )

    def fmt(v: float) -> str:
        return f"{v:.0%}" if percent else f"{v:,.0f}"

    axis = (
        f'<line x1="{pad_l}" y1="{pad_t + h}" x2="{pad_l + w}" y2="{pad_t + h}" class="a"/>'
        f'<line x1="{pad_l}" y1="{pad_t}" x2="{pad_l}" y2="{pad_t + h}" class="a"/>'
        f'<text x="{pad_l - 4}" y="{pad_t + 4}" class="y">{fmt(top)}</text>'
        f'<text x="{pad_l - 4}" y="{pad_t + h}" class="y">{fmt(low)}</text>'
        f'<text x="{pad_l}" y="{height - 6}" class="t">{escape(points[0][0])}</text>'
        f'<text x="{pad_l + w}" y="{height - 6}" class="e">{escape(points[-1][0])}</text>'
    )
    body = f'{axis}<polyline points="{coords}" class="l"/>{dots}'
    return Markup(_frame(width, height, label, title + body))


def _frame(width: int, height: int, label: str, inner: str) -> str:
    return (
        f'<svg xmlns="http://www.w3.org/2000/svg" class="plot" width="{width}" '
        f'height="{height}" viewBox="0 0 {width} {height}" role="img" '
        f'aria-label="{escape(label)}">{inner}</svg>'
    )
