"""Upload sources indexed before UploadedFile existed keep their content: their
documents become their uploaded files, and their fingerprint the uploads' one."""

import hashlib

from django.db import migrations


def forwards(apps, schema_editor):
    ReferenceSource = apps.get_model("catalog", "ReferenceSource")
    Document = apps.get_model("catalog", "Document")
    UploadedFile = apps.get_model("catalog", "UploadedFile")
    for source in ReferenceSource.objects.filter(kind="upload"):
        documents = Document.objects.filter(source=source).order_by("path")
        UploadedFile.objects.bulk_create([
            UploadedFile(source=source, path=d.path, title=d.title, text=d.text, sha256=d.content_sha256, size=d.size)
            for d in documents
        ], ignore_conflicts=True)
        digest = hashlib.sha256()
        entries = sorted(UploadedFile.objects.filter(source=source).values_list("path", "sha256"))
        for path, sha in entries:
            digest.update(f"{path}\0{sha}\n".encode())
        source.fingerprint = digest.hexdigest() if entries else ""
        source.save(update_fields=["fingerprint"])


class Migration(migrations.Migration):
    dependencies = [("catalog", "0005_uploaded_file")]
    operations = [migrations.RunPython(forwards, migrations.RunPython.noop)]
