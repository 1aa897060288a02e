"""Real PDF, DOCX and PPTX files made for tests: PDFs written byte by byte (one text
object per line, Helvetica), DOCX and PPTX by python-docx and python-pptx."""

from __future__ import annotations

import io
import zipfile


def pdf_bytes(pages: list[list[str]], *, title: str = "") -> bytes:
    """A PDF whose page i shows the lines pages[i] (an empty list: a page without text,
    as a scan without a text layer has)."""
    objects: list[bytes] = []
    count = len(pages)
    kids = " ".join(f"{4 + 2 * i} 0 R" for i in range(count))
    objects.append(b"<< /Type /Catalog /Pages 2 0 R >>")
    objects.append(f"<< /Type /Pages /Kids [{kids}] /Count {count} >>".encode())
    objects.append(b"<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica /Encoding /WinAnsiEncoding >>")
    for i, lines in enumerate(pages):
        stream = "BT /F1 12 Tf 14 TL 72 720 Td " + " ".join(
            f"({line.replace(chr(92), chr(92) * 2).replace('(', chr(92) + '(').replace(')', chr(92) + ')')}) Tj T*"
            for line in lines) + " ET" if lines else ""
        objects.append(f"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] /Resources << /Font << /F1 3 0 R >> >> "
                       f"/Contents {5 + 2 * i} 0 R >>".encode())
        data = stream.encode("latin-1")
        objects.append(b"<< /Length %d >>\nstream\n" % len(data) + data + b"\nendstream")
    info = len(objects) + 1
    objects.append(f"<< /Title ({title}) >>".encode())
    out = io.BytesIO()
    out.write(b"%PDF-1.4\n%\xe2\xe3\xcf\xd3\n")
    offsets = []
    for number, body in enumerate(objects, start=1):
        offsets.append(out.tell())
        out.write(b"%d 0 obj\n" % number + body + b"\nendobj\n")
    xref = out.tell()
    out.write(b"xref\n0 %d\n0000000000 65535 f \n" % (len(objects) + 1))
    for offset in offsets:
        out.write(b"%010d 00000 n \n" % offset)
    out.write(b"trailer\n<< /Size %d /Root 1 0 R /Info %d 0 R >>\nstartxref\n%d\n%%%%EOF\n"
              % (len(objects) + 1, info, xref))
    return out.getvalue()


def encrypted_pdf_bytes(pages: list[list[str]], password: str = "secret") -> bytes:
    from pypdf import PdfReader, PdfWriter

    writer = PdfWriter()
    writer.append(PdfReader(io.BytesIO(pdf_bytes(pages))))
    writer.encrypt(user_password=password, owner_password=password + "-owner", algorithm="AES-128")
    out = io.BytesIO()
    writer.write(out)
    return out.getvalue()


def docx_bytes(blocks: list[tuple[str, str]], *, title: str = "") -> bytes:
    """A Word document of (kind, text) blocks: kind 'h1'..'h3', 'p', 'li', or 'table'
    (text: rows split by newlines, cells by '|')."""
    import docx

    document = docx.Document()
    document.core_properties.title = title
    for kind, text in blocks:
        if kind.startswith("h"):
            document.add_heading(text, level=int(kind[1]))
        elif kind == "li":
            document.add_paragraph(text, style="List Bullet")
        elif kind == "table":
            rows = [row.split("|") for row in text.split("\n")]
            table = document.add_table(rows=len(rows), cols=len(rows[0]))
            for r, row in enumerate(rows):
                for c, cell in enumerate(row):
                    table.cell(r, c).text = cell
        else:
            document.add_paragraph(text)
    out = io.BytesIO()
    document.save(out)
    return out.getvalue()


def pptx_bytes(slides: list[tuple[str, list[str]]], *, notes: dict[int, str] | None = None) -> bytes:
    """A presentation of (title, bullet lines) slides; notes by slide index."""
    from pptx import Presentation

    deck = Presentation()
    for index, (heading, lines) in enumerate(slides):
        slide = deck.slides.add_slide(deck.slide_layouts[1])
        slide.shapes.title.text = heading
        slide.placeholders[1].text_frame.text = "\n".join(lines)
        if notes and index in notes:
            slide.notes_slide.notes_text_frame.text = notes[index]
    out = io.BytesIO()
    deck.save(out)
    return out.getvalue()


def zip_bomb_docx(unpacked: int = 4 * 1024 * 1024) -> bytes:
    """A .docx-named zip whose document part unpacks to `unpacked` zero bytes from a few KB."""
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED) as archive:
        archive.writestr("[Content_Types].xml", "<Types/>")
        archive.writestr("word/document.xml", b"\0" * unpacked)
    return out.getvalue()
