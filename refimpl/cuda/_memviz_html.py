"""A self-contained HTML page for a memory snapshot: summary, segment map, timeline.

No scripts, styles or fonts are fetched: the page is one file with inline CSS and
inline SVG. Every string from the snapshot (file names, function names, states)
is escaped, so a hostile snapshot cannot inject markup.
"""

from __future__ import annotations

from html import escape
from typing import Any

from refimpl.cuda._allocator_stats import format_size
from refimpl.cuda._memviz import timeline

__all__ = ["render_html"]

_COLORS = {
    "active_allocated": "#4c72b0",
    "active_pending_free": "#dd8452",
    "inactive": "#e5e5e5",
}
_MAP_WIDTH = 900
_ROW_HEIGHT = 18
_MAX_SEGMENTS = 2000


def _block_title(segment: dict[str, Any], block: dict[str, Any]) -> str:
    lines = [
        f"{block['state']} at {block.get('address', 0):#x}",
        f"size {format_size(block['size'])} (requested {block.get('requested_size', 0)} B)",
        f"segment {segment['address']:#x}, stream {segment['stream']}",
    ]
    for frame in (block.get("frames") or [])[:8]:
        if isinstance(frame, dict):
            lines.append(f"{frame.get('name', '?')} {frame.get('filename', '?')}:{frame.get('line', '?')}")
    return escape("\n".join(lines))


def _segment_map(segments: list[dict[str, Any]]) -> str:
    shown = segments[:_MAX_SEGMENTS]
    height = max(1, len(shown)) * _ROW_HEIGHT + 4
    parts = [
        (f'<svg xmlns="http://www.w3.org/2000/svg" width="{_MAP_WIDTH + 260}" '
        f'height="{height}" role="img" aria-label="segment map">')
    ]
    for row, segment in enumerate(shown):
        y = row * _ROW_HEIGHT + 2
        total = sum(b["size"] for b in segment["blocks"]) or 1
        x = 0.0
        for block in segment["blocks"]:
            w = block["size"] * _MAP_WIDTH / total
            color = _COLORS.get(block["state"], "#999999")
            parts.append(
                f'<rect x="{x:.2f}" y="{y}" width="{max(w, 0.5):.2f}" height="{_ROW_HEIGHT - 4}" '
                f'fill="{color}" stroke="#ffffff" stroke-width="0.5">'
                f"<title>{_block_title(segment, block)}</title></rect>"
            )
            x += w
        label = escape(
            f"{segment['segment_type']} {format_size(segment['total_size'])} "
            f"stream {segment['stream']} @ {segment['address']:#x}"
        )
        parts.append(
            f'<text x="{_MAP_WIDTH + 8}" y="{y + _ROW_HEIGHT - 7}" font-size="11">{label}</text>'
        )
    parts.append("</svg>")
    if len(segments) > len(shown):
        parts.append(f"<p>{len(segments) - len(shown)} more segments not drawn.</p>")
    return "".join(parts)


def _timeline_svg(points: list[tuple[int, int, int]]) -> str:
    if not points:
        return "<p>No allocation history was recorded in this snapshot.</p>"
    width, height, pad = 900, 260, 40
    last = max(p[0] for p in points) or 1
    low = min(min(p[1], p[2]) for p in points)
    high = max(max(p[1], p[2]) for p in points)
    span = (high - low) or 1

    def path(column: int) -> str:
        coords = []
        for point in points:
            x = pad + point[0] * (width - 2 * pad) / last
            y = height - pad - (point[column] - low) * (height - 2 * pad) / span
            coords.append(f"{x:.1f},{y:.1f}")
        return " ".join(coords)

    return (
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
        'role="img" aria-label="timeline">'
        f'<rect x="{pad}" y="{pad}" width="{width - 2 * pad}" height="{height - 2 * pad}" '
        'fill="none" stroke="#cccccc"/>'
        f'<polyline fill="none" stroke="#dd8452" stroke-width="1.5" points="{path(2)}"/>'
        f'<polyline fill="none" stroke="#4c72b0" stroke-width="1.5" points="{path(1)}"/>'
        f'<text x="{pad}" y="{pad - 8}" font-size="11">{escape(format_size(high))} '
        f"(change since the history began; {len(points)} events)</text>"
        f'<text x="{pad}" y="{height - 12}" font-size="11">event 0 .. {last}</text>'
        "</svg>"
        '<p><span style="color:#4c72b0">&#9632;</span> allocated '
        '<span style="color:#dd8452">&#9632;</span> reserved</p>'
    )


def render_html(snapshot: dict[str, Any], summary: dict[str, Any], title: str) -> str:
    """The page for ``snapshot`` (``summary`` from ``_memviz.summarize``)."""
    frag = summary["fragmentation"]
    rows = [
        ("segments", str(summary["segments"])),
        ("reserved", format_size(summary["reserved_bytes"])),
        ("allocated", format_size(summary["allocated_bytes"])),
        ("requested", format_size(summary["requested_bytes"])),
        ("active", format_size(summary["active_bytes"])),
        ("blocks", ", ".join(f"{k} {v}" for k, v in summary["blocks"].items())),
        ("internal fragmentation", (f"{format_size(frag['internal_bytes'])} "
                                   f"({frag['internal_ratio']:.1%} of allocated)")),
        ("external fragmentation", (f"{format_size(frag['external_bytes'])} "
                                   f"({frag['external_ratio']:.1%} of free) against "
                                   f"{frag['target_request']} "
                                   f"{format_size(frag['target_request_bytes'])}")),
        ("history entries", str(summary["trace_entries"])),
    ]
    table = "".join(f"<tr><th>{escape(k)}</th><td>{escape(v)}</td></tr>" for k, v in rows)
    devices = sorted({s["device"] for s in snapshot["segments"]}) or [0]
    timelines = "".join(
        f"<h3>device {d}</h3>{_timeline_svg(timeline(snapshot, d))}" for d in devices
    )
    legend = " ".join(
        f'<span style="color:{c}">&#9632;</span> {escape(s)}' for s, c in _COLORS.items()
    )
    return (
        "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
        f"<title>{escape(title)}</title>"
        "<style>body{font-family:sans-serif;margin:24px}th{text-align:left;padding-right:16px}"
        "svg{display:block;margin:8px 0}</style></head><body>"
        f"<h1>{escape(title)}</h1><table>{table}</table>"
        f"<h2>Segment map</h2><p>{legend}</p>{_segment_map(snapshot['segments'])}"
        f"<h2>Timeline</h2>{timelines}</body></html>\n"
    )
