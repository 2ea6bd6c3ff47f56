"""Label and field selectors, parsed and matched the way the API server does.

Label selector strings follow apimachinery's `labels.Parse` (`a=b`, `a==b`, `a!=b`, `a in (x,y)`,
`a notin (x)`, `a`, `!a`, `a>1`, `a<1`, comma = AND) and fail with its error texts. Field
selectors follow `fields.ParseSelector` (`=`, `==`, `!=`, backslash escapes) and only accept the
field labels the real registry exposes per kind. LabelSelector objects (`matchLabels` +
`matchExpressions`) and node selector terms (node affinity) reuse the same requirements.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

Obj = dict[str, Any]

IN, NOT_IN, EQUALS, DOUBLE_EQUALS, NOT_EQUALS = "in", "notin", "=", "==", "!="
EXISTS, DOES_NOT_EXIST, GREATER_THAN, LESS_THAN = "exists", "!", "gt", "lt"
_BINARY_OPERATORS = (IN, NOT_IN, EQUALS, DOUBLE_EQUALS, NOT_EQUALS, GREATER_THAN, LESS_THAN)
# LabelSelector / NodeSelector operator names as they appear in API objects.
_OBJECT_OPERATORS = {
    "In": IN,
    "NotIn": NOT_IN,
    "Exists": EXISTS,
    "DoesNotExist": DOES_NOT_EXIST,
    "Gt": GREATER_THAN,
    "Lt": LESS_THAN,
}

_NAME = r"([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]"
_NAME_RE = re.compile(f"^{_NAME}$")
_DNS_SUBDOMAIN = r"[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*"
_DNS_SUBDOMAIN_RE = re.compile(f"^{_DNS_SUBDOMAIN}$")
_NAME_MSG = (
    "name part must consist of alphanumeric characters, '-', '_' or '.', and must start and end "
    "with an alphanumeric character (e.g. 'MyName',  or 'my.name',  or '123-abc', regex used for "
    f"validation is '{_NAME}')"
)
_PREFIX_MSG = (
    "prefix part a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, "
    "'-' or '.', and must start and end with an alphanumeric character (e.g. 'example.com', regex "
    f"used for validation is '{_DNS_SUBDOMAIN}')"
)
_VALUE_MSG = (
    "a valid label must be an empty string or consist of alphanumeric characters, '-', '_' or '.', "
    "and must start and end with an alphanumeric character (e.g. 'MyValue',  or 'my_value',  or "
    f"'12345', regex used for validation is '({_NAME})?')"
)


class SelectorError(ValueError):
    """A selector the API server would refuse with 400 Bad Request; str() is its message."""


@dataclass(frozen=True)
class Requirement:
    """One ANDed clause of a label selector."""

    key: str
    operator: str
    values: tuple[str, ...] = ()

    def matches(self, labels: Mapping[str, str]) -> bool:
        present = self.key in labels
        if self.operator in (IN, EQUALS, DOUBLE_EQUALS):
            return present and labels[self.key] in self.values
        if self.operator in (NOT_IN, NOT_EQUALS):
            return not present or labels[self.key] not in self.values
        if self.operator == EXISTS:
            return present
        if self.operator == DOES_NOT_EXIST:
            return not present
        if not present:
            return False
        try:
            have, want = int(labels[self.key]), int(self.values[0])
        except ValueError:
            return False
        return have > want if self.operator == GREATER_THAN else have < want


# ---------------------------------------------------------------------------------------------
# Label selector strings


def parse_label_selector(selector: str) -> list[Requirement]:
    """Requirements of a selector string; raises SelectorError with the API server's message."""
    return _LabelParser(_lex(selector)).parse()


def match_labels(selector: str, labels: Mapping[str, str] | None) -> bool:
    """Whether labels satisfy a selector string ("" matches everything)."""
    return all(r.matches(labels or {}) for r in parse_label_selector(selector))


_SPECIAL = "=!(),<>"
_SYMBOLS = ("!=", "==", "=", "!", "(", ")", ",", "<", ">")
_IDENT, _EOS = "identifier", "end of string"


def _lex(text: str) -> list[tuple[str, str]]:
    """(kind, literal) pairs; "in"/"notin" come back as their own tokens, symbols as themselves."""
    tokens: list[tuple[str, str]] = []
    i = 0
    while True:
        while i < len(text) and text[i] in " \t\r\n":
            i += 1
        if i == len(text):
            tokens.append((_EOS, ""))
            return tokens
        if text[i] in _SPECIAL:
            # Longest symbol first ("!=" before "!"); every special character is a symbol itself.
            symbol = next(s for s in _SYMBOLS if text.startswith(s, i))
            tokens.append((symbol, symbol))
            i += len(symbol)
            continue
        start = i
        while i < len(text) and text[i] not in _SPECIAL and text[i] not in " \t\r\n":
            i += 1
        word = text[start:i]
        tokens.append((word if word in (IN, NOT_IN) else _IDENT, word))


class _LabelParser:
    """Recursive-descent parser with the same lookahead rules (and messages) as labels.Parser."""

    def __init__(self, tokens: list[tuple[str, str]]) -> None:
        self.tokens = tokens
        self.pos = 0

    def _peek(self, values: bool = True) -> tuple[str, str]:
        return self._as_value(self.tokens[self.pos], values)

    def _next(self, values: bool = True) -> tuple[str, str]:
        item = self._as_value(self.tokens[self.pos], values)
        self.pos += 1
        return item

    @staticmethod
    def _as_value(item: tuple[str, str], values: bool) -> tuple[str, str]:
        # Where a value is expected, "in" and "notin" are ordinary identifiers.
        return (_IDENT, item[1]) if values and item[0] in (IN, NOT_IN) else item

    def parse(self) -> list[Requirement]:
        requirements: list[Requirement] = []
        while True:
            kind, literal = self._peek()
            if kind == _EOS:
                return requirements
            if kind not in (_IDENT, DOES_NOT_EXIST):
                raise SelectorError(f"found '{literal}', expected: !, identifier, or 'end of string'")
            try:
                requirements.append(self._requirement())
            except SelectorError as exc:
                raise SelectorError(f"unable to parse requirement: {exc}") from None
            kind, literal = self._next()
            if kind == _EOS:
                return requirements
            if kind != ",":
                raise SelectorError(f"found '{literal}', expected: ',' or 'end of string'")
            kind, literal = self._peek()
            if kind not in (_IDENT, DOES_NOT_EXIST):
                raise SelectorError(f"found '{literal}', expected: identifier after ','")

    def _requirement(self) -> Requirement:
        kind, literal = self._next()
        negated = kind == DOES_NOT_EXIST
        if negated:
            kind, literal = self._next()
        if kind != _IDENT:
            raise SelectorError(f"found '{literal}', expected: identifier")
        key = literal
        _validate_key(key)
        # "!key" never takes an operator: "!a=b" fails afterwards at the "=".
        if negated or self._peek()[0] in (_EOS, ","):
            return new_requirement(key, DOES_NOT_EXIST if negated else EXISTS, ())
        kind, literal = self._next(values=False)
        operators = {IN: IN, NOT_IN: NOT_IN, "=": EQUALS, "==": DOUBLE_EQUALS, "!=": NOT_EQUALS}
        operators |= {">": GREATER_THAN, "<": LESS_THAN}
        if kind not in operators:
            raise SelectorError(f"found '{literal}', expected: {', '.join(_BINARY_OPERATORS)}")
        operator = operators[kind]
        values = self._value_set() if operator in (IN, NOT_IN) else self._exact_value()
        return new_requirement(key, operator, sorted(values))

    def _exact_value(self) -> set[str]:
        if self._peek()[0] in (_EOS, ","):
            return {""}
        kind, literal = self._next()
        if kind != _IDENT:
            raise SelectorError(f"found '{literal}', expected: identifier")
        return {literal}

    def _value_set(self) -> set[str]:
        kind, literal = self._next()
        if kind != "(":
            raise SelectorError(f"found '{literal}' expected: '('")
        kind, literal = self._peek()
        if kind == ")":
            self._next()
            return {""}
        if kind not in (_IDENT, ","):
            raise SelectorError(f"found '{literal}', expected: ',', ')' or identifier")
        values: set[str] = set()
        while True:
            kind, literal = self._next()
            if kind == _IDENT:
                values.add(literal)
                after, after_literal = self._peek()
                if after == ")":
                    self._next()
                    return values
                if after != ",":
                    raise SelectorError(f"found '{after_literal}', expected: ',' or ')'")
            elif kind == ",":
                # Empty members: "(,a)", "(a,)" and "(a,,b)" all include the empty value.
                if not values or self._peek()[0] in (")", ","):
                    values.add("")
                if self._peek()[0] == ")":
                    self._next()
                    return values
                if self._peek()[0] == ",":
                    self._next()
            else:
                raise SelectorError(f"found '{literal}', expected: ',', or identifier")


def new_requirement(key: str, operator: str, values: Iterable[str]) -> Requirement:
    """A validated requirement (labels.NewRequirement): key, operator arity and label values."""
    vals = tuple(values)
    _validate_key(key)
    if operator in (IN, NOT_IN) and not vals:
        raise SelectorError("for 'in', 'notin' operators, values set can't be empty")
    if operator in (EQUALS, DOUBLE_EQUALS, NOT_EQUALS) and len(vals) != 1:
        raise SelectorError("exact-match compatibility requires one single value")
    if operator in (EXISTS, DOES_NOT_EXIST) and vals:
        raise SelectorError("values set must be empty for exists and does not exist")
    if operator in (GREATER_THAN, LESS_THAN):
        if len(vals) != 1:
            raise SelectorError("for 'Gt', 'Lt' operators, exactly one value is required")
        if not re.fullmatch(r"[+-]?\d+", vals[0]):
            raise SelectorError("for 'Gt', 'Lt' operators, the value must be an integer")
    elif operator not in (IN, NOT_IN, EQUALS, DOUBLE_EQUALS, NOT_EQUALS, EXISTS, DOES_NOT_EXIST):
        raise SelectorError(f'"{operator}" is not a valid label selector operator')
    for v in vals:
        if len(v) > 63:
            raise SelectorError(f'Invalid value: "{v}": must be no more than 63 characters')
        if v and not _NAME_RE.match(v):
            raise SelectorError(f'Invalid value: "{v}": {_VALUE_MSG}')
    return Requirement(key, operator, vals)


def _validate_key(key: str) -> None:
    errors = qualified_name_errors(key)
    if errors:
        raise SelectorError(f'key: Invalid value: "{key}": {"; ".join(errors)}')


def qualified_name_errors(name: str) -> list[str]:
    """validation.IsQualifiedName: `[prefix/]name` as used by label and annotation keys."""
    parts = name.split("/")
    if len(parts) > 2:
        return [
            "a qualified name must consist of alphanumeric characters, '-', '_' or '.', and must start "
            "and end with an alphanumeric character (e.g. 'MyName',  or 'my.name',  or '123-abc', "
            f"regex used for validation is '{_NAME}') with an optional DNS subdomain prefix and '/' "
            "(e.g. 'example.com/MyName')"
        ]
    errors = []
    if len(parts) == 2:
        prefix = parts[0]
        if not prefix:
            errors.append("prefix part must be non-empty")
        elif len(prefix) > 253 or not _DNS_SUBDOMAIN_RE.match(prefix):
            errors.append(_PREFIX_MSG)
    short = parts[-1]
    if not short:
        errors.append("name part must be non-empty")
    elif len(short) > 63:
        errors.append("name part must be no more than 63 characters")
    if short and not _NAME_RE.match(short):
        errors.append(_NAME_MSG)
    return errors


# ---------------------------------------------------------------------------------------------
# LabelSelector objects and node selector terms


def label_selector_requirements(selector: Mapping[str, Any]) -> list[Requirement]:
    """Requirements of a metav1.LabelSelector (matchLabels + matchExpressions)."""
    requirements = [new_requirement(k, EQUALS, (v,)) for k, v in (selector.get("matchLabels") or {}).items()]
    for expr in selector.get("matchExpressions") or []:
        operator = expr.get("operator", "")
        if operator not in ("In", "NotIn", "Exists", "DoesNotExist"):
            raise SelectorError(f'"{operator}" is not a valid label selector operator')
        requirements.append(_object_requirement(expr))
    return requirements


def match_label_selector(selector: Mapping[str, Any] | None, labels: Mapping[str, str] | None) -> bool:
    """LabelSelectorAsSelector semantics: a missing selector matches nothing, {} matches everything."""
    if selector is None:
        return False
    return all(r.matches(labels or {}) for r in label_selector_requirements(selector))


def _object_requirement(expr: Mapping[str, Any]) -> Requirement:
    operator = expr.get("operator", "")
    if operator not in _OBJECT_OPERATORS:
        raise SelectorError(f'"{operator}" is not a valid selector operator')
    return new_requirement(expr.get("key", ""), _OBJECT_OPERATORS[operator], expr.get("values") or ())


def match_node_selector_term(term: Mapping[str, Any], node: Mapping[str, Any]) -> bool:
    """One nodeSelectorTerm: matchExpressions on labels AND matchFields (metadata.name only).

    A term with neither list matches no node, as in the scheduler's nodeaffinity helper.
    """
    expressions = term.get("matchExpressions") or []
    field_exprs = term.get("matchFields") or []
    if not expressions and not field_exprs:
        return False
    labels = node.get("metadata", {}).get("labels") or {}
    fields = {"metadata.name": node.get("metadata", {}).get("name", "")}
    for expr in field_exprs:
        if expr.get("key") != "metadata.name" or expr.get("operator") not in ("In", "NotIn"):
            return False
        if not _object_requirement(expr).matches(fields):
            return False
    return all(_object_requirement(expr).matches(labels) for expr in expressions)


def match_node_selector_terms(terms: Sequence[Mapping[str, Any]], node: Mapping[str, Any]) -> bool:
    """nodeSelectorTerms are ORed."""
    return any(match_node_selector_term(term, node) for term in terms)


# ---------------------------------------------------------------------------------------------
# Field selectors


@dataclass(frozen=True)
class FieldTerm:
    field: str
    operator: str  # "=" (also for "==") or "!="
    value: str


def parse_field_selector(selector: str) -> list[FieldTerm]:
    """Terms of a field selector string, with fields.ParseSelector's error texts."""
    terms = []
    for part in sorted(_split_unescaped(selector, ",")):
        if not part:
            continue
        for i in range(len(part)):
            op = next((op for op in ("!=", "==", "=") if part.startswith(op, i)), None)
            if op is not None:
                value = _unescape_field_value(part[i + len(op) :])
                terms.append(FieldTerm(part[:i], "!=" if op == "!=" else "=", value))
                break
        else:
            raise SelectorError(f"invalid selector: '{selector}'; can't understand '{part}'")
    return terms


def _split_unescaped(text: str, sep: str) -> list[str]:
    parts, current, escaped = [], [], False
    for ch in text:
        if escaped:
            current.append(ch)
            escaped = False
        elif ch == "\\":
            current.append(ch)
            escaped = True
        elif ch == sep:
            parts.append("".join(current))
            current = []
        else:
            current.append(ch)
    parts.append("".join(current))
    return parts


def _unescape_field_value(value: str) -> str:
    out, escaped = [], False
    for ch in value:
        if escaped:
            if ch not in "\\,=":
                raise SelectorError(f"invalid field selector: invalid escape sequence: \\{ch}")
            out.append(ch)
            escaped = False
        elif ch == "\\":
            escaped = True
        elif ch in ",=":
            raise SelectorError(f"invalid field selector: unescaped character in value: {ord(ch)}")
        else:
            out.append(ch)
    if escaped:
        raise SelectorError("invalid field selector: invalid escape sequence: \\")
    return "".join(out)


def _get(obj: Mapping[str, Any], path: str) -> Any:
    current: Any = obj
    for part in path.split("."):
        current = current.get(part) if isinstance(current, Mapping) else None
    return current


def _text(path: str) -> Callable[[Mapping[str, Any]], str]:
    return lambda obj: str(_get(obj, path) or "")


def _flag(path: str) -> Callable[[Mapping[str, Any]], str]:
    return lambda obj: "true" if _get(obj, path) else "false"


_NAMESPACED = {"metadata.name": _text("metadata.name"), "metadata.namespace": _text("metadata.namespace")}
_CLUSTER_SCOPED = {"metadata.name": _text("metadata.name")}
# The selectable fields each registry exposes (pkg/registry/*/strategy.go ToSelectableFields).
_FIELDS: dict[str, dict[str, Callable[[Mapping[str, Any]], str]]] = {
    "pod": _NAMESPACED
    | {
        "spec.nodeName": _text("spec.nodeName"),
        "spec.restartPolicy": _text("spec.restartPolicy"),
        "spec.schedulerName": _text("spec.schedulerName"),
        "spec.serviceAccountName": _text("spec.serviceAccountName"),
        "spec.hostNetwork": _flag("spec.hostNetwork"),
        "status.phase": _text("status.phase"),
        "status.podIP": _text("status.podIP"),
        "status.nominatedNodeName": _text("status.nominatedNodeName"),
    },
    "event": _NAMESPACED
    | {
        f"involvedObject.{f}": _text(f"involvedObject.{f}")
        for f in ("kind", "namespace", "name", "uid", "apiVersion", "resourceVersion", "fieldPath")
    }
    | {
        "reason": _text("reason"),
        "reportingComponent": _text("reportingComponent"),
        "source": lambda e: str(_get(e, "source.component") or e.get("reportingComponent") or ""),
        "type": _text("type"),
    },
    "node": _CLUSTER_SCOPED | {"spec.unschedulable": _flag("spec.unschedulable")},
    "namespace": _CLUSTER_SCOPED | {"status.phase": _text("status.phase")},
    "job": _NAMESPACED | {"status.successful": lambda j: str(_get(j, "status.succeeded") or 0)},
    "service": _NAMESPACED | {"spec.clusterIP": _text("spec.clusterIP"), "spec.type": _text("spec.type")},
    "secret": _NAMESPACED | {"type": _text("type")},
    "priorityclass": _CLUSTER_SCOPED,
    "persistentvolume": _CLUSTER_SCOPED,
}
_PLURALS = {"pods": "pod", "events": "event", "nodes": "node", "namespaces": "namespace", "jobs": "job"}
_PLURALS |= {"services": "service", "secrets": "secret", "priorityclasses": "priorityclass"}
_PLURALS |= {"persistentvolumes": "persistentvolume"}


def selectable_fields(kind: str) -> dict[str, Callable[[Mapping[str, Any]], str]]:
    """Field label -> getter for a kind ("Pod") or resource ("pods"); other kinds get metadata only."""
    key = kind.lower()
    return _FIELDS.get(_PLURALS.get(key, key), _NAMESPACED)


def match_fields(selector: str, obj: Mapping[str, Any], kind: str) -> bool:
    """Whether obj satisfies a field selector; unknown field labels raise SelectorError
    ("field label not supported: x"), as the API server answers 400."""
    fields = selectable_fields(kind)
    for term in parse_field_selector(selector):
        if term.field not in fields:
            raise SelectorError(f"field label not supported: {term.field}")
        equal = fields[term.field](obj) == term.value
        if equal != (term.operator == "="):
            return False
    return True


def check_field_selector(selector: str, kind: str) -> None:
    """Validate a field selector for a kind up front (before listing), raising SelectorError."""
    fields = selectable_fields(kind)
    for term in parse_field_selector(selector):
        if term.field not in fields:
            raise SelectorError(f"field label not supported: {term.field}")
