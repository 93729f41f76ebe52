from rest_framework import serializers

from principals.models import Group


class GroupSerializer(serializers.ModelSerializer):
    parent = serializers.SlugRelatedField(slug_field="slug", read_only=True, allow_null=True)
    path = serializers.CharField(read_only=True)

    class Meta:
        model = Group
        fields = ["id", "slug", "name", "parent", "path"]
        read_only_fields = fields
