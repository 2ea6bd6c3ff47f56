"""What a notification says, in the portal, in an email and in a webhook post. Pure: no database, no network."""

from __future__ import annotations

from dataclasses import dataclass

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


def compose(kind: str, *, workspace_name: str, reason: str, link: str, settings_link: str) -> Message:
    """The words for one event: a headline for the kind, then the timeline's own reason (which has the figures
    and times), and for email a link to the workspace."""
    headline = _HEADLINES[Kind(kind)].format(name=workspace_name)
    text = f"{headline} {reason}".strip()[:TEXT_LIMIT]
    subject = f"[GPU portal] {workspace_name}: {Kind(kind).label}"
    body = f"{text}\n\nOpen it: {link}\n\nChoose which notifications you get by email: {settings_link}\n"
    return Message(text=text, subject=subject[:200], body=body)


def webhook_payload(message: Message, link: str) -> dict[str, str]:
    """Slack and Microsoft Teams incoming webhooks both accept ``{"text": ...}``."""
    return {"text": f"{message.text} {link}"}
