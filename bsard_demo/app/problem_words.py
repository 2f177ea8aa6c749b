"""The Score page's French words for a run file's problems: one sentence per stable code of the readers
(:data:`bsard_demo.runs.problems.CODES`) and of the checks (:data:`~bsard_demo.runs.problems.CHECK_CODES`),
and the fixes a problem points to, in the page's terms. The readers' own messages (English, with the
figures and ids) stay the technical details."""
from __future__ import annotations

#: The label of the Score page's checkbox that reads a file's scores as distances (the CLI's
#: ``--lower-is-better``), which the problems' hints name.
DISTANCES_LABEL = "scores = distances"

PROBLEMS_FR: dict[str, str] = {
    "file_not_found": "le fichier n'existe pas",
    "not_a_file": "ce chemin est un dossier ou un fichier spécial, pas un fichier ordinaire",
    "unreadable_file": "le fichier ne peut pas être lu (droits, erreur de lecture)",
    "empty_file": "le fichier (ou son contenu gzip) est vide",
    "file_too_large": "le fichier dépasse la taille permise ; il n'est pas lu",
    "gzip_too_large": "le contenu gzip décompressé dépasse la taille permise ; la décompression est arrêtée",
    "gzip_truncated": "les données gzip s'arrêtent avant la fin de leur flux compressé",
    "gzip_corrupt": "les données gzip sont endommagées",
    "gzip_trailing_data": "des octets après la fin du flux gzip ont été ignorés",
    "gzip_twice": "le contenu est compressé deux fois en gzip",
    "binary_file": "un fichier binaire (image, PDF, archive, tableur…), pas du texte",
    "not_utf8": "une ligne n'est pas du texte UTF-8 valide (ou un texte UTF-16 sans marque d'ordre des octets)",
    "whitespace_only": "le fichier ne contient que des espaces",
    "html_page": "une page HTML ou XML (souvent une page de téléchargement enregistrée), pas un run",
    "parquet_unreadable": "un fichier parquet illisible (tronqué ou endommagé)",
    "parquet_too_large": "les colonnes parquet décompressées dépassent la taille permise",
    "not_a_run": "les lignes n'ont pas la forme d'un run : ni 6 champs (TREC) ni 3 pour la plupart",
    "qrels_file": "un fichier de jugements (qid 0 docid pertinence), pas un run",
    "csv_without_header": "des valeurs séparées par des virgules sans ligne d'en-tête qui nomme les colonnes",
    "missing_columns": "l'en-tête n'a pas de colonne d'identifiant de question, d'article, ou de score/rang",
    "bad_column_type": "une colonne parquet d'un type qui ne peut contenir ni identifiants, ni scores, ni rangs",
    "csv_syntax_error": "une erreur de syntaxe CSV (guillemet non fermé…) ; la suite n'est pas lue",
    "no_run_lines": "aucune ligne de run utilisable",
    "invalid_json": "le JSON (ou une ligne JSON Lines) ne se lit pas",
    "json_too_deep": "le JSON est trop imbriqué pour être un run",
    "json_not_a_run": "le JSON (ou un enregistrement JSON Lines) n'a pas la forme d'un run",
    "json_mixed_layout": "une question ou un enregistrement JSON de forme différente du premier",
    "missing_field": "un enregistrement JSON Lines sans identifiant de question, d'article, ou sans score/rang",
    "bad_field_count": "une ligne n'a pas le nombre de champs des autres",
    "bad_id": "un identifiant de question ou d'article vide, ou qui n'est ni un texte ni un entier",
    "bad_article_list": "la liste d'articles d'un enregistrement JSON Lines n'est pas une liste",
    "bad_score": "un score qui n'est pas un nombre fini",
    "bad_rank": "un rang qui n'est pas un entier (au moins 1)",
    "duplicate_article": "un article cité deux fois pour une question ; sa copie la mieux classée est gardée",
    "rank_score_order": "les rangs contredisent les scores ; les articles sont classés par score",
    "tie_order": "des scores égaux classés autrement que par la règle de trec_eval (identifiant décroissant)",
    "several_tags": "plusieurs noms de run dans un fichier ; toutes ses lignes forment un seul run",
    "unknown_questions": "des questions qui ne sont pas du split évalué ; elles sont ignorées",
    "unknown_articles": "des articles absents du corpus ; ils ne peuvent jamais être pertinents",
    "short_rankings": "des questions avec moins d'articles que la coupure la plus profonde",
    "scores_ascending": "les scores croissent avec le rang pour la plupart des questions : des distances ?",
    "scores_descending": "lus comme des distances, les scores décroissent avec le rang : des similarités ?",
    "internal_error": "une panne inattendue du lecteur (un bogue : signalez-le avec le fichier)",
    "reader_crashed": "le lecteur s'est arrêté sur ce fichier (octets endommagés ou hostiles) ; il n'est pas lu",
    "too_slow": "la lecture de ce fichier a dépassé son temps (la limite est dans les détails) : elle a été arrêtée",
    "too_large_in_memory": "ce fichier demanderait trop de mémoire (trop de lignes, de questions ou d'articles) : "
                           "il n'est pas lu",
    "line_too_long": "une ligne est bien trop longue pour une ligne de run (64 Ko au plus)",
    "gzip_too_many_members": "le fichier gzip est fait de trop de morceaux (plus de 100 000) : il n'est pas lu",
    "lz4_unreadable": "un fichier LZ4 (ranx) illisible : endommagé, ou ni un run ni des étiquettes de ranx",
    "lz4_too_large": "le contenu LZ4 décompressé dépasse la taille permise",
    "bad_relevance": "une pertinence n'est pas un nombre entier",
    "conflicting_label": "un article jugé deux fois pour une question, avec deux pertinences différentes",
    "duplicate_label": "un article jugé deux fois pour une question, avec la même pertinence",
    "json_not_qrels": "ce JSON n'est pas un objet d'étiquettes de ranx {question: {article: pertinence}}",
    "no_labels": "le fichier ne contient aucune étiquette",
    "reader_timeout": "le lecteur a dépassé son temps sur ce fichier et a été arrêté",
    "reader_out_of_memory": "le lecteur a demandé plus de mémoire que permis pour ce fichier",
    "wrong_split": "la plupart des questions du run sont d'un autre split du jeu de données",
    "ids_shifted": "le run correspond bien mieux aux articles pertinents avec chaque identifiant décalé de 1 "
                   "(numéros de ligne comptés à partir de 0 ?)",
    "near_random": "le run ne fait pas mieux qu'un classement au hasard (identifiants, split ou jeu de données ?)",
}

#: The page's words for a problem's hint (:data:`bsard_demo.runs.problems.HINTS`).
HINTS_FR = {
    "read_as_distances": f"cochez « {DISTANCES_LABEL} » sous le fichier",
    "read_as_similarities": f"si un score plus haut est meilleur, décochez « {DISTANCES_LABEL} »",
}


#: Codes whose message the Score page words itself, in French and with its figures (the upload limit:
#: :func:`bsard_demo.app.score_uploads.upload_too_large`).
PAGE_WORDED = frozenset({"file_too_large"})


def problem_fr(code: str, hint: str | None = None, message: str = "") -> str:
    """The French sentence of a problem's ``code`` (an unknown code named as it is), with its ``hint``'s fix;
    the page's own ``message`` for a code of :data:`PAGE_WORDED`."""
    if code in PAGE_WORDED and message:
        return message
    text = PROBLEMS_FR.get(code, f"problème « {code} » (voir les détails techniques)")
    return f"{text} — {HINTS_FR[hint]}" if hint in HINTS_FR else text
