from typing import Any, cast

from django import forms
from django.db.models import QuerySet

from catalog.models import Catalog
from retrieval.search.selectors import MODES

PAGE_QUERY_CHARS = 2000


class SearchForm(forms.Form):
    catalog: forms.ModelChoiceField[Catalog] = forms.ModelChoiceField(queryset=None, to_field_name="slug",
                                                                      empty_label=None)
    # The page searches by GET: gunicorn refuses a request line over 4094 bytes (the API
    # takes LECTERN_MAX_ENRICH_CHARS).
    query = forms.CharField(max_length=PAGE_QUERY_CHARS, strip=True)
    mode = forms.ChoiceField(choices=[(m, m) for m in MODES], initial="hybrid")
    top_k = forms.IntegerField(min_value=1, max_value=100, initial=10)
    dedup = forms.BooleanField(required=False)

    def __init__(self, *args: Any, catalogs: QuerySet[Catalog], **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        # self.fields holds deep copies of the fields declared above, typed as Field
        cast(forms.ModelChoiceField[Catalog], self.fields["catalog"]).queryset = catalogs
