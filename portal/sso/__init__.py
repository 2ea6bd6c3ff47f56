"""Single sign-on with OpenID Connect (docs/sso.md).

``config`` reads the ``OIDC_*`` settings, ``claims`` maps ID-token claims to teams and roles (pure),
``tokens`` verifies ID tokens (pure), ``sync`` applies a sign-in to the database, ``backend`` and ``views``
plug it into mozilla-django-oidc and the login page.
"""
