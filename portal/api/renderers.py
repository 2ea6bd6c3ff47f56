"""The API's page for a browser: DRF's browsable API, read-only.

DRF offers a form or button for every method a view allows, judged by the view's permission classes and,
only where the serializer holds an object, its object permissions. The portal's rules for changes live in
its access modules and actions (who may stop, delete, set a policy or a price), so DRF's pages offered a
Delete button on a workspace its viewer may only read, and on a 404 to anybody, and PUT forms for policies
to members. Here the page shows the answer and links to what can be read; changes are made on the portal's
own pages, with an API token, or from the interactive documentation at ``/api/docs/``.
"""

from __future__ import annotations

from typing import Any

from rest_framework.renderers import BrowsableAPIRenderer
from rest_framework.request import Request


class ReadOnlyBrowsableAPIRenderer(BrowsableAPIRenderer):
    def show_form_for_method(self, view: Any, method: str, request: Request, obj: Any) -> bool:
        return False  # no form for POST/PUT/PATCH, and no DELETE or OPTIONS button

    # DRF 3.16 passes the status code; djangorestframework-stubs still has the older one-argument signature.
    def get_extra_actions(self, view: Any, status_code: int) -> dict[str, str] | None:  # type: ignore[override]
        """Links to the view's extra actions that answer GET, on a successful answer only (a 404 names
        nothing to act on; a POST-only action answers a link with 405)."""
        if status_code >= 400 or not hasattr(view, "get_extra_action_url_map"):
            return None
        # The map is keyed by each action's view name, made as DRF makes it.
        readable = {type(view)(**a.kwargs).get_view_name() for a in view.get_extra_actions() if "get" in a.mapping}
        links: dict[str, str] = view.get_extra_action_url_map()
        return {name: url for name, url in links.items() if name in readable}
