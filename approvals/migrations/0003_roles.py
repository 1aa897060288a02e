"""The two roles are Django groups: `curator` (catalogs, sources, tags, agents' scopes,
approval policies) and `reviewer` (approval requests and their decisions, the audit
log). Services check membership (catalog.auth.is_curator / is_reviewer); the model
permissions granted here are what the admin shows each role. Existing groups of these
names keep their other permissions (they are added to, never reset)."""

from django.db import migrations

ALL = ("add", "change", "delete", "view")

ROLES = {
    "curator": {
        "catalog": {"catalog": ALL, "referencesource": ALL, "tag": ALL, "uploadedfile": ALL,
                    "agent": ("change", "view"), "document": ("view",), "indexrun": ("view",)},
        "approvals": {"approvalpolicy": ALL, "approvalrequest": ("view",), "auditentry": ("view",)},
    },
    "reviewer": {
        "catalog": {"catalog": ("view",), "referencesource": ("view",), "document": ("view",), "agent": ("view",)},
        "approvals": {"approvalpolicy": ("view",), "approvalrequest": ("view",), "decision": ("add", "view"),
                      "approvedcontent": ("view",), "auditentry": ("view",)},
    },
}


def roles_ensure(apps, schema_editor):
    from django.contrib.auth.management import create_permissions

    for label in ROLES["curator"]:  # permissions are otherwise made after all migrations
        app_config = apps.get_app_config(label)
        app_config.models_module = True
        create_permissions(app_config, apps=apps, verbosity=0)
        app_config.models_module = None
    Group = apps.get_model("auth", "Group")
    Permission = apps.get_model("auth", "Permission")
    for role, grants in ROLES.items():
        group, _ = Group.objects.get_or_create(name=role)
        codenames = [(app, f"{action}_{model}") for app, models in grants.items()
                     for model, actions in models.items() for action in actions]
        for app, codename in codenames:
            group.permissions.add(Permission.objects.get(content_type__app_label=app, codename=codename))


class Migration(migrations.Migration):

    dependencies = [
        ("approvals", "0002_audit_append_only"),
        ("auth", "0012_alter_user_first_name_max_length"),
        ("contenttypes", "0002_remove_content_type_name"),
    ]

    operations = [migrations.RunPython(roles_ensure, migrations.RunPython.noop)]
