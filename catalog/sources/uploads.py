"""What curators may put into a source: an uploaded file is a text file the indexer reads
(the suffixes glob sources index: md, markdown, txt, rst), UTF-8 without NUL
characters, under a valid upload path; any text put at once (an uploaded file, a file
PUT through the API, an inline source's text) is at most LECTERN_MAX_UPLOAD_BYTES.

The dashboard reads every uploaded file through upload_text(); the API's serializers,
the dashboard's inline text field and the editing services ask text_size_problem(), so
one rule holds on every path."""

from __future__ import annotations

from django.conf import settings
from django.template.defaultfilters import filesizeformat

from catalog.sources.documents import TEXT_SUFFIXES, DocumentInput, title_of
from catalog.sources.upload_paths import upload_path_problem

UPLOAD_SUFFIXES = tuple(sorted(TEXT_SUFFIXES))


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
    dot = name.rfind(".")
    suffix = name[dot:].lower() if dot > 0 else ""
    if suffix not in TEXT_SUFFIXES:
        return f"is not a text file Lectern indexes (it reads {', '.join(UPLOAD_SUFFIXES)})"
    return None


def upload_text(*, name: str, data: bytes) -> DocumentInput:
    """An uploaded file as the document it becomes (path: its name), or UploadRefused."""
    for problem in (upload_path_problem(name), upload_suffix_problem(name), text_size_problem(len(data))):
        if problem:
            raise UploadRefused(f"{name}: {problem}")
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise UploadRefused(f"{name}: is not UTF-8 text (byte {exc.start})") from None
    if "\x00" in text:
        raise UploadRefused(f"{name}: holds NUL characters, so it is not a text file")
    return DocumentInput(name, title_of(name, text), text, len(data))
