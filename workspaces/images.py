"""Which image a request may run: an enabled catalogue image (named by slug or reference), or a reference
from a registry an operator allowed."""

from __future__ import annotations

from django.db.models import Q

from workspaces import policy
from workspaces.models import AllowedRegistry, Image


class ImageRefused(ValueError):
    """The request names an image it may not run; the message says why, for the ``image`` field."""


def _catalogue_image(value: str, kind: str) -> Image | None:
    """The enabled image whose slug is ``value``, else the first whose reference is (one query)."""
    found = list(Image.objects.filter(Q(slug=value) | Q(reference=value), enabled=True, kind=kind))
    return next((image for image in found if image.slug == value), found[0] if found else None)


def _not_in_catalogue(value: str, kind: str) -> str:
    """Why ``value`` is no image for a ``kind`` workspace: an image of the other kind (the catalogue's images
    of ``kind`` named), or none at all."""
    other = Image.objects.filter(enabled=True, slug=value).exclude(kind=kind).first()
    if other is None:
        return f"There is no {kind} image called {value!r} in the catalogue."
    label = dict(Image.Kind.choices)
    wanted = ", ".join(Image.objects.filter(enabled=True, kind=kind).values_list("slug", flat=True)) or "none yet"
    return (
        f"{value} is a {label[other.kind].lower()} image; a {label[kind].lower()} needs a "
        f"{label[kind].lower()} image: {wanted}."
    )


def image_reference(value: str, kind: str) -> str:
    """The reference a ``kind`` workspace asking for ``value`` runs; raises :class:`ImageRefused`."""
    image = _catalogue_image(value, kind)
    if image:
        return image.reference
    if "/" not in value:
        raise ImageRefused(_not_in_catalogue(value, kind))
    # fullmatch: match() with the pattern's $ let a trailing line break through.
    if not policy.IMAGE_REFERENCE.fullmatch(value):
        raise ImageRefused(f"{value!r} is not an image reference like registry.example.org/team/image:tag.")
    if not any(value.startswith(r.prefix) for r in AllowedRegistry.objects.all()):
        raise ImageRefused(f"Images from {value.split('/')[0]} are not allowed; ask an operator to allow the registry.")
    return value
