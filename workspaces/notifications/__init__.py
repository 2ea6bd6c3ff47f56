"""Notifications: which workspace events (and team budget thresholds) people hear about, in the portal, by
email and by webhook.

- ``kinds``: the event kinds and the pure classifier WorkspaceEvent -> kind (or None: not notifiable);
- ``messages``: the text, email and webhook payload of one notification (pure);
- ``models``: ``Notification`` (one per event, or budget alert, and recipient) and ``NotificationPreference``;
- ``dispatch``: what ``workspaces.transitions`` calls: enqueue delivery after commit, only for notifiable events;
- ``delivery``: the tasks' work: rows for each recipient, then email and webhook per their preferences
  (``deliver`` for a workspace event, ``deliver_budget_alert`` for a ``portal.billing`` ``BudgetAlert``);
- ``views``, ``forms``, ``api``, ``urls``, ``context_processors``: the pages, the API and the unread badge.

See docs/notifications.md.
"""
