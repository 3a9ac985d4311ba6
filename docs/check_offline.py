"""Check that the built HTML documentation works without a network.

Two checks, both on a built site (``python -m sphinx -b html docs DIR``):

* the static check reads every HTML page, stylesheet and script of the site
  and lists each remote resource one of them loads: a script, a stylesheet, a
  font, an image, a frame (a link ``<a href>`` to another site is no load);
* the browser check serves the site on the loopback interface and opens the
  pages with formulas in headless Chromium, every host name but the loopback
  one unresolvable. It asserts that MathJax typeset every formula (one
  ``mjx-container`` each, no TeX delimiters left in the visible text), that
  the pages asked for nothing outside the site and found every file they asked
  for, and, on a screenshot of the Nadaraya-Watson estimator set by the
  site's MathJax, that the fraction bar is drawn with ink above and below it.

Run ``python docs/check_offline.py HTML_DIR``; the exit status is 0 when both
checks pass, 1 when one fails (each problem listed), 2 when Chromium is
missing (``--no-browser`` runs the static check alone). It needs only the
standard library and, for the browser check, Debian's ``chromium``.
"""

import argparse
import functools
import html.parser
import http.server
import json
import posixpath
import re
import shutil
import struct
import subprocess
import sys
import tempfile
import threading
import time
import zlib
from pathlib import Path
from urllib.parse import unquote, urljoin, urlsplit

# Link relations that name another document rather than load a resource.
NAVIGATION_RELS = frozenset(
    "alternate author bookmark canonical external first help index last license "
    "me next nofollow noopener noreferrer prev search tag up".split()
)
# Attributes through which an element loads what they name.
LOADING_ATTRIBUTES = {
    "script": ("src",),
    "img": ("src", "srcset"),
    "source": ("src", "srcset"),
    "iframe": ("src",),
    "frame": ("src",),
    "embed": ("src",),
    "object": ("data",),
    "video": ("src", "poster"),
    "audio": ("src",),
    "track": ("src",),
    "input": ("src",),
    "image": ("href", "xlink:href"),
    "use": ("href", "xlink:href"),
    "feimage": ("href", "xlink:href"),
}
# What a URL in a script loads when it names one of these files.
RESOURCE_SUFFIXES = tuple(
    ".js .mjs .css .woff .woff2 .ttf .otf .eot .json .png .jpg .jpeg .gif .svg "
    ".webp".split()
)
CDN_HOST = re.compile(
    r"(^|\.)(cdn[^.]*|jsdelivr|unpkg|cdnjs|bootstrapcdn|googleapis|gstatic|"
    r"cloudflare|jquery|datatables|polyfill|fontawesome|typekit)\.",
    re.IGNORECASE,
)
# Remote URLs in the MathJax bundles that no page of a browser loads: the
# defaults of the speech-rule-engine that MathJax bundles, for Node and for
# Internet Explorer only. In a browser MathJax points the engine to its own
# copy, ``_static/mathjax/sre/mathmaps`` (the browser check sees no request
# leave the site).
UNUSED_MATHJAX_URLS = frozenset(
    {
        "https://cdn.jsdelivr.net/npm/speech-rule-engine@",
        "https://cdn.jsdelivr.net/npm/sre-mathmaps-ie@",
        "https://cdn.jsdelivr.net/npm/wicked-good-xpath@1.3.0/dist/wgxpath.install.js",
    }
)
CSS_COMMENT_OR_STRING = re.compile(
    r"/\*.*?\*/|\"(?:\\.|[^\"\\])*\"|'(?:\\.|[^'\\])*'", re.DOTALL
)
CSS_URL = re.compile(
    r"""url\(\s*(?:"([^"]*)"|'([^']*)'|([^)\s]*))\s*\)"""
    r"""|@import\s+(?:"([^"]*)"|'([^']*)')""",
    re.IGNORECASE,
)
JS_URL = re.compile(r"""(["'`])((?:https?:)?//[^"'`\s\\]+)(["'`]?)\s*(\+?)""")
XML_NAMESPACE_HOSTS = frozenset({"www.w3.org"})
# Raw TeX that MathJax leaves in the page when it does not run.
RAW_TEX = ("\\(", "\\)", "\\[", "\\]", "$$", "\\frac", "\\begin{", "\\sum")
MATH_ELEMENT = re.compile(
    r"<(span|div)\b[^>]*\bclass=\"math\b[^\"]*\"[^>]*>(.*?)</\1>", re.DOTALL
)
MATHJAX_SCRIPT = re.compile(r"<script\b([^>]*)>(.*?)</script>", re.DOTALL)
FORMULA = (
    r"\[\hat f(x) = \frac{\sum_{i=1}^{n} K\left(\frac{x - x_i}{h}\right) y_i}"
    r"{\sum_{i=1}^{n} K\left(\frac{x - x_i}{h}\right)}\]"
)
FORMULA_PATH = "/__check_offline__/formula.html"
BROWSER_NAMES = ("chromium", "chromium-browser", "google-chrome")
WINDOW = (1200, 500)


def is_remote(url):
    """Tell whether loading ``url`` reaches the network.

    Parameters
    ----------
    url : str
        A URL as a page, stylesheet or script writes it.

    Returns
    -------
    bool
        True for an absolute ``http``, ``https``, ``ftp``, ``ws`` or ``wss``
        URL and for a protocol-relative one (``//host/path``); False for a
        relative URL and for ``data:``, ``blob:``, ``about:`` and the like.
    """
    url = url.strip()
    if url.startswith(("//", "\\\\")):
        return True
    return urlsplit(url).scheme.lower() in {"http", "https", "ftp", "ws", "wss"}


def css_urls(text):
    """List the URLs a stylesheet loads.

    Parameters
    ----------
    text : str
        The stylesheet, or the value of a ``style`` attribute.

    Returns
    -------
    list of str
        Every ``url(...)`` and ``@import`` target, comments left out.
    """
    text = CSS_COMMENT_OR_STRING.sub(
        lambda match: "" if match.group().startswith("/*") else match.group(), text
    )
    return [
        next(group for group in match.groups() if group is not None)
        for match in CSS_URL.finditer(text)
    ]


def js_remote_urls(text):
    """List the remote URLs a script loads, as far as its text tells.

    A remote URL that opens a string literal counts when it names a resource
    file (a script, stylesheet, font, image or JSON file), when its host is a
    content delivery network, or when the script appends to it (a base URL).
    Links to documentation, XML namespaces and the like do not count.

    Parameters
    ----------
    text : str
        The script.

    Returns
    -------
    list of str
        The URLs, in the order they appear.
    """
    urls = []
    for match in JS_URL.finditer(text):
        url = match.group(2)
        try:
            parts = urlsplit(url if "://" in url else "https:" + url)
            host = parts.hostname
        except ValueError:  # no URL: "//[" in a regular expression
            continue
        if host is None or host in XML_NAMESPACE_HOSTS:
            continue
        appended = match.group(3) == match.group(1) and match.group(4) == "+"
        if (
            parts.path.lower().endswith(RESOURCE_SUFFIXES)
            or CDN_HOST.search(host)
            or appended
        ):
            urls.append(url)
    return urls


class _PageResources(html.parser.HTMLParser):
    """Collect what an HTML page loads: URLs, inline styles and scripts."""

    def __init__(self):
        super().__init__(convert_charrefs=True)
        self.loads = []
        self.styles = []
        self.scripts = []
        self._inline = None

    def handle_starttag(self, tag, attrs):
        attributes = {name: value or "" for name, value in attrs}
        for name in LOADING_ATTRIBUTES.get(tag, ()):
            value = attributes.get(name, "")
            if name == "srcset":
                self.loads.extend(
                    (tag, part.split()[0]) for part in value.split(",") if part.split()
                )
            elif value:
                self.loads.append((tag, value))
        if tag == "link" and attributes.get("href"):
            rels = set(attributes.get("rel", "").lower().split())
            if not rels or not rels <= NAVIGATION_RELS:
                self.loads.append(
                    (f"link rel={' '.join(sorted(rels))}", attributes["href"])
                )
        if attributes.get("style"):
            self.styles.append(attributes["style"])
        if tag == "style" or (tag == "script" and "src" not in attributes):
            self._inline = (tag, [])

    def handle_data(self, data):
        if self._inline is not None:
            self._inline[1].append(data)

    def handle_endtag(self, tag):
        if self._inline is not None and tag == self._inline[0]:
            text = "".join(self._inline[1])
            (self.styles if tag == "style" else self.scripts).append(text)
            self._inline = None


def _local_target(root, base, url):
    """Return the file a relative ``url`` of ``base`` names, or None."""
    path = unquote(urlsplit(url).path)
    if not path or urlsplit(url).scheme:
        return None
    if path.startswith("/"):
        return root / path.lstrip("/")
    return root / posixpath.normpath(posixpath.join(posixpath.dirname(base), path))


def find_remote_resources(html_dir):
    """Run the static check on a built site.

    Parameters
    ----------
    html_dir : str or path-like
        The directory of the built HTML documentation.

    Returns
    -------
    list of str
        One line per problem, ``FILE: WHAT URL``: a remote resource that a page,
        stylesheet or script loads, or a local one that is missing. Empty when
        the site works offline.
    """
    root = Path(html_dir)
    problems = []

    def check(relative, what, url):
        if is_remote(url):
            problems.append(f"{relative}: {what} loads remote {url}")
            return
        target = _local_target(root, relative, url)
        template = "{{" in url  # the theme's Jinja templates in _static
        if target is not None and not template and not target.exists():
            problems.append(f"{relative}: {what} names missing file {url}")

    def check_script(relative, text):
        for url in js_remote_urls(text):
            if relative.startswith("_static/mathjax/") and url in UNUSED_MATHJAX_URLS:
                continue
            problems.append(f"{relative}: script loads remote {url}")

    for path in sorted(root.rglob("*")):
        relative = path.relative_to(root).as_posix()
        suffix = path.suffix.lower()
        if not path.is_file() or suffix not in {".html", ".htm", ".css", ".js", ".mjs"}:
            continue
        text = path.read_text(encoding="utf-8", errors="replace")
        if suffix == ".css":
            for url in css_urls(text):
                check(relative, "stylesheet url()", url)
        elif suffix in {".js", ".mjs"}:
            check_script(relative, text)
        else:
            page = _PageResources()
            page.feed(text)
            page.close()
            for what, url in page.loads:
                check(relative, f"<{what}>", url)
            for style in page.styles:
                for url in css_urls(style):
                    check(relative, "inline style url()", url)
            for script in page.scripts:
                check_script(relative, script)
    return problems


class _VisibleText(html.parser.HTMLParser):
    """Collect the visible text of a rendered page, and count MathJax output."""

    HIDDEN = frozenset(
        {"script", "style", "pre", "code", "textarea", "template", "mjx-assistive-mml"}
    )

    def __init__(self):
        super().__init__(convert_charrefs=True)
        self.text = []
        self.containers = 0
        self._hidden = []

    def handle_starttag(self, tag, attrs):
        if tag == "mjx-container":
            self.containers += 1
        if tag in self.HIDDEN:
            self._hidden.append(tag)

    def handle_endtag(self, tag):
        if tag in self._hidden:
            while self._hidden and self._hidden.pop() != tag:
                pass

    def handle_data(self, data):
        if not self._hidden:
            self.text.append(data)


class _Site(http.server.SimpleHTTPRequestHandler):
    """Serve the built site, record what is asked, add the formula page."""

    def __init__(self, *args, formula_page, log, **kwargs):
        self.formula_page = formula_page
        self.request_log = log
        super().__init__(*args, **kwargs)

    def do_GET(self):
        if urlsplit(self.path).path == FORMULA_PATH and self.formula_page:
            body = self.formula_page.encode()
            self.send_response(200)
            self.send_header("Content-Type", "text/html; charset=utf-8")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)
            return
        super().do_GET()

    def log_request(self, code="-", size="-"):
        self.request_log.append((int(code), urlsplit(self.path).path))

    def log_message(self, format, *args):
        pass


def math_pages(html_dir):
    """List the pages with formulas and how many each has.

    Parameters
    ----------
    html_dir : str or path-like
        The directory of the built HTML documentation.

    Returns
    -------
    dict
        Maps each page's path, relative to ``html_dir``, to the number of
        formulas (TeX delimiters ``\\(`` and ``\\[``) in its math elements.
    """
    root = Path(html_dir)
    pages = {}
    for path in sorted(root.rglob("*.html")):
        text = path.read_text(encoding="utf-8", errors="replace")
        count = sum(
            match.group(2).count("\\(") + match.group(2).count("\\[")
            for match in MATH_ELEMENT.finditer(text)
        )
        if count:
            pages[path.relative_to(root).as_posix()] = count
    return pages


def formula_page(html_dir, page):
    """Write the page the screenshot check takes a picture of.

    Parameters
    ----------
    html_dir : str or path-like
        The directory of the built HTML documentation.
    page : str
        A page with formulas, relative to ``html_dir``: the new page loads
        MathJax with the same script elements.

    Returns
    -------
    str
        An HTML page, black on white, that sets the Nadaraya-Watson estimator
        as a display formula at 40 px.
    """
    text = (Path(html_dir) / page).read_text(encoding="utf-8", errors="replace")
    scripts = []
    for match in MATHJAX_SCRIPT.finditer(text):
        attributes, body = match.groups()
        source = re.search(r"""\bsrc=["']([^"']*)["']""", attributes)
        if source and "mathjax" in source.group(1).lower():
            absolute = urljoin("/" + page, source.group(1))
            scripts.append(
                f"<script{attributes.replace(source.group(1), absolute)}></script>"
            )
        elif not source and "MathJax" in body:
            scripts.append(match.group())
    return (
        '<!DOCTYPE html><html><head><meta charset="utf-8"><title>formula</title>'
        "<style>html,body{background:#fff;color:#000;margin:0}"
        "div{font-size:40px;padding:60px}</style>"
        + "".join(scripts)
        + f'</head><body><div class="math">{FORMULA}</div></body></html>'
    )


def read_png(data):
    """Decode an 8-bit RGB or RGBA PNG into rows of gray levels.

    Parameters
    ----------
    data : bytes
        The PNG file.

    Returns
    -------
    list of bytes
        One ``bytes`` per row, one gray level (0 black to 255 white) per pixel.
    """
    if data[:8] != b"\x89PNG\r\n\x1a\n":
        raise ValueError("not a PNG file")
    offset, chunks, header = 8, [], None
    while offset < len(data):
        (length,) = struct.unpack(">I", data[offset : offset + 4])
        kind = data[offset + 4 : offset + 8]
        body = data[offset + 8 : offset + 8 + length]
        if kind == b"IHDR":
            header = struct.unpack(">IIBBBBB", body)
        elif kind == b"IDAT":
            chunks.append(body)
        offset += 12 + length
    width, height, depth, color, _, _, interlace = header
    if depth != 8 or color not in (2, 6) or interlace:
        raise ValueError(f"unsupported PNG: depth {depth}, color type {color}")
    channels = 3 if color == 2 else 4
    stride = width * channels
    raw = zlib.decompress(b"".join(chunks))
    rows, previous = [], bytearray(stride)
    for y in range(height):
        kind = raw[y * (stride + 1)]
        line = bytearray(raw[y * (stride + 1) + 1 : (y + 1) * (stride + 1)])
        for x in range(stride):
            left = line[x - channels] if x >= channels else 0
            up = previous[x]
            corner = previous[x - channels] if x >= channels else 0
            if kind == 1:
                line[x] = (line[x] + left) & 255
            elif kind == 2:
                line[x] = (line[x] + up) & 255
            elif kind == 3:
                line[x] = (line[x] + (left + up) // 2) & 255
            elif kind == 4:
                estimate = left + up - corner
                pa, pb, pc = (
                    abs(estimate - left),
                    abs(estimate - up),
                    abs(estimate - corner),
                )
                best = left if pa <= pb and pa <= pc else up if pb <= pc else corner
                line[x] = (line[x] + best) & 255
        previous = line
        rows.append(
            bytes(
                (line[x] * 299 + line[x + 1] * 587 + line[x + 2] * 114) // 1000
                for x in range(0, stride, channels)
            )
        )
    return rows


def fraction_bar(rows, dark=128, min_length=200, margin=15):
    """Find a fraction bar in a picture of a formula.

    Parameters
    ----------
    rows : list of bytes
        Gray levels, as :func:`read_png` returns them.
    dark : int, default=128
        Gray levels below it are ink.
    min_length : int, default=200
        The shortest run of ink, in pixels, that counts as a bar.
    margin : int, default=15
        The rows of ink needed at least this far above and below the bar.

    Returns
    -------
    int or None
        The row of the longest such bar with ink above and below it (the
        numerator and the denominator), or None when there is none: raw TeX
        on one line has no such run.
    """
    inked = [any(value < dark for value in row) for row in rows]
    best, best_length = None, 0
    for y, row in enumerate(rows):
        run = longest = 0
        for value in row:
            run = run + 1 if value < dark else 0
            longest = max(longest, run)
        if (
            longest >= min_length
            and longest > best_length
            and any(inked[: max(y - margin, 0)])
            and any(inked[y + margin :])
        ):
            best, best_length = y, longest
    return best


def find_browser(path=None):
    """Return the Chromium executable, or None when there is none."""
    if path:
        return shutil.which(path) or (path if Path(path).is_file() else None)
    return next(filter(None, map(shutil.which, BROWSER_NAMES)), None)


def _run_browser(browser, url, workdir, extra):
    """Open ``url`` in headless Chromium with every other host unresolvable."""
    netlog = Path(workdir) / "netlog.json"
    command = [
        browser,
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        "--no-first-run",
        "--disable-extensions",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-sync",
        f"--user-data-dir={Path(workdir) / 'profile'}",
        "--host-resolver-rules=MAP * ~NOTFOUND, EXCLUDE 127.0.0.1",
        f"--log-net-log={netlog}",
        "--virtual-time-budget=15000",
        f"--window-size={WINDOW[0]},{WINDOW[1]}",
        "--hide-scrollbars",
        *extra,
        url,
    ]
    result = subprocess.run(command, capture_output=True, text=True, timeout=180)
    if result.returncode != 0:
        raise RuntimeError(
            f"{browser} exited {result.returncode}: {result.stderr[-2000:]}"
        )
    origin = "{0.scheme}://{0.netloc}".format(urlsplit(url))
    return result.stdout, _remote_requests(netlog, origin)


def _remote_requests(netlog, origin):
    """List the requests a page at ``origin`` sent outside it, from a net log."""
    if not netlog.exists():
        return []
    text = netlog.read_text(encoding="utf-8", errors="replace")
    try:
        events = json.loads(text)["events"]
    except (ValueError, KeyError):  # a log cut short: its lines are events
        events = []
        for line in text.splitlines():
            try:
                events.append(json.loads(line.rstrip(",")))
            except ValueError:
                continue
    remote = []
    for event in events:
        params = event.get("params", {}) if isinstance(event, dict) else {}
        url = params.get("url", "")
        if params.get("initiator") == origin and not url.startswith(origin + "/"):
            if url not in remote:
                remote.append(url)
    return remote


def check_in_browser(html_dir, browser, pages=None, screenshot=None):
    """Run the browser check on a built site.

    Parameters
    ----------
    html_dir : str or path-like
        The directory of the built HTML documentation.
    browser : str
        The Chromium executable.
    pages : list of str, optional
        The pages to open, relative to ``html_dir``; by default every page
        with formulas.
    screenshot : str or path-like, optional
        Where to keep the screenshot of the formula page (a PNG file).

    Returns
    -------
    list of str
        One line per problem; empty when the pages render their formulas with
        nothing but the site.
    """
    html_dir = Path(html_dir)
    counts = math_pages(html_dir)
    pages = list(counts) if pages is None else list(pages)
    if not pages:
        return [f"{html_dir}: no page with formulas to open"]
    log = []
    handler = functools.partial(
        _Site,
        directory=str(html_dir),
        formula_page=formula_page(html_dir, pages[0]),
        log=log,
    )
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    base = f"http://127.0.0.1:{server.server_port}"
    problems = []
    try:
        with tempfile.TemporaryDirectory() as workdir:
            for page in pages:
                dom, remote = _run_browser(
                    browser, f"{base}/{page}", workdir, ["--dump-dom"]
                )
                problems.extend(
                    f"{page}: asked the network for {url}" for url in remote
                )
                text = _VisibleText()
                text.feed(dom)
                expected = counts.get(page, 1)
                if text.containers < expected:
                    problems.append(
                        f"{page}: MathJax typeset {text.containers} "
                        f"of {expected} formulas"
                    )
                visible = "".join(text.text)
                raw = [tex for tex in RAW_TEX if tex in visible]
                if raw:
                    problems.append(
                        f"{page}: raw TeX in the visible text: {' '.join(raw)}"
                    )
            picture = Path(workdir) / "formula.png"
            _, remote = _run_browser(
                browser, base + FORMULA_PATH, workdir, [f"--screenshot={picture}"]
            )
            problems.extend(
                f"{FORMULA_PATH}: asked the network for {url}" for url in remote
            )
            problems.extend(_check_picture(picture))
            if screenshot is not None and picture.exists():
                shutil.copyfile(picture, screenshot)
    finally:
        server.shutdown()
        server.server_close()
    problems.extend(
        f"{path}: the site has no such file (HTTP {code})"
        for code, path in log
        if code >= 400 and path != "/favicon.ico"
    )
    return problems


def _check_picture(picture):
    """Check the screenshot of the formula page."""
    if not picture.exists():
        return [f"{FORMULA_PATH}: no screenshot"]
    rows = read_png(picture.read_bytes())
    size = (len(rows[0]), len(rows)) if rows else (0, 0)
    if size != WINDOW:
        return [f"{FORMULA_PATH}: screenshot of {size[0]}x{size[1]}, not {WINDOW}"]
    ink = sum(value < 128 for row in rows for value in row)
    if not 0 < ink < 0.5 * WINDOW[0] * WINDOW[1]:
        return [f"{FORMULA_PATH}: blank screenshot ({ink} dark pixels)"]
    if fraction_bar(rows) is None:
        return [
            f"{FORMULA_PATH}: no fraction bar in the screenshot: the formula is raw TeX"
        ]
    return []


def main(argv=None):
    """Run the checks from the command line; return the exit status."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("html_dir", type=Path, help="the built HTML documentation")
    parser.add_argument("--browser", help="the Chromium executable (default: chromium)")
    parser.add_argument(
        "--no-browser", action="store_true", help="run the static check alone"
    )
    parser.add_argument(
        "--page",
        action="append",
        dest="pages",
        help="a page for the browser check, relative to HTML_DIR (repeatable; "
        "default: every page with formulas)",
    )
    parser.add_argument(
        "--screenshot", type=Path, help="keep the formula screenshot in this PNG file"
    )
    args = parser.parse_args(argv)
    if not (args.html_dir / "index.html").is_file():
        parser.error(
            f"{args.html_dir} has no index.html: build the documentation first"
        )
    browser = None
    if not args.no_browser:
        browser = find_browser(args.browser)
        if browser is None:
            names = args.browser or " or ".join(BROWSER_NAMES)
            print(
                f"error: no Chromium found ({names}): "
                "install it (Debian: apt-get install chromium), name it with "
                "--browser, or run the static check alone with --no-browser",
                file=sys.stderr,
            )
            return 2
    problems = find_remote_resources(args.html_dir)
    print(f"static check: {len(problems)} problem(s)")
    if browser is not None:
        start = time.perf_counter()
        found = check_in_browser(args.html_dir, browser, args.pages, args.screenshot)
        pages = len(args.pages or math_pages(args.html_dir))
        print(
            f"browser check: {pages} page(s) with formulas and a screenshot in "
            f"{time.perf_counter() - start:.1f} s, {len(found)} problem(s)"
        )
        problems += found
    for problem in problems:
        print(problem)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
