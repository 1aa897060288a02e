"""The evaluation pages' forms: starting a run (a catalog, the modes, a stored test set
or two files to upload as a new one), filtering the history, choosing two modes to
compare. What a test set may be is retrieval.evaluation.query_sets' rule; its
ValidationErrors come back onto these fields."""

from __future__ import annotations

from typing import Any

from django import forms
from django.core.files.uploadedfile import UploadedFile
from django.template.defaultfilters import filesizeformat

from catalog.models import Catalog
from catalog.ranking import MODES
from catalog.sources.uploads import max_upload_bytes
from catalog.widgets import FastSelect
from retrieval.evaluation.beir import METRICS
from retrieval.evaluation.runs import DEFAULT_MODES, modes_problem
from retrieval.evaluation.selectors import METRIC_LABELS, query_sets_listed
from retrieval.models import EvaluationRun, EvaluationSet

MODE_HELP = {
    "bm25": "exact BM25 over the catalog's terms",
    "vector": "nearest chunks by meaning",
    "hybrid": "BM25 and vector fused as the catalog fuses them",
    "bm25_tiebreak": "BM25, vector breaks its ties",
}
assert set(MODE_HELP) == set(MODES)
STORED, UPLOAD = "stored", "upload"


class FileTextField(forms.FileField):
    """An uploaded text file read as UTF-8, its size checked before it is read."""

    def __init__(self, *, file: str, **kwargs: Any) -> None:
        super().__init__(required=False, **kwargs)
        self.file = file

    def clean(self, data: Any, initial: Any = None) -> str:
        upload = super().clean(data, initial)
        if not isinstance(upload, UploadedFile):
            return ""
        if (upload.size or 0) > max_upload_bytes():
            raise forms.ValidationError(f"{upload.name} is {_size(upload.size or 0)}; a test set's file may be at "
                                        f"most {_size(max_upload_bytes())}.")
        raw: bytes = upload.read()
        try:
            return raw.decode("utf-8-sig")
        except UnicodeDecodeError as exc:
            raise forms.ValidationError(f"{upload.name} is not UTF-8 text (byte {exc.start}).") from None


def _size(n: int) -> str:
    return str(filesizeformat(n)).replace("\xa0", " ")


class QuerySetChoice(forms.ModelChoiceField[EvaluationSet]):
    """A stored set, shown with the catalog it runs on."""

    def label_from_instance(self, obj: EvaluationSet) -> str:
        return f"{obj.name} ({obj.catalog.slug})" if obj.catalog is not None else f"{obj.name} (no catalog)"


class EvaluationForm(forms.Form):
    catalog = forms.ModelChoiceField(queryset=Catalog.objects.live().order_by("slug"), to_field_name="slug",
                                     widget=FastSelect, empty_label="— choose a catalog —",
                                     help_text="Its search is ranked as a signed-in person's: sources that need "
                                               "approval are left out.")
    modes = forms.MultipleChoiceField(choices=[(mode, mode) for mode in MODES], widget=forms.CheckboxSelectMultiple,
                                      required=False, initial=list(DEFAULT_MODES))
    test_set = forms.ChoiceField(choices=[(STORED, "A stored test set"), (UPLOAD, "Upload a new test set")],
                                 widget=forms.RadioSelect, initial=STORED, label="Test set")
    query_set = QuerySetChoice(queryset=query_sets_listed(), required=False, widget=FastSelect,
                               empty_label="— choose a test set —", label="Stored test set",
                               help_text="A set runs on the catalog it was uploaded for.")
    name = forms.CharField(max_length=100, required=False, label="Name of the new set",
                           help_text="Runs of the same set and catalog are compared with each other.")
    queries = FileTextField(file="queries.jsonl", label="Queries (queries.jsonl)",
                            help_text='One {"_id", "text"} per line, as BEIR ships them.')
    qrels = FileTextField(file="qrels", label="Judgements (qrels .tsv)",
                          help_text="query-id, corpus-id, score per line, tab-separated; a header line is fine.")

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        if not self.is_bound and not query_sets_listed().exists():
            self.initial["test_set"] = UPLOAD

    def clean_modes(self) -> list[str]:
        modes: list[str] = self.cleaned_data["modes"]
        if problem := modes_problem(modes):
            raise forms.ValidationError(problem)
        return modes

    def clean(self) -> dict[str, Any]:
        data = super().clean() or {}
        if data.get("test_set") == STORED:
            query_set, catalog = data.get("query_set"), data.get("catalog")
            if query_set is None and "query_set" not in self.errors:
                self.add_error("query_set", "Choose a stored test set, or upload a new one.")
            elif query_set is not None and catalog is not None and query_set.catalog_id != catalog.pk:
                self.add_error("query_set", f"{query_set.name} was uploaded for another catalog: choose one of "
                                            f"{catalog.slug}'s sets, or upload it for {catalog.slug}.")
        elif data.get("test_set") == UPLOAD:
            for name, message in (("name", "Name the new test set."), ("queries", "Choose the queries file."),
                                  ("qrels", "Choose the judgements file.")):
                if not data.get(name) and name not in self.errors:
                    self.add_error(name, message)
        return data


class HistoryFilterForm(forms.Form):
    catalog = forms.ModelChoiceField(queryset=Catalog.objects.live().order_by("slug"), to_field_name="slug",
                                     required=False, empty_label="any catalog", widget=FastSelect)
    query_set = QuerySetChoice(queryset=query_sets_listed(), required=False, empty_label="any test set",
                                       widget=FastSelect, label="Test set")
    status = forms.ChoiceField(choices=[("", "any status"), *EvaluationRun.Status.choices], required=False)


class CompareForm(forms.Form):
    """Two of the run's modes and the metric wins, ties and losses count on; what is not
    given is the run's last mode against its first, on nDCG@10."""

    a = forms.ChoiceField(label="Mode", required=False)
    b = forms.ChoiceField(label="against", required=False)
    metric = forms.ChoiceField(choices=[(m, METRIC_LABELS[m]) for m in METRICS], required=False, label="on")

    def __init__(self, *args: Any, run: EvaluationRun, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        choices = [(mode, mode) for mode in run.modes]
        for name in ("a", "b"):
            field = self.fields[name]
            assert isinstance(field, forms.ChoiceField)
            field.choices = choices
        self.defaults = {"a": run.modes[-1], "b": run.modes[0], "metric": "ndcg_at_10"}

    def clean(self) -> dict[str, Any]:
        data = super().clean() or {}
        for name, default in self.defaults.items():
            if name not in self.errors and not data.get(name):
                data[name] = default
        if "a" not in self.errors and "b" not in self.errors and data["a"] == data["b"]:
            self.add_error("b", "Choose two different modes.")
        return data

    @classmethod
    def chosen(cls, query: Any, run: EvaluationRun) -> CompareForm:
        """The form as asked for, its defaults for what is not."""
        form = cls({name: query.get(name, "") for name in ("a", "b", "metric")}, run=run)
        form.data = {**form.defaults, **{name: value for name, value in form.data.items() if value}}
        return form
