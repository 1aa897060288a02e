"""Document formats benchmark: how many documents per second each format becomes text
(catalog.sources.extraction), on generated files of a realistic size: a 10-page PDF, a
DOCX of 10 sections, a 10-slide PPTX, an HTML page and a Markdown file of about the
same text. Extraction alone: chunking, embedding and writing are the same for every
format (benchmarks.reindex times them)."""

from __future__ import annotations

import random
import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass

from benchmarks.reindex import WORDS
from catalog.sources.extraction import extract
from tests.documents import docx_bytes, pdf_bytes, pptx_bytes

SECTIONS = 10


def _sentences(rng: random.Random, count: int) -> list[str]:
    return [" ".join(rng.choices(WORDS, k=rng.randint(8, 16))).capitalize() + "." for _ in range(count)]


def sample_files(seed: int = 7) -> dict[str, tuple[str, bytes]]:
    """One file per format, each holding SECTIONS sections of about 12 sentences."""
    rng = random.Random(seed)
    sections = [(f"Section {i + 1}: {' '.join(rng.sample(WORDS, 2))}", _sentences(rng, 12)) for i in range(SECTIONS)]
    markdown = "\n\n".join(f"## {title}\n\n" + " ".join(body) for title, body in sections)
    html = ("<html><head><title>Guide</title></head><body><nav>Home | Docs</nav><main>"
            + "".join(f"<h2>{title}</h2><p>{' '.join(body)}</p>" for title, body in sections)
            + "</main><footer>(c)</footer></body></html>")
    return {
        "markdown": ("guide.md", markdown.encode()),
        "html": ("guide.html", html.encode()),
        "pdf": ("guide.pdf", pdf_bytes([[title, *body] for title, body in sections], title="Guide")),
        "docx": ("guide.docx", docx_bytes([block for title, body in sections
                                           for block in (("h2", title), ("p", " ".join(body)))])),
        "pptx": ("guide.pptx", pptx_bytes([(title, body[:6]) for title, body in sections])),
    }


@dataclass
class FormatFigures:
    format: str
    bytes: int
    text_chars: int
    documents_per_s: float
    median_ms: float


def run_formats_bench(*, repeat: int = 30, log: Callable[[str], object] = print) -> list[FormatFigures]:
    figures = []
    for kind, (name, data) in sample_files().items():
        extract(name, data)  # imports and caches warmed
        times = []
        for _ in range(repeat):
            started = time.perf_counter()
            text = extract(name, data).text
            times.append(time.perf_counter() - started)
        median = statistics.median(times)
        figures.append(FormatFigures(kind, len(data), len(text), round(1 / median, 1), round(median * 1000, 2)))
        log(f"{kind:<9} {len(data):>8} bytes -> {len(text):>6} chars: {1 / median:8.1f} documents/s "
            f"(median {median * 1000:.2f} ms)")
    return figures
