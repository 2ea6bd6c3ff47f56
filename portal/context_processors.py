from typing import Any

from django.http import HttpRequest

from portal.navigation import menu_for


def navigation(request: HttpRequest) -> dict[str, Any]:
    return {"menu": menu_for(getattr(request, "user", None))}
