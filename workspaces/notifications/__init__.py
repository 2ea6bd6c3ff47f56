"""Notifications: which workspace events people hear about, in the portal, by email and by webhook.

- ``kinds``: the event kinds and the pure classifier WorkspaceEvent -> kind (or None: not notifiable);
- ``messages``: the text, email and webhook payload of one notification (pure);
- ``models``: ``Notification`` (one per event and recipient) and ``NotificationPreference`` (per user);
- ``dispatch``: what ``workspaces.transitions`` calls: enqueue delivery after commit, only for notifiable events;
- ``delivery``: the task's work: rows for each recipient, then email and webhook per their preferences;
- ``views``, ``forms``, ``api``, ``urls``, ``context_processors``: the pages, the API and the unread badge.

See docs/notifications.md.
"""
