"""Request types for views behind ``login_required``, so the type checker knows who is asking."""

from django.http import HttpRequest

from portal.models import User


class AuthenticatedRequest(HttpRequest):
    user: User  # narrowed: login_required rejects anonymous requests
