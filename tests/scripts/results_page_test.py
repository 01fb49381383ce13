#!/usr/bin/env python3
"""Renders a decodebench results page in headless Chromium and checks that every figure and the
results table can be seen.

  results_page_test.py PAGE.html                    # check an existing page
  results_page_test.py PAGE.html -- CMD [ARG...]    # run CMD first (it must write PAGE.html)
  results_page_test.py --self-test [SVG...]         # the checker against planted faults

The page contract (`decodebench report --format html --figure F.svg ...`): each figure is
`<figure class="db-figure" id="fig-<name>"><svg>...</svg><figcaption>...</figcaption></figure>`,
the results are `<table class="db-results">`, and nothing is loaded from outside the page.
Checked: nothing is loaded from outside the page (every src, href and url() is an in-page
anchor or a data: URL); at least one figure and exactly one results table; each figure's svg and
the table has a non-zero box that lies inside the page; the screenshot region each covers is not blank (more
than a sliver of its pixels differ from its dominant colour). With --expect-figures N the page
must hold N figures.

How: a copy of the page gets a script that writes the boxes as JSON into a hidden <pre>, read
back with `chromium --headless --dump-dom --virtual-time-budget`; the page itself is then
screenshot at the page's full height and the regions are cropped with Pillow.
Exit status: 0 pass, 1 a check failed, 2 bad usage, 77 no Chromium (CTest SKIP_RETURN_CODE).
"""
import argparse
import html
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile

EXIT_FAIL, EXIT_USAGE, EXIT_SKIP = 1, 2, 77
WIDTH = 1400
MAX_HEIGHT = 16000  # Chromium's screenshot limit is far above this; a page this tall is broken
NOT_BLANK_FRACTION = 0.005  # of a region's pixels that differ from its dominant colour
NOT_BLANK_MIN_PIXELS = 50
HERE = os.path.dirname(os.path.abspath(__file__))
PLOT = os.path.join(os.path.dirname(os.path.dirname(HERE)), "scripts", "plot.py")
SELF_TEST_REPORT = os.path.join(HERE, "fixtures", "cpu-sweep.json")
CHROMIUM_NAMES = ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable",
                  "chrome")

PROBE = """<pre id="db-probe-boxes" style="display:none"></pre>
<script>
(function () {
  function box(el) {
    var r = el.getBoundingClientRect();
    return {x: r.left + window.scrollX, y: r.top + window.scrollY, w: r.width, h: r.height};
  }
  function probe() {
    var out = {figures: [], tables: [],
               page: {w: document.documentElement.scrollWidth,
                      h: document.documentElement.scrollHeight}};
    document.querySelectorAll("figure.db-figure").forEach(function (f, i) {
      var svg = f.querySelector("svg");
      out.figures.push({id: f.id || ("figure " + i), svg: svg ? box(svg) : null});
    });
    document.querySelectorAll("table.db-results").forEach(function (t) {
      out.tables.push(box(t));
    });
    document.getElementById("db-probe-boxes").textContent = JSON.stringify(out);
  }
  if (document.readyState === "complete") probe(); else window.addEventListener("load", probe);
})();
</script>
"""


class Failed(Exception):
    pass


def find_chromium():
    env = os.environ.get("CHROMIUM")
    if env:
        return env if shutil.which(env) else None
    for name in CHROMIUM_NAMES:
        path = shutil.which(name)
        if path:
            return path
    return None


def chromium(binary, profile, args, timeout=120):
    cmd = [binary, "--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars",
           "--force-device-scale-factor=1", "--no-first-run", "--disable-extensions",
           f"--user-data-dir={profile}"] + args
    try:
        done = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        raise Failed(f"chromium did not finish within {timeout} s: {' '.join(cmd)}") from None
    if done.returncode != 0:
        raise Failed(f"chromium exit status {done.returncode}: {' '.join(cmd)}\n"
                     f"{done.stderr[-2000:]}")
    return done.stdout


def measure(binary, page, work, height):
    """The boxes of the page laid out in a WIDTH x height window."""
    with open(page, encoding="utf-8") as f:
        text = f.read()
    probed = os.path.join(os.path.dirname(os.path.abspath(page)), ".db-probe-" +
                          os.path.basename(page))
    # Beside the original, so relative references (there should be none) resolve the same.
    at = text.lower().rfind("</body>")
    with open(probed, "w", encoding="utf-8") as f:
        f.write(text[:at] + PROBE + text[at:] if at >= 0 else text + PROBE)
    try:
        dom = chromium(binary, os.path.join(work, "profile"),
                       ["--virtual-time-budget=5000", f"--window-size={WIDTH},{height}",
                        "--dump-dom", "file://" + os.path.abspath(probed)])
    finally:
        os.remove(probed)
    m = re.search(r'<pre id="db-probe-boxes"[^>]*>(.*?)</pre>', dom, re.S)
    if not m or not m.group(1).strip():
        raise Failed("the probe script did not run (no boxes in chromium's --dump-dom output)")
    return json.loads(html.unescape(m.group(1)))


def external_references(text):
    """The src/href/url() targets that are neither in-page anchors nor data: URLs."""
    refs = re.findall(r"""(?:\bsrc|\bhref)\s*=\s*["']([^"']*)["']""", text, re.I)
    refs += re.findall(r"""url\(\s*["']?([^"')]*)""", text, re.I)
    return sorted({r for r in refs if not r.startswith(("#", "data:"))})


def not_blank(image, box):
    """(ok, fraction): whether enough pixels of the region differ from its dominant colour."""
    region = image.crop((round(box["x"]), round(box["y"]), round(box["x"] + box["w"]),
                         round(box["y"] + box["h"]))).convert("RGB")
    pixels = region.width * region.height
    if pixels == 0:
        return False, 0.0
    colors = region.getcolors(maxcolors=pixels)
    dominant = max(colors)[0]
    other = pixels - dominant
    return (other >= NOT_BLANK_MIN_PIXELS and other / pixels >= NOT_BLANK_FRACTION,
            other / pixels)


def check_page(page, expect_figures=None, log=print):
    """Raises Failed naming every problem; returns the boxes on success."""
    from PIL import Image

    binary = find_chromium()
    if binary is None:
        raise Failed("no Chromium found")
    if not os.path.isfile(page):
        raise Failed(f"{page}: no such page")
    with tempfile.TemporaryDirectory(prefix="db-page-") as work:
        boxes = measure(binary, page, work, 1000)
        height = min(MAX_HEIGHT, max(1000, int(boxes["page"]["h"]) + 1))
        boxes = measure(binary, page, work, height)  # the layout the screenshot will have
        shot = os.path.join(work, "page.png")
        chromium(binary, os.path.join(work, "profile"),
                 [f"--window-size={WIDTH},{height}", f"--screenshot={shot}",
                  "file://" + os.path.abspath(page)])
        image = Image.open(shot)
        image.load()
    problems = []
    with open(page, encoding="utf-8") as f:
        external = external_references(f.read())
    if external:
        problems.append("the page loads from outside itself: " + ", ".join(external[:5]))
    page_w, page_h = boxes["page"]["w"], boxes["page"]["h"]
    if page_h > MAX_HEIGHT:
        problems.append(f"the page is {page_h} px tall, more than the {MAX_HEIGHT} px checked")
    figures, tables = boxes["figures"], boxes["tables"]
    if not figures:
        problems.append("no figure.db-figure in the page")
    if expect_figures is not None and len(figures) != expect_figures:
        problems.append(f"{len(figures)} figures in the page, expected {expect_figures}")
    if len(tables) != 1:
        problems.append(f"{len(tables)} table.db-results in the page, expected 1")
    items = [(f"{f['id']} svg", f["svg"]) for f in figures] + [
        ("table.db-results", t) for t in tables]
    for name, box in items:
        if box is None:
            problems.append(f"{name}: the figure holds no <svg>")
            continue
        where = f"{box['w']:.0f}x{box['h']:.0f} at ({box['x']:.0f},{box['y']:.0f})"
        if box["w"] < 1 or box["h"] < 1:
            problems.append(f"{name}: not visible, its box is {where}")
            continue
        if (box["x"] < -0.5 or box["y"] < -0.5 or box["x"] + box["w"] > page_w + 0.5
                or box["y"] + box["h"] > page_h + 0.5):
            problems.append(f"{name}: {where} is not inside the {page_w}x{page_h} page")
            continue
        if box["x"] + box["w"] > image.width + 0.5 or box["y"] + box["h"] > image.height + 0.5:
            problems.append(f"{name}: {where} is outside the {image.width}x{image.height} "
                            "screenshot")
            continue
        ok, fraction = not_blank(image, box)
        log(f"  {name}: {where}, {100 * fraction:.1f} % of its pixels drawn")
        if not ok:
            problems.append(f"{name}: its region {where} is blank in the screenshot "
                            f"({100 * fraction:.2f} % of its pixels differ from the background)")
    if problems:
        raise Failed("\n".join(problems))
    return boxes


# ---- self-test: a stand-in page following the contract, and planted faults --------------------

def stand_in_page(svgs, extra_style="", figure_style=None, svg_override=None, table=True):
    """A page shaped like `decodebench report --format html`: figures inline, then a table."""
    figure_style = figure_style or {}
    svg_override = svg_override or {}
    parts = ["<!DOCTYPE html><html><head><meta charset='utf-8'><title>decodebench results</title>",
             "<style>body{font-family:sans-serif;margin:16px} "
             "figure.db-figure svg{max-width:100%;height:auto} "
             "table.db-results{border-collapse:collapse} "
             f"table.db-results td,th{{border:1px solid #888;padding:2px 6px}} {extra_style}"
             "</style>"
             "</head><body><h1>decodebench results (stand-in page)</h1>"]
    for path in svgs:
        name = os.path.splitext(os.path.basename(path))[0]
        if name in svg_override:
            svg = svg_override[name]
        else:
            with open(path, encoding="utf-8") as f:
                svg = f.read()
            svg = svg[svg.index("<svg"):]  # inline: no XML prolog or doctype
        style = f" style='{figure_style[name]}'" if name in figure_style else ""
        parts.append(f"<figure class='db-figure' id='fig-{name}'{style}>{svg}"
                     f"<figcaption>{name}</figcaption></figure>")
    if table:
        parts.append("<table class='db-results'><tr><th>kernel</th><th>batch</th><th>GB/s</th></tr>"
                     + "".join(f"<tr><td>cpu</td><td>{b}</td><td>{10 * b}</td></tr>"
                               for b in (1, 2, 4)) + "</table>")
    parts.append("</body></html>")
    return "".join(parts)


def self_test_svgs(work):
    """Two of plot.py's figures of the CPU fixture: real SVGs to build the stand-in pages of."""
    prefix = os.path.join(work, "cpu")
    cmd = [sys.executable, PLOT, SELF_TEST_REPORT, "--out-prefix", prefix, "--only",
           "roofline,ceiling-heatmap"]
    done = subprocess.run(cmd, capture_output=True, text=True)
    if done.returncode != 0:
        raise Failed(f"{' '.join(cmd)} failed: {done.stderr.strip()}")
    return [f"{prefix}-roofline.svg", f"{prefix}-ceiling-heatmap.svg"]


def self_test(svgs):
    names = [os.path.splitext(os.path.basename(p))[0] for p in svgs]
    first = names[0]
    empty_svg = "<svg xmlns='http://www.w3.org/2000/svg' width='640' height='480'></svg>"
    cases = [  # (what, page arguments, whether the checker must pass it)
        ("clean stand-in page", {}, True),
        (f"{first}: an svg with nothing drawn", {"svg_override": {first: empty_svg}}, False),
        (f"{first}: hidden (display:none)", {"figure_style": {first: "display:none"}}, False),
        (f"{first}: moved off the page", {"figure_style": {
            first: "position:absolute;left:-5000px"}}, False),
        ("no results table", {"table": False}, False),
        ("an external stylesheet", {"extra_style": "@import url('https://example.com/a.css');"},
         False),
        ("the table drawn white on white", {"extra_style":
                                            "table.db-results,table.db-results *{color:#fff;"
                                            "border-color:#fff !important}"}, False),
    ]
    failures = []
    with tempfile.TemporaryDirectory(prefix="db-page-selftest-") as work:
        for what, kwargs, should_pass in cases:
            page = os.path.join(work, "page.html")
            with open(page, "w", encoding="utf-8") as f:
                f.write(stand_in_page(svgs, **kwargs))
            try:
                check_page(page, expect_figures=len(svgs) if should_pass else None,
                           log=lambda s: None)
                passed, why = True, ""
            except Failed as e:
                passed, why = False, str(e)
            verdict = "ok" if passed == should_pass else "WRONG"
            print(f"self-test {verdict}: {what}: checker {'passed' if passed else 'failed'}"
                  + (f" ({why.splitlines()[0]})" if why else ""))
            if passed != should_pass:
                failures.append(what + (f": {why}" if why else ""))
    if failures:
        raise Failed("the checker got these planted cases wrong:\n  " + "\n  ".join(failures))


def main(argv=None):
    argv = sys.argv[1:] if argv is None else argv
    command = []
    if "--" in argv:
        at = argv.index("--")
        argv, command = argv[:at], argv[at + 1:]
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("page", nargs="*", help="the page (HTML); with --self-test, the SVGs to "
                    "build stand-in pages of (default: plot.py's of fixtures/cpu-sweep.json)")
    ap.add_argument("--expect-figures", type=int, help="the number of figures the page holds")
    ap.add_argument("--self-test", action="store_true",
                    help="check the checker on stand-in pages built from the given SVGs")
    args = ap.parse_args(argv)
    if find_chromium() is None:
        tried = (f"$CHROMIUM={os.environ['CHROMIUM']}" if os.environ.get("CHROMIUM")
                 else ", ".join(CHROMIUM_NAMES) + " on PATH")
        print(f"results_page_test: SKIP: no Chromium found (tried {tried}); "
              "scripts/bootstrap.sh installs Debian's chromium")
        return EXIT_SKIP
    try:
        if args.self_test:
            if command:
                ap.error("--self-test takes no command")
            with tempfile.TemporaryDirectory(prefix="db-page-svgs-") as work:
                self_test(args.page or self_test_svgs(work))
            print("results_page_test: self-test passed")
            return 0
        if len(args.page) != 1:
            ap.error("give one page (PAGE.html), optionally followed by -- COMMAND")
        page = args.page[0]
        if command:
            if os.path.exists(page):
                os.remove(page)  # a page left from an earlier run must not pass for this one
            print("results_page_test: running " + " ".join(command))
            done = subprocess.run(command)
            if done.returncode != 0:
                raise Failed(f"the command that writes {page} failed with exit status "
                             f"{done.returncode}")
        print(f"results_page_test: {page}")
        boxes = check_page(page, args.expect_figures)
        print(f"results_page_test: pass: {len(boxes['figures'])} figures and the table visible")
        return 0
    except Failed as e:
        print(f"results_page_test: FAIL: {e}", file=sys.stderr)
        return EXIT_FAIL


if __name__ == "__main__":
    sys.exit(main())
