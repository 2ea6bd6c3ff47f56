"""Which catalogue image a request's ``image`` names: by slug first, then by reference, in one query."""

from __future__ import annotations

import pytest

from workspaces.images import ImageRefused, image_reference
from workspaces.models import Image

pytestmark = pytest.mark.django_db


def _image(slug: str, reference: str, *, kind: str = "job", enabled: bool = True) -> Image:
    return Image.objects.create(slug=slug, display_name=slug, reference=reference, kind=kind, enabled=enabled)


def test_a_slug_names_its_image_before_any_reference(django_assert_num_queries):
    _image("trainer", "registry.example.org/ml/trainer:1")
    # Another image's reference spelled like the first one's slug: the slug wins.
    _image("odd", "trainer")
    with django_assert_num_queries(1):
        assert image_reference("trainer", "job") == "registry.example.org/ml/trainer:1"


def test_a_reference_names_its_catalogue_image(django_assert_num_queries):
    _image("trainer", "registry.example.org/ml/trainer:1")
    with django_assert_num_queries(1):
        assert image_reference("registry.example.org/ml/trainer:1", "job") == "registry.example.org/ml/trainer:1"


def test_disabled_images_and_images_of_the_other_kind_name_nothing():
    _image("old", "registry.example.org/ml/old:1", enabled=False)
    _image("lab", "registry.example.org/ml/lab:1", kind="notebook")
    with pytest.raises(ImageRefused, match="no job image called 'old'"):
        image_reference("old", "job")
    with pytest.raises(ImageRefused, match="lab is a notebook image"):
        image_reference("lab", "job")
