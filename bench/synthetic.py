"""Write the synthetic BSARD-scale corpus of ``tests/_synthetic.py`` (and, with ``--run``, a
500-deep TREC run of its test split)::

    python bench/synthetic.py --out /tmp/bsard-synth [--seed 0] [--articles 22633] [--questions 222]
"""
from __future__ import annotations

import argparse
import sys
import time
from typing import Sequence

if __package__ in (None, ""):  # python bench/synthetic.py (bench/_path.py)
    import _path  # noqa: F401

from _synthetic import BSARD_ARTICLES, BSARD_TEST_QUESTIONS, generate, make_run  # noqa: E402


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Write a synthetic BSARD-like dataset folder.")
    parser.add_argument("--out", required=True, help="folder to write (created if needed)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--articles", type=int, default=BSARD_ARTICLES)
    parser.add_argument("--questions", type=int, default=BSARD_TEST_QUESTIONS, help="test questions")
    parser.add_argument("--train", type=int, default=None, help="train questions (default 4 × test, 886 for 222)")
    parser.add_argument("--run", metavar="FILE", help="also write a synthetic 500-deep TREC run of the test split")
    args = parser.parse_args(argv)
    t0 = time.perf_counter()
    try:
        stats = generate(args.out, seed=args.seed, n_articles=args.articles, n_test=args.questions, n_train=args.train)
    except (ValueError, OSError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    elapsed = time.perf_counter() - t0
    print(f"wrote {args.out}: {int(stats['articles'])} articles in {int(stats['codes'])} codes, "
          f"{args.questions} test questions ({elapsed:.1f} s)")
    print(f"article words: mean {stats['words_mean']:.1f}, median {stats['words_median']:.0f}, "
          f"p99 {stats['words_p99']:.0f}, max {stats['words_max']:.0f}")
    print(f"test questions: {stats['question_words_mean']:.1f} words on average, "
          f"{stats['gold_mean']:.2f} gold articles on average, {stats['gold_1_or_2']:.0%} with 1 or 2")
    if args.run:
        from bsard_demo.sources import load_dataset
        make_run(load_dataset(args.out, need_corpus=False), args.run, n_articles=args.articles, seed=args.seed)
        print(f"wrote run {args.run}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
