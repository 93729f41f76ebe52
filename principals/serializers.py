from rest_framework import serializers

from principals.models import Group


class GroupSerializer(serializers.ModelSerializer):
    # DRF's metaclass moves declared fields into _declared_fields; the stubs see this
    # class attribute as overriding Field.parent (the field's own parent serializer).
    parent: serializers.SlugRelatedField[Group] = serializers.SlugRelatedField(  # type: ignore[assignment]
        slug_field="slug", read_only=True, allow_null=True
    )
    path = serializers.CharField(read_only=True)

    class Meta:
        model = Group
        fields = ["id", "slug", "name", "parent", "path"]
        read_only_fields = fields
