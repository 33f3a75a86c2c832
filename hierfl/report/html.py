"""report.html: the report model as one self-contained file (figures embedded as base64 PNG, no
external resources) readable offline. A small inline script checks, once the page has loaded,
that every figure decoded to a non-zero size and is shown at (nearly) its intended width, and
that no script error occurred; it writes the result into the page (#render-check,
data-status="ok"), which the headless-browser test reads back."""
from __future__ import annotations

import base64
import html
import os

from .model import Report, Section

CSS = """
body{font-family:-apple-system,"Segoe UI",Roboto,"DejaVu Sans",Arial,sans-serif;color:#222;
 max-width:1320px;margin:24px auto;padding:0 20px;line-height:1.45;font-size:15px}
h1{font-size:1.6em;margin-bottom:.2em}h2{margin-top:1.8em;border-bottom:1px solid #ddd;
 padding-bottom:.2em;font-size:1.3em}
table{border-collapse:collapse;margin:.6em 0;font-size:.9em}
th,td{border:1px solid #d6d6d6;padding:4px 8px;text-align:right;vertical-align:top}
th{background:#f3f3f3}td:first-child,th:first-child{text-align:left}
table.kv td{text-align:left}table.kv td:first-child{font-weight:600;white-space:nowrap}
.figs{display:flex;flex-wrap:wrap;gap:18px}
figure{margin:0;max-width:100%}
figure img{display:block;width:100%;height:auto;border:1px solid #eee}
figcaption{font-size:.88em;color:#444;margin-top:.2em}
figcaption a{color:#666}
nav{font-size:.9em;color:#555}nav a{margin-right:1em}
.swatch{display:inline-block;width:.9em;height:.9em;border-radius:2px;margin-right:.35em;
 vertical-align:-1px}
#render-check{font-size:.8em;color:#777;margin-top:2.5em}
#render-check.bad{color:#b00020;font-weight:600}
@media print{nav{display:none}figure{break-inside:avoid}}
"""

SCRIPT = """
(function () {
  var errors = [];
  window.addEventListener('error', function (e) {
    errors.push(String((e && e.message) || (e && e.target && e.target.alt) || 'error'));
  }, true);
  window.addEventListener('load', function () {
    var imgs = document.images, ok = 0, bad = [], small = [];
    var avail = document.body.clientWidth;
    for (var i = 0; i < imgs.length; i++) {
      var im = imgs[i];
      if (im.complete && im.naturalWidth > 0 && im.naturalHeight > 0) { ok++; }
      else { bad.push(im.alt || ('#' + i)); }
      var want = Math.min(parseInt(im.getAttribute('width') || '0', 10), avail) * 0.9;
      if (im.getBoundingClientRect().width < want) { small.push(im.alt || ('#' + i)); }
    }
    var el = document.getElementById('render-check');
    var good = ok === imgs.length && errors.length === 0 && small.length === 0;
    el.setAttribute('data-small', String(small.length));
    el.setAttribute('data-images', String(imgs.length));
    el.setAttribute('data-loaded', String(ok));
    el.setAttribute('data-errors', String(errors.length));
    el.setAttribute('data-status', good ? 'ok' : 'bad');
    el.className = good ? 'ok' : 'bad';
    el.textContent = 'Render check: ' + ok + ' of ' + imgs.length + ' figures decoded' +
      (bad.length ? '; not decoded: ' + bad.join(', ') : '') +
      (small.length ? '; shown too small: ' + small.join(', ') : '') +
      (errors.length ? '; errors: ' + errors.join('; ') : '') + '.';
  });
})();
"""

TABLE_FILES = (' Machine-readable: <a href="table.csv">table.csv</a>, '
               '<a href="metrics_all.csv">metrics_all.csv</a>.')
CSS_PX_PER_PNG_PX = 96 / 150   # figures are saved at 150 dpi; shown at their print size


def _figure(path: str, caption: str) -> str:
    """The PNG inline, shown at its print size (so every figure's text has the same size), with
    its caption wrapped to the figure's width."""
    with open(path, "rb") as fh:
        raw = fh.read()
    px = int.from_bytes(raw[16:20], "big") if raw[:8] == b"\x89PNG\r\n\x1a\n" else 0
    width = round(px * CSS_PX_PER_PNG_PX)
    data = base64.b64encode(raw).decode("ascii")
    base = os.path.basename(path)
    svg = os.path.splitext(base)[0] + ".svg"
    e = html.escape
    style = f' style="width:{width}px"' if width else ""
    size = f' width="{width}"' if width else ""
    return (f'<figure{style}><img src="data:image/png;base64,{data}"{size} alt="{e(caption)}">'
            f'<figcaption>{e(caption)} — <a href="{e(base)}">PNG</a> · '
            f'<a href="{e(svg)}">SVG</a>'
            "</figcaption></figure>")


def _table(head: list[str], rows: list[list[str]], cls: str = "") -> str:
    out = [f'<table{f" class={chr(34)}{cls}{chr(34)}" if cls else ""}>']
    if any(head):
        out.append("<tr>" + "".join(f"<th>{html.escape(h)}</th>" for h in head) + "</tr>")
    for r in rows:
        out.append("<tr>" + "".join(f"<td>{html.escape(c)}</td>" for c in r) + "</tr>")
    out.append("</table>")
    return "\n".join(out)


def _section(sec: Section) -> list[str]:
    e = html.escape
    body = [f'<h2 id="{sec.key}">{e(sec.name)}</h2>']
    if sec.facts:
        body.append(_table(["", ""], [[k, v] for k, v in sec.facts], "kv"))
    if sec.head:
        body.append(_table(sec.head, sec.rows))
    if sec.text:
        body.append(f"<p>{e(sec.text, quote=False)}{TABLE_FILES if sec.key == 'table' else ''}"
                    "</p>")
    if sec.notes is not None:
        body.append("<ul>" + "".join(f"<li>{e(n)}</li>" for n in sec.notes or [sec.empty])
                    + "</ul>")
    if sec.figures:
        body.append('<div class="figs">')
        body += [_figure(f.path, f.caption) for f in sec.figures]
        body.append("</div>")
    return body


def render_html(rep: Report) -> str:
    e = html.escape
    title = f"hierfl report{': ' + rep.title if rep.title else ''}"
    shown = rep.shown
    body = [f"<h1>{e(title)}</h1>"]
    body += [f"<p>{e(p)}</p>" for p in rep.intro]
    body.append("<nav>" + "".join(f'<a href="#{s.key}">{e(s.name)}</a>' for s in shown)
                + "</nav>")
    for sec in shown:
        body += _section(sec)
    body.append('<p id="render-check" data-status="pending">Render check: pending (needs '
                'JavaScript).</p>')
    return ("<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n"
            "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n"
            f"<title>{e(title)}</title>\n<link rel=\"icon\" href=\"data:,\">\n"
            f"<style>{CSS}</style>\n<script>{SCRIPT}</script>\n</head>\n<body>\n"
            + "\n".join(body) + "\n</body>\n</html>\n")
