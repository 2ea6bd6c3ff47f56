"""What a notification says, in the portal, in an email and in a webhook post. Pure: no database, no network."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import date

from workspaces.notifications.kinds import Kind

TEXT_LIMIT = 600  # Notification.text

_HEADLINES = {
    Kind.STARTED: "{name} is running.",
    Kind.IDLE_WARNING: "{name} is idle and will be reclaimed unless it is used or kept alive.",
    Kind.RECLAIMED: "{name} was reclaimed for idleness; its home volume is kept.",
    Kind.PREEMPTION_NOTICE: "{name} will be preempted soon: the lending team needs its GPUs back.",
    Kind.PREEMPTED: "{name} was preempted.",
    Kind.RUNTIME_WARNING: "{name} is near its runtime limit.",
    Kind.FAILED: "{name} failed.",
    Kind.POSSIBLY_STUCK: "{name} may be stuck: its GPUs have been idle.",
}


@dataclass(frozen=True)
class Message:
    text: str  # the portal's line, the webhook's text and the email's first paragraph
    subject: str
    body: str


# What a budget's policy does once it is used up (portal.billing.models.Budget.Policy; budgets.refusal).
_POLICY_AT_100 = {
    "warn": "Requests are not refused.",
    "block_batch": "New training jobs are refused until next month or until finance raises the budget.",
    "block_all": "New requests are refused until next month or until finance raises the budget.",
}


def compose(kind: str, *, workspace_name: str, reason: str, link: str, settings_link: str) -> Message:
    """The words for one event: a headline for the kind, then the timeline's own reason (which has the figures
    and times), and for email a link to the workspace."""
    headline = _HEADLINES[Kind(kind)].format(name=workspace_name)
    return _message(
        f"{headline} {reason}",
        subject=f"{workspace_name}: {Kind(kind).label}",
        link_line=f"Open it: {link}",
        settings_link=settings_link,
    )


def compose_budget(
    *,
    team_name: str,
    threshold: int,
    month: date,
    spent: str,
    amount: str,
    forecast: str | None,
    policy: str | None,
    link: str,
    settings_link: str,
) -> Message:
    """The words for a team budget's threshold crossed. ``spent``, ``amount`` and ``forecast`` come written
    in the budget's unit (``BudgetStatus.describe``: "812.40 EUR", "310.50 GPU-h"); ``forecast`` is None in
    the month's first hour, ``policy`` None when the team has no budget any more."""
    text = f"{team_name} has used {threshold} % of its budget for {month:%B %Y}: {spent} of {amount}."
    if forecast is not None:
        text += f" At this month's rate it ends at {forecast}."
    if threshold >= 100 and policy in _POLICY_AT_100:
        text += f" {_POLICY_AT_100[policy]}"
    return _message(
        text,
        subject=f"{team_name}: {Kind.BUDGET.label} at {threshold} %",
        link_line=f"See the team's costs: {link}",
        settings_link=settings_link,
    )


def compose_ops_alert(
    *,
    label: str,
    severity: str,
    change: str,
    message: str,
    scope: str | None,
    firing_for: str | None,
    link: str,
    settings_link: str,
) -> Message:
    """The words for an operations alert that fired or resolved (``change``: "fired" or "resolved").
    ``message`` is the alert's own line with its figures (for a resolution: as it last fired), ``scope`` the
    team's name or None for the whole portal, ``firing_for`` how long it fired (resolutions only)."""
    about = f"{label} ({scope})" if scope else label
    if change == "resolved":
        text = f"Resolved: {about}, after {firing_for}. It was: {message}" if firing_for else f"Resolved: {about}."
    else:
        text = f"{severity.capitalize()}: {about}. {message}"
    return _message(
        text,
        subject=f"{'Resolved' if change == 'resolved' else severity.capitalize()}: {about}",
        link_line=f"See the alerts: {link}",
        settings_link=settings_link,
    )


def _message(text: str, *, subject: str, link_line: str, settings_link: str) -> Message:
    text = text.strip()[:TEXT_LIMIT]
    body = f"{text}\n\n{link_line}\n\nChoose which notifications you get by email: {settings_link}\n"
    return Message(text=text, subject=f"[GPU portal] {subject}"[:200], body=body)


def webhook_payload(message: Message, link: str) -> dict[str, str]:
    """Slack and Microsoft Teams incoming webhooks both accept ``{"text": ...}``."""
    return {"text": f"{message.text} {link}"}
