"""``/oidc/authenticate/`` and ``/oidc/callback/`` (the redirect URI to register at the provider)."""

from __future__ import annotations

from django.urls import path

from portal.sso import views

urlpatterns = [
    path("authenticate/", views.SignInView.as_view(), name="oidc_authentication_init"),
    path("callback/", views.CallbackView.as_view(), name="oidc_authentication_callback"),
]
