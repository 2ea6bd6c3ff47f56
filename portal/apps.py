from django.apps import AppConfig


class PortalConfig(AppConfig):
    name = "portal"
    verbose_name = "Organisation"

    def ready(self) -> None:
        from portal import typing_runtime

        typing_runtime.enable_for_drf()
