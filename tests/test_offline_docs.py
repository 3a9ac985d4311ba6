"""Tests of docs/check_offline.py, the check that the built docs work offline."""

import importlib.util
import struct
import sys
import zlib
from importlib.util import find_spec
from pathlib import Path

import pytest

_PATH = Path(__file__).resolve().parents[1] / "docs" / "check_offline.py"
_SPEC = importlib.util.spec_from_file_location("check_offline", _PATH)
check_offline = importlib.util.module_from_spec(_SPEC)
sys.modules[_SPEC.name] = check_offline
_SPEC.loader.exec_module(check_offline)


def _site(tmp_path, files):
    """Write a small site: ``files`` maps relative paths to their text."""
    files = {"index.html": "<html><body><p>home</p></body></html>", **files}
    for name, text in files.items():
        path = tmp_path / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
    return tmp_path


def _page(head="", body=""):
    return f"<!DOCTYPE html><html><head>{head}</head><body>{body}</body></html>"


@pytest.mark.parametrize(
    "head, body, url",
    [
        ('<script src="https://cdn.example.org/lib.js"></script>', "", "lib.js"),
        ('<script src="//cdn.example.org/proto.js"></script>', "", "proto.js"),
        (
            '<link rel="stylesheet" href="http://cdn.example.org/theme.css">',
            "",
            "theme.css",
        ),
        (
            '<link rel="preload" as="font" href="https://fonts.example.org/f.woff2">',
            "",
            "f.woff2",
        ),
        ("<style>@import 'https://fonts.example.org/css?family=A';</style>", "", "css"),
        ("", '<img src="//img.example.org/logo.png">', "logo.png"),
        ("", '<img srcset="a.png 1x, https://img.example.org/b.png 2x">', "b.png"),
        ("", '<iframe src="https://player.example.org/embed"></iframe>', "embed"),
        ("", '<div style="background: url(https://img.example.org/bg.jpg)">', "bg.jpg"),
        (
            '<script>var s = "https://cdn.jsdelivr.net/npm/mathjax@3/tex.js";</script>',
            "",
            "mathjax@3",
        ),
    ],
)
def test_static_check_flags_remote_loads_of_pages(tmp_path, head, body, url):
    site = _site(tmp_path, {"guide/page.html": _page(head, body), "guide/a.png": ""})
    problems = check_offline.find_remote_resources(site)
    assert len(problems) == 1
    assert problems[0].startswith("guide/page.html: ")
    assert url in problems[0]


def test_static_check_flags_remote_loads_of_stylesheets(tmp_path):
    css = """
    /* url(https://commented.example.org/out.woff2) is no load */
    @import url("https://fonts.example.org/css2?family=Roboto");
    @import '//cdn.example.org/base.css';
    @font-face { font-family: F; src: url(https://fonts.example.org/f.woff2); }
    .icon { background: url("data:image/svg+xml,<svg xmlns='http://www.w3.org/'/>"); }
    .logo { background: url(../img/logo.png); }
    """
    site = _site(tmp_path, {"_static/site.css": css, "img/logo.png": ""})
    problems = check_offline.find_remote_resources(site)
    assert [problem.split(" remote ")[1] for problem in problems] == [
        "https://fonts.example.org/css2?family=Roboto",
        "//cdn.example.org/base.css",
        "https://fonts.example.org/f.woff2",
    ]
    assert all(problem.startswith("_static/site.css: ") for problem in problems)


def test_static_check_flags_scripts_that_load_from_a_cdn(tmp_path):
    script = """
    // Documentation: https://developer.mozilla.org/en-US/docs/Web/API
    const ns = "http://www.w3.org/2000/svg";
    const help = "https://docs.example.org/guide.html";
    const font = "https://fonts.example.org/icons.woff2";
    const base = "https://unpkg.com/lib@" + version + "/dist/";
    const pattern = /\\/\\/[a-z]+/;
    """
    site = _site(tmp_path, {"_static/app.js": script})
    problems = check_offline.find_remote_resources(site)
    assert problems == [
        "_static/app.js: script loads remote https://fonts.example.org/icons.woff2",
        "_static/app.js: script loads remote https://unpkg.com/lib@",
    ]


def test_static_check_passes_links_and_local_files(tmp_path):
    page = _page(
        head=(
            '<link rel="stylesheet" href="../_static/site.css?v=1">'
            '<link rel="canonical" href="https://docs.example.org/page.html">'
            '<script defer src="../_static/mathjax/tex-chtml.js"></script>'
        ),
        body=(
            '<a href="https://scikit-learn.org/stable/">scikit-learn</a>'
            '<a href="//example.org/">another site</a>'
            '<img src="../_images/plot.png" alt="a plot">'
            '<img src="data:image/png;base64,iVBORw0KGgo=" alt="inline">'
        ),
    )
    site = _site(
        tmp_path,
        {
            "guide/page.html": page,
            "_static/site.css": "body { color: black; }",
            "_static/mathjax/tex-chtml.js": "",
            "_images/plot.png": "",
        },
    )
    assert check_offline.find_remote_resources(site) == []


def test_static_check_flags_missing_local_files(tmp_path):
    page = _page('<script src="../_static/mathjax/tex-chtml.js"></script>')
    site = _site(tmp_path, {"guide/page.html": page})
    assert check_offline.find_remote_resources(site) == [
        "guide/page.html: <script> names missing file ../_static/mathjax/tex-chtml.js"
    ]


def test_static_check_passes_the_theme_templates_in_static(tmp_path):
    # pydata-sphinx-theme copies a Jinja template into _static: its URLs are
    # unrendered template code, not files.
    template = '<link href="{{ pathto(\'_static/theme.css\', 1) }}" rel="stylesheet">'
    site = _site(tmp_path, {"_static/webpack-macros.html": template})
    assert check_offline.find_remote_resources(site) == []


def test_static_check_passes_only_the_unused_mathjax_defaults(tmp_path):
    # The speech-rule-engine defaults are allowed in MathJax's own files only.
    script = 'r.url="https://cdn.jsdelivr.net/npm/speech-rule-engine@"+r.VERSION'
    site = _site(
        tmp_path, {"_static/mathjax/tex-chtml.js": script, "_static/other.js": script}
    )
    assert check_offline.find_remote_resources(site) == [
        "_static/other.js: script loads remote "
        "https://cdn.jsdelivr.net/npm/speech-rule-engine@"
    ]


@pytest.mark.parametrize(
    "url, remote",
    [
        ("https://cdn.example.org/a.js", True),
        ("HTTP://cdn.example.org/a.js", True),
        ("//cdn.example.org/a.js", True),
        (" wss://example.org/socket", True),
        ("_static/a.js", False),
        ("../_static/a.js?v=1", False),
        ("/_static/a.js", False),
        ("data:font/woff2;base64,AAAA", False),
        ("#section", False),
        ("", False),
    ],
)
def test_is_remote(url, remote):
    assert check_offline.is_remote(url) is remote


def test_math_pages_counts_the_formulas(tmp_path):
    page = _page(
        body=(
            '<p><span class="math notranslate nohighlight">\\(K(u)\\)</span> and '
            '<span class="math notranslate nohighlight">\\(h\\)</span></p>'
            '<div class="math notranslate nohighlight">\n\\[a\\]\n\n\\[b\\]</div>'
            "<pre>not math: \\(x\\)</pre>"
        )
    )
    site = _site(tmp_path, {"guide/kernels.html": page})
    assert check_offline.math_pages(site) == {"guide/kernels.html": 4}


def test_formula_page_loads_mathjax_as_the_site_does(tmp_path):
    page = _page(
        '<script>window.MathJax = {tex: {tags: "ams"}};</script>'
        '<script src="../_static/doctools.js"></script>'
        '<script defer="defer" src="../_static/mathjax/tex-chtml.js"></script>'
    )
    site = _site(tmp_path, {"guide/kernels.html": page})
    text = check_offline.formula_page(site, "guide/kernels.html")
    assert '<script>window.MathJax = {tex: {tags: "ams"}};</script>' in text
    assert '<script defer="defer" src="/_static/mathjax/tex-chtml.js"></script>' in text
    assert "doctools" not in text
    assert check_offline.FORMULA in text


def _png(gray, filter_type=0):
    """Encode rows of gray levels as an RGB PNG with one filter on every row."""
    height, width = len(gray), len(gray[0])
    raw, previous = bytearray(), bytes(3 * width)
    for row in gray:
        line = bytes(value for value in row for _ in range(3))
        out = bytearray()
        for x, value in enumerate(line):
            left = line[x - 3] if x >= 3 else 0
            up = previous[x]
            corner = previous[x - 3] if x >= 3 else 0
            if filter_type == 4:
                estimate = left + up - corner
                pa, pb, pc = (abs(estimate - v) for v in (left, up, corner))
                best = left if pa <= pb and pa <= pc else up if pb <= pc else corner
            else:
                best = (0, left, up, (left + up) // 2)[filter_type]
            out.append((value - best) & 255)
        raw += bytes([filter_type]) + out
        previous = line

    def chunk(kind, body):
        crc = zlib.crc32(kind + body) & 0xFFFFFFFF
        return struct.pack(">I", len(body)) + kind + body + struct.pack(">I", crc)

    header = struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)
    return (
        b"\x89PNG\r\n\x1a\n"
        + chunk(b"IHDR", header)
        + chunk(b"IDAT", zlib.compress(bytes(raw)))
        + chunk(b"IEND", b"")
    )


@pytest.mark.parametrize("filter_type", [0, 1, 2, 3, 4])
def test_read_png_decodes_every_filter(filter_type):
    gray = [[(7 * x + 13 * y + x * y) % 256 for x in range(23)] for y in range(11)]
    rows = check_offline.read_png(_png(gray, filter_type))
    assert [list(row) for row in rows] == gray


def _formula_picture(bar_length, numerator=True, denominator=True):
    """A white picture with a bar at row 50 and ink blocks above and below."""
    gray = [[255] * 400 for _ in range(100)]
    for x in range(50, 50 + bar_length):
        gray[50][x] = 0
    for y, present in ((20, numerator), (80, denominator)):
        if present:
            for x in range(100, 140):
                gray[y][x] = 0
    return check_offline.read_png(_png(gray, 1))


def test_fraction_bar_is_found_between_numerator_and_denominator():
    assert check_offline.fraction_bar(_formula_picture(300)) == 50
    assert check_offline.fraction_bar(_formula_picture(150)) is None
    assert check_offline.fraction_bar(_formula_picture(300, numerator=False)) is None
    assert check_offline.fraction_bar(_formula_picture(300, denominator=False)) is None


def test_main_without_browser_reports_each_problem(tmp_path, capsys):
    page = _page('<script src="https://cdn.example.org/mathjax.js"></script>')
    site = _site(tmp_path, {"page.html": page})
    assert check_offline.main([str(site), "--no-browser"]) == 1
    out = capsys.readouterr().out
    assert "page.html: <script> loads remote https://cdn.example.org/mathjax.js" in out
    (site / "page.html").write_text(_page(), encoding="utf-8")
    assert check_offline.main([str(site), "--no-browser"]) == 0


def test_main_fails_when_the_browser_is_missing(tmp_path, capsys):
    site = _site(tmp_path, {})
    missing = str(tmp_path / "no-such-chromium")
    assert check_offline.main([str(site), "--browser", missing]) == 2
    assert "--no-browser" in capsys.readouterr().err


_BROWSER = check_offline.find_browser()
_needs_browser = pytest.mark.skipif(
    _BROWSER is None, reason="Chromium is not installed (apt-get install chromium)"
)
_FORMULAS = (
    '<p><span class="math notranslate nohighlight">\\(\\frac{a}{b}\\)</span></p>'
    '<div class="math notranslate nohighlight">\\[\\sum_i K(x, x_i)\\]</div>'
)


@_needs_browser
def test_browser_check_fails_on_mathjax_from_a_cdn(tmp_path):
    # With every host but the loopback one unresolvable, a CDN is out of reach.
    cdn = "https://cdn.jsdelivr.net/npm/mathjax@3/es5/tex-chtml.js"
    page = _page(f'<script defer src="{cdn}"></script>', _FORMULAS)
    site = _site(tmp_path, {"guide/kernels.html": page})
    problems = check_offline.check_in_browser(site, _BROWSER)
    assert f"guide/kernels.html: asked the network for {cdn}" in problems
    assert "guide/kernels.html: MathJax typeset 0 of 2 formulas" in problems
    assert any("raw TeX in the visible text" in problem for problem in problems)
    assert any("no fraction bar in the screenshot" in problem for problem in problems)


_MATHJAX = find_spec("sphinx-mathjax-offline")


@_needs_browser
@pytest.mark.skipif(
    _MATHJAX is None, reason="sphinx-mathjax-offline (the docs extra) is not installed"
)
def test_browser_check_passes_on_mathjax_from_the_site(tmp_path):
    source = Path(_MATHJAX.origin).parent / "static" / "mathjax"
    page = _page(
        '<script defer src="../_static/mathjax/tex-chtml.js"></script>', _FORMULAS
    )
    site = _site(tmp_path, {"guide/kernels.html": page})
    (site / "_static").mkdir()
    (site / "_static" / "mathjax").symlink_to(source, target_is_directory=True)
    assert check_offline.check_in_browser(site, _BROWSER) == []
