"""Who signed in through the provider: the provider's subject, tied to one portal account."""

from __future__ import annotations

from django.conf import settings
from django.db import models


class SsoIdentity(models.Model):
    """An account made by single sign-on. Accounts without one (the demo's, break-glass accounts) are local:
    single sign-on never signs in as them and never changes their memberships or roles."""

    user = models.OneToOneField(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="sso_identity")
    issuer = models.CharField(max_length=255)
    subject = models.CharField(max_length=255, help_text="The provider's stable id of the person (the sub claim).")
    created_at = models.DateTimeField(auto_now_add=True)
    last_login_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        app_label = "portal"
        ordering = ("issuer", "subject")
        constraints = [models.UniqueConstraint(fields=("issuer", "subject"), name="one_account_per_sso_subject")]
        verbose_name = "SSO identity"
        verbose_name_plural = "SSO identities"

    def __str__(self) -> str:
        return f"{self.user} = {self.subject} at {self.issuer}"
