"""Files become text with what a citation needs (catalog.sources.extraction), and chunks
are located in them (catalog.sources.locators): real PDF, DOCX, PPTX and HTML files,
and the files that cannot be read, each refused with one line saying why."""

from __future__ import annotations

import pytest

from catalog.sources.extraction import PAGE_BREAK, ExtractionError, extract, html_text
from catalog.sources.locators import Positions, cite, document_positions
from tests.documents import docx_bytes, encrypted_pdf_bytes, pdf_bytes, pptx_bytes, zip_bomb_docx


def test_a_pdf_reads_page_by_page_with_its_title():
    data = pdf_bytes([["Restart the ingest worker (v2)."], ["Rotate the signing keys yearly."]], title="Ops guide")

    extracted = extract("guides/ops.pdf", data)

    assert extracted.format == "pdf" and extracted.title == "Ops guide"
    first, second = extracted.text.split(PAGE_BREAK)
    assert first == "Restart the ingest worker (v2)." and second == "Rotate the signing keys yearly."
    positions = document_positions("guides/ops.pdf", extracted.text, {"format": "pdf"})
    start = extracted.text.index("Rotate")
    assert positions.locate(start, start + 10) == {"pages": [2, 2]}
    assert positions.locate(0, len(extracted.text)) == {"pages": [1, 2]}


def test_a_docx_keeps_its_headings_lists_and_tables_in_order():
    data = docx_bytes([("h1", "Deploying"), ("p", "Build the image first."), ("h2", "Rollback"),
                       ("li", "Revert the tag"), ("table", "step|owner\nrevert|on-call")], title="Deploy runbook")

    extracted = extract("deploy.docx", data)

    assert extracted.title == "Deploy runbook"
    assert extracted.text == ("# Deploying\n\nBuild the image first.\n\n## Rollback\n\n- Revert the tag\n\n"
                              "step | owner\n\nrevert | on-call")
    positions = Positions(extracted.text, "headings")
    at = extracted.text.index("revert |")
    assert positions.locate(at, at + 5) == {"heading": "Deploying › Rollback"}
    assert positions.locate(0, 5) == {"heading": "Deploying"}


def test_a_pptx_reads_slide_by_slide_with_titles_as_headings_and_notes():
    data = pptx_bytes([("Quarterly review", ["Revenue grew", "Churn fell"]), ("Next steps", ["Hire two SREs"])],
                      notes={1: "Mention the budget"})

    extracted = extract("deck.pptx", data)

    assert extracted.title == "Quarterly review"  # no title property: the first slide's
    slides = extracted.text.split(PAGE_BREAK)
    assert slides == ["## Quarterly review\n\nRevenue grew\n\nChurn fell",
                      "## Next steps\n\nHire two SREs\n\nNotes: Mention the budget"]
    positions = Positions(extracted.text, "slides")
    at = extracted.text.index("Hire")
    assert positions.locate(at, at + 4) == {"slides": [2, 2], "heading": "Next steps"}


def test_html_keeps_the_main_text_and_drops_navigation_scripts_and_footers():
    page = b"""<!doctype html><html><head><title>Caching guide</title><style>p{}</style></head><body>
      <header><a href="/">Home</a></header><nav><a href="/a">About</a></nav>
      <div role="navigation">Sidebar links</div>
      <main><h1>Caching</h1><p>Cache   responses with a <b>time to live</b>.</p>
        <h2>Invalidation</h2><ul><li>On every write</li></ul>
        <pre>cache.delete(key)\n    cache.set(key, v)</pre>
        <table><tr><th>ttl</th><td>60 s</td></tr></table>
        <script>track()</script><div hidden>secret draft</div></main>
      <footer>Copyright</footer></body></html>"""

    title, text = html_text(page)

    assert title == "Caching guide"
    assert text == ("# Caching\n\nCache responses with a time to live.\n\n## Invalidation\n\n- On every write\n\n"
                    "cache.delete(key)\n    cache.set(key, v)\n\nttl | 60 s")
    for gone in ("Home", "About", "Sidebar", "track", "secret draft", "Copyright", "p{}"):
        assert gone not in text


def test_html_without_main_reads_its_body_and_titles_by_its_first_heading():
    title, text = html_text(b"<body><h1>Runbook</h1><p>Step one.</p></body>")
    assert (title, text) == ("Runbook", "# Runbook\n\nStep one.")


def test_markdown_chunks_know_their_lines_and_heading_path_but_not_headings_in_code():
    text = "# Guide\n\nIntro.\n\n## Setup\n\n```sh\n# not a heading\n```\nRun it.\n"
    positions = document_positions("guide.md", text, {})
    at = text.index("Run it")
    assert positions.locate(at, at + 7) == {"lines": [10, 10], "heading": "Guide › Setup"}
    assert positions.locate(0, len(text)) == {"lines": [1, 10], "heading": "Guide"}


@pytest.mark.parametrize(("name", "data", "why"), [
    ("scan.pdf", pdf_bytes([[], []]), "no text in its 2 page(s): a scanned PDF without a text layer?"),
    ("locked.pdf", encrypted_pdf_bytes([["Top secret"]]), "encrypted PDF (it needs a password)"),
    ("broken.pdf", b"%PDF-1.4\n1 0 obj garbage", "not a readable PDF"),
    ("bomb.docx", zip_bomb_docx(), "refused as a zip bomb: word/document.xml unpacks 4,194,304 bytes"),
    ("broken.docx", b"PK\x03\x04 not really", "not a valid .docx file"),
    ("empty.pptx", zip_bomb_docx(1000), "not a readable .pptx file"),
    ("old.doc.docx", b"\xd0\xcf\x11\xe0\xa1\xb1\x1a\xe1" + b"\0" * 100, "encrypted, or in the old binary Office"),
    ("latin.md", "caf\u00e9".encode("latin-1"), "is not UTF-8 text (byte 3)"),
    ("nul.txt", b"a\x00b", "holds NUL characters"),
    ("logo.png", b"\x89PNG", "unsupported file type .png"),
])
def test_a_file_that_cannot_become_text_is_refused_with_why(name, data, why):
    with pytest.raises(ExtractionError) as refused:
        extract(name, data)
    assert why in str(refused.value) and "\n" not in str(refused.value)


def test_a_citation_reads_as_one_line():
    assert cite({"lines": [3, 9], "heading": "Guide › Setup"}, "guide.md") == "guide.md:3-9 — Guide › Setup"
    assert cite({"pages": [2, 2]}, "ops.pdf") == "ops.pdf p. 2"
    assert cite({"pages": [2, 3]}, "ops.pdf") == "ops.pdf pp. 2-3"
    assert cite({"slides": [4, 4], "heading": "Next"}, "deck.pptx") == "deck.pptx slide 4 — Next"
    git = {"path": "docs/run.md", "lines": [1, 1], "commit": "0123456789abcdef"}
    assert cite(git) == "docs/run.md:1 @ 0123456789ab"
    assert cite({"url": "https://docs.example/a", "heading": "A"}, "a") == "https://docs.example/a — A"
    assert cite({}, "plain.md") == "plain.md"
