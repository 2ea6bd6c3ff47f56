"""The notification settings form: which kinds by email and by webhook, and the webhook's URL."""

from __future__ import annotations

from typing import Any

from django import forms

from workspaces.notifications.kinds import OPS_KINDS, Kind
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

    def __init__(self, *args: Any, ops: bool = True, **kwargs: Any) -> None:
        """``ops``: whether the person gets operations alerts (operators, leads); if not, those kinds are not
        offered, and whatever was saved for them is kept as it is."""
        super().__init__(*args, **kwargs)
        self.ops = ops
        if not ops:
            for name in ("email_kinds", "webhook_kinds"):
                field = self.fields[name]
                field.choices = [c for c in Kind.choices if c[0] not in OPS_KINDS]  # type: ignore[attr-defined]

    def _kept(self, name: str) -> list[str]:
        chosen = list(self.cleaned_data.get(name) or [])
        if self.ops:
            return chosen
        # What was saved (by a former lead, say) stays; an unsaved default is no choice of theirs to keep.
        saved = (getattr(self.instance, name) or []) if self.instance.pk is not None else []
        return chosen + [k for k in saved if k in OPS_KINDS]

    def clean_email_kinds(self) -> list[str]:
        return self._kept("email_kinds")

    def clean_webhook_kinds(self) -> list[str]:
        return self._kept("webhook_kinds")

    def clean_webhook_url(self) -> str:
        value: str = self.cleaned_data.get("webhook_url") or ""
        return value.strip()

    def clean(self) -> dict[str, Any]:
        cleaned = super().clean() or {}
        # Only what the person could choose here needs a URL (kept operations kinds are not used without one).
        chosen = [k for k in cleaned.get("webhook_kinds") or [] if self.ops or k not in OPS_KINDS]
        if chosen and not cleaned.get("webhook_url") and "webhook_url" not in self.errors:
            self.add_error("webhook_url", "Give the webhook's URL, or choose no kinds for it.")
        return cleaned
