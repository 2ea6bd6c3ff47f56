"""Workspace requests live here (see the workspaces issue); nothing yet."""
