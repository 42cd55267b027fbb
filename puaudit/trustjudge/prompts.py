"""Prompt templates for the judge runner (``puaudit judge``).

A template is a system message and a user message with ``{placeholders}``: ``{question}``,
``{answer_a}``, ``{answer_b}`` for pairs (the judge ends with ``[A]`` / ``[B]`` / ``[C]``, C = tie,
or the doubled form), ``{question}``, ``{answer}``, ``{low}``, ``{high}`` for scores (a bracketed
integer). Built in: :data:`PAIR_TEMPLATES` and :data:`SCORE_TEMPLATES`; your own JSON file is
read by :func:`load_template` (docs/judge.md).
"""

from __future__ import annotations

import json
import string
from dataclasses import dataclass
from pathlib import Path

from puaudit.errors import PUAuditError

__all__ = ["PromptTemplate", "PAIR_TEMPLATES", "SCORE_TEMPLATES", "get_template", "load_template"]

_FIELDS = {"pair": {"question", "answer_a", "answer_b"},
           "score": {"question", "answer", "low", "high"}}
_REQUIRED = {"pair": {"question", "answer_a", "answer_b"}, "score": {"question", "answer"}}


@dataclass(frozen=True)
class PromptTemplate:
    """A judge prompt: system and user messages with ``{placeholders}``.

    Attributes
    ----------
    name : str
    kind : {"pair", "score"}
    system, user : str
        ``str.format`` templates (see the module docstring for the placeholders).
    scale : (int, int) or None
        The allowed integer scores of a score template.
    """

    name: str
    kind: str
    system: str
    user: str
    scale: tuple[int, int] | None = None

    def __post_init__(self):
        if self.kind not in _FIELDS:
            raise PUAuditError(f"Template '{self.name}': kind must be 'pair' or 'score' (got "
                               f"'{self.kind}').")
        used = set()
        for part in (self.system, self.user):
            try:
                used |= {f for _, f, _, _ in string.Formatter().parse(part) if f is not None}
            except ValueError as exc:
                raise PUAuditError(f"Template '{self.name}': {exc}. Write literal braces as "
                                   "{{ and }}.") from None
        unknown = sorted(used - _FIELDS[self.kind])
        if unknown:
            raise PUAuditError(f"Template '{self.name}': unknown placeholder(s) "
                               f"{', '.join('{' + u + '}' for u in unknown)}; a {self.kind} "
                               f"template may use {', '.join(sorted(_FIELDS[self.kind]))}.")
        missing = sorted(_REQUIRED[self.kind] - used)
        if missing:
            raise PUAuditError(f"Template '{self.name}': the placeholder(s) "
                               f"{', '.join('{' + m + '}' for m in missing)} must appear.")
        if self.kind == "score":
            try:
                lo, hi = (int(v) for v in self.scale)
                ok = lo < hi and all(float(v) == int(v) for v in self.scale)
            except (TypeError, ValueError):
                ok = False
            if not ok:
                raise PUAuditError(f"Template '{self.name}': a score template needs a scale "
                                   "[low, high] of integers with low < high.")
            object.__setattr__(self, "scale", (lo, hi))

    def messages(self, **fields: str) -> list[dict]:
        """The chat messages for one request (system first, then user)."""
        if self.kind == "score":
            fields = {"low": self.scale[0], "high": self.scale[1], **fields}
        out = []
        if self.system:
            out.append({"role": "system", "content": self.system.format(**fields)})
        out.append({"role": "user", "content": self.user.format(**fields)})
        return out

    def to_dict(self) -> dict:
        """JSON-ready description (what :func:`load_template` reads back)."""
        d = {"name": self.name, "kind": self.kind, "system": self.system, "user": self.user}
        if self.scale is not None:
            d["scale"] = list(self.scale)
        return d


_PAIR_USER = ("[User Question]\n{question}\n\n"
              "[The Start of Assistant A's Answer]\n{answer_a}\n[The End of Assistant A's Answer]\n\n"
              "[The Start of Assistant B's Answer]\n{answer_b}\n[The End of Assistant B's Answer]")
_SCORE_USER = ("[User Question]\n{question}\n\n"
               "[The Start of Assistant's Answer]\n{answer}\n[The End of Assistant's Answer]")

PAIR_TEMPLATES: dict[str, PromptTemplate] = {
    "trustjudge": PromptTemplate(
        name="trustjudge", kind="pair", user=_PAIR_USER,
        system=("You compare two AI assistants' answers to the same user question, as a neutral "
                "evaluator. Work in four steps.\n"
                "1. Strengths: three short bullet points contrasting what Assistant A and "
                "Assistant B do well.\n"
                "2. Weaknesses: three short bullet points contrasting where each falls short.\n"
                "3. Decide on helpfulness, relevance, accuracy, depth, creativity and clarity "
                "only; the order of the answers, their length and the assistants' names must not "
                "sway you.\n"
                "4. Verdict: end with exactly one of [A] (Assistant A is better), [B] (Assistant "
                "B is better) or [C] (a tie), in square brackets, e.g. \"Verdict: [A]\".")),
    "mtbench": PromptTemplate(
        name="mtbench", kind="pair", user=_PAIR_USER,
        system=("Act as an impartial judge of the two AI assistants' answers to the user question "
                "shown below, and decide which assistant follows the user's instructions and "
                "answers the question better, considering helpfulness, relevance, accuracy, "
                "depth, creativity and level of detail. Compare the two answers and explain your "
                "comparison briefly. Do not let the order in which the answers appear, their "
                "length or the assistants' names influence you, and be as objective as possible. "
                "After your explanation, give your final verdict in exactly this format: \"[[A]]\" "
                "if Assistant A is better, \"[[B]]\" if Assistant B is better, \"[[C]]\" for a "
                "tie.")),
}

_SCORE_SYSTEM = ("You are an experienced critic of AI assistants' answers. Read the user question "
                 "and the assistant's answer below, then:\n"
                 "1. Highlights: what the answer does well (accuracy, relevance, style).\n"
                 "2. Opportunities: what could be better (missing details, organisation, tone).\n"
                 "3. Summary: your overall impression in one sentence.\n"
                 "4. Score: one integer on a scale of {low} (poor) to {high} (excellent), in "
                 "square brackets, exactly as \"Score: [X]\".")

SCORE_TEMPLATES: dict[str, PromptTemplate] = {
    "trustjudge-5": PromptTemplate(name="trustjudge-5", kind="score", system=_SCORE_SYSTEM,
                                   user=_SCORE_USER, scale=(1, 5)),
    "trustjudge-100": PromptTemplate(name="trustjudge-100", kind="score", system=_SCORE_SYSTEM,
                                     user=_SCORE_USER, scale=(1, 100)),
    "mtbench-10": PromptTemplate(
        name="mtbench-10", kind="score", user=_SCORE_USER, scale=(1, 10),
        system=("Act as an impartial judge of the quality of the AI assistant's answer to the "
                "user question shown below, considering helpfulness, relevance, accuracy, depth, "
                "creativity and level of detail. Explain your evaluation briefly and as "
                "objectively as possible, then rate the answer on a scale of {low} to {high} in "
                "exactly this format: \"Rating: [[5]]\".")),
}


def load_template(path: str | Path, *, kind: str) -> PromptTemplate:
    """Read a template from a JSON file.

    Parameters
    ----------
    path : path
        ``{"system": "...", "user": "...", "scale": [1, 10]}`` (``scale`` for score templates;
        ``kind`` optional, it must match).
    kind : {"pair", "score"}

    Raises
    ------
    PUAuditError
        Unreadable file, wrong kind, unknown or missing placeholders.
    """
    p = Path(path)
    try:
        obj = json.loads(p.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError) as exc:
        raise PUAuditError(f"Cannot read the template {p}: {exc}") from None
    except json.JSONDecodeError as exc:
        raise PUAuditError(f"The template {p} is not valid JSON ({exc.msg}, line {exc.lineno}).") from None
    if not isinstance(obj, dict) or not isinstance(obj.get("user"), str):
        raise PUAuditError(f"The template {p} must be a JSON object with a \"user\" message (and "
                           "optionally \"system\").")
    if obj.get("kind", kind) != kind:
        raise PUAuditError(f"The template {p} is a '{obj.get('kind')}' template; a '{kind}' "
                           "template is needed here.")
    scale = obj.get("scale")
    return PromptTemplate(name=str(obj.get("name") or p.stem), kind=kind,
                          system=str(obj.get("system") or ""), user=obj["user"],
                          scale=tuple(scale) if isinstance(scale, list) else None)


def get_template(name_or_path: str, *, kind: str) -> PromptTemplate:
    """A built-in template by name, or one read from a JSON file."""
    builtins = PAIR_TEMPLATES if kind == "pair" else SCORE_TEMPLATES
    if name_or_path in builtins:
        return builtins[name_or_path]
    if Path(name_or_path).suffix.lower() == ".json" or Path(name_or_path).is_file():
        return load_template(name_or_path, kind=kind)
    raise PUAuditError(f"Unknown {kind} template '{name_or_path}'. Use one of "
                       f"{', '.join(builtins)}, or a JSON file.")
