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

import executed_chapters
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
def built_book(chromium: str, request: pytest.FixtureRequest) -> Path:
    """Build the book as README command (1) does; any cell error or warning fails the build.

    When nbval executed every chapter earlier in this session (`pytest` runs book/ before tests/),
    the build renders those executed copies with execution off instead of running each chapter a
    second time (tools/executed_chapters.py).
    """
    entries = (f"{entry}.ipynb" for entry in export.toc_files(ROOT))
    chapters = [entry for entry in entries if (ROOT / entry).exists()]
    staged = executed_chapters.stage_book(request.config, chapters, BUILD / "staged")
    if staged is None:
        print("book build: executing every chapter (not all were executed by nbval in this run)")
        command = [jupyter_book(), *BUILD_COMMAND[1:]]
    else:
        print(f"book build: rendering the {len(chapters)} chapters nbval executed in this run")
        command = [jupyter_book(), "build", str(staged), "--path-output", str(ROOT)]
        command += BUILD_COMMAND[3:]
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

    # Tables: what a cell displays as a Markdown table is a table, not a paragraph of pipes.
    unparsed = page.evaluate(
        "() => [...document.querySelectorAll('p')].map(p => p.textContent.trim())"
        ".filter(text => text.startsWith('| ')).map(text => text.slice(0, 60))"
    )
    assert unparsed == [], f"{page_path}: Markdown tables left unparsed: {unparsed}"

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


# --- the chapter "Try it": the shipped model translating in the page -----------------------------

TRYIT = "book/tryit.html"
# Beyond test2016's captions: umlauts, ASCII symbols, digits, emoji (the tokenizer's byte fallback).
TRYIT_HARD = [
    "Ein Mädchen mit grünen Schuhen läuft über die Brücke.",
    "Der Preis ist 5 + 3 = 8 $ und x < y > z ^ 2 | ~ 1.",
    "Im Jahr 2017 spielten 11 Kinder auf 3 Feldern.",
    "Ein Hund 🐕 spielt mit einem Ball ⚽ im Garten 🙂.",
    "Über Äpfel, Öl und Süßes freut sich die ganze Familie.",
]
TWELVE_WORDS = "Zwei junge Männer mit Hüten spielen im Park mit einem braunen Hund."


@pytest.fixture(scope="session")
def tryit_expected(built_book: Path) -> dict[str, list]:
    """The page's test sentences and Python's translations of them (beam 4, α 0.6, plain)."""
    from annotated_transformer.data.multi30k import read_split
    from annotated_transformer.decoding.batched import translate_ids
    from annotated_transformer.translator import Translator

    test = [de for de, en in read_split("test2016") if de.strip() and en.strip()][:50]
    sentences = [*test, *TRYIT_HARD, TWELVE_WORDS]
    translator = Translator.pretrained(device="cpu")
    encoded, max_len = translator.encode(sentences), translator.config.model.max_len
    pieces = translate_ids(translator.model, encoded, translator.tgt_vocab, max_len=max_len,
                           beam_size=4, alpha=0.6)  # fmt: skip
    texts = [translator.detokenize(p) for p in pieces]  # as Translator.translate gives them
    return {"sentences": sentences, "pieces": pieces, "texts": texts}


def open_tryit(browser, url: str, allowed: tuple[str, ...]):
    """The page at `url`, its model loaded; every request outside `allowed` is blocked and listed
    in page.left_machine, every script error in page.errors."""
    context = browser.new_context(viewport={"width": 1280, "height": 900})
    page = context.new_page()
    page.left_machine, page.errors, page.received = [], [], []  # received: bytes per response
    page.on(
        "response",
        lambda response: (
            page.received.append(len(response.body())) if response.url.startswith("http") else None
        ),
    )

    def route(route) -> None:
        if route.request.url.startswith(allowed):
            route.continue_()
        else:
            page.left_machine.append(route.request.url)
            route.abort()

    def report(text: str) -> None:
        if not any(harmless in text for harmless in HARMLESS):
            page.errors.append(text)

    page.route("**/*", route)
    page.on("pageerror", lambda error: report(f"page error: {error}"))
    page.on(
        "console", lambda msg: report(f"console error: {msg.text}") if msg.type == "error" else None
    )
    page.goto(url, wait_until="load")
    page.wait_for_function("() => window.TryIt && window.TryIt.ready", timeout=30_000)
    page.evaluate("() => TryIt.ready.then(() => true)")
    return page


TRANSLATE_ALL = """async (sentences) => {
  const page = await TryIt.ready;
  const out = [];
  for (const text of sentences) {
    const r = await page.run(text, {beamSize: 4, alpha: 0.6});
    out.push({pieces: r.nbest[0].pieces, text: r.text, ms: r.ms});
  }
  return out;
}"""


@pytest.mark.parametrize("where", ["file", "server"])
def test_tryit_translates_as_python_does(
    browser, server: str, built_book: Path, tryit_expected: dict, where: str
) -> None:
    if where == "file":  # opened from the disk: no fetch, only scripts
        page = open_tryit(browser, (built_book / TRYIT).as_uri(), ("file:", "data:", "blob:"))
    else:
        page = open_tryit(browser, f"{server}/{TRYIT}", (server, "data:", "blob:"))
    got = page.evaluate(TRANSLATE_ALL, tryit_expected["sentences"])
    differ = [
        (sentence, want, one["pieces"])
        for sentence, want, one in zip(tryit_expected["sentences"], tryit_expected["pieces"], got,
                                       strict=True)
        if one["pieces"] != want
    ]  # fmt: skip
    assert not differ, f"{len(differ)} of {len(got)} translations differ; the first: {differ[0]}"
    assert [one["text"] for one in got] == tryit_expected["texts"]
    print(f"\n{where}: {len(got)} sentences as Python translates them; the 12-word sentence took "
          f"{got[-1]['ms']:.0f} ms, all {sum(one['ms'] for one in got) / 1000:.1f} s")  # fmt: skip
    page.context.close()
    assert page.left_machine == [] and page.errors == []


def test_tryit_draws_attention_and_refuses_bad_input(
    browser, server: str, built_book: Path, tryit_expected: dict
) -> None:
    import torch

    from annotated_transformer.evaluation.attention_maps import attention_maps
    from annotated_transformer.translator import Translator

    page = open_tryit(browser, f"{server}/{TRYIT}", (server, "data:", "blob:"))
    sizes = page.received
    print(f"\nthe page loads {len(sizes)} files, {sum(sizes) / 1e6:.1f} MB")
    assert len(sizes) > 10 and sum(sizes) < 40e6
    status = page.locator(".tryit-status")

    page.fill("textarea.tryit-input", TWELVE_WORDS)
    page.click("button.tryit-go")
    page.wait_for_function("() => /^Translated in/.test(document.querySelector('.tryit-status')"
                           ".textContent)", timeout=60_000)  # fmt: skip
    assert page.inner_text(".tryit-output") == tryit_expected["texts"][-1]
    assert page.locator("table.tryit-nbest tr").count() == 1 + 4  # a header, 4 hypotheses

    # The heatmap: a cell per output piece and source piece, the weights Python computes.
    result = page.evaluate("""async (text) => { const r = await (await TryIt.ready).run(text,
        {beamSize: 4, alpha: 0.6}); return {ids: r.nbest[0].ids, dims: r.cross.dims,
        cross: Array.from(r.cross.data)}; }""", TWELVE_WORDS)  # fmt: skip
    _, N, h, T, S = result["dims"]
    assert page.locator("svg.tryit-heatmap rect").count() == T * S
    widths = page.evaluate("() => [...document.querySelectorAll('svg.tryit-heatmap rect')]"
                           ".map(r => r.getBBox().width)")  # fmt: skip
    assert set(widths) == {21}  # each cell its own square (no stylesheet stretches them)
    translator = Translator.pretrained(device="cpu")
    src = translator.encode([TWELVE_WORDS])[0]
    maps = attention_maps(translator.model, src, torch.tensor(result["ids"][:-1]))["cross"]
    assert torch.allclose(torch.tensor(result["cross"]).view(N, h, T, S), maps, atol=1e-4)
    first = page.locator("svg.tryit-heatmap rect").nth(0).get_attribute("fill")
    page.select_option("div.tryit select >> nth=0", "2")  # layer 3
    page.select_option("div.tryit select >> nth=1", "5")  # head 6
    shown = page.locator("svg.tryit-heatmap rect").nth(0).get_attribute("fill")
    weight = maps[2, 5, 0, 0].item()
    assert shown != first and shown == f"rgba(31, 119, 180, {weight:.3f})"
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(SCREENSHOTS / "tryit.png"), full_page=True)

    # Bad input: a message on the page, and the page goes on working.
    for text, message in (("", "Nothing to translate"), (" \n ", "Nothing to translate"),
                          ("Hund " * 500, "the model reads at most 255")):  # fmt: skip
        page.fill("textarea.tryit-input", text)
        page.click("button.tryit-go")
        page.wait_for_function("() => document.querySelector('.tryit-status').classList"
                               ".contains('tryit-error')", timeout=10_000)  # fmt: skip
        assert message in status.inner_text()
        assert page.inner_text(".tryit-output") == ""  # no stale translation beside the message
    page.fill("input[title='beam size']", "0")
    page.click("button.tryit-go")
    assert "beam size must be a whole number from 1 to 8" in status.inner_text()
    page.fill("input[title='beam size']", "4")
    page.click("button.tryit-example >> nth=0")
    page.click("button.tryit-go")
    page.wait_for_function("() => /^Translated in/.test(document.querySelector('.tryit-status')"
                           ".textContent)", timeout=60_000)  # fmt: skip
    assert page.inner_text(".tryit-output") == "A dog runs through the snow."
    page.context.close()
    assert page.left_machine == [] and page.errors == []


def test_attention_explorer_follows_its_menus(browser, server: str) -> None:
    """The Results chapter's explorer: choosing another head redraws the map with its weights."""
    page = browser.new_page(viewport={"width": 1280, "height": 900})
    page.goto(f"{server}/book/results.html", wait_until="load")
    page.wait_for_function(
        "() => [...document.querySelectorAll(\"[id^='altair-']\")]"
        ".every(c => c.querySelector('.marks'))",
        timeout=20_000,
    )
    chart = page.evaluate(
        "() => document.querySelector('.vega-bindings select[name=head]')"
        ".closest(\"[id^='altair-']\").id"
    )
    menus = page.evaluate(
        "(id) => [...document.querySelectorAll('#' + id + ' .vega-bindings select')]"
        ".map(s => [s.name, s.options.length])",
        chart,
    )
    assert dict(menus) == {"sentence": 2, "kind": 3, "layer": 3, "head": 8}
    cells = (
        "(id) => [...document.querySelectorAll('#' + id + ' .marks path')]"
        ".map(e => e.getAttribute('fill')).join()"
    )
    before = page.evaluate(cells, chart)
    page.select_option(f"#{chart} select[name=head]", "3")
    page.wait_for_function(
        "([id, before]) => [...document.querySelectorAll('#' + id + ' .marks path')]"
        ".map(e => e.getAttribute('fill')).join() !== before",
        arg=[chart, before],
        timeout=10_000,
    )
    assert "head 3" in page.inner_text(f"#{chart}")
    page.close()
