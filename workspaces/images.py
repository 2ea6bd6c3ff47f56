"""Which image a request may run: an enabled catalogue image (named by slug or reference), or a reference
from a registry an operator allowed."""

from __future__ import annotations

from workspaces import policy
from workspaces.models import AllowedRegistry, Image


class ImageRefused(ValueError):
    """The request names an image it may not run; the message says why, for the ``image`` field."""


def _catalogue_image(value: str, kind: str) -> Image | None:
    enabled = Image.objects.filter(enabled=True, kind=kind)
    return enabled.filter(slug=value).first() or enabled.filter(reference=value).first()


def image_reference(value: str, kind: str) -> str:
    """The reference a ``kind`` workspace asking for ``value`` runs; raises :class:`ImageRefused`."""
    image = _catalogue_image(value, kind)
    if image:
        return image.reference
    if "/" not in value:
        raise ImageRefused(f"There is no {kind} image called {value!r} in the catalogue.")
    if not policy.IMAGE_REFERENCE.match(value):
        raise ImageRefused(f"{value!r} is not an image reference like registry.example.org/team/image:tag.")
    if not any(value.startswith(r.prefix) for r in AllowedRegistry.objects.all()):
        raise ImageRefused(f"Images from {value.split('/')[0]} are not allowed; ask an operator to allow the registry.")
    return value
