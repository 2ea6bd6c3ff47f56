"""The shared-configuration model builder: same objects, no configuration per model."""

from __future__ import annotations

import pytest
from kubernetes import client

from scheduling.kube import manifests
from scheduling.kube.models import k8s
from tests.kube import make_spec


def test_models_are_the_clients_classes_with_one_configuration():
    built = k8s.V1ObjectMeta(name="ws-1", labels={"a": "b"})
    assert isinstance(built, client.V1ObjectMeta)
    assert built == client.V1ObjectMeta(name="ws-1", labels={"a": "b"})
    assert built.local_vars_configuration is k8s.V1Container(name="x").local_vars_configuration


def test_building_a_workspaces_objects_makes_no_configuration(monkeypatch):
    # Each Configuration() sets logger levels, which clears every logger's cache in the process.
    made = []
    original = client.Configuration.__init__

    def counting(self, *args, **kwargs):
        made.append(1)
        original(self, *args, **kwargs)

    monkeypatch.setattr(client.Configuration, "__init__", counting)
    objects = manifests.objects_for(make_spec(kind="job", workers=4))
    assert [type(o).__name__ for o in objects][-1] == "V1Job"
    assert made == []


def test_a_name_that_is_no_model_is_refused():
    with pytest.raises(AttributeError, match="no model"):
        k8s.ApiClient  # noqa: B018 - the lookup is what is tested
    with pytest.raises(AttributeError):
        k8s.V1NoSuchThing  # noqa: B018
