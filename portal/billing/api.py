"""The billing API: the chargeback report as JSON, closing months, the rate card, budgets, a team's costs.

Money and hours are decimal strings, never floats. Finance and operators read everything; a team's costs
answer its leads (per member) and its members (their own line and the team's totals); others get 404 for a
team and 403 for the organisation-wide report."""

from __future__ import annotations

from typing import Any

from django.core.exceptions import PermissionDenied, ValidationError
from django.http import Http404
from django.utils import timezone
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework import generics, serializers, status
from rest_framework.request import Request
from rest_framework.response import Response

from portal import access as portal_access
from portal.billing import access, actions, budgets, choices, closing, report
from portal.billing.models import Budget, RateCardEntry
from portal.billing.rates import MODEL_PRICE

PERIOD_PARAMETERS = [
    OpenApiParameter("month", OpenApiTypes.STR, description="A calendar month, YYYY-MM (default: this month)."),
    OpenApiParameter("start", OpenApiTypes.DATE, description="First day of any other period (with end)."),
    OpenApiParameter("end", OpenApiTypes.DATE, description="Last day of that period, included."),
]
REPORT_PARAMETERS = [
    *PERIOD_PARAMETERS,
    OpenApiParameter("group", OpenApiTypes.STR, enum=list(choices.GROUP_LABELS)),
    OpenApiParameter("mode", OpenApiTypes.STR, enum=list(choices.MODE_LABELS)),
    OpenApiParameter("spread", OpenApiTypes.BOOL, description="Full recovery: spread unallocated cost over use."),
]


def _choice(request: Request, *, default_group: str = "team") -> choices.Choice:
    choice = choices.read(request.query_params, default_group=default_group)
    if choice.problems:
        raise ValidationError(choice.problems)
    return choice


def _report_json(choice: choices.Choice, **narrow: Any) -> dict[str, Any]:
    built = report.build(
        choice.start, choice.end, group=choice.group, mode=choice.mode, spread_unallocated=choice.spread, **narrow
    )
    return {"label": choice.label, **report.as_json(built)}


class ReportSerializer(serializers.Serializer[Any]):
    """The report as ``report.as_json`` gives it."""

    def to_representation(self, instance: dict[str, Any]) -> dict[str, Any]:
        return instance


class ChargebackView(generics.GenericAPIView[Any]):
    """The chargeback report for a month or any period, grouped, in showback or full recovery."""

    serializer_class = ReportSerializer

    @extend_schema(parameters=REPORT_PARAMETERS)
    def get(self, request: Request) -> Response:
        if not access.reads_all(request.user):
            raise PermissionDenied("Only finance and operators read the organisation's chargeback.")
        return Response(_report_json(_choice(request)))


class CloseMonthSerializer(serializers.Serializer[Any]):
    month = serializers.RegexField(r"^\d{4}-\d{2}$", help_text="YYYY-MM")


class CloseMonthView(generics.GenericAPIView[Any]):
    """Close a month that has ended (finance): its report is frozen as it stands."""

    serializer_class = CloseMonthSerializer

    def post(self, request: Request) -> Response:
        payload = CloseMonthSerializer(data=request.data)
        payload.is_valid(raise_exception=True)
        month = choices.read({"month": payload.validated_data["month"]})
        if month.problems or month.month is None:
            raise ValidationError({"month": month.problems})
        closed = closing.close_month(request.user, month.month)
        return Response(
            {"month": f"{closed.period:%Y-%m}", "closed_at": closed.closed_at.isoformat()},
            status=status.HTTP_201_CREATED,
        )


class PriceSerializer(serializers.ModelSerializer[RateCardEntry]):
    created_by = serializers.CharField(source="created_by.username", read_only=True, default=None)
    effective_from = serializers.DateTimeField(required=False)
    hourly_price = serializers.CharField(max_length=32)

    class Meta:
        model = RateCardEntry
        fields = ("id", "gpu_model", "shape", "hourly_price", "effective_from", "note", "created_by", "created_at")
        read_only_fields = ("id", "created_by", "created_at")
        extra_kwargs = {"shape": {"required": False}, "note": {"required": False}}
        validators: list[Any] = []  # the action checks uniqueness, with a sentence


class PricesView(generics.ListCreateAPIView[RateCardEntry]):
    """The rate card's entries (finance and operators); a new price applies from now or later."""

    serializer_class = PriceSerializer

    def get_queryset(self) -> Any:
        if not access.reads_all(self.request.user):
            raise PermissionDenied("Only finance and operators read the rate card.")
        return RateCardEntry.objects.select_related("created_by").order_by("gpu_model", "shape", "effective_from")

    def create(self, request: Request, *args: Any, **kwargs: Any) -> Response:
        payload = PriceSerializer(data=request.data)
        payload.is_valid(raise_exception=True)
        data = payload.validated_data
        entry = actions.set_price(
            request.user,
            gpu_model=data["gpu_model"],
            shape=data.get("shape", MODEL_PRICE),
            hourly_price=data["hourly_price"],
            effective_from=data.get("effective_from"),
            note=data.get("note", ""),
        )
        return Response(PriceSerializer(entry).data, status=status.HTTP_201_CREATED)


class PriceView(generics.GenericAPIView[Any]):
    """Withdraw a price that has not taken effect."""

    serializer_class = PriceSerializer

    def delete(self, request: Request, entry_id: int) -> Response:
        if not access.reads_all(request.user):
            raise PermissionDenied("Only finance and operators change the rate card.")
        actions.withdraw_price(request.user, entry_id)
        return Response(status=status.HTTP_204_NO_CONTENT)


class BudgetSerializer(serializers.Serializer[Any]):
    amount = serializers.CharField(max_length=20)
    unit = serializers.ChoiceField(choices=Budget.Unit.choices)
    policy = serializers.ChoiceField(choices=Budget.Policy.choices)


def _status_json(status_: budgets.BudgetStatus | None) -> dict[str, Any] | None:
    if status_ is None:
        return None
    return {
        "month": f"{status_.month:%Y-%m}",
        "amount": str(status_.amount),
        "unit": status_.unit,
        "policy": status_.policy,
        "spent": str(status_.spent),
        "share": round(status_.share, 4),
        "forecast": None if status_.forecast is None else str(status_.forecast),
        "exhausted": status_.exhausted,
    }


class BudgetsView(generics.GenericAPIView[Any]):
    """This month's budget status of every team the caller sees (finance and operators: all)."""

    serializer_class = BudgetSerializer

    def get(self, request: Request) -> Response:
        teams = portal_access.teams_visible_to(request.user)
        found = budgets.statuses(timezone.now(), list(teams.values_list("pk", flat=True)))
        rows = [{"team": t.slug, "team_id": t.pk, **(_status_json(found[t.pk]) or {})} for t in teams if t.pk in found]
        return Response({"results": rows})


class TeamBudgetView(generics.GenericAPIView[Any]):
    """A team's monthly budget: read by whoever sees the team's costs, set by finance and operators."""

    serializer_class = BudgetSerializer

    def _team(self, request: Request, team_id: int) -> Any:
        team = portal_access.access_team_by_id(request.user, team_id)
        if access.team_cost_scope(request.user, team) is None:
            raise Http404("No such team.")
        return team

    def get(self, request: Request, team_id: int) -> Response:
        team = self._team(request, team_id)
        return Response(
            {"team": team.slug, "budget": _status_json(budgets.statuses(timezone.now(), [team.pk]).get(team.pk))}
        )

    def put(self, request: Request, team_id: int) -> Response:
        team = self._team(request, team_id)
        payload = BudgetSerializer(data=request.data)
        payload.is_valid(raise_exception=True)
        actions.set_budget(request.user, team, **payload.validated_data)
        return self.get(request, team_id)

    def delete(self, request: Request, team_id: int) -> Response:
        actions.remove_budget(request.user, self._team(request, team_id))
        return Response(status=status.HTTP_204_NO_CONTENT)


class TeamCostsView(generics.GenericAPIView[Any]):
    """A team's costs for a month or period: per member for its leads, finance and operators; the team's
    totals and their own line for a member."""

    serializer_class = ReportSerializer

    @extend_schema(parameters=PERIOD_PARAMETERS)
    def get(self, request: Request, team_id: int) -> Response:
        team = portal_access.access_team_by_id(request.user, team_id)
        scope = access.team_cost_scope(request.user, team)
        if scope is None:
            raise Http404("No such team.")
        choice = choices.read(choices.period_only(request.query_params))
        if choice.problems:
            raise ValidationError(choice.problems)
        totals = report.build(choice.start, choice.end, group="team", teams=[team.pk])
        members = report.build(
            choice.start, choice.end, group="user", teams=[team.pk], user=None if scope == "all" else request.user.pk
        )
        status_ = budgets.statuses(timezone.now(), [team.pk]).get(team.pk)
        team_json = report.as_json(totals)
        return Response(
            {
                "team": team.slug,
                "label": choice.label,
                "scope": scope,
                "currency": totals.currency,
                "totals": team_json["lines"][0] if team_json["lines"] else None,
                "adjustments": team_json["adjustments"],
                "members": report.as_json(members)["lines"],
                "budget": _status_json(status_),  # this month's, whatever the period asked for
            }
        )
