"""The Django project and the organisation: departments, teams, roles, audit log."""

from portal.celery import app as celery_app

__all__ = ("celery_app",)
