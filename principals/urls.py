from django.urls import path

from principals import views

urlpatterns = [
    path("groups/", views.GroupListView.as_view(), name="group-list"),
]
