from django.apps import AppConfig


class PrincipalsConfig(AppConfig):
    """Groups, apps, memberships, API tokens and the capability check."""

    name = "principals"
    verbose_name = "Groups, apps and access"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        from principals import openapi  # noqa: F401  (registers the OpenAPI auth scheme)
