"""The built book in a real browser: every page opens offline, math is typeset, charts draw.

The session builds the book exactly as README command (1) does, serves `_build/html` on
127.0.0.1, and opens each page in headless Chromium (Debian's, driven by Playwright). Every
request that would leave the machine is blocked and reported, and at a 1280 px wide window every
page must read cleanly (`page_problems`): nothing wider than the content column, no stderr output,
no path of the building machine in an output, no value shown twice, no command line whose `--`
became a dash and no literal caret in a number. Screenshots of the pages in SCREENSHOT_PAGES are
saved in `_build/screenshots/`.

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
    "book/reference/index.html",
    "book/reference/cli.html",
)
BUILD_COMMAND = ["jupyter-book", "build", ".", "--all", "-W", "-n", "--keep-going"]
# Errors that Jupyter Book's own scripts raise on every page, whatever the content: sphinx-thebe
# declares THEBE_JS_URL twice (its live-code feature is off here), and the theme's mode switch
# logs "invalid theme mode" on a first visit. Anything else fails the test.
HARMLESS = ("Identifier 'THEBE_JS_URL' has already been declared", "invalid theme mode")


# What `page_problems` measures against the content column: each may be at most 1 px wider.
WIDE_SELECTOR = (
    "table, mjx-container[display], img, svg, canvas, .vega-embed, pre, div.cell_output, "
    "div.cell_output .output"
)
# The building machine's folders, as a cell's output could show them.
MACHINE_PATH = r"/work/|/tmp/|/home/|/root/|/private/var/|site-packages|\\Users\\"
PAGE_PROBLEMS_JS = """([wideSelector, machinePath]) => {
  const article = document.querySelector('article.bd-article') || document.querySelector('main')
    || document.body;
  const style = getComputedStyle(article);
  const box = article.getBoundingClientRect();
  const left = box.left + parseFloat(style.paddingLeft);
  const right = box.right - parseFloat(style.paddingRight);
  const column = right - left;
  const short = (text) => text.replace(/\\s+/g, ' ').trim().slice(0, 80);
  // What an output shows: its <pre>, without the copy button's words beside it.
  const shown = (el) => {
    const pres = [...el.querySelectorAll('pre')];
    return pres.length ? pres.map((pre) => pre.textContent).join('\\n') : el.textContent;
  };
  const tex = (el) => {
    try { return MathJax.startup.document.getMathItemsWithin(el)[0].math; } catch (e) { return ''; }
  };
  const name = (el) => {
    const tag = el.tagName.toLowerCase();
    if (tag === 'mjx-container') return `display math ${JSON.stringify(short(tex(el)))}`;
    if (tag === 'img') return `image ${el.getAttribute('src').split('/').pop()}`;
    const kind = typeof el.className === 'string' && el.className.trim()
      ? `${tag}.${el.className.trim().split(/\\s+/).join('.')}` : tag;
    return `${kind} ${JSON.stringify(short(el.textContent))}`;
  };
  // 1. Too wide: an element wider than the column, or sticking out of it, even where a wrapper
  // lets the reader scroll it sideways. Of nested offenders only the innermost is named.
  const wide = [];
  for (const el of article.querySelectorAll(wideSelector)) {
    if (el.tagName !== 'MJX-CONTAINER' && el.closest('mjx-container')) continue;
    const rect = el.getBoundingClientRect();
    if (rect.width === 0 && rect.height === 0) continue;  // not displayed: a folded cell
    const width = Math.max(rect.width, el.scrollWidth);
    if (width > column + 1 || rect.left < left - 1 || rect.right > right + 1) {
      wide.push([el, width]);
    }
  }
  const problems = wide
    .filter(([el]) => !wide.some(([other]) => other !== el && el.contains(other)))
    .map(([el, width]) => `too wide: ${name(el)} is ${Math.round(width)} px in a `
      + `${Math.round(column)} px column`);
  // 2. What a cell wrote to stderr.
  for (const el of article.querySelectorAll('.output.stderr, .stderr')) {
    problems.push(`stderr output: ${JSON.stringify(short(shown(el)))}`);
  }
  // 3. The building machine's paths in what a cell shows.
  const path = new RegExp(machinePath);
  for (const el of article.querySelectorAll('div.cell_output')) {
    const line = shown(el).split('\\n').find((text) => path.test(text));
    if (line !== undefined) {
      problems.push(`machine path in an output: ${JSON.stringify(short(line))}`);
    }
  }
  // 4. A value shown twice: a line the cell printed, then the same line again, quoted, as the
  // cell's value (an exercise's status, printed and returned).
  for (const cell of article.querySelectorAll('div.cell')) {
    const printed = [...cell.querySelectorAll('.output.stream')]
      .flatMap((el) => shown(el).split('\\n')).map((line) => line.trim()).filter(Boolean);
    for (const el of cell.querySelectorAll('.output.text_plain')) {
      const value = shown(el).trim();
      if (printed.some((line) => value === `'${line}'` || value === `"${line}"`)) {
        problems.push(`shown twice, printed and as the value: ${JSON.stringify(short(value))}`);
      }
    }
  }
  // 5. Prose that should not be prose: a command line whose "--" the smart quotes turned into
  // a dash ("translate \\u2013beam 1"), a power written with a caret ("1.0\\u00b710^20").
  const dash = /(^|\\s)[\\u2013\\u2014][a-z]/;
  const caret = /\\d\\^[\\d{(-]/;
  const skip = 'pre, code, kbd, samp, script, style, textarea, mjx-container, .math, .highlight';
  const walker = document.createTreeWalker(article, NodeFilter.SHOW_TEXT);
  for (let node = walker.nextNode(); node; node = walker.nextNode()) {
    const text = node.textContent;
    if (!(dash.test(text) || caret.test(text)) || node.parentElement.closest(skip)) continue;
    if (dash.test(text)) {
      problems.push(`a command line set as prose, "--" now a dash: ${JSON.stringify(short(text))}`);
    }
    if (caret.test(text)) {
      problems.push(`a power written with a caret: ${JSON.stringify(short(text))}`);
    }
  }
  return problems;
}"""


def page_problems(page) -> list[str]:
    """What does not read cleanly on an open page at its window's width, one line per offender.

    Measured against the article's content column (the theme's `article.bd-article`, less its
    padding): every table, display formula, image, SVG, canvas, chart, code block and cell output
    must fit it to a pixel, scrolled or not. No output may be stderr or show a path of the
    machine that built the book; no cell may show a printed line again as its value; prose may
    hold no command line whose `--` became a dash and no power written with a caret. Call it
    once math is typeset and charts are drawn.
    """
    return page.evaluate(PAGE_PROBLEMS_JS, [WIDE_SELECTOR, MACHINE_PATH])


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


def watched_page(browser, allowed: tuple[str, ...]):
    """A new 1280 × 900 page whose requests outside `allowed` are blocked and listed in
    page.left_machine, and whose script errors, but the HARMLESS ones, are listed in page.errors."""
    context = browser.new_context(viewport={"width": 1280, "height": 900})
    page = context.new_page()
    page.left_machine, page.errors = [], []

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
    return page


def assert_drawn(page, page_path: str) -> None:
    """Every formula typeset by the local MathJax and none failed; every Altair chart drew its
    marks; every image loaded; no Markdown table left as a paragraph of pipes."""
    if page.locator(".math").count():
        page.wait_for_function("() => window.MathJax && MathJax.startup && MathJax.startup.promise")
        page.evaluate("() => MathJax.startup.promise")
        untypeset = page.evaluate(
            "() => [...document.querySelectorAll('.math')]"
            ".filter(e => !e.querySelector('mjx-container')).map(e => e.textContent.slice(0, 60))"
        )
        assert untypeset == [], f"{page_path}: math not typeset: {untypeset}"
        assert page.locator("mjx-merror").count() == 0, f"{page_path}: MathJax reported errors"
    if page.locator("[id^='altair-']").count():
        page.wait_for_function(
            "() => [...document.querySelectorAll(\"[id^='altair-']\")]"
            ".every(c => c.querySelector('.marks'))",
            timeout=20_000,
        )
    broken = page.evaluate(
        "() => [...document.images].filter(i => !i.complete || i.naturalWidth === 0)"
        ".map(i => i.src)"
    )
    assert broken == [], f"{page_path}: images that did not load: {broken}"
    unparsed = page.evaluate(  # what a cell displays as a Markdown table is a table
        "() => [...document.querySelectorAll('p')].map(p => p.textContent.trim())"
        ".filter(text => text.startsWith('| ')).map(text => text.slice(0, 60))"
    )
    assert unparsed == [], f"{page_path}: Markdown tables left unparsed: {unparsed}"


def sideways_code(page) -> list[list]:
    """The code blocks that scroll sideways, each as its widths and its longest line. The
    chapters' lines are at most 100 columns (ruff's line-length) and book/_static/book.css makes
    100 columns fit at 1280 px; what a cell prints wraps."""
    return page.evaluate(
        "() => [...document.querySelectorAll('div.highlight pre')]"
        ".filter(pre => pre.scrollWidth > pre.clientWidth + 1)"
        ".map(pre => [pre.scrollWidth, pre.clientWidth, pre.textContent.split('\\n')"
        ".reduce((longest, line) => (line.length > longest.length ? line : longest), '')])"
    )


@pytest.mark.parametrize("page_path", book_pages())
def test_page_renders_offline(browser, server: str, page_path: str) -> None:
    page = watched_page(browser, allowed=(server, "data:", "blob:"))
    page.on("requestfailed", lambda request: page.errors.append(f"request failed: {request.url}"))
    response = page.goto(f"{server}/{page_path}", wait_until="load")
    assert response is not None and response.ok, f"{page_path}: HTTP {response and response.status}"
    settle(page)
    assert_drawn(page, page_path)
    scrolling = sideways_code(page)
    problems = page_problems(page)  # everything fits the column and reads cleanly
    if page_path in SCREENSHOT_PAGES:
        SCREENSHOTS.mkdir(parents=True, exist_ok=True)
        name = Path(page_path).with_suffix(".png").name
        page.screenshot(path=str(SCREENSHOTS / name), full_page=True)
    page.context.close()
    assert page.left_machine == [], (
        f"{page_path}: requests that tried to leave the machine: {page.left_machine}"
    )
    assert page.errors == [], f"{page_path}: script errors: {page.errors}"
    if scrolling:
        scroll_width, client_width, line = scrolling[0]
        pytest.fail(
            f"{page_path}: {len(scrolling)} code block(s) scroll sideways at 1280 px; the first is "
            f"{scroll_width} px wide in {client_width} px, its longest line ({len(line)} "
            f"characters): {line!r}"
        )
    assert problems == [], f"{page_path} at 1280 px:\n" + "\n".join(problems)


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

    from annotated_transformer.book.notebook import offline_altair_html

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
# A long sentence, 46 pieces (longer than any of test2016): the row of pieces must wrap in the box.
FORTY_SIX_PIECES = (
    "Ein Mann in einem blauen Hemd und einer schwarzen Hose steht auf einer Leiter und streicht "
    "die Wand eines alten Hauses, während zwei Kinder unten auf dem Gehweg mit einem kleinen "
    "braunen Hund spielen und eine Frau mit einem roten Regenschirm ihnen lächelnd zuschaut."
)


@pytest.fixture(scope="session")
def tryit_expected(built_book: Path) -> dict[str, list]:
    """The page's test sentences and Python's translations of them (beam 4, α 0.6, plain; and
    greedy, beam 1)."""
    from annotated_transformer.data.multi30k import read_split
    from annotated_transformer.decoding.batched import translate_ids
    from annotated_transformer.translator import Translator

    test = [de for de, en in read_split("test2016") if de.strip() and en.strip()][:50]
    sentences = [*test, *TRYIT_HARD, TWELVE_WORDS]
    translator = Translator.pretrained(device="cpu")
    encoded, max_len = translator.encode(sentences), translator.config.model.max_len
    pieces, greedy = (
        translate_ids(translator.model, encoded, translator.tgt_vocab, max_len=max_len,
                      beam_size=k, alpha=0.6)
        for k in (4, 1)
    )  # fmt: skip
    texts = [translator.detokenize(p) for p in pieces]  # as Translator.translate gives them
    return {"sentences": sentences, "pieces": pieces, "texts": texts, "greedy": greedy}


# Records every text the status line shows, from the page's first script on (the loading message).
RECORD_STATUS = """(() => {
  window.tryitStatuses = [];
  new MutationObserver(() => {
    const status = document.querySelector('.tryit-status');
    if (status && window.tryitStatuses.at(-1) !== status.textContent) {
      window.tryitStatuses.push(status.textContent);
    }
  }).observe(document, {subtree: true, childList: true, characterData: true});
})()"""


def open_tryit(browser, url: str, allowed: tuple[str, ...], typing: bool = False):
    """The page at `url`, its model loaded; every request outside `allowed` is blocked and listed
    in page.left_machine, every script error in page.errors, every status line in
    window.tryitStatuses. Unless `typing`, the page waits ten minutes after a keystroke before it
    translates on its own, so that a test of the button and the keys sees only what they start."""
    page = watched_page(browser, allowed)
    page.received = []  # bytes per response
    page.on(
        "response",
        lambda response: (
            page.received.append(len(response.body())) if response.url.startswith("http") else None
        ),
    )
    page.add_init_script(RECORD_STATUS)
    page.goto(url, wait_until="load")
    page.wait_for_function("() => window.TryIt && window.TryIt.ready", timeout=30_000)
    page.evaluate("() => TryIt.ready.then(() => true)")
    if not typing:
        page.evaluate("() => { TryIt.typingPause = 600_000; }")
    return page


def tryit_translated(page, action) -> None:
    """Do `action` (a click, a key) on the idle page and wait for the translation it starts."""
    page.evaluate("() => { document.querySelector('.tryit-status').textContent = 'idle'; }")
    action()
    page.wait_for_function("() => /^Translated in/.test(document.querySelector('.tryit-status')"
                           ".textContent)", timeout=60_000)  # fmt: skip


TRANSLATE_ALL = """async (sentences) => {
  const page = await TryIt.ready;
  const out = [];
  for (const text of sentences) {
    const r = await page.run(text, {beamSize: 4, alpha: 0.6});
    out.push({pieces: r.nbest[0].pieces, greedy: r.greedy.pieces, text: r.text, ms: r.ms});
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
    for search in ("pieces", "greedy"):  # beam 4, α 0.6; and greedy decoding, beside it
        differ = [
            (sentence, want, one[search])
            for sentence, want, one in zip(tryit_expected["sentences"], tryit_expected[search],
                                           got, strict=True)
            if one[search] != want
        ]  # fmt: skip
        assert not differ, f"{search}: {len(differ)} of {len(got)} differ; the first: {differ[0]}"
    assert [one["text"] for one in got] == tryit_expected["texts"]
    print(f"\n{where}: {len(got)} sentences as Python translates them; the 12-word sentence took "
          f"{got[-1]['ms']:.0f} ms, all {sum(one['ms'] for one in got) / 1000:.1f} s")  # fmt: skip
    page.context.close()
    assert page.left_machine == [] and page.errors == []


def test_tryit_reads_a_variant_as_the_plain_sentence(
    browser, server: str, built_book: Path
) -> None:
    """Typed with a byte-order mark, non-breaking and double spaces, a tab, a zero-width space and
    a decomposed umlaut, a sentence is translated as the plain one (the page's `normalize`)."""
    from annotated_transformer.translator import Translator

    plain = "Ein Hund läuft durch den Schnee."
    variant = "\ufeffEin\u00a0Hund  la\u0308uft\tdu\u200brch den Schnee. "
    want = Translator.pretrained(device="cpu").translate([plain])[0]
    page = open_tryit(browser, f"{server}/{TRYIT}", (server, "data:", "blob:"))
    page.fill("textarea.tryit-input", variant)
    tryit_translated(page, lambda: page.click("button.tryit-go"))
    assert page.inner_text(".tryit-output") == want
    page.context.close()
    assert page.left_machine == [] and page.errors == []


# Each setting's title and the message beside its field.
SETTING_MESSAGES = (
    "() => [...document.querySelectorAll('.tryit-settings input')]"
    ".map(i => [i.title, i.nextElementSibling.textContent])"
)


def refuses_bad_input(page) -> None:
    """Nothing to translate, or too long: a message on the page, no stale translation beside it,
    and the page goes on working."""
    status = page.locator(".tryit-status")
    for text, message in (("", "Nothing to translate"), (" \n ", "Nothing to translate"),
                          ("Hund " * 500, "the model reads at most 255")):  # fmt: skip
        page.fill("textarea.tryit-input", text)
        page.click("button.tryit-go")
        page.wait_for_function("() => document.querySelector('.tryit-status').classList"
                               ".contains('tryit-error')", timeout=10_000)  # fmt: skip
        assert message in status.inner_text()
        assert page.inner_text(".tryit-output") == ""


def refuses_wrong_settings(page) -> None:
    """A wrong beam size or α: a message beside its own field, naming it, and no translation
    started, by the button or by Enter in a field; the settings are put back after."""
    page.fill("textarea.tryit-input", TWELVE_WORDS)
    beam, alpha = "input[title='beam size']", "input[title='α']"
    beam_message = "beam size must be a whole number from 1 to 8"
    alpha_message = "α must be a number ≥ 0 (the paper's is 0.6)"
    for k, a, want in (("0", "0.6", [beam_message, ""]), ("4", "-1", ["", alpha_message]),
                       ("2.5", "", [beam_message, alpha_message]),
                       ("9", "0.6", [beam_message, ""])):  # fmt: skip
        page.fill(beam, k)
        page.fill(alpha, a)
        page.evaluate("() => { document.querySelector('.tryit-status').textContent = 'idle'; }")
        page.click("button.tryit-go")
        assert page.evaluate(SETTING_MESSAGES) == [["beam size", want[0]], ["α", want[1]]], (k, a)
        page.press(alpha, "Enter")  # Enter in a field: the same check
        assert page.evaluate(SETTING_MESSAGES) == [["beam size", want[0]], ["α", want[1]]], (k, a)
        assert page.inner_text(".tryit-status") == "idle"  # nothing started
    page.fill(beam, "4")
    page.fill(alpha, "0.6")


def heatmap_follows_its_menus(page, maps) -> None:
    """The heatmap opens on the mean of the last layer's heads, titled, with a colour scale; the
    menus offer every layer, and every head besides the mean; each choice draws its weights of
    `maps` (N, h, T, S), the cross-attention Python computes."""
    import torch

    N, h, T, S = maps.shape
    cells = "svg.tryit-heatmap g.row rect"

    def drawn() -> torch.Tensor:  # the weights of the cells drawn, (T, S)
        weights = page.evaluate(f"() => [...document.querySelectorAll('{cells}')]"
                                ".map(r => Number(r.getAttribute('data-weight')))")  # fmt: skip
        return torch.tensor(weights).view(T, S)

    layer, head = "div.tryit select[title=layer]", "div.tryit select[title=head]"
    assert (page.input_value(layer), page.input_value(head)) == (str(N - 1), "mean")
    assert torch.allclose(drawn(), maps[N - 1].mean(dim=0), atol=1e-4)
    menus = page.evaluate("() => [...document.querySelectorAll('div.tryit select')]"
                          ".map(s => [...s.options].map(o => o.textContent))")  # fmt: skip
    assert menus == [[f"layer {n + 1}" for n in range(N)],
                     ["mean of heads", *(f"head {n + 1}" for n in range(h))]]  # fmt: skip
    titles = page.evaluate("() => [...document.querySelectorAll('svg.tryit-heatmap "
                           "text.tryit-axis')].map(t => t.textContent)")  # fmt: skip
    assert titles == ["source pieces (the input)", "output pieces (the translation)"]
    assert page.locator("svg.tryit-heatmap rect.tryit-scale").count() == 1
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(SCREENSHOTS / "tryit.png"), full_page=True)
    page.select_option(layer, "0")  # layer 1, still the mean
    assert torch.allclose(drawn(), maps[0].mean(dim=0), atol=1e-4)
    first = page.locator(cells).nth(0).get_attribute("fill")
    page.select_option(layer, "2")  # layer 3
    page.select_option(head, "5")  # head 6
    assert torch.allclose(drawn(), maps[2, 5], atol=1e-4)
    shown = page.locator(cells).nth(0).get_attribute("fill")
    weight = maps[2, 5, 0, 0].item()
    assert shown != first and shown == f"rgba(31, 119, 180, {weight:.3f})"


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
    page.fill("textarea.tryit-input", TWELVE_WORDS)
    tryit_translated(page, lambda: page.click("button.tryit-go"))
    assert page.inner_text(".tryit-output") == tryit_expected["texts"][-1]
    assert page.locator("table.tryit-nbest tr").count() == 1 + 4  # a header, 4 hypotheses

    # The heatmap: a cell per output piece and source piece, the weights Python computes.
    result = page.evaluate("""async (text) => { const r = await (await TryIt.ready).run(text,
        {beamSize: 4, alpha: 0.6}); return {ids: r.nbest[0].ids, dims: r.cross.dims,
        cross: Array.from(r.cross.data)}; }""", TWELVE_WORDS)  # fmt: skip
    _, N, h, T, S = result["dims"]
    cells = "svg.tryit-heatmap g.row rect"
    assert page.locator(cells).count() == T * S
    widths = page.evaluate(f"() => [...document.querySelectorAll('{cells}')]"
                           ".map(r => r.getBBox().width)")  # fmt: skip
    assert set(widths) == {21}  # each cell its own square (no stylesheet stretches them)
    translator = Translator.pretrained(device="cpu")
    src = translator.encode([TWELVE_WORDS])[0]
    maps = attention_maps(translator.model, src, torch.tensor(result["ids"][:-1]))["cross"]
    assert torch.allclose(torch.tensor(result["cross"]).view(N, h, T, S), maps, atol=1e-4)

    heatmap_follows_its_menus(page, maps)

    refuses_bad_input(page)
    refuses_wrong_settings(page)

    # A click on an example translates it: no need to press Translate.
    tryit_translated(page, lambda: page.click("button.tryit-example >> nth=0"))
    assert page.evaluate(SETTING_MESSAGES) == [["beam size", ""], ["α", ""]]
    assert page.input_value("textarea.tryit-input") == "Ein Hund rennt durch den Schnee."
    assert page.inner_text(".tryit-output") == "A dog runs through the snow."
    page.context.close()
    assert page.left_machine == [] and page.errors == []


# Every text the translation (.tryit-output) shows, from the call on.
RECORD_OUTPUTS = """() => {
  const output = document.querySelector('.tryit-output');
  window.tryitOutputs = [];
  new MutationObserver(() => window.tryitOutputs.push(output.textContent))
    .observe(output, {subtree: true, childList: true, characterData: true});
}"""
# Ctrl+Enter on one sentence, and at once, while that one is searched, another typed in its place.
NEWER_INPUT = """([first, second]) => {
  const box = document.querySelector('textarea.tryit-input');
  box.value = first;
  box.dispatchEvent(new KeyboardEvent('keydown', {key: 'Enter', ctrlKey: true, bubbles: true}));
  box.value = second;
  box.dispatchEvent(new InputEvent('input', {bubbles: true}));
}"""


def test_tryit_translates_as_one_types(browser, server: str, built_book: Path) -> None:
    """The box is on the first screen at 1280x900. Typed key by key, a sentence is translated once
    the typing pauses, with no key pressed and nothing clicked, as Python's `Translator` does;
    Ctrl+Enter translates at once; a translation begun before newer input is never shown; a box
    emptied by typing clears the translation without an error."""
    from annotated_transformer.translator import Translator

    translate = Translator.pretrained(device="cpu").translate
    page = open_tryit(browser, f"{server}/{TRYIT}", (server, "data:", "blob:"), typing=True)
    box, output = "textarea.tryit-input", ".tryit-output"
    top = page.locator(box).bounding_box()["y"]
    assert top < 900, f"the text box begins {top:.0f} px down, below the first screen"

    def shows(text: str) -> None:  # wait, pressing nothing, until the translation is `text`
        shown = "([selector, text]) => document.querySelector(selector).textContent === text"
        page.wait_for_function(shown, arg=[output, text], timeout=60_000)

    typed = "Zwei Kinder spielen mit einem roten Ball am Strand."
    page.click(box)
    page.keyboard.press("Control+A")
    page.keyboard.type(typed, delay=30)  # a keystroke every 30 ms, then nothing
    shows(translate([typed])[0])
    assert page.input_value(box) == typed
    assert page.inner_text(".tryit-status").startswith("Translated in")
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(SCREENSHOTS / "tryit_typed.png"))  # the first screen, 1280x900

    # Ctrl+Enter does not wait for the pause (here ten minutes long).
    page.evaluate("() => { TryIt.typingPause = 600_000; }")
    pressed = "Ein alter Mann sitzt auf einer Bank."
    page.keyboard.press("Control+A")
    page.keyboard.type(pressed)
    page.keyboard.press("Control+Enter")
    shows(translate([pressed])[0])
    assert page.input_value(box) == pressed  # (no line break added)

    # Newer input while a translation runs: the older one never shows, the newer one does.
    page.evaluate("() => { TryIt.typingPause = 500; }")
    page.evaluate(RECORD_OUTPUTS)
    older, newer = TWELVE_WORDS, "Ein Hund rennt durch den Schnee."
    page.evaluate(NEWER_INPUT, [older, newer])
    shows(translate([newer])[0])
    assert translate([older])[0] not in page.evaluate("() => window.tryitOutputs")

    # Emptied by typing: the translation goes quietly ("Nothing to translate" is for the button).
    statuses = len(page.evaluate("() => window.tryitStatuses"))
    page.click(box)
    page.keyboard.press("Control+A")
    page.keyboard.press("Backspace")
    shows("")
    quiet = page.evaluate("() => window.tryitStatuses")[statuses:]
    assert not any("Nothing to translate" in status for status in quiet), quiet
    assert page.locator(".tryit-status.tryit-error").count() == 0
    page.context.close()
    assert page.left_machine == [] and page.errors == []


# Where the box, the first translation and each input piece lie on the page, in px (CSS, window).
TRYIT_LAYOUT = """() => {
  const rect = (el) => { const r = el.getBoundingClientRect();
    return {top: r.top, bottom: r.bottom, left: r.left, right: r.right}; };
  const row = document.querySelector('.tryit-pieces');
  return {
    scrollY: window.scrollY,
    widget: rect(document.querySelector('div.tryit')),
    box: rect(document.querySelector('textarea.tryit-input')),
    greedy: rect(document.querySelector('.tryit-greedy')),
    output: rect(document.querySelector('.tryit-output')),
    row: {...rect(row), scrollWidth: row.scrollWidth, clientWidth: row.clientWidth},
    pieces: [...row.querySelectorAll('.tryit-piece')].map(rect),
  };
}"""


def test_tryit_translates_its_sentence_on_load_on_the_first_screen(
    browser, server: str, built_book: Path
) -> None:
    """With no key pressed, the sentence in the box is translated as soon as the model has loaded,
    and the box and that translation lie on the first screen (1280 × 900); a 46-piece sentence's
    pieces wrap inside their box. Screenshots: tryit-after-load.png, tryit-46-pieces.png."""
    from annotated_transformer.translator import Translator

    translator = Translator.pretrained(device="cpu")
    page = open_tryit(browser, f"{server}/{TRYIT}", (server, "data:", "blob:"))  # no key pressed
    sentence = page.input_value("textarea.tryit-input")
    assert sentence.strip(), "the box opens empty"
    assert page.inner_text(".tryit-output") == translator.translate([sentence])[0]
    assert page.inner_text(".tryit-greedy") == translator.translate([sentence], beam_size=1)[0]
    statuses = page.evaluate("() => window.tryitStatuses")
    assert any(text.startswith("Model loaded in") for text in statuses), statuses
    assert statuses[-1].startswith("Translated in"), statuses
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(SCREENSHOTS / "tryit-after-load.png"))  # the first screen
    layout = page.evaluate(TRYIT_LAYOUT)
    assert layout["scrollY"] == 0
    for part in ("box", "greedy", "output"):
        box = layout[part]
        assert 0 <= box["top"] < box["bottom"] <= 900, f"{part} not on the first screen: {box}"

    # A long sentence: its row of pieces wraps; no piece sticks out of the box that holds them.
    want = translator.bpe(FORTY_SIX_PIECES)
    assert len(want) == 46
    page.fill("textarea.tryit-input", FORTY_SIX_PIECES)
    tryit_translated(page, lambda: page.click("button.tryit-go"))
    assert page.locator(".tryit-pieces .tryit-piece").all_inner_texts() == want
    assert page.inner_text(".tryit-output") == translator.translate([FORTY_SIX_PIECES])[0]
    layout = page.evaluate(TRYIT_LAYOUT)
    row, widget = layout["row"], layout["widget"]
    assert widget["left"] <= row["left"] and row["right"] <= widget["right"], (row, widget)
    assert row["scrollWidth"] <= row["clientWidth"] + 1, row
    outside = [text for text, piece in zip(want, layout["pieces"], strict=True)
               if piece["left"] < row["left"] - 1 or piece["right"] > row["right"] + 1]  # fmt: skip
    assert not outside, f"pieces outside their box {row}: {outside}"
    lines = {round(piece["top"]) for piece in layout["pieces"]}
    assert len(lines) > 1, "46 pieces on one line"
    page.locator("div.tryit").screenshot(path=str(SCREENSHOTS / "tryit-46-pieces.png"))
    page.context.close()
    assert page.left_machine == [] and page.errors == []


# Two sentences whose beam search finishes more than k hypotheses; for the second, Python's
# `simple_beam_search` keeps an empty one (</s> as the first token) among the 8 best.
TRYIT_NBEST = ["Zwei Kinder spielen mit einem roten Ball am Strand.",
               "Zwei Jungen packen Obst auf das Fahrrad."]  # fmt: skip


def nbest_expected(translator, sentence: str, k: int) -> tuple[list[str], list[float]]:
    """The k best of the book's simple beam search (α = 0.6) on `sentence`, best first, as texts
    (an empty one where the search kept the empty hypothesis) and scores."""
    from annotated_transformer.decoding.batched import EXTRA_LENGTH
    from annotated_transformer.decoding.simple import simple_beam_search
    from annotated_transformer.model.masks import padding_mask

    src = translator.encode([sentence])[0].unsqueeze(0)  # (1, S)
    limit = min(src.size(1) + 1 + EXTRA_LENGTH, translator.config.model.max_len)
    want = simple_beam_search(translator.model, src, padding_mask(src, 0), limit, 1, 2, k,
                              0.6, n_best=k)  # fmt: skip
    texts = [translator.detokenize(translator.tgt_vocab.decode(ids)) for ids, _ in want]
    return texts, [score for _, score in want]


def test_tryit_answers_keys_and_lists_at_most_k(browser, server: str, built_book: Path) -> None:
    """Loading shows progress; the widget says what the model learned and shows the input's
    pieces; Enter in a field, Ctrl+Enter and Cmd+Enter in the box translate; greedy and beam
    search side by side; the n-best list holds Python's k best, at most k rows, none blank."""
    import re

    from annotated_transformer.translator import Translator

    page = open_tryit(browser, f"{server}/{TRYIT}", (server, "data:", "blob:"))
    statuses = page.evaluate("() => window.tryitStatuses")
    loading = [re.fullmatch(r"Loading the model: (\d+) of (\d+) MB…", text) for text in statuses]
    done, total = zip(*((int(match[1]), int(match[2])) for match in loading if match), strict=True)
    assert len(done) >= 3 and list(done) == sorted(done) and set(total) == {done[-1]}, statuses
    loaded = [text for text in statuses if text.startswith("Model loaded in")]
    assert len(loaded) == 1 and statuses[-1].startswith("Translated in"), statuses  # (on load)

    # One line on the widget: the model learned image captions; what it does elsewhere.
    quoted = page.evaluate("() => TryIt.CAPTIONS_ONLY")
    note = page.inner_text(".tryit-note")
    assert "image captions" in note and quoted["german"] in note and quoted["english"] in note

    # The input's pieces, as Python's tokenizer cuts it, shown as the reader types.
    translator = Translator.pretrained(device="cpu")
    page.fill("textarea.tryit-input", TWELVE_WORDS)
    shown = page.locator(".tryit-pieces .tryit-piece").all_inner_texts()
    assert shown == translator.bpe.pipe([TWELVE_WORDS])[0]

    def rows() -> list[list[str]]:  # the n-best table: rank, hypothesis, score
        return page.evaluate(
            "() => [...document.querySelectorAll('table.tryit-nbest tr')].slice(1)"
            ".map(r => [...r.cells].map(c => c.textContent))"
        )

    keys = [("input[title='beam size']", "Enter"), ("textarea.tryit-input", "Control+Enter"),
            ("input[title='α']", "Enter"), ("textarea.tryit-input", "Meta+Enter")]  # fmt: skip
    cases = [(sentence, k) for sentence in TRYIT_NBEST for k in (4, 8)]
    empties = 0
    for (sentence, k), (field, key) in zip(cases, keys, strict=True):
        page.fill("textarea.tryit-input", sentence)
        page.fill("input[title='beam size']", str(k))
        tryit_translated(page, lambda field=field, key=key: page.press(field, key))
        assert page.input_value("textarea.tryit-input") == sentence  # (no line break added)
        assert page.inner_text(".tryit-output") == translator.translate([sentence], beam_size=k)[0]
        assert page.inner_text(".tryit-greedy") == translator.translate([sentence], beam_size=1)[0]
        assert page.inner_text(".tryit-label >> nth=1") == f"beam search, k = {k}, α = 0.6"
        texts, scores = nbest_expected(translator, sentence, k)
        got = rows()
        assert len(got) <= k and all(text.strip() for _, text, _ in got), got
        assert [(int(n), text) for n, text, _ in got] == [
            (n, text) for n, text in enumerate(texts, 1) if text
        ]
        listed = [score for score, text in zip(scores, texts, strict=True) if text]
        assert [float(score) for *_, score in got] == pytest.approx(listed, abs=2e-4)
        empties += "" in texts
        note = page.inner_text(".tryit-empty")
        assert ("empty translation" in note) == ("" in texts), (sentence, k, note)
    assert empties  # the cases hold the empty hypothesis of the search
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
    assert dict(menus) == {"sentence": 2, "kind": 3, "layer": 3, "head": 9}  # and "mean"
    # It opens on the last layer's mean of heads, says which way it translates, and is saved.
    opened = page.evaluate(
        "(id) => Object.fromEntries([...document.querySelectorAll('#' + id + ' .vega-bindings "
        "select')].map(s => [s.name, [s.selectedIndex, s.options.length, "
        "s.options[s.selectedIndex].textContent]]))",
        chart,
    )
    assert opened["layer"][0] == opened["layer"][1] - 1, opened
    assert "mean" in opened["head"][2], opened
    assert "German → English" in (page.text_content(f"#{chart}") or "")
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    page.locator(f"#{chart}").screenshot(path=str(SCREENSHOTS / "results_explorer.png"))
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


# --- figures a learner can read ------------------------------------------------------------------

# Every page's figures are measured. The pages that draw the model and its searches must have
# figures, and seven of them are saved as screenshots: each the image of the chapter cell with that
# tag (myst-nb gives a cell the class tag_<tag> for each of its tags).
FIGURE_PAGES = (
    "book/architecture.html",
    "book/attention.html",
    "book/regularization.html",
    "book/decoding.html",
    "book/fast_decoding.html",
)
FIGURE_SCREENSHOTS = {
    "figure1": ("book/architecture.html", "figure-architecture"),
    "worked_attention": ("book/attention.html", "figure-worked-attention"),
    "label_smoothing": ("book/regularization.html", "figure-label-smoothing"),
    "step_by_step": ("book/decoding.html", "figure-step-by-step"),
    "beam_helps": ("book/decoding.html", "figure-beam-helps"),
    "beam_tree": ("book/decoding.html", "figure-beam-tree"),
    "cache": ("book/fast_decoding.html", "figure-cache"),
}
SMALLEST_TEXT_PX = 10
# The size of every text of every figure image, as displayed. The book's matplotlib style keeps
# text as SVG text (svg.fonttype "none"), its font size in the user units of the SVG's viewBox,
# and the page shows the viewBox at the image's displayed width. A label's size is that of its
# largest part: the sub- and superscripts of a math label are set at 0.7 of it, as in print.
FIGURE_TEXT_SIZES = """async () => {
  const figures = [];
  for (const img of document.querySelectorAll('div.cell_output img')) {
    img.loading = 'eager';  // laid out at its displayed size before it is measured
    await img.decode().catch(() => {});
    const width = img.getBoundingClientRect().width;
    const figure = {src: img.src.split('/').pop().slice(0, 12), texts: []};
    if (img.src.endsWith('.svg')) {
      const svg = new DOMParser().parseFromString(await (await fetch(img.src)).text(),
                                                  'image/svg+xml').documentElement;
      const scale = width / svg.viewBox.baseVal.width;  // displayed px per user unit
      for (const text of svg.querySelectorAll('text')) {
        const sizes = [text, ...text.querySelectorAll('tspan')]
          .map(e => parseFloat(e.style.fontSize)).filter(size => size > 0);
        figure.texts.push([Math.max(...sizes) * scale, text.textContent.trim().slice(0, 40)]);
      }
    }
    figures.push(figure);
  }
  return figures;
}"""


def test_figures_can_be_read(browser, server: str) -> None:
    """No figure of the book has text under 10 px as shown in a 1280 px window, and the pages that
    draw the model and its searches have figures; screenshots of Figure 1, the worked attention,
    label smoothing's opening picture, the step-by-step decoding, the beam search that helps and
    the one that loses, and the decoder's cache go to _build/screenshots/."""
    context = browser.new_context(viewport={"width": 1280, "height": 900})
    page = context.new_page()
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    too_small, unmeasured, smallest = [], [], {}
    for page_path in book_pages()[1:]:  # not index.html: it redirects to the introduction
        page.goto(f"{server}/{page_path}", wait_until="load")
        figures = page.evaluate(FIGURE_TEXT_SIZES)
        assert figures or page_path not in FIGURE_PAGES, f"{page_path}: no figure found"
        for figure in figures:
            where = f"{page_path} {figure['src']}"
            if not figure["texts"]:  # a raster image, or text drawn as outlines
                unmeasured.append(where)
                continue
            size, text = min(figure["texts"])
            smallest[where] = round(size, 1)
            if size < SMALLEST_TEXT_PX:
                too_small.append(f"{where}: {text!r} at {size:.1f} px")
        for name, (path, tag) in FIGURE_SCREENSHOTS.items():
            if path == page_path:
                image = page.locator(f"div.tag_{tag} div.cell_output img")
                assert image.count() == 1, f"{page_path}: no figure in the cell tagged {tag}"
                image.screenshot(path=str(SCREENSHOTS / f"{name}.png"))
    context.close()
    print("\nsmallest text as displayed, px:", smallest)
    assert not unmeasured, f"figures whose text size cannot be read: {unmeasured}"
    assert not too_small, f"figure text under {SMALLEST_TEXT_PX} px as displayed: {too_small}"


def test_the_introduction_opens_on_what_the_reader_will_build(browser, server: str) -> None:
    """The introduction's first screen (1280 × 900): a picture of the model, a translation the
    package made, a link to "Try it", and the reading map with the minutes of its two routes (the
    main line and the whole path); saved as introduction_first_screen.png."""
    page = browser.new_page(viewport={"width": 1280, "height": 900})
    page.goto(f"{server}/book/introduction.html", wait_until="load")
    settle(page)
    tops = page.evaluate(
        """() => ({
          picture: [...document.querySelectorAll('div.cell_output img')]
            .map(e => e.getBoundingClientRect().top),
          table: [...document.querySelectorAll('div.cell_output table')]
            .map(e => e.getBoundingClientRect().top),
          minutes: [...document.querySelectorAll('div.cell_output table')]
            .filter(t => /minutes/i.test(t.innerText)).map(e => e.getBoundingClientRect().top),
          routes: [...document.querySelectorAll('div.cell_output p')]
            .filter(p => /main line/i.test(p.innerText) && /whole path/i.test(p.innerText))
            .map(e => e.getBoundingClientRect().top),
          tryit: [...document.querySelectorAll('article.bd-article a[href^="tryit.html"]')]
            .map(e => e.getBoundingClientRect().top),
        })"""
    )
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(SCREENSHOTS / "introduction_first_screen.png"))
    page.close()
    assert any(top < 900 for top in tops["picture"]), f"no picture on the first screen: {tops}"
    assert any(top < 900 for top in tops["minutes"]), f"no reading map on the first screen: {tops}"
    assert any(top < 900 for top in tops["routes"]), f"no two routes on the first screen: {tops}"
    assert any(top < 900 for top in tops["tryit"]), f"no link to Try it on the first screen: {tops}"


# Each chapter of the path reads as a main line, then "Going deeper" (issue 57): Attention's worked
# example comes before multi-head attention (and so before a trained model's heads, which are under
# "Going deeper"), and Regularization's `LabelSmoothing` code before its "Going deeper". Both are
# saved as screenshots for a reader's eye. A place is a CSS selector, or "text:" and a code cell's
# text.
MAIN_LINE_ORDER = """(places) => {
  const top = place => {
    const found = place.startsWith('text:')
      ? [...document.querySelectorAll('div.cell')]
          .filter(cell => cell.innerText.includes(place.slice(5)))
      : [...document.querySelectorAll(place)];
    return found.length ? found[0].getBoundingClientRect().top + window.scrollY : null;
  };
  return places.map(top);
}"""


@pytest.mark.parametrize(
    ("page_path", "first", "inside", "later", "shot"),
    [
        ("book/attention.html", "div.tag_worked-example", "text:attention() agrees",
         "section#multi-head-attention", "attention_worked_example"),
        ("book/regularization.html", "section#label-smoothing",
         "text:class LabelSmoothing(nn.Module)", "section#going-deeper",
         "regularization_main_line"),
    ],
    ids=["attention", "regularization"],
)  # fmt: skip
def test_the_main_line_comes_before_going_deeper(
    browser, server: str, page_path: str, first: str, inside: str, later: str, shot: str
) -> None:
    page = browser.new_page(viewport={"width": 1280, "height": 900})
    page.goto(f"{server}/{page_path}", wait_until="load")
    settle(page)
    start, middle, end = page.evaluate(MAIN_LINE_ORDER, [first, inside, later])
    assert None not in (start, middle, end), (page_path, start, middle, end)
    assert start <= middle < end, (page_path, start, middle, end)
    headings = page.evaluate(
        "() => [...document.querySelectorAll('article h2')].map(h => h.innerText.trim())"
    )
    deeper = [h for h in headings if h.startswith("Going deeper")]
    assert len(deeper) == 1 and headings.index(deeper[0]) > 0, headings
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    page.set_viewport_size({"width": 1280, "height": int(min(end - start, 2400)) + 160})
    page.evaluate(f"window.scrollTo(0, {start - 140})")  # below the sticky header
    page.screenshot(path=str(SCREENSHOTS / f"{shot}.png"))
    page.close()
