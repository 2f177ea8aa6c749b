"""What each built-in system of the Score page is, said under its menu: the models it runs (their menu
lines, by name, never by path: :mod:`bsard_demo.app.naming`) and, for a learned ranker, the ranker's own
record (what it was fitted on, its fingerprint, its own dev figure), not the record of an adapter it uses.
"""
from __future__ import annotations

from typing import Mapping, Sequence

from ..retrievers import RetrieverSpec
from ..retrievers.kinds import RANKER_LABEL
from . import french
from .builds import EncoderOption, recorded_figure
from .naming import digests_fingerprint, public_name


def spec_targets(spec: RetrieverSpec) -> set[str]:
    """Every model a spec names (its ``encoder`` and ``model`` options, its parts' too)."""
    found: set[str] = set()

    def walk(value) -> None:
        if isinstance(value, RetrieverSpec):
            walk(value.options)
        elif isinstance(value, Mapping):
            for key, item in value.items():
                if key in ("encoder", "model") and isinstance(item, str):
                    found.add(item)
                elif key in ("encoders", "models") and isinstance(item, (list, tuple)):
                    found.update(x for x in item if isinstance(x, str))
                else:
                    walk(item)
        elif isinstance(value, (list, tuple)):
            for item in value:
                walk(item)

    walk(spec)
    return found


def ranker_caption(name: str, record: Mapping) -> str:
    """One French line of a learned ranker from its own record (``bsard_training.json``): its name, what
    it fuses, what it was fitted on, its fingerprint (its trees' sha256) and its dev figure."""
    data = record.get("dataset") if isinstance(record.get("dataset"), Mapping) else {}
    systems = [str(s) for s in record.get("systems") or [] if isinstance(s, str)]
    used = data.get("questions_used") or data.get("questions")
    line = (f"{public_name(name)} — {RANKER_LABEL.lower()} (LightGBM LambdaRank)"
            + (f" sur {' + '.join(systems)}" if systems else "")
            + f", ajusté sur {public_name(data.get('name') or '?')} (split {data.get('split') or '?'}"
            + (f", {used} questions" if isinstance(used, int) else "")
            + (f", {str(record.get('created'))[:10]}" if record.get("created") else "") + ")")
    digests = record.get("weights_sha256")
    fingerprint = digests_fingerprint(digests) if isinstance(digests, Mapping) else ""
    if fingerprint:
        line += f" · empreinte {fingerprint}"
    evaluation = record.get("evaluation") if isinstance(record.get("evaluation"), Mapping) else None
    figure = recorded_figure(evaluation)
    if figure:
        line += f" · {figure}"
        # the figures of the system the recorded value is of (its MAP@100 beside its recall)
        own = next((v for v in evaluation.values() if isinstance(v, Mapping)
                    and v.get(evaluation.get("measure")) == evaluation.get("value")), {})
        if isinstance(own.get("map@100"), (int, float)):
            line += f", MAP@100 {french.decimal(float(own['map@100']), 3)}"
    return line


def system_captions(spec: RetrieverSpec, models: Sequence[EncoderOption], rankers: Mapping[str, str]) -> list[str]:
    """The lines said under a built-in system: the menu line of each model it runs (``models``), then
    each learned ranker's own line (``rankers``: ``--encoder`` value -> :func:`ranker_caption`)."""
    used = spec_targets(spec)
    return [o.label for o in models if o.target in used] + [line for target, line in rankers.items() if target in used]
