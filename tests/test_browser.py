"""The built book in a real browser: every page opens offline, math is typeset, charts draw.

The session builds the book exactly as README command (1) does, serves `_build/html` on
127.0.0.1, and opens each page in headless Chromium (Debian's, driven by Playwright). Every
request that would leave the machine is blocked and reported, and no code block may scroll
sideways at a 1280 px wide window. Screenshots of the pages in SCREENSHOT_PAGES are saved in
`_build/screenshots/`.

Without Chromium these tests skip, except under CI (`CI=true`), where they must run.
"""

from __future__ import annotations

import functools
import os
import shutil
import subprocess
import sys
import threading
from collections.abc import Iterator
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import export
import pytest

ROOT = Path(__file__).resolve().parent.parent
BUILD = ROOT / "_build"
HTML = BUILD / "html"
SCREENSHOTS = BUILD / "screenshots"
SCREENSHOT_PAGES = (
    "book/introduction.html",
    "book/background.html",
    "book/attention.html",
    "book/decoding.html",
    "book/results.html",
    "book/performance.html",
)
BUILD_COMMAND = ["jupyter-book", "build", ".", "--all", "-W", "-n", "--keep-going"]
# Errors that Jupyter Book's own scripts raise on every page, whatever the content: sphinx-thebe
# declares THEBE_JS_URL twice (its live-code feature is off here), and the theme's mode switch
# logs "invalid theme mode" on a first visit. Anything else fails the test.
HARMLESS = ("Identifier 'THEBE_JS_URL' has already been declared", "invalid theme mode")


def chromium_path() -> str | None:
    for candidate in (os.environ.get("CHROMIUM"), "chromium", "chromium-browser", "google-chrome"):
        if candidate and (found := shutil.which(candidate)):
            return found
    return None


def jupyter_book() -> str:
    return str(Path(sys.executable).parent / "jupyter-book")


pytestmark = pytest.mark.browser


def book_pages() -> list[str]:
    """Every page of the book as a path under _build/html, in reading order."""
    pages = [
        f"{entry.removesuffix('.ipynb').removesuffix('.md')}.html"
        for entry in export.toc_files(ROOT)
    ]
    return ["index.html", *pages, "genindex.html", "search.html"]


@pytest.fixture(scope="session")
def chromium() -> str:
    path = chromium_path()
    if path is None:
        if os.environ.get("CI") == "true":
            pytest.fail("CI=true but no Chromium found: .ci/run installs Debian's chromium")
        pytest.skip("no Chromium on this machine (apt-get install chromium); CI runs these tests")
    return path


@pytest.fixture(scope="session")
def built_book(chromium: str) -> Path:
    """Build the book as README command (1) does; any cell error or warning fails the build."""
    command = [jupyter_book(), *BUILD_COMMAND[1:]]
    result = subprocess.run(command, cwd=ROOT, capture_output=True, text=True, timeout=1800)
    assert result.returncode == 0, f"book build failed:\n{result.stdout[-6000:]}\n{result.stderr}"
    assert (HTML / "index.html").exists()
    return HTML


@pytest.fixture(scope="session")
def server(built_book: Path) -> Iterator[str]:
    handler = functools.partial(QuietHandler, directory=str(built_book))
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{httpd.server_address[1]}"
    httpd.shutdown()


class QuietHandler(SimpleHTTPRequestHandler):
    def log_message(self, format: str, *args: object) -> None:
        pass


@pytest.fixture(scope="session")
def browser(chromium: str):
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(
            executable_path=chromium,
            args=[
                "--no-sandbox",
                "--disable-gpu",
                "--disable-quic",
                "--no-first-run",
                "--disable-background-networking",
                "--disable-component-update",
                "--disable-sync",
                "--disable-dev-shm-usage",
                "--host-resolver-rules=MAP * ~NOTFOUND, EXCLUDE localhost, EXCLUDE 127.0.0.1",
            ],
        )
        yield browser
        browser.close()


def settle(page) -> None:
    """Wait for the page's network to go quiet, up to 10 s.

    "networkidle" is Chromium's heuristic (no request for 500 ms), and on a page with several
    inline Vega bundles and inline math ("Making it fast") it sometimes never fired although every
    request had finished. The checks that
    follow wait for what they need themselves (MathJax's promise, every chart's marks), and every
    request the page attempts, however late, passes the route that records leaving the machine.
    """
    from playwright.sync_api import TimeoutError as PlaywrightTimeout

    try:
        page.wait_for_load_state("networkidle", timeout=10_000)
    except PlaywrightTimeout:
        pass


@pytest.mark.parametrize("page_path", book_pages())
def test_page_renders_offline(browser, server: str, page_path: str) -> None:
    context = browser.new_context(viewport={"width": 1280, "height": 900})
    page = context.new_page()
    left_machine: list[str] = []
    errors: list[str] = []

    def route(route) -> None:
        url = route.request.url
        if url.startswith((server, "data:", "blob:")):
            route.continue_()
        else:
            left_machine.append(url)
            route.abort()

    page.route("**/*", route)

    def report(text: str) -> None:
        if not any(harmless in text for harmless in HARMLESS):
            errors.append(text)

    page.on("pageerror", lambda error: report(f"page error: {error}"))
    page.on(
        "console", lambda msg: report(f"console error: {msg.text}") if msg.type == "error" else None
    )
    page.on("requestfailed", lambda request: errors.append(f"request failed: {request.url}"))

    response = page.goto(f"{server}/{page_path}", wait_until="load")
    assert response is not None and response.ok, f"{page_path}: HTTP {response and response.status}"
    settle(page)

    # Math: every formula was typeset by the local MathJax, none failed.
    if page.locator(".math").count():
        page.wait_for_function("() => window.MathJax && MathJax.startup && MathJax.startup.promise")
        page.evaluate("() => MathJax.startup.promise")
        untypeset = page.evaluate(
            "() => [...document.querySelectorAll('.math')]"
            ".filter(e => !e.querySelector('mjx-container')).map(e => e.textContent.slice(0, 60))"
        )
        assert untypeset == [], f"{page_path}: math not typeset: {untypeset}"
        assert page.locator("mjx-merror").count() == 0, f"{page_path}: MathJax reported errors"

    # Charts: every Altair chart drew its marks.
    charts = page.locator("[id^='altair-']")
    if charts.count():
        page.wait_for_function(
            "() => [...document.querySelectorAll(\"[id^='altair-']\")]"
            ".every(c => c.querySelector('.marks'))",
            timeout=20_000,
        )

    # Images: every image loaded and has a size.
    broken = page.evaluate(
        "() => [...document.images].filter(i => !i.complete || i.naturalWidth === 0)"
        ".map(i => i.src)"
    )
    assert broken == [], f"{page_path}: images that did not load: {broken}"

    # Code fits the page: at this width no code block scrolls sideways. The chapters' lines are at
    # most 100 columns (ruff's line-length) and book/_static/book.css makes 100 columns fit;
    # what a cell prints wraps. Each offender: its widths and its longest line.
    scrolling = page.evaluate(
        "() => [...document.querySelectorAll('div.highlight pre')]"
        ".filter(pre => pre.scrollWidth > pre.clientWidth + 1)"
        ".map(pre => [pre.scrollWidth, pre.clientWidth, pre.textContent.split('\\n')"
        ".reduce((longest, line) => (line.length > longest.length ? line : longest), '')])"
    )

    if page_path in SCREENSHOT_PAGES:
        SCREENSHOTS.mkdir(parents=True, exist_ok=True)
        name = Path(page_path).with_suffix(".png").name
        page.screenshot(path=str(SCREENSHOTS / name), full_page=True)

    context.close()
    assert left_machine == [], (
        f"{page_path}: requests that tried to leave the machine: {left_machine}"
    )
    assert errors == [], f"{page_path}: script errors: {errors}"
    if scrolling:
        scroll_width, client_width, line = scrolling[0]
        pytest.fail(
            f"{page_path}: {len(scrolling)} code block(s) scroll sideways at 1280 px; the first is "
            f"{scroll_width} px wide in {client_width} px, its longest line ({len(line)} "
            f"characters): {line!r}"
        )


def test_book_has_the_pages_and_assets_it_needs(built_book: Path) -> None:
    for page_path in book_pages():
        assert (built_book / page_path).is_file(), page_path
    assert (built_book / "_static" / "mathjax" / "tex-chtml.js").is_file()
    background = (built_book / "book" / "background.html").read_text(encoding="utf-8")
    assert "cdn.jsdelivr.net" not in background and "https://cdn" not in background
    assert 'src="../_static/mathjax/tex-chtml.js' in background


def test_two_offline_charts_on_one_page_both_draw(browser) -> None:
    """The reason `offline_altair_html` makes its scripts ES modules: two charts on one page."""
    import altair as alt

    from annotated_transformer.notebook import offline_altair_html

    charts = [
        alt.Chart(alt.Data(values=[{"x": i, "y": i * i} for i in range(5)]))
        .mark_line()
        .encode(x="x:Q", y="y:Q")
        .to_dict()
        for _ in range(2)
    ]
    body = "".join(offline_altair_html(spec)["text/html"] for spec in charts)
    page = browser.new_page()
    errors: list[str] = []
    left_machine: list[str] = []
    page.route("**/*", lambda route: (left_machine.append(route.request.url), route.abort()))
    page.on("pageerror", lambda error: errors.append(str(error)))
    page.set_content(f"<!DOCTYPE html><html><body>{body}</body></html>", wait_until="load")
    page.wait_for_function(
        "() => { const c = document.querySelectorAll(\"[id^='altair-']\");"
        " return c.length === 2 && [...c].every(e => e.querySelector('.marks')); }",
        timeout=20_000,
    )
    page.close()
    assert errors == [] and left_machine == []
