from typing import Any

from django.http import HttpRequest
from django.utils.functional import SimpleLazyObject

from portal.navigation import menu_for


def navigation(request: HttpRequest) -> dict[str, Any]:
    # Lazy: worked out only where a template shows the menu (not for the fragments that pages refresh).
    return {"menu": SimpleLazyObject(lambda: menu_for(getattr(request, "user", None)))}
