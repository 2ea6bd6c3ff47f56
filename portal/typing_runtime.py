"""Let generic classes be subscripted at runtime (``ModelAdmin[Team]``, ``ModelSerializer[Team]``).

django-stubs and djangorestframework-stubs make these classes generic for mypy; at runtime they are not
subscriptable, so ``django_stubs_ext.monkeypatch`` adds ``__class_getitem__`` to them.

Django's classes are patched from settings (as django-stubs documents). DRF's are patched from
``PortalConfig.ready``: importing DRF's views while settings load would freeze DRF's defaults
(authentication, pagination) before ``REST_FRAMEWORK`` exists.
"""

import django_stubs_ext


def enable_for_django() -> None:
    django_stubs_ext.monkeypatch()


def enable_for_drf() -> None:
    from rest_framework import fields, generics, serializers, viewsets

    django_stubs_ext.monkeypatch(
        extra_classes=[
            serializers.BaseSerializer,
            serializers.Serializer,
            serializers.ModelSerializer,
            serializers.ListSerializer,
            fields.Field,
            generics.GenericAPIView,
            viewsets.GenericViewSet,
            viewsets.ReadOnlyModelViewSet,
            viewsets.ModelViewSet,
        ]
    )
