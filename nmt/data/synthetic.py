"""A translation-like synthetic parallel corpus, generated from an integer seed.

This is the built-in default data set. The seed fixes everything: the two
lexicons, the inflection tables and every sentence. Only the standard library
is used (one ``random.Random(seed)``), so the same seed and sizes give the same
corpus in every process and on every machine. The target is a deterministic
function of the source (a perfect model scores BLEU 100), but getting it right
needs reordering over long distances, agreement and subwords, which is where
recurrent units differ.

Source language (SVO, little morphology)
    Nouns take ``-s``/``-es`` in the plural, verbs take ``-ta`` in the past;
    the perfect is ``PERF verb``, negation ``NOT`` before the verb group. Every
    noun phrase starts with a determiner (definite, indefinite, demonstrative)
    or is a pronoun; adjectives come before the noun. Relative clauses are set
    off by commas, ``N , REL ...  ,``, which keeps the source unambiguous.
    Questions start with a particle, ``QUEST S V O ?``. Adverbs stand at the
    start of the sentence or at the end of their clause.

Target language (V2 main clauses, verb-final subordinate clauses)
    * Lexicon: every source lemma (400 nouns, 100 adjectives, 100 verbs, 40
      adverbs, 12 prepositions; fewer with ``lexicon``, see below) maps to one
      target lemma. The two vocabularies are drawn independently from
      different syllable inventories and share no word, so every translation
      has to be learned.
    * Nouns have one of three genders and one of five plural classes (``-en``,
      ``-e``, ``-s``, umlaut + ``-er``, or no ending: then only the determiner
      shows the number).
    * Agreement: determiners come before the noun and inflect for gender,
      number and case (18 endings); adjectives come *after* the noun and
      inflect for gender and number. In the source the noun comes after the
      adjectives, so the target determiner depends on a word up to four
      positions later. Case: subjects nominative, objects accusative or
      dative (a property of the verb), prepositions govern accusative or
      dative. Relative pronouns agree with the head noun in gender and number
      and take the case of their role in the relative clause.
    * Verbs agree with their subject in person and number (6 endings; past
      tense adds a marker). The source verb does not agree, so the target has
      to find the subject, which may be separated from the verb by a relative
      clause, or may come *after* the verb (see V2 and questions). Coordinated
      subjects are plural; their person is the lowest of the conjuncts.
    * Word order: main clauses are verb-second. A fronted adverb, PP or
      adverbial clause, and the connective "so", put the finite verb before
      the subject; questions are verb-first. The participle of the perfect
      goes to the end of its clause (after the object and PPs), negation to
      the end of the middle field (after object and PPs), a clause-final
      source adverb moves to its front (right after the finite verb and the
      subject). Subordinate clauses (``that``-complements, adverbial clauses
      with four subordinators, relative clauses) are verb-final: the finite
      verb moves past the whole object and PP phrase. Complement clauses are
      extraposed after the verb. Subordinate and relative clauses are set off
      by commas.
    * Compounds: a noun-noun sequence in the source, ``MOD HEAD`` or ``HEAD OF
      MOD``, is one target word ``mod + link + head`` (the linking element
      depends on the first noun, the gender and plural come from the head).
      Most compounds are rare, so only subword units can model them.
    * Lengths: recursion through complement clauses, relative clauses, PP
      attachment, coordination and adverbial clauses gives source sentences of
      3 to 60 tokens (``max_words``), most between 5 and 25. Text is written
      like real text, punctuation attached to the word before it (``tokenize``
      splits it off).

Example, glossed (``.m.sg.acc``: gender, number, case; ``+s+``: linking element)::

    src: when the old man , REL the dog sees , NOT PERF sleep , we sing-PAST the door house today .
    tgt: when the.m.sg.nom man old.m.sg , REL.m.sg.acc the.m.sg.nom dog see.3sg , NOT slept has.3sg ,
         sang.1pl we today the.n.sg.acc door+s+house .

Two knobs make a corpus that is quicker to learn (``generate_corpus``,
``write_corpus``, and ``--lexicon``/``--max-words`` on the command line). With
their defaults the corpus is the one earlier versions gave, byte for byte.

``lexicon`` (0 < lexicon <= 1, default 1)
    Multiplies the number of lemmas of every word class by the factor,
    rounded, but keeps at least 20 nouns (5 of them compound modifiers), 8
    adjectives, 3 verbs of each class (transitive, intransitive,
    clause-taking), 4 adverbs and 4 prepositions (``lexicon_sizes``). Fewer
    word types to learn, each one seen more often. The grammar, the closed
    word classes (determiners, pronouns, connectives, subordinators) and the
    inflection tables stay the same, and a reduced lexicon is made to keep
    every contrast a small draw could lose by chance: all three genders and
    five plural classes, accusative and dative prepositions and verbs, and
    several linking elements among the compound modifiers. The lexicon is
    still drawn from the seed, but a different factor gives different words.
``max_words`` (>= 8, default 60)
    The longest source sentence in tokens, punctuation included; longer
    samples are drawn again. The grammar and its probabilities stay the same,
    so the corpus is the full distribution restricted to short sentences:
    every construction can still occur, but the long ones get rarer as the
    cap falls (a relative clause is in 20% of the sentences without a cap, in
    9% with ``max_words=20``, in 2% with 12). About 74% of all samples have at
    most 20 tokens, 41% at most 12 and 21% at most 8, so redrawing stays cheap.
    The cap only filters the stream of samples: with the same seed and
    ``lexicon`` the words are the same, and so are the short sentences.

Public API: ``generate_corpus``, ``write_corpus``, ``lexicon_sizes`` and ``word_forms``;
``python -m nmt.data.synthetic --help`` prints examples and statistics.
"""

from __future__ import annotations

import bisect
import itertools
import math
import numbers
import pathlib
import random
import statistics
import sys
import time
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, fields

from nmt.cli import command_parser
from nmt.fileio import write_lines

__all__ = ["LexiconSizes", "detokenize", "generate_corpus", "lexicon_sizes", "tokenize", "word_forms",
           "write_corpus"]

VERSION = "2"  # bump when the output for a given seed changes
SPLITS = ("train", "valid", "test")

DEFAULT_MAX_WORDS = 60  # cap on source tokens (punctuation included); longer samples are drawn again
MIN_MAX_WORDS = 8  # the smallest cap that leaves room for every kind of clause ("the dog , REL sees , sleeps .")

# Grammatical features.
GENDERS = 3  # masculine, feminine, neuter
NOM, ACC, DAT = 0, 1, 2
PRESENT, PAST, PERFECT = 0, 1, 2
DEF, INDEF, DEM = 0, 1, 2
# Pronouns as (person, plural, gender); gender only matters for the 3rd singular.
PRONOUNS = ((1, False, 0), (2, False, 0), (3, False, 0), (3, False, 1), (3, False, 2),
            (1, True, 0), (2, True, 0), (3, True, 0))
# Clause connectives: (name, whether the target inverts subject and verb after it).
CONNECTIVES = (("and", False), ("but", False), ("so", True))
SUBORDINATORS = ("because", "when", "although", "if")

SRC_ONSETS = ("b", "d", "f", "g", "k", "l", "m", "n", "p", "r", "s", "t", "v", "z", "br", "kl", "pr", "st", "tr")
SRC_VOWELS = ("a", "e", "i", "o", "u")
SRC_CODAS = ("n", "r", "l")
TGT_ONSETS = ("b", "d", "f", "g", "h", "j", "k", "l", "m", "n", "p", "r", "s", "t", "w", "z",
              "sch", "st", "sp", "kr", "gr", "pf", "fl", "tr", "zw")
TGT_VOWELS = ("a", "e", "i", "o", "u", "ei", "au", "ie", "eu", "ä", "ö", "ü")
TGT_CODAS = ("n", "r", "l", "s", "t", "ch", "ng", "m", "k", "rt", "nd", "st")
UMLAUT = {"a": "ä", "o": "ö", "u": "ü"}
PLURAL_CLASSES = ("en", "e", "s", "umlaut-er", "")
PLURAL_CLASS_WEIGHTS = (0.3, 0.25, 0.15, 0.15, 0.15)
LINKS = ("", "s", "en", "er", "e")

Pair = tuple[str, str]


# --------------------------------------------------------------------------- lexicon sizes


@dataclass(frozen=True)
class LexiconSizes:
    """How many lemmas each open word class has (the same in both languages).

    Lemma ids are frequency ranks: words are drawn Zipf-like, so id 0 is the most frequent. The defaults are the
    full lexicon; ``lexicon_sizes(factor)`` gives a smaller one.
    """

    nouns: int = 400
    compound_modifiers: int = 80  # the most frequent nouns can be the first part of a compound
    adjectives: int = 100
    transitive_verbs: int = 60
    intransitive_verbs: int = 25
    clause_verbs: int = 15  # verbs that take a "that"-clause
    adverbs: int = 40
    prepositions: int = 12

    def __post_init__(self):
        for name, value in self.as_dict().items():
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ValueError(f"LexiconSizes.{name} must be a positive integer, got {value!r}")
        if not 2 <= self.compound_modifiers <= self.nouns:  # a compound needs a modifier other than its head
            raise ValueError(f"LexiconSizes.compound_modifiers must be between 2 and nouns ({self.nouns}), "
                             f"got {self.compound_modifiers}")

    @property
    def verbs(self) -> int:
        """All verbs; their ids run transitive, then intransitive, then clause-taking."""
        return self.transitive_verbs + self.intransitive_verbs + self.clause_verbs

    def as_dict(self) -> dict[str, int]:
        return {f.name: getattr(self, f.name) for f in fields(self)}


FULL_LEXICON = LexiconSizes()
SMALLEST_LEXICON = LexiconSizes(nouns=20, compound_modifiers=5, adjectives=8, transitive_verbs=3,
                                intransitive_verbs=3, clause_verbs=3, adverbs=4, prepositions=4)


def _check_lexicon(lexicon: float) -> None:
    """Accept a scale factor 0 < lexicon <= 1."""
    if isinstance(lexicon, bool) or not isinstance(lexicon, numbers.Real) or not 0 < lexicon <= 1:
        raise ValueError(f"lexicon must be a number with 0 < lexicon <= 1, got {lexicon!r}")


def _check_max_words(max_words: int) -> None:
    """Accept an integer cap max_words >= MIN_MAX_WORDS."""
    if isinstance(max_words, bool) or not isinstance(max_words, int) or max_words < MIN_MAX_WORDS:
        raise ValueError(f"max_words must be an integer >= {MIN_MAX_WORDS}, got {max_words!r}")


def lexicon_sizes(lexicon: float = 1.0) -> LexiconSizes:
    """The full lexicon sizes times ``lexicon`` (0 < lexicon <= 1), rounded, but at least SMALLEST_LEXICON."""
    _check_lexicon(lexicon)
    smallest = SMALLEST_LEXICON.as_dict()
    return LexiconSizes(**{name: max(smallest[name], math.floor(full * lexicon + 0.5))
                           for name, full in FULL_LEXICON.as_dict().items()})


# --------------------------------------------------------------------------- lexicon


class _WordMaker:
    """Draws pseudo-words from one language's syllables; no word form is ever given out twice."""

    def __init__(self, rng: random.Random, onsets, vowels, codas, coda_rate: float, taken=()):
        self.rng, self.onsets, self.vowels, self.codas, self.coda_rate = rng, onsets, vowels, codas, coda_rate
        self.taken: set[str] = set(taken)

    def syllable(self) -> str:
        """Onset + vowel + sometimes a coda."""
        rng = self.rng
        coda = rng.choice(self.codas) if rng.random() < self.coda_rate else ""
        return rng.choice(self.onsets) + rng.choice(self.vowels) + coda

    def word(self, syllables: Sequence[int], forms: Callable[[str], Sequence[str]] = lambda w: (w,)) -> str:
        """A new stem of one of the given syllable counts whose forms are all unused; reserves the forms."""
        while True:
            stem = "".join(self.syllable() for _ in range(self.rng.choice(syllables)))
            new = set(forms(stem))
            if new.isdisjoint(self.taken):
                self.taken |= new
                return stem

    def words(self, n: int, syllables: Sequence[int], forms=lambda w: (w,)) -> list[str]:
        """``n`` new stems (see ``word``)."""
        return [self.word(syllables, forms) for _ in range(n)]


def _umlaut(stem: str) -> str:
    """Umlaut on the last a/o/u of the stem (if any)."""
    for i in range(len(stem) - 1, -1, -1):
        if stem[i] in UMLAUT and not (i > 0 and stem[i - 1] in "ae"):  # leave diphthongs (au, eu) alone
            return stem[:i] + UMLAUT[stem[i]] + stem[i + 1:]
    return stem


def _target_plural(stem: str, plural_class: str) -> str:
    """The target plural of a noun stem in one of PLURAL_CLASSES."""
    if plural_class == "umlaut-er":
        return _umlaut(stem) + "er"
    return stem + plural_class


def _source_plural(lemma: str) -> str:
    """Source plural: -s after a vowel, -es after a consonant."""
    return lemma + ("s" if lemma[-1] in SRC_VOWELS else "es")


def _source_past(lemma: str) -> str:
    """Source past tense (the same for every person)."""
    return lemma + "ta"


@dataclass
class _Lexicon:
    """Both vocabularies and the target inflection tables. Lists are indexed by lemma id."""

    sizes: LexiconSizes
    # source
    src_function: dict[str, str]
    src_pronouns: list[str]
    src_connectives: list[str]
    src_subordinators: list[str]
    src_prepositions: list[str]
    src_nouns: list[str]
    src_adjectives: list[str]
    src_verbs: list[str]  # transitive, then intransitive, then clause-taking
    src_adverbs: list[str]
    # target inflection
    strong_endings: list[list[list[str]]]  # [gender][plural][case], on determiners and relative pronouns
    det_stems: list[str]  # [DEF, INDEF, DEM]
    rel_stem: str
    adj_endings: list[list[str]]  # [gender][plural]
    present_endings: list[str]  # [agreement slot]
    past_marker: str
    participle_affixes: tuple[str, str]
    aux_forms: list[str]  # perfect auxiliary, [agreement slot]
    # target words
    tgt_function: dict[str, str]
    tgt_pronouns: list[list[str]]  # [pronoun][case]
    tgt_connectives: list[str]
    tgt_subordinators: list[str]
    tgt_prepositions: list[str]
    prep_case: list[int]
    tgt_nouns: list[str]
    noun_gender: list[int]
    noun_plural: list[str]
    noun_link: list[str]
    tgt_adjectives: list[str]
    tgt_verbs: list[str]
    verb_object_case: list[int]
    tgt_adverbs: list[str]

    # -- target word forms

    def determiner(self, kind: int, gender: int, plural: bool, case: int) -> str:
        return self.det_stems[kind] + self.strong_endings[gender][plural][case]

    def relative_pronoun(self, gender: int, plural: bool, case: int) -> str:
        return self.rel_stem + self.strong_endings[gender][plural][case]

    def noun(self, noun: int, plural: bool) -> str:
        return self.noun_plural[noun] if plural else self.tgt_nouns[noun]

    def compound(self, modifier: int, head: int, plural: bool) -> str:
        return self.tgt_nouns[modifier] + self.noun_link[modifier] + self.noun(head, plural)

    def adjective(self, adjective: int, gender: int, plural: bool) -> str:
        return self.tgt_adjectives[adjective] + self.adj_endings[gender][plural]

    def finite_verb(self, verb: int, tense: int, slot: int) -> str:
        """Present or past form; the perfect uses ``aux_forms[slot]`` and ``participle``."""
        marker = self.past_marker if tense == PAST else ""
        return self.tgt_verbs[verb] + marker + self.present_endings[slot]

    def participle(self, verb: int) -> str:
        prefix, suffix = self.participle_affixes
        return prefix + self.tgt_verbs[verb] + suffix


def _agreement_slot(person: int, plural: bool) -> int:
    """0..5 = 1sg 2sg 3sg 1pl 2pl 3pl."""
    return person - 1 + (3 if plural else 0)


def _with_every_value(values: Sequence, choices: Sequence) -> list:
    """``values`` with each of ``choices`` present at least once, as far as there are enough values: a missing
    choice replaces the last value that occurs more than once (the rarest lemma sharing its value). No randomness."""
    values = list(values)
    for choice in choices:
        counts = Counter(values)
        if counts[choice]:
            continue
        shared = [i for i, value in enumerate(values) if counts[value] > 1]
        if shared:
            values[shared[-1]] = choice
    return values


def _unchanged(values: Sequence, choices: Sequence) -> list:
    """``values`` as drawn (the full lexicon's contrasts are all but certain to be present)."""
    return list(values)


def _build_lexicon(rng: random.Random, sizes: LexiconSizes = FULL_LEXICON) -> _Lexicon:
    """Draw both vocabularies, of the given sizes, and the target morphology from ``rng``: the source
    words, then the target's closed-class forms and endings, then the target words, in this order
    (the order of the draws decides every corpus)."""
    src, source_words = _source_words(rng, sizes)
    closed_forms, morphology = _target_morphology(rng, src)
    # Target words never coincide with a source word, nor with each other.
    tgt = _WordMaker(rng, TGT_ONSETS, TGT_VOWELS, TGT_CODAS, coda_rate=0.45, taken=src.taken | set(closed_forms))
    return _Lexicon(sizes=sizes, **source_words, **morphology, **_target_words(rng, sizes, tgt, morphology))


def _source_words(rng: random.Random, sizes: LexiconSizes) -> tuple[_WordMaker, dict]:
    """(the source word maker, which holds every form given out, the source words by ``_Lexicon`` field)."""
    src = _WordMaker(rng, SRC_ONSETS, SRC_VOWELS, SRC_CODAS, coda_rate=0.15)
    src_function = {name: src.word((1,)) for name in
                    ("def", "indef", "indef_pl", "dem", "dem_pl", "not", "perfect", "that", "rel",
                     "np_and", "of", "question")}
    src_pronouns = src.words(len(PRONOUNS), (1,))
    src_connectives = src.words(len(CONNECTIVES), (1, 2))
    src_subordinators = src.words(len(SUBORDINATORS), (2,))
    src_prepositions = src.words(sizes.prepositions, (1, 2))
    src_nouns = src.words(sizes.nouns, (2, 2, 3), lambda w: (w, _source_plural(w)))
    src_adjectives = src.words(sizes.adjectives, (2, 3))
    src_verbs = src.words(sizes.verbs, (2, 3), lambda w: (w, _source_past(w)))
    src_adverbs = src.words(sizes.adverbs, (3,))
    return src, dict(src_function=src_function, src_pronouns=src_pronouns, src_connectives=src_connectives,
                     src_subordinators=src_subordinators, src_prepositions=src_prepositions, src_nouns=src_nouns,
                     src_adjectives=src_adjectives, src_verbs=src_verbs, src_adverbs=src_adverbs)


def _target_morphology(rng: random.Random, src: _WordMaker) -> tuple[list[str], dict]:
    """(the determiners' and relative pronouns' forms, the target's inflection by ``_Lexicon`` field)."""
    # Determiners and relative pronouns: a consonant stem + a vowel-initial ending (unique by construction).
    vowel_consonant = [v + c for v in SRC_VOWELS for c in ("", "r", "n", "m", "s")]
    while True:
        endings = rng.sample(vowel_consonant, 2 * 3 * GENDERS)
        det_stems = rng.sample(("d", "w", "j", "k", "m", "s", "gl", "br", "h"), 4)
        closed_forms = [stem + e for stem in det_stems for e in endings]
        if src.taken.isdisjoint(closed_forms):
            break
    strong_endings = [[endings[g * 6 + p * 3: g * 6 + p * 3 + 3] for p in range(2)] for g in range(GENDERS)]
    rel_stem = det_stems.pop()
    adj = rng.sample(("e", "en", "er", "es", "em", "a", "an", "ar", "i", "in", "o", "on"), 2 * GENDERS)
    adj_endings = [adj[g * 2: g * 2 + 2] for g in range(GENDERS)]
    present_endings = rng.sample(("e", "st", "t", "en", "et", "ant", "o", "est", "ir", "on", "u", "at"), 6)
    past_marker = rng.choice(("te", "de", "ta", "ti"))
    participle_affixes = (rng.choice(("ge", "be", "ga")), rng.choice(("t", "en", "et")))
    return closed_forms, dict(strong_endings=strong_endings, det_stems=det_stems, rel_stem=rel_stem,
                              adj_endings=adj_endings, present_endings=present_endings, past_marker=past_marker,
                              participle_affixes=participle_affixes)


def _target_words(rng: random.Random, sizes: LexiconSizes, tgt: _WordMaker, morphology: dict) -> dict:
    """The target words, their genders, plurals, linking elements and cases, by ``_Lexicon`` field."""
    # A reduced lexicon could lack a contrast by chance (all 4 prepositions dative, no dative verb among 3, ...),
    # so it gets every value. The full lexicon keeps its draws untouched: its corpora stay byte-identical.
    complete = _with_every_value if sizes != FULL_LEXICON else _unchanged
    aux_forms = tgt.words(6, (1,))
    tgt_function = {name: tgt.word((1,)) for name in ("not", "that", "np_and")}
    tgt_pronouns = [tgt.words(3, (1,)) for _ in PRONOUNS]
    tgt_connectives = tgt.words(len(CONNECTIVES), (1, 2))
    tgt_subordinators = tgt.words(len(SUBORDINATORS), (1, 2))
    tgt_prepositions = tgt.words(sizes.prepositions, (1, 2))
    prep_case = complete([rng.choice((ACC, DAT)) for _ in range(sizes.prepositions)], (ACC, DAT))

    noun_plural_class = complete(rng.choices(PLURAL_CLASSES, PLURAL_CLASS_WEIGHTS, k=sizes.nouns), PLURAL_CLASSES)
    tgt_nouns = [tgt.word((1, 2, 2, 3), lambda w, c=c: (w, _target_plural(w, c))) for c in noun_plural_class]
    noun_plural = [_target_plural(w, c) for w, c in zip(tgt_nouns, noun_plural_class)]
    noun_gender = complete([rng.randrange(GENDERS) for _ in range(sizes.nouns)], range(GENDERS))
    noun_link = [rng.choice(LINKS) for _ in range(sizes.nouns)]
    n_modifiers = sizes.compound_modifiers  # only their linking elements are ever used
    noun_link[:n_modifiers] = complete(noun_link[:n_modifiers], LINKS)
    adj_forms = [e for pair in morphology["adj_endings"] for e in pair]
    tgt_adjectives = tgt.words(sizes.adjectives, (1, 2, 3), lambda w: [w + e for e in adj_forms])
    past_marker, present_endings = morphology["past_marker"], morphology["present_endings"]
    participle_affixes = morphology["participle_affixes"]

    def verb_forms(stem: str) -> list[str]:
        finite = [stem + m + e for m in ("", past_marker) for e in present_endings]
        return finite + [participle_affixes[0] + stem + participle_affixes[1]]

    tgt_verbs = tgt.words(sizes.verbs, (1, 2), verb_forms)
    verb_object_case = [DAT if rng.random() < 0.2 else ACC for _ in range(sizes.verbs)]
    n_transitive = sizes.transitive_verbs  # only transitive verbs have an object
    verb_object_case[:n_transitive] = complete(verb_object_case[:n_transitive], (ACC, DAT))
    tgt_adverbs = tgt.words(sizes.adverbs, (2, 3))
    return dict(aux_forms=aux_forms, tgt_function=tgt_function, tgt_pronouns=tgt_pronouns,
                tgt_connectives=tgt_connectives, tgt_subordinators=tgt_subordinators,
                tgt_prepositions=tgt_prepositions, prep_case=prep_case, tgt_nouns=tgt_nouns, noun_gender=noun_gender,
                noun_plural=noun_plural, noun_link=noun_link, tgt_adjectives=tgt_adjectives, tgt_verbs=tgt_verbs,
                verb_object_case=verb_object_case, tgt_adverbs=tgt_adverbs)


# --------------------------------------------------------------------------- syntax trees


@dataclass(slots=True)
class _Pronoun:
    index: int  # into PRONOUNS


@dataclass(slots=True)
class _NounPhrase:
    noun: int  # the head
    plural: bool
    det: int  # DEF, INDEF or DEM
    adjectives: list[int] = field(default_factory=list)
    modifier: int | None = None  # compound: the first noun
    of_style: bool = False  # source writes the compound "HEAD of MOD" instead of "MOD HEAD"
    pp: _PrepPhrase | None = None
    relative: _Clause | None = None


@dataclass(slots=True)
class _Coordination:
    first: _NounPhrase | _Pronoun
    second: _NounPhrase | _Pronoun


@dataclass(slots=True)
class _PrepPhrase:
    prep: int
    np: _NounPhrase | _Pronoun | _Coordination


@dataclass(slots=True)
class _Clause:
    subject: object | None  # None in a subject relative clause (the relative pronoun is the subject)
    verb: int
    tense: int
    negated: bool
    obj: object | None = None  # None for intransitive verbs, clause-taking verbs and object relatives
    complement: _Clause | None = None  # the "that"-clause of a clause-taking verb
    pps: list[_PrepPhrase] = field(default_factory=list)
    adverb: int | None = None  # clause-final in the source
    object_relative: bool = False


def _person_number(np) -> tuple[int, bool]:
    """(person, plural) of a subject, for verb agreement; coordinations are plural, with the lowest person."""
    if isinstance(np, _Pronoun):
        person, plural, _ = PRONOUNS[np.index]
        return person, plural
    if isinstance(np, _Coordination):
        return min(_person_number(np.first)[0], _person_number(np.second)[0]), True
    return 3, np.plural


# --------------------------------------------------------------------------- sampling


def _zipf_cum_weights(n: int, exponent: float = 1.0, offset: float = 2.0) -> list[float]:
    """Cumulative weights 1 / (rank + offset) ** exponent: a few frequent words, a long tail of rare ones."""
    total, cum = 0.0, []
    for rank in range(n):
        total += 1.0 / (rank + offset) ** exponent
        cum.append(total)
    return cum


class _Sampler:
    """Draws random syntax trees; all probabilities of the grammar live here.

    A few restrictions keep the source string unambiguous, so that the target
    is a function of it: a noun phrase has a PP or a relative clause, not both;
    no relative clause inside a relative clause, a PP or a conjunct; a clause
    with a complement clause has no PPs or final adverb (the complement ends
    it); a clause that ends in a complement or adverbial clause is not followed
    by a coordinated clause. ``test_target_is_a_function_of_the_source`` checks it.
    """

    def __init__(self, rng: random.Random, sizes: LexiconSizes):
        self.rng = rng
        self.noun_weights = _zipf_cum_weights(sizes.nouns)
        self.modifier_weights = _zipf_cum_weights(sizes.compound_modifiers)
        self.adjective_weights = _zipf_cum_weights(sizes.adjectives)
        self.transitive_weights = _zipf_cum_weights(sizes.transitive_verbs)
        self.intransitive_weights = _zipf_cum_weights(sizes.intransitive_verbs)
        self.clause_verb_weights = _zipf_cum_weights(sizes.clause_verbs)
        self.adverb_weights = _zipf_cum_weights(sizes.adverbs)
        self.prep_weights = _zipf_cum_weights(sizes.prepositions, exponent=0.7)
        # Verb ids run transitive, intransitive, clause-taking (see _build_lexicon).
        self.first_intransitive = sizes.transitive_verbs
        self.first_clause_verb = sizes.transitive_verbs + sizes.intransitive_verbs

    def pick(self, cum_weights: list[float]) -> int:
        """A lemma id drawn with the given cumulative weights."""
        index = bisect.bisect_right(cum_weights, self.rng.random() * cum_weights[-1])
        return min(index, len(cum_weights) - 1)  # guards against rounding up to the total

    # -- noun phrases

    def noun_phrase(self, pronoun_rate: float, depth: int, relative_ok: bool):
        """A pronoun, a coordination, or a lexical noun phrase with an optional relative clause or PP."""
        rng = self.rng
        r = rng.random()
        if r < pronoun_rate:
            return _Pronoun(rng.randrange(len(PRONOUNS)))
        if r < pronoun_rate + 0.05:
            return _Coordination(self.simple_noun_phrase(pronoun_rate / 2), self.simple_noun_phrase(pronoun_rate / 2))
        np = self.lexical_noun_phrase()
        if relative_ok and rng.random() < 0.13:
            np.relative = self.relative_clause(depth + 1)
        elif depth < 3 and rng.random() < 0.13:
            np.pp = self.prep_phrase(depth + 1)
        return np

    def simple_noun_phrase(self, pronoun_rate: float):
        """A conjunct: a pronoun or a lexical noun phrase without PP or relative clause."""
        if self.rng.random() < pronoun_rate:
            return _Pronoun(self.rng.randrange(len(PRONOUNS)))
        return self.lexical_noun_phrase()

    def lexical_noun_phrase(self) -> _NounPhrase:
        """Determiner, 0-3 adjectives and a noun, sometimes a compound."""
        rng = self.rng
        r = rng.random()
        det = DEF if r < 0.55 else INDEF if r < 0.85 else DEM
        r = rng.random()
        n_adjectives = 0 if r < 0.55 else 1 if r < 0.85 else 2 if r < 0.96 else 3
        np = _NounPhrase(noun=self.pick(self.noun_weights), plural=rng.random() < 0.3, det=det,
                         adjectives=[self.pick(self.adjective_weights) for _ in range(n_adjectives)])
        if rng.random() < 0.07:
            np.modifier = self.pick(self.modifier_weights)
            while np.modifier == np.noun:
                np.modifier = self.pick(self.modifier_weights)
            np.of_style = rng.random() < 0.4
        return np

    def prep_phrase(self, depth: int) -> _PrepPhrase:
        """Preposition + noun phrase (which may have a PP of its own, up to a depth limit)."""
        return _PrepPhrase(self.pick(self.prep_weights), self.noun_phrase(0.08, depth, relative_ok=False))

    # -- clauses

    def clause(self, depth: int, complement_ok: bool = True, relative_ok: bool = True) -> _Clause:
        """A main or subordinate clause (not a relative clause)."""
        rng = self.rng
        subject = self.noun_phrase(0.3, depth, relative_ok)
        clause = self.verb_group(subject)
        r = rng.random()
        if complement_ok and depth < 4 and r < 0.16 * 0.6 ** depth:
            clause.verb = self.first_clause_verb + self.pick(self.clause_verb_weights)
            clause.complement = self.clause(depth + 1, relative_ok=relative_ok)
            return clause
        if r < 0.75:
            clause.verb = self.pick(self.transitive_weights)
            clause.obj = self.noun_phrase(0.15, depth, relative_ok)
        else:
            clause.verb = self.first_intransitive + self.pick(self.intransitive_weights)
        self.adjuncts(clause, depth)
        return clause

    def relative_clause(self, depth: int) -> _Clause:
        """Subject or object relative clause; no relative or complement clause inside."""
        rng = self.rng
        if rng.random() < 0.6:  # subject relative: REL verb (object) ...
            clause = self.verb_group(None)
            if rng.random() < 0.7:
                clause.verb = self.pick(self.transitive_weights)
                clause.obj = self.noun_phrase(0.15, depth, relative_ok=False)
            else:
                clause.verb = self.first_intransitive + self.pick(self.intransitive_weights)
        else:  # object relative: REL subject verb ...
            clause = self.verb_group(self.noun_phrase(0.35, depth, relative_ok=False))
            clause.verb = self.pick(self.transitive_weights)
            clause.object_relative = True
        self.adjuncts(clause, depth)
        return clause

    def verb_group(self, subject) -> _Clause:
        """A clause with subject, tense and negation; the caller fills in the verb and its arguments."""
        rng = self.rng
        r = rng.random()
        tense = PRESENT if r < 0.45 else PAST if r < 0.75 else PERFECT
        return _Clause(subject=subject, verb=-1, tense=tense, negated=rng.random() < 0.15)

    def adjuncts(self, clause: _Clause, depth: int) -> None:
        """0-2 PPs and sometimes a clause-final adverb."""
        rng = self.rng
        r = rng.random()
        n_pps = 0 if r < 0.6 else 1 if r < 0.9 else 2
        clause.pps = [self.prep_phrase(depth + 1) for _ in range(n_pps)]
        if rng.random() < 0.18:
            clause.adverb = self.pick(self.adverb_weights)


# --------------------------------------------------------------------------- linearization

# Target clause orders.
_MAIN, _INVERTED, _SUBORDINATE = 0, 1, 2


class _Linearizer:
    """Writes a syntax tree as source tokens and as target tokens."""

    def __init__(self, lexicon: _Lexicon):
        self.lex = lexicon

    # -- source side

    def source_np(self, np, out: list[str]) -> None:
        """DET ADJ* NOUN [PP] [, REL clause ,]; compounds as MOD HEAD or HEAD OF MOD."""
        lex = self.lex
        if isinstance(np, _Pronoun):
            out.append(lex.src_pronouns[np.index])
            return
        if isinstance(np, _Coordination):
            self.source_np(np.first, out)
            out.append(lex.src_function["np_and"])
            self.source_np(np.second, out)
            return
        det = ("def", "indef", "dem")[np.det]
        out.append(lex.src_function[det + ("_pl" if np.plural and np.det != DEF else "")])
        out.extend(lex.src_adjectives[a] for a in np.adjectives)
        head = lex.src_nouns[np.noun]
        if np.plural:
            head = _source_plural(head)
        if np.modifier is None:
            out.append(head)
        elif np.of_style:
            out += [head, lex.src_function["of"], lex.src_nouns[np.modifier]]
        else:
            out += [lex.src_nouns[np.modifier], head]
        if np.pp is not None:
            self.source_pp(np.pp, out)
        if np.relative is not None:
            out += [",", lex.src_function["rel"]]
            self.source_clause(np.relative, out)
            out.append(",")

    def source_pp(self, pp: _PrepPhrase, out: list[str]) -> None:
        """PREP NP."""
        out.append(self.lex.src_prepositions[pp.prep])
        self.source_np(pp.np, out)

    def source_clause(self, clause: _Clause, out: list[str]) -> None:
        """SUBJ [NOT] VERB [OBJ] [PP*] [ADV] [that CLAUSE] (relative clauses lack the subject or the object)."""
        lex = self.lex
        if clause.subject is not None:
            self.source_np(clause.subject, out)
        if clause.negated:
            out.append(lex.src_function["not"])
        verb = lex.src_verbs[clause.verb]
        if clause.tense == PERFECT:
            out += [lex.src_function["perfect"], verb]
        else:
            out.append(_source_past(verb) if clause.tense == PAST else verb)
        if clause.obj is not None:
            self.source_np(clause.obj, out)
        for pp in clause.pps:
            self.source_pp(pp, out)
        if clause.adverb is not None:
            out.append(lex.src_adverbs[clause.adverb])
        if clause.complement is not None:
            out.append(lex.src_function["that"])
            self.source_clause(clause.complement, out)

    # -- target side

    def target_np(self, np, case: int, out: list[str]) -> None:
        """DET NOUN ADJ* [PP] [, REL ... VERB ,], inflected for the noun's gender and number and for ``case``."""
        lex = self.lex
        if isinstance(np, _Pronoun):
            out.append(lex.tgt_pronouns[np.index][case])
            return
        if isinstance(np, _Coordination):
            self.target_np(np.first, case, out)
            out.append(lex.tgt_function["np_and"])
            self.target_np(np.second, case, out)
            return
        gender = lex.noun_gender[np.noun]
        out.append(lex.determiner(np.det, gender, np.plural, case))
        if np.modifier is None:
            out.append(lex.noun(np.noun, np.plural))
        else:
            out.append(lex.compound(np.modifier, np.noun, np.plural))
        out.extend(lex.adjective(a, gender, np.plural) for a in np.adjectives)
        if np.pp is not None:
            self.target_pp(np.pp, out)
        if np.relative is not None:
            rel = np.relative
            rel_case = lex.verb_object_case[rel.verb] if rel.object_relative else NOM
            out += [",", lex.relative_pronoun(gender, np.plural, rel_case)]
            self.target_clause(rel, _SUBORDINATE, out, subject_features=(3, np.plural))
            out.append(",")

    def target_pp(self, pp: _PrepPhrase, out: list[str]) -> None:
        """PREP NP in the case the preposition governs."""
        out.append(self.lex.tgt_prepositions[pp.prep])
        self.target_np(pp.np, self.lex.prep_case[pp.prep], out)

    def target_clause(self, clause: _Clause, order: int, out: list[str], prefield: Sequence[str] = (),
                      subject_features=None) -> None:
        """One clause in the given order. ``prefield`` is a fronted phrase (main clauses);
        ``subject_features`` (person, plural) stand in for the missing subject of a subject relative clause."""
        lex = self.lex
        subject: list[str] = []
        if clause.subject is not None:
            self.target_np(clause.subject, NOM, subject)
            subject_features = _person_number(clause.subject)
        slot = _agreement_slot(subject_features[0], subject_features[1])
        if clause.tense == PERFECT:
            finite, final = lex.aux_forms[slot], [lex.participle(clause.verb)]
        else:
            finite, final = lex.finite_verb(clause.verb, clause.tense, slot), []
        middle: list[str] = []
        if clause.adverb is not None:
            middle.append(lex.tgt_adverbs[clause.adverb])
        if clause.obj is not None:
            self.target_np(clause.obj, lex.verb_object_case[clause.verb], middle)
        for pp in clause.pps:
            self.target_pp(pp, middle)
        if clause.negated:
            middle.append(lex.tgt_function["not"])

        if order == _MAIN:
            out += subject + [finite] + middle + final
        elif order == _INVERTED:
            out += [*prefield, finite] + subject + middle + final
        else:
            out += subject + middle + final + [finite]
        if clause.complement is not None:
            out += [",", lex.tgt_function["that"]]
            self.target_clause(clause.complement, _SUBORDINATE, out)


def _tidy(tokens: list[str]) -> list[str]:
    """Merge repeated commas and drop a comma before the final punctuation mark."""
    out: list[str] = []
    for token in tokens:
        if token == "," and out and out[-1] == ",":
            continue
        if token in (".", "?") and out and out[-1] == ",":
            out.pop()
        out.append(token)
    return out


class _SentenceGenerator:
    """Draws whole sentences (main clause, fronting, coordination, questions) and writes both sides."""

    def __init__(self, rng: random.Random, lexicon: _Lexicon, max_words: int = DEFAULT_MAX_WORDS):
        self.rng, self.lex, self.max_words = rng, lexicon, max_words
        self.sampler = _Sampler(rng, lexicon.sizes)
        self.write = _Linearizer(lexicon)

    def pair(self) -> tuple[list[str], list[str]]:
        """One (source tokens, target tokens) pair of at most ``max_words`` source tokens (punctuation included).

        Longer sentences are drawn again, so the pairs follow the grammar's distribution restricted to short
        sentences (at least 20% of all sentences have at most 8 tokens)."""
        while True:
            src, tgt = self._sentence()
            if len(src) <= self.max_words:
                return src, tgt

    def _sentence(self) -> tuple[list[str], list[str]]:
        """10% questions, 15% coordinated main clauses, 75% declaratives."""
        r = self.rng.random()
        if r < 0.1:
            return self._question()
        if r < 0.25:
            return self._coordination()
        return self._declarative()

    def _question(self):
        """QUEST clause ? -> verb-first clause ?"""
        clause = self.sampler.clause(0)
        src = [self.lex.src_function["question"]]
        self.write.source_clause(clause, src)
        tgt: list[str] = []
        self.write.target_clause(clause, _INVERTED, tgt)
        return _tidy(src + ["?"]), _tidy(tgt + ["?"])

    def _coordination(self):
        """Two main clauses joined by a connective; "so" inverts the second one in the target."""
        sampler, write, lex = self.sampler, self.write, self.lex
        first = sampler.clause(0, complement_ok=False)
        connective = self.rng.randrange(len(CONNECTIVES))
        second = sampler.clause(0)
        src: list[str] = []
        write.source_clause(first, src)
        src.append(lex.src_connectives[connective])
        write.source_clause(second, src)
        tgt: list[str] = []
        write.target_clause(first, _MAIN, tgt)
        if CONNECTIVES[connective][1]:
            tgt.append(",")
            write.target_clause(second, _INVERTED, tgt, prefield=[lex.tgt_connectives[connective]])
        else:
            tgt.append(lex.tgt_connectives[connective])
            write.target_clause(second, _MAIN, tgt)
        return _tidy(src + ["."]), _tidy(tgt + ["."])

    def _declarative(self):
        """A main clause, maybe with a fronted adverb, PP or adverbial clause, or a trailing adverbial clause."""
        sampler, write, lex, rng = self.sampler, self.write, self.lex, self.rng
        src: list[str] = []
        prefield: list[str] = []
        r = rng.random()
        if r < 0.12:  # fronted adverb
            adverb = sampler.pick(sampler.adverb_weights)
            src.append(lex.src_adverbs[adverb])
            prefield.append(lex.tgt_adverbs[adverb])
        elif r < 0.22:  # fronted PP
            pp = sampler.prep_phrase(1)
            write.source_pp(pp, src)
            write.target_pp(pp, prefield)
        elif r < 0.32:  # fronted adverbial clause
            subordinator = rng.randrange(len(SUBORDINATORS))
            sub = sampler.clause(1)
            src.append(lex.src_subordinators[subordinator])
            write.source_clause(sub, src)
            src.append(",")
            prefield.append(lex.tgt_subordinators[subordinator])
            write.target_clause(sub, _SUBORDINATE, prefield)
            prefield.append(",")
        main = sampler.clause(0)
        write.source_clause(main, src)
        tgt: list[str] = []
        write.target_clause(main, _INVERTED if prefield else _MAIN, tgt, prefield=prefield)
        if not prefield and main.complement is None and rng.random() < 0.2:  # trailing adverbial clause
            subordinator = rng.randrange(len(SUBORDINATORS))
            sub = sampler.clause(1)
            src.append(lex.src_subordinators[subordinator])
            write.source_clause(sub, src)
            tgt += [",", lex.tgt_subordinators[subordinator]]
            write.target_clause(sub, _SUBORDINATE, tgt)
        return _tidy(src + ["."]), _tidy(tgt + ["."])


# --------------------------------------------------------------------------- public API


PUNCTUATION = frozenset({",", ".", "?"})


def detokenize(tokens: Sequence[str]) -> str:
    """Join tokens as running text: punctuation attaches to the word before it ("dog ." -> "dog.")."""
    text = ""
    for token in tokens:
        text += token if token in PUNCTUATION or not text else " " + token
    return text


def tokenize(text: str) -> list[str]:
    """The inverse of ``detokenize``: words and punctuation marks as separate tokens."""
    tokens: list[str] = []
    for word in text.split():
        trailing: list[str] = []
        while word and word[-1] in PUNCTUATION:
            trailing.insert(0, word[-1])
            word = word[:-1]
        tokens += ([word] if word else []) + trailing
    return tokens


def _check_sizes(**sizes: int) -> None:
    """Reject negative or non-integer split sizes."""
    for name, value in sizes.items():
        if isinstance(value, bool) or not isinstance(value, int) or value < 0:
            raise ValueError(f"{name} must be a non-negative integer, got {value!r}")


# generate_corpus gives up when this many sentences in a row repeat earlier ones: the sizes asked for are
# (nearly) all the distinct sentences the knobs allow.
MAX_REPEATS_IN_A_ROW = 100_000


def generate_corpus(seed: int, train_size: int, valid_size: int, test_size: int, *, lexicon: float = 1.0,
                    max_words: int = DEFAULT_MAX_WORDS) -> dict[str, list[tuple[str, str]]]:
    """Return {"train": [(src, tgt), ...], "valid": [...], "test": [...]}. Same seed, sizes and knobs -> identical
    output; the default knobs give the corpus of earlier versions.

    ``lexicon`` (0 < lexicon <= 1) scales the number of lemmas of every word class (see ``lexicon_sizes``);
    ``max_words`` (>= 8) caps the source length in tokens, punctuation included (longer samples are drawn again).
    The three splits have no source sentence in common, and no duplicate source sentences within a split.
    Valid and test are drawn first, so they do not change when only ``train_size`` does.
    """
    _check_sizes(train_size=train_size, valid_size=valid_size, test_size=test_size)
    sizes = lexicon_sizes(lexicon)
    _check_max_words(max_words)
    rng = random.Random(seed)
    generator = _SentenceGenerator(rng, _build_lexicon(rng, sizes), max_words)
    wanted = valid_size + test_size + train_size
    seen: set[str] = set()
    pairs: list[Pair] = []
    repeats = 0
    while len(pairs) < wanted:
        src, tgt = generator.pair()
        source = detokenize(src)
        if source in seen:
            repeats += 1
            if repeats >= MAX_REPEATS_IN_A_ROW:
                raise ValueError(f"cannot draw {wanted} distinct pairs with lexicon={lexicon!r}, "
                                 f"max_words={max_words!r} (found {len(pairs)}); ask for fewer pairs")
            continue
        repeats = 0
        seen.add(source)
        pairs.append((source, detokenize(tgt)))
    return {"valid": pairs[:valid_size],
            "test": pairs[valid_size:valid_size + test_size],
            "train": pairs[valid_size + test_size:]}


def write_corpus(out_dir: str | pathlib.Path, seed: int, train_size: int, valid_size: int, test_size: int, *,
                 lexicon: float = 1.0,
                 max_words: int = DEFAULT_MAX_WORDS) -> dict[str, tuple[pathlib.Path, pathlib.Path]]:
    """Write train.src/train.tgt, valid.src/valid.tgt, test.src/test.tgt (UTF-8, one sentence per line, '\\n' line ends)
    into out_dir and return {"train": (src_path, tgt_path), ...}. Write each file to a temporary name in out_dir and
    os.replace() it into place, so that a crash or a concurrent writer never leaves a half-written file.
    ``lexicon`` and ``max_words`` are passed to ``generate_corpus``."""
    out_dir = pathlib.Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    corpus = generate_corpus(seed, train_size, valid_size, test_size, lexicon=lexicon, max_words=max_words)
    written: dict[str, tuple[pathlib.Path, pathlib.Path]] = {}
    for split in SPLITS:
        src_path, tgt_path = out_dir / f"{split}.src", out_dir / f"{split}.tgt"
        write_lines(src_path, [src for src, _ in corpus[split]])
        write_lines(tgt_path, [tgt for _, tgt in corpus[split]])
        written[split] = (src_path, tgt_path)
    return written


def word_forms(seed: int, lexicon: float = 1.0) -> dict[str, set[str]]:
    """{"source": tokens, "target": tokens}: every token (word or punctuation mark) each side of a corpus of this
    seed and ``lexicon`` can contain, from the lexicon alone: no sentence is drawn, so it takes milliseconds. A
    corpus holds a subset (which words it draws depends on its size). Config validation bounds the subword
    vocabulary with it; ``test_word_forms_cover_every_generated_token`` keeps it complete."""
    lex = _build_lexicon(random.Random(seed), lexicon_sizes(lexicon))  # the lexicon generate_corpus draws first
    source = {*lex.src_function.values(), *lex.src_pronouns, *lex.src_connectives, *lex.src_subordinators,
              *lex.src_prepositions, *lex.src_adjectives, *lex.src_adverbs, *PUNCTUATION}
    source |= {form for noun in lex.src_nouns for form in (noun, _source_plural(noun))}
    source |= {form for verb in lex.src_verbs for form in (verb, _source_past(verb))}
    target = {*lex.aux_forms, *lex.tgt_function.values(), *lex.tgt_connectives, *lex.tgt_subordinators,
              *lex.tgt_prepositions, *lex.tgt_adverbs, *PUNCTUATION}
    target |= {pronoun for cases in lex.tgt_pronouns for pronoun in cases}
    for gender, plural, case in itertools.product(range(GENDERS), (False, True), (NOM, ACC, DAT)):
        target |= {stem + lex.strong_endings[gender][plural][case] for stem in (*lex.det_stems, lex.rel_stem)}
    target |= {lex.adjective(a, gender, plural) for a in range(len(lex.tgt_adjectives))
               for gender, plural in itertools.product(range(GENDERS), (False, True))}
    nouns = range(len(lex.tgt_nouns))
    target |= {lex.noun(n, plural) for n in nouns for plural in (False, True)}
    target |= {lex.compound(modifier, head, plural) for modifier in range(lex.sizes.compound_modifiers)
               for head in nouns for plural in (False, True)}
    target |= {lex.finite_verb(v, tense, slot) for v in range(len(lex.tgt_verbs)) for tense in (PRESENT, PAST)
               for slot in range(6)}
    target |= {lex.participle(v) for v in range(len(lex.tgt_verbs))}
    return {"source": source, "target": target}


# --------------------------------------------------------------------------- command line


def _corpus_statistics(pairs: list[Pair]) -> dict[str, dict[str, float]]:
    """Token-length statistics (punctuation counts, as for ``max_words``) and vocabulary size of each side."""
    stats = {}
    for side, index in (("source", 0), ("target", 1)):
        sentences = [tokenize(pair[index]) for pair in pairs]
        lengths = [len(tokens) for tokens in sentences] or [0]
        vocabulary = {token for tokens in sentences for token in tokens}
        stats[side] = {"mean": statistics.fmean(lengths), "median": statistics.median(lengths),
                       "min": min(lengths), "max": max(lengths),
                       "over_40": sum(n > 40 for n in lengths) / len(lengths), "vocab": len(vocabulary)}
    return stats


def _main(argv: Sequence[str] | None = None) -> int:
    """Command line: generate, print examples and statistics, optionally write the files."""
    parser = command_parser(
        "nmt.data.synthetic",
        description="Generate the synthetic parallel corpus; print example pairs and statistics.")
    parser.add_argument("--seed", type=int, default=1, help="corpus seed (default: 1)")
    parser.add_argument("--size", type=int, default=20000, help="training pairs (default: 20000)")
    parser.add_argument("--valid-size", type=int, default=500, help="validation pairs (default: 500)")
    parser.add_argument("--test-size", type=int, default=500, help="test pairs (default: 500)")
    parser.add_argument("--show", type=int, default=10, help="example training pairs to print (default: 10)")
    parser.add_argument("--lexicon", type=float, default=1.0, metavar="FACTOR",
                        help="scale every lexicon size (nouns, adjectives, verbs, ...) by FACTOR, 0 < FACTOR <= 1, "
                             "for a corpus that is quicker to learn (default: 1.0, the full lexicon)")
    parser.add_argument("--max-words", type=int, default=DEFAULT_MAX_WORDS, metavar="N",
                        help=f"longest source sentence in tokens, punctuation included, N >= {MIN_MAX_WORDS}; "
                             f"longer ones are drawn again (default: {DEFAULT_MAX_WORDS})")
    parser.add_argument("--out", metavar="DIR", help="also write the corpus files into DIR")
    args = parser.parse_args(argv)
    for name in ("size", "valid_size", "test_size", "show"):
        if getattr(args, name) < 0:
            parser.error(f"--{name.replace('_', '-')} must be >= 0")
    if not 0 < args.lexicon <= 1:
        parser.error(f"--lexicon must be > 0 and <= 1, got {args.lexicon:g}")
    if args.max_words < MIN_MAX_WORDS:
        parser.error(f"--max-words must be >= {MIN_MAX_WORDS}, got {args.max_words}")
    knobs = {"lexicon": args.lexicon, "max_words": args.max_words}

    start = time.perf_counter()
    corpus = generate_corpus(args.seed, args.size, args.valid_size, args.test_size, **knobs)
    seconds = time.perf_counter() - start
    for source, target in corpus["train"][:args.show]:
        print(f"SRC: {source}\nTGT: {target}\n")
    print(f"seed {args.seed}, lexicon {args.lexicon:g} ({lexicon_sizes(args.lexicon).nouns} nouns), max "
          f"{args.max_words} source tokens: {args.size} train, {args.valid_size} valid, {args.test_size} test pairs "
          f"generated in {seconds:.2f} s")
    print(f"{'split':<6} {'side':<7} {'mean':>6} {'median':>6} {'min':>4} {'max':>4} {'>40':>6} {'vocab':>6}")
    for split in SPLITS:
        if not corpus[split]:
            continue
        for side, s in _corpus_statistics(corpus[split]).items():
            print(f"{split:<6} {side:<7} {s['mean']:6.1f} {s['median']:6.1f} {s['min']:4d} {s['max']:4d} "
                  f"{s['over_40']:6.1%} {s['vocab']:6d}")
    if args.out:
        written = write_corpus(args.out, args.seed, args.size, args.valid_size, args.test_size, **knobs)
        print("wrote " + ", ".join(str(p) for paths in written.values() for p in paths))
    return 0


if __name__ == "__main__":
    sys.exit(_main())
