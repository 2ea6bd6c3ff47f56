"""The notification settings form: which kinds by email and by webhook, and the webhook's URL."""

from __future__ import annotations

from typing import Any

from django import forms

from workspaces.notifications.kinds import Kind
from workspaces.notifications.models import NotificationPreference


class PreferenceForm(forms.ModelForm[NotificationPreference]):
    email_kinds = forms.MultipleChoiceField(
        choices=Kind.choices, required=False, widget=forms.CheckboxSelectMultiple, label="By email"
    )
    webhook_kinds = forms.MultipleChoiceField(
        choices=Kind.choices, required=False, widget=forms.CheckboxSelectMultiple, label="By webhook"
    )

    class Meta:
        model = NotificationPreference
        fields = ("email_kinds", "webhook_url", "webhook_kinds")
        labels = {"webhook_url": "Webhook URL"}
        widgets = {"webhook_url": forms.URLInput(attrs={"placeholder": "https://hooks.slack.com/services/..."})}

    def clean_webhook_url(self) -> str:
        value: str = self.cleaned_data.get("webhook_url") or ""
        return value.strip()

    def clean(self) -> dict[str, Any]:
        cleaned = super().clean() or {}
        if cleaned.get("webhook_kinds") and not cleaned.get("webhook_url") and "webhook_url" not in self.errors:
            self.add_error("webhook_url", "Give the webhook's URL, or choose no kinds for it.")
        return cleaned
