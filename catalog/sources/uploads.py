"""What curators may put into a source: an uploaded file is one the indexer reads (the
formats glob sources index: text and Markdown as UTF-8 without NUL characters, HTML,
PDF, DOCX, PPTX; catalog.sources.extraction), read into its text when it is uploaded,
under a valid upload path; any text put at once (an uploaded file, a file
PUT through the API, an inline source's text) is at most LECTERN_MAX_UPLOAD_BYTES.

The dashboard reads every uploaded file through upload_text(); the API's serializers,
the dashboard's inline text field and the editing services ask text_size_problem(), so
one rule holds on every path."""

from __future__ import annotations

from django.conf import settings
from django.template.defaultfilters import filesizeformat

from catalog.sources.documents import DocumentInput, document_input
from catalog.sources.extraction import FORMATS, ExtractionError, extract, file_format
from catalog.sources.upload_paths import upload_path_problem

UPLOAD_SUFFIXES = tuple(sorted(FORMATS))


class UploadRefused(ValueError):
    """A file that cannot become a document; the message says which file and why."""


def max_upload_bytes() -> int:
    return int(settings.LECTERN_MAX_UPLOAD_BYTES)


def text_size_problem(size: int) -> str | None:
    """Why `size` bytes of text are too many to put into a source at once, or None."""
    limit = max_upload_bytes()
    if size > limit:
        return f"is {_size(size)}; at most {_size(limit)} may be put into a source at once"
    return None


def _size(n: int) -> str:
    return str(filesizeformat(n)).replace("\xa0", " ")  # plain spaces: the API's messages are JSON


def upload_suffix_problem(name: str) -> str | None:
    """Why a file of this name is not one the indexer reads, or None."""
    if file_format(name) is None:
        return f"is not a file type Lectern indexes (it reads {', '.join(UPLOAD_SUFFIXES)})"
    return None


def upload_text(*, name: str, data: bytes) -> DocumentInput:
    """An uploaded file as the document it becomes (path: its name), or UploadRefused."""
    for problem in (upload_path_problem(name), upload_suffix_problem(name), text_size_problem(len(data))):
        if problem:
            raise UploadRefused(f"{name}: {problem}")
    try:
        extracted = extract(name, data)
    except ExtractionError as exc:
        raise UploadRefused(f"{name}: {exc}") from None
    return document_input(name, extracted, len(data))
