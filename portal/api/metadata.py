"""OPTIONS answers for every API view.

DRF's metadata calls ``get_object()`` for any view that accepts PUT, but the portal's collection endpoints
(``PUT /quotas/``, ``PUT /teams/{id}/policy/``) replace a whole set and have no object to look up: DRF's
lookup assertion made OPTIONS on them a 500. Here the object check runs only where the URL names one."""

from __future__ import annotations

from typing import Any

from django.core.exceptions import PermissionDenied
from django.http import Http404
from rest_framework import exceptions
from rest_framework.metadata import SimpleMetadata
from rest_framework.request import Request, clone_request


class PortalMetadata(SimpleMetadata):
    def determine_actions(self, request: Request, view: Any) -> dict[str, Any]:
        actions = {}
        for method in {"PUT", "POST"} & set(view.allowed_methods):
            view.request = clone_request(request, method)
            try:
                if hasattr(view, "check_permissions"):
                    view.check_permissions(view.request)
                lookup = getattr(view, "lookup_url_kwarg", None) or getattr(view, "lookup_field", None)
                if method == "PUT" and hasattr(view, "get_object") and lookup in view.kwargs:
                    view.get_object()
            except (exceptions.APIException, PermissionDenied, Http404):
                pass
            else:
                if hasattr(view, "get_serializer"):
                    actions[method] = self.get_serializer_info(view.get_serializer())
            finally:
                view.request = request
        return actions
