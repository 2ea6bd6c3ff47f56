"""The names of the organisation's tasks, said once. Plain strings: ``workspaces/tasks.py`` defines the
deliveries (notifications are theirs) and imports these, and so pulls in nothing of what the checks read."""

CHECK_BUDGETS = "billing.check_budgets"
DELIVER_BUDGET_ALERT = "workspaces.deliver_budget_alert"
CHECK_ALERTS = "alerts.check"
DELIVER_OPS_ALERT = "workspaces.deliver_ops_alert"
