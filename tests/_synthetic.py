"""A deterministic synthetic corpus at BSARD scale, in BSARD's schema, plus synthetic TREC runs.

Test support (tests/test_synthetic.py, the browser and load tests' corpora) and the benches' full-size
corpus without the real one (only on the hub): ``python bench/synthetic.py --out DIR`` calls
:func:`generate`, which writes ``articles.csv``, ``questions_test.csv`` and ``questions_train.csv``, a folder that
``bsard_demo.sources.load_dataset(DIR)`` loads. The text is French-looking, not French: words come
from a few thousand French legal word forms plus generated French-looking tokens, drawn with a
Zipfian frequency and mixed with per-code and per-section topic words, so that neighbouring
articles share vocabulary. Article lengths are lognormal (mean ≈ 130 words, long tail). Each
question (~15 words) takes some content words from its gold articles (1–10 consecutive articles
of one code, mostly 1–2), so retrieval is non-trivial but far from random.

Conventions: everything derives from one ``numpy.random.Generator`` seeded with ``seed``; the same
arguments give byte-identical files (UTF-8, ``\\n`` line ends, csv-module quoting).
"""
from __future__ import annotations

import csv
import io
import math
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Mapping, Sequence

import numpy as np

BSARD_ARTICLES = 22_633
BSARD_TEST_QUESTIONS = 222
BSARD_TRAIN_QUESTIONS = 886
ARTICLE_COLUMNS = ("id", "reference", "article", "law_type", "code", "book", "part", "act",
                   "chapter", "section", "subsection", "description")
QUESTION_COLUMNS = ("id", "category", "subcategory", "question", "extra_description", "article_ids")

# --- vocabulary ------------------------------------------------------------------------------

#: Function words and frequent legal tokens, most frequent first (they take the top Zipf ranks).
FUNCTION_WORDS = """
de la le les des à et en du l' d' est un une par pour dans au sur qui ou que il ne pas
être son sa ses aux être ce cette ces leur leurs se sont peut doit l'article d'un d'une
qu' qu'il n'est selon lorsque dont tout toute tous toutes sans entre avec sous lui elle
ils elles y même autre autres ainsi également dès avant après jusqu'à contre vers chaque
aucun aucune plus moins été ayant fait lequel laquelle lesquels auquel duquel celui celle
ceux où si alors toutefois cependant notamment conformément vertu présent présente
§ 1er 2 3 4 5 6 7 8 9 10 alinéa alinéas article articles
""".split()

LEGAL_NOUNS = """
acte action administration affaire agrément aide allocation amende appel arrêt arrêté
assurance audience autorisation autorité avis avocat ayant-droit bail bailleur bien
biens bourgmestre cassation caution certificat charge citation collège commission
commune compétence conclusion condition conjoint conseil consentement contrat contribution
convention cotisation cour créance créancier débiteur décision déclaration décret délai
demande demandeur dépens dette disposition divorce document dommage domicile donation
droit durée effet emploi emprunteur enfant enquête entreprise époux état étranger exécution
expertise expulsion facture faute femme filiation fonction fonctionnaire frais garantie
greffe greffier héritier homme huissier hypothèque immeuble indemnité information
infraction inscription intérêt jugement juge juridiction justice législation liberté
licenciement locataire logement loi loyer magistrat mainlevée majorité mandat mariage
mesure meuble mineur ministère ministre mois montant nationalité notaire notification
nullité objet obligation occupant office opposition ordonnance organisme paiement parent
partie patrimoine peine pension permis personne plainte possession pouvoir preuve
procédure procureur propriétaire propriété protection prestation rapport recours
recouvrement registre règlement réglementation rémunération remboursement réparation
requête résidence responsabilité revenu saisie salaire sanction secours séjour service
signification situation société somme statut succession sûreté tiers titre tribunal
tutelle tuteur usufruit valeur vente victime voie insalubrité habitation bâtiment travaux
employeur travailleur chômage contrat-type médiateur séparation pension alimentaire
adoption autorité hébergement garde cohabitation cohabitant testament legs partage
indivision réserve quotité prescription forclusion sommation mise demeure astreinte
commandement inventaire scellés curateur faillite insolvabilité médiation conciliation
""".split()

LEGAL_VERBS = """
accorder adresser appliquer apprécier autoriser calculer communiquer compléter
considérer constater contester déclarer déposer désigner déterminer entraîner envoyer
exiger exonérer fixer imposer indiquer informer interdire justifier limiter mentionner
modifier motiver notifier octroyer opposer ordonner payer porter présenter prononcer
proposer prouver réclamer recouvrer réduire refuser régler rembourser remplacer renouveler
résilier respecter signaler statuer supporter suspendre transmettre verser viser
demander délivrer enregistrer examiner prolonger constituer réaliser adopter abroger
""".split()

LEGAL_ADJECTIVES = """
administratif civil communal compétent conjugal contractuel définitif écrit effectif
exécutoire familial fédéral financier fiscal général immobilier judiciaire juridique
légal locatif matériel mobilier moral national nécessaire nul obligatoire officiel
pénal personnel préalable principal privé professionnel provisoire public raisonnable
régional social solidaire spécial suffisant temporaire total urgent valable wallon
bruxellois belge mensuel annuel
""".split()

_SYLLABLES = ("ba be bi bo bu ca ce ci co cu da de di do du fa fe fi fo ga ge gi go la le li lo "
              "lu ma me mi mo mu na ne ni no pa pe pi po pu ra re ri ro ru sa se si so su ta te ti "
              "to tu va ve vi vo cha che chi pla pre tra tri con com dis pro ré dé mé pé").split()
_SUFFIXES = ("ation ement ité eur euse ique ance ence age ier ière oire al elle iste able ible if ive "
             "ure ment eux euse ion ais ant ent ude ise").split()

CATEGORIES = {"Famille": 67, "Logement": 66, "Argent": 36, "Justice": 30, "Etrangers": 13,
              "Travail": 6, "Protection sociale": 4}

#: (name, relative size, law type) — 30 codes; sizes are relative weights.
CODES = (
    ("Code civil", 10.0, "federal"), ("Code judiciaire", 12.0, "federal"),
    ("Code pénal", 4.0, "federal"), ("Code d'instruction criminelle", 3.0, "federal"),
    ("Code de la nationalité belge", 0.6, "federal"), ("Code de droit international privé", 1.2, "federal"),
    ("Code de droit économique", 9.0, "federal"), ("Code des sociétés et des associations", 6.0, "federal"),
    ("Code des impôts sur les revenus 1992", 5.0, "federal"), ("Code électoral", 1.0, "federal"),
    ("Code consulaire", 0.7, "federal"), ("Code des droits d'enregistrement", 1.8, "federal"),
    ("Code des droits de succession", 0.9, "federal"), ("Code du bien-être au travail", 3.5, "federal"),
    ("Code ferroviaire", 1.0, "federal"), ("Constitution", 0.8, "federal"),
    ("Code de la police de la circulation routière", 0.5, "federal"),
    ("Code rural", 0.6, "federal"), ("Code forestier", 0.5, "regional"),
    ("Code wallon du Logement et de l'Habitat durable", 1.0, "regional"),
    ("Code bruxellois du Logement", 0.9, "regional"),
    ("Code wallon de l'Action sociale et de la Santé", 6.0, "regional"),
    ("Code de la démocratie locale et de la décentralisation", 4.0, "regional"),
    ("Code wallon du Développement territorial", 1.5, "regional"),
    ("Code bruxellois de l'Aménagement du territoire", 1.2, "regional"),
    ("Code de l'Environnement", 3.0, "regional"), ("Code de l'Eau", 1.6, "regional"),
    ("Code wallon de l'Agriculture", 1.0, "regional"),
    ("Code de la fonction publique wallonne", 2.5, "regional"),
    ("Code wallon du Bien-être des animaux", 0.4, "regional"),
)

_QUESTION_STARTS = (
    "Quels sont les", "Quelles sont les conditions pour", "Comment", "Peut-on", "Est-ce que",
    "Que faire si", "A-t-on droit à", "Qui doit", "Quand peut-on", "Dans quels cas", "Puis-je",
    "Quelle est la procédure pour", "Combien de temps", "Mon", "Ma",
)

ZIPF_EXPONENT = 1.05
LENGTH_MEAN, LENGTH_SIGMA = 130.0, 0.9  # lognormal article length (words), mean ≈ 130
MIN_WORDS, MAX_WORDS = 8, 6000
#: Probability of 1, 2, …, 10 gold articles per question.
GOLD_COUNT_P = (0.38, 0.20, 0.10, 0.07, 0.06, 0.05, 0.04, 0.04, 0.03, 0.03)
BACKGROUND_SHARE, CODE_SHARE = 0.50, 0.35  # the rest of each article comes from its section topic
#: Share of a question's words (after its opening) that are content words, and the share of
#: those taken from its gold articles (the rest are topic words of the gold articles' code).
KEY_SHARE, GOLD_KEY_SHARE = (0.25, 0.5), 0.5


def _conjugate(verb: str) -> list[str]:
    if not verb.endswith("er"):
        return [verb]
    stem = verb[:-2]
    return [verb, stem + "e", stem + "ent", stem + "é", stem + "ée", stem + "és", stem + "ées"]


def _inflect(adj: str) -> list[str]:
    if adj.endswith("e"):
        return [adj, adj + "s"]
    if adj.endswith("al"):
        return [adj, adj + "e", adj[:-2] + "aux", adj + "es"]
    if adj.endswith("el"):
        return [adj, adj + "le", adj + "s", adj + "les"]
    if adj.endswith("if"):
        return [adj, adj[:-1] + "ve", adj + "s", adj[:-1] + "ves"]
    if adj.endswith("ois"):
        return [adj, adj + "e", adj + "es"]
    return [adj, adj + "e", adj + "s", adj + "es"]


def _real_content_words() -> list[str]:
    words: list[str] = []
    for noun in LEGAL_NOUNS:
        words += [noun, noun if noun.endswith(("s", "x")) else noun + "s"]
    for verb in LEGAL_VERBS:
        words += _conjugate(verb)
    for adj in LEGAL_ADJECTIVES:
        words += _inflect(adj)
    return list(dict.fromkeys(w for w in words if w not in FUNCTION_WORDS))


@dataclass(frozen=True)
class Vocabulary:
    """Words by Zipf rank (0 = most frequent) and the Zipf probabilities; the first
    ``n_function`` words are function words, never used as question keywords."""

    words: np.ndarray  # dtype object
    p: np.ndarray
    n_function: int
    n_real: int  # function + real French content words; the rest are generated


def build_vocabulary(rng: np.random.Generator, size: int = 30_000) -> Vocabulary:
    """Function words, then real legal word forms (shuffled), then generated French-looking tokens."""
    function = list(dict.fromkeys(FUNCTION_WORDS))
    real = _real_content_words()
    real = [real[i] for i in rng.permutation(len(real))]
    taken = set(function) | set(real)
    generated: list[str] = []
    n_gen = max(0, size - len(function) - len(real))
    while len(generated) < n_gen:
        batch = 2 * (n_gen - len(generated)) + 64
        n_syl = rng.integers(1, 4, size=batch)
        syl = rng.integers(0, len(_SYLLABLES), size=(batch, 3))
        suf = rng.integers(0, len(_SUFFIXES), size=batch)
        for i in range(batch):
            w = "".join(_SYLLABLES[j] for j in syl[i, : n_syl[i]]) + _SUFFIXES[suf[i]]
            if w not in taken:
                taken.add(w)
                generated.append(w)
                if len(generated) == n_gen:
                    break
    words = np.array(function + real + generated, dtype=object)
    ranks = np.arange(1, len(words) + 1, dtype=float)
    p = ranks ** -ZIPF_EXPONENT
    return Vocabulary(words, p / p.sum(), len(function), len(function) + len(real))


# --- corpus ----------------------------------------------------------------------------------

_ROMAN = ((10, "X"), (9, "IX"), (5, "V"), (4, "IV"), (1, "I"))


def _roman(n: int) -> str:
    out = ""
    for value, sym in _ROMAN:
        while n >= value:
            out, n = out + sym, n - value
    return out


def _code_sizes(n_articles: int) -> list[tuple[str, int, str]]:
    """Split ``n_articles`` over the codes by their weights (largest remainder, ≥ 1 article each);
    fewer codes for a small corpus (about 20 articles per code at least)."""
    n_codes = max(1, min(len(CODES), n_articles // 20))
    codes = CODES[:n_codes]
    w = np.array([c[1] for c in codes])
    exact = w / w.sum() * (n_articles - n_codes)
    sizes = np.floor(exact).astype(int) + 1
    for i in np.argsort(-(exact - np.floor(exact)), kind="stable")[: n_articles - sizes.sum()]:
        sizes[i] += 1
    return [(name, int(s), law) for (name, _, law), s in zip(codes, sizes)]


def _title(rng: np.random.Generator, nouns: Sequence[str]) -> str:
    a, b = (nouns[i] for i in rng.integers(0, len(nouns), size=2))
    form = rng.integers(0, 3)
    if form == 0:
        return f"Des {a}s" if not a.endswith(("s", "x")) else f"Des {a}"
    if form == 1:
        return f"De la {a} et du {b}"
    return f"Dispositions diverses en matière de {a}"


@dataclass
class Corpus:
    """The generated tables (as lists of rows) and what questions need to pick gold articles."""

    articles: list[list[str]]
    tokens: np.ndarray  # vocabulary index of every word of every article, concatenated
    offsets: np.ndarray  # article i's words are tokens[offsets[i]:offsets[i + 1]]
    code_of: np.ndarray  # code number of each article (0-based, articles in id order)
    code_start: np.ndarray  # first article (0-based) of each code, plus the total at the end
    code_topics: np.ndarray  # vocabulary indices of each code's topic words (codes × words)
    vocab: Vocabulary


def generate_corpus(rng: np.random.Generator, n_articles: int = BSARD_ARTICLES) -> Corpus:
    """Articles with ids 1..n in code order; see the module docstring for the text model."""
    if n_articles < 1:
        raise ValueError("n_articles must be at least 1")
    vocab = build_vocabulary(rng)
    V = len(vocab.words)
    codes = _code_sizes(n_articles)
    code_of = np.repeat(np.arange(len(codes)), [s for _, s, _ in codes])
    code_start = np.concatenate([[0], np.cumsum([s for _, s, _ in codes])])

    # hierarchy: walk each code, one leaf group (same headers) of ~1-25 articles at a time
    nouns = [w for w in LEGAL_NOUNS]
    headers: list[tuple[str, ...]] = []  # (book, part, act, chapter, section, subsection) per article
    group_of = np.empty(n_articles, dtype=np.int64)
    n_groups = 0
    for c, (_name, size, _) in enumerate(codes):
        flags = rng.random(5)
        has_book, has_part, has_act, has_section, has_sub = (flags[0] < 0.6, flags[1] < 0.15,
                                                             flags[2] < 0.4, flags[3] < 0.75, flags[4] < 0.1)
        book = part = act = chapter = section = 1
        titles = {key: _title(rng, nouns) for key in ("book", "part", "act", "chapter", "section")}
        done = 0
        while done < size:
            g = min(size - done, 1 + int(rng.poisson(10)))
            empty_section = rng.random() < 0.15
            row = (
                f"Livre {_roman(book)}. - {titles['book']}" if has_book else "",
                f"Partie {_roman(part)}. - {titles['part']}" if has_part else "",
                f"Titre {_roman(act)}. - {titles['act']}" if has_act else "",
                f"Chapitre {_roman(chapter)}. - {titles['chapter']}",
                f"Section {section}. - {titles['section']}" if has_section and not empty_section else "",
                (f"Sous-section {section}.{1 + int(rng.integers(0, 3))}"
                 if has_sub and has_section and not empty_section else ""),
            )
            headers.extend([row] * g)
            group_of[code_start[c] + done: code_start[c] + done + g] = n_groups
            n_groups += 1
            done += g
            section += 1
            titles["section"] = _title(rng, nouns)
            u = rng.random(3)
            if u[0] < 0.3:
                chapter, section = chapter + 1, 1
                titles["chapter"] = _title(rng, nouns)
            if u[1] < 0.08:
                book, act, chapter, section = book + 1, act + 1, 1, 1
                titles["book"], titles["act"] = _title(rng, nouns), _title(rng, nouns)
            if u[2] < 0.03:
                part += 1
                titles["part"] = _title(rng, nouns)

    # topics: per code ~400 content words (Zipf-weighted pick among content words), per group 25
    content_lo = vocab.n_function
    content_p = vocab.p[content_lo:] / vocab.p[content_lo:].sum()
    topic_size, group_topic_size = 400, 25
    code_topics = content_lo + np.stack([
        rng.choice(V - content_lo, size=topic_size, replace=False, p=content_p) for _ in codes])
    group_topics = content_lo + rng.integers(0, V - content_lo, size=(n_groups, group_topic_size))
    half = group_topic_size // 2  # half of a section's words come from its code's topic
    group_code = code_of[np.searchsorted(group_of, np.arange(n_groups))]
    group_topics[:, :half] = code_topics[group_code[:, None], rng.integers(50, topic_size, size=(n_groups, half))]
    topic_p = np.arange(1, topic_size + 1, dtype=float) ** -1.0
    topic_p /= topic_p.sum()

    # words: lognormal lengths, each word from background / code topic / section topic
    mu = math.log(LENGTH_MEAN) - LENGTH_SIGMA ** 2 / 2
    lengths = np.clip(np.rint(rng.lognormal(mu, LENGTH_SIGMA, size=n_articles)), MIN_WORDS, MAX_WORDS).astype(np.int64)
    offsets = np.concatenate([[0], np.cumsum(lengths)])
    total = int(offsets[-1])
    art = np.repeat(np.arange(n_articles), lengths)
    source = rng.random(total)
    tokens = rng.choice(V, size=total, p=vocab.p)
    in_code = (source >= BACKGROUND_SHARE) & (source < BACKGROUND_SHARE + CODE_SHARE)
    tokens[in_code] = code_topics[code_of[art[in_code]], rng.choice(topic_size, size=int(in_code.sum()), p=topic_p)]
    in_group = source >= BACKGROUND_SHARE + CODE_SHARE
    tokens[in_group] = group_topics[group_of[art[in_group]],
                                    rng.integers(0, group_topic_size, size=int(in_group.sum()))]

    # punctuation: a comma after ~1 word in 12, a full stop after ~1 in 20 and at the end
    punct = rng.random(total)
    suffix = np.where(punct < 0.05, ".", np.where(punct < 0.13, ",", ""))
    suffix[offsets[1:] - 1] = "."
    words = vocab.words[tokens]
    text_words = [w + s if s else w for w, s in zip(words.tolist(), suffix.tolist())]

    articles: list[list[str]] = []
    numbers_in_code = 0
    sentence_start = re.compile(r"(^|\. )(\w)")
    for i in range(n_articles):
        c = int(code_of[i])
        name, _, law = codes[c]
        numbers_in_code = 1 if i == code_start[c] else numbers_in_code + 1
        no = "1er" if numbers_in_code == 1 else str(numbers_in_code)
        if numbers_in_code > 1 and rng.random() < 0.04:
            no = f"{numbers_in_code - 1}{'bis' if rng.random() < 0.7 else 'ter'}"
        text = " ".join(text_words[offsets[i]: offsets[i + 1]])
        text = sentence_start.sub(lambda m: m.group(1) + m.group(2).upper(), text)
        book, part, act, chapter, section, subsection = headers[i]
        description = ", ".join(h.split(". - ")[0] for h in headers[i] if h)
        articles.append([str(i + 1), f"Art. {no}, {name}", text, law, name, book, part, act,
                         chapter, section, subsection, description])
    return Corpus(articles, tokens, offsets, code_of, code_start, code_topics, vocab)


# --- questions -------------------------------------------------------------------------------

def generate_questions(rng: np.random.Generator, corpus: Corpus, n: int, ids: Sequence[int]) -> list[list[str]]:
    """``n`` questions with ids ``ids``; each has 1–10 consecutive gold articles of one code and
    ~15 words of which about a third are content words, half of them from its gold articles."""
    vocab = corpus.vocab
    n_articles = len(corpus.articles)
    cats = list(CATEGORIES)
    cat_p = np.array(list(CATEGORIES.values()), dtype=float)
    cat_p /= cat_p.sum()
    counts = 1 + rng.choice(len(GOLD_COUNT_P), size=n, p=GOLD_COUNT_P)
    rows = []
    for q in range(n):
        anchor = int(rng.integers(0, n_articles))
        c = int(corpus.code_of[anchor])
        lo, hi = int(corpus.code_start[c]), int(corpus.code_start[c + 1])
        k = min(int(counts[q]), hi - lo)
        start = min(anchor, hi - k)
        gold = list(range(start, start + k))
        if k > 2 and rng.random() < 0.3:  # sometimes one gold article lies elsewhere in the code
            gold[-1] = int(rng.integers(lo, hi))
            gold = sorted(set(gold))
        pool = np.concatenate([corpus.tokens[corpus.offsets[g]: corpus.offsets[g + 1]] for g in gold])
        pool = pool[pool >= vocab.n_function]
        n_words = int(np.clip(np.rint(rng.normal(15, 4)), 6, 32))
        start_words = _QUESTION_STARTS[int(rng.integers(0, len(_QUESTION_STARTS)))].split()
        rest = max(2, n_words - len(start_words))
        n_key = max(1, int(round(rest * rng.uniform(KEY_SHARE[0], KEY_SHARE[1])))) if len(pool) else 0
        keys = rng.choice(pool, size=n_key) if n_key else np.zeros(0, dtype=np.int64)
        off_topic = rng.random(n_key) < 1 - GOLD_KEY_SHARE  # a word of the code, not of the gold
        keys[off_topic] = rng.choice(corpus.code_topics[c], size=int(off_topic.sum()))
        keys = vocab.words[keys].tolist()
        filler = vocab.words[rng.choice(len(vocab.words), size=rest - n_key, p=vocab.p)].tolist()
        body = keys + filler
        body = [body[i] for i in rng.permutation(len(body))]
        question = " ".join(start_words + body) + " ?"
        category = cats[int(rng.choice(len(cats), p=cat_p))]
        sub_words = vocab.words[rng.choice(pool, size=2)].tolist() if len(pool) else ["divers"]
        subcategory = " ".join(sub_words).capitalize()
        extra = ""
        if rng.random() >= 0.1:
            n_phr = int(rng.integers(1, 4))
            extra = ", ".join(" ".join(vocab.words[rng.choice(pool, size=int(rng.integers(1, 4)))].tolist())
                              .capitalize() for _ in range(n_phr)) if len(pool) else ""
        rows.append([str(ids[q]), category, subcategory, question, extra, ",".join(str(g + 1) for g in gold)])
    return rows


# --- files -----------------------------------------------------------------------------------

def _csv_bytes(header: Sequence[str], rows: Sequence[Sequence[str]]) -> bytes:
    buf = io.StringIO()
    writer = csv.writer(buf, lineterminator="\n")
    writer.writerow(header)
    writer.writerows(rows)
    return buf.getvalue().encode("utf-8")


def generate(out: str | Path, *, seed: int = 0, n_articles: int = BSARD_ARTICLES,
             n_test: int = BSARD_TEST_QUESTIONS, n_train: int | None = None) -> dict[str, float]:
    """Write ``articles.csv``, ``questions_test.csv``, ``questions_train.csv`` into ``out``.

    ``n_train`` defaults to 4 × ``n_test`` (886 for BSARD's 222, as in the real split).
    Returns summary statistics (article length mean/median/p99/max, question length, …).
    """
    if n_test < 1:
        raise ValueError("need at least one test question")
    n_train = round(n_test * BSARD_TRAIN_QUESTIONS / BSARD_TEST_QUESTIONS) if n_train is None else n_train
    rng = np.random.default_rng(seed)
    corpus = generate_corpus(rng, n_articles)
    qids = rng.permutation(np.arange(1, n_test + n_train + 1))
    test = generate_questions(rng, corpus, n_test, qids[:n_test].tolist())
    train = generate_questions(rng, corpus, n_train, qids[n_test:].tolist())
    folder = Path(out)
    folder.mkdir(parents=True, exist_ok=True)
    for name, header, rows in (("articles.csv", ARTICLE_COLUMNS, corpus.articles),
                               ("questions_test.csv", QUESTION_COLUMNS, test),
                               ("questions_train.csv", QUESTION_COLUMNS, train)):
        (folder / name).write_bytes(_csv_bytes(header, rows))
    lengths = np.diff(corpus.offsets)
    q_len = np.array([len(r[3].split()) - 1 for r in test])  # minus the "?"
    n_gold = np.array([len(r[5].split(",")) for r in test])
    return {
        "articles": float(n_articles), "codes": float(len(corpus.code_start) - 1),
        **length_stats(lengths),
        "question_words_mean": float(q_len.mean()), "gold_mean": float(n_gold.mean()),
        "gold_1_or_2": float(np.mean(n_gold <= 2)),
    }


def length_stats(word_counts: Sequence[int] | np.ndarray) -> dict[str, float]:
    """Mean, median, 99th percentile and maximum of article lengths in words."""
    a = np.asarray(word_counts, dtype=float)
    return {"words_mean": float(a.mean()), "words_median": float(np.median(a)),
            "words_p99": float(np.percentile(a, 99)), "words_max": float(a.max())}


# --- runs ------------------------------------------------------------------------------------

def make_run(qrels: Mapping[str, Sequence[str]] | object, path: str | Path | None = None, *,
             split: str = "test", depth: int = 500, seed: int = 0, tie_rate: float = 0.02,
             n_articles: int | None = None, found_rate: float = 0.65, tag: str = "synthetic") -> str:
    """A BM25-like TREC run (``qid Q0 docid rank score tag``), ``depth`` lines per question.

    ``qrels`` is a :class:`bsard_demo.dataset.Dataset` (its ``split`` labels are used) or a
    mapping ``{qid: gold ids}``. Doc ids are ``1..n_articles`` (the dataset's corpus size, else
    BSARD's 22,633). Each gold article is retrieved with probability ``found_rate``, at a
    log-uniform rank in ``1..depth`` (R@100 ≈ 0.45–0.5, R@500 ≈ 0.6–0.65, MRR@100 ≈ 0.3,
    like BM25 on BSARD); other
    lines are random non-gold articles. Scores decrease with rank; a fraction ``tie_rate`` of
    lines repeat the score of the line above (a tie, which readers break by doc id). Lines are
    written in generation order with ranks 1..depth. Returns the text; writes it to ``path``
    when given.
    """
    if hasattr(qrels, "qrels"):
        dataset = qrels
        labels = dataset.qrels(split)
        if n_articles is None and getattr(dataset, "articles", None) is not None:
            n_articles = len(dataset.articles)
    else:
        labels = qrels
    n_articles = BSARD_ARTICLES if n_articles is None else n_articles
    if not 1 <= depth <= n_articles:
        raise ValueError(f"depth must be between 1 and the {n_articles} articles, not {depth}")
    rng = np.random.default_rng(seed)
    lines: list[str] = []
    log_depth = math.log(depth + 1)
    for qid, gold in labels.items():
        # sorted: a frozenset's order of strings changes from one process to the next
        gold_ids = sorted({int(g) for g in gold if str(g).isdigit() and 1 <= int(g) <= n_articles})
        slots = np.zeros(depth, dtype=np.int64)  # 0 = free
        for g in gold_ids:
            if rng.random() < found_rate:
                r = min(depth, int(math.exp(rng.uniform(0.0, log_depth)))) - 1
                free_slots = np.flatnonzero(slots == 0)
                if len(free_slots):  # the first free rank at or below r, else the last free one
                    after = free_slots[free_slots >= r]
                    slots[after[0] if len(after) else free_slots[-1]] = g
        free = np.flatnonzero(slots == 0)
        candidates = rng.choice(n_articles, size=min(n_articles, depth + len(gold_ids)), replace=False) + 1
        candidates = candidates[~np.isin(candidates, gold_ids)][: len(free)]
        slots[free[: len(candidates)]] = candidates
        slots = slots[slots > 0]  # shorter than depth only when the corpus runs out of articles
        n = len(slots)
        base = rng.uniform(2.0, 10.0)
        scores = base + 4.0 * np.log((depth + 1) / np.arange(1, n + 1)) + rng.uniform(0, 1e-3, size=n)
        scores = np.minimum.accumulate(np.round(scores, 4))  # strictly decreasing: steps > 0.008
        ties = rng.random(n) < tie_rate
        ties[:1] = False
        for r in np.flatnonzero(ties):
            scores[r] = scores[r - 1]
        lines.extend(f"{qid} Q0 {d} {r} {s:.4f} {tag}"
                     for r, (d, s) in enumerate(zip(slots.tolist(), scores.tolist()), 1))
    text = "\n".join(lines) + "\n"
    if path is not None:
        Path(path).write_text(text, encoding="utf-8")
    return text
