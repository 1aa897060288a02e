from django import forms
from django.conf import settings

from retrieval.selectors import MODES


class SearchForm(forms.Form):
    catalog = forms.ModelChoiceField(queryset=None, to_field_name="slug", empty_label=None)
    query = forms.CharField(max_length=settings.LECTERN_MAX_QUERY_CHARS, strip=True)
    mode = forms.ChoiceField(choices=[(m, m) for m in MODES], initial="hybrid")
    top_k = forms.IntegerField(min_value=1, max_value=100, initial=10)
    dedup = forms.BooleanField(required=False)

    def __init__(self, *args, catalogs, **kwargs):
        super().__init__(*args, **kwargs)
        self.fields["catalog"].queryset = catalogs
