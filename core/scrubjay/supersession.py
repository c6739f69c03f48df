"""Offline supersession: does a new memory give a new value to the slot of an older one?

A memory *supersedes* an older one when both state the same **slot** (the same subject and
attribute) and the new one gives it a **new value**: "I parked on level 3, spot D3" supersedes
"I parked on level 2, spot B17"; "I changed jobs, I now work at Globex" supersedes "I work as a
software engineer at Acme Corp" (their wordllama cosine is 0.34, so similarity alone cannot see
it). Statements that **coexist** ("I like tea" / "I like coffee", two children's names) or are
about another subject ("my sister lives in Paris" / "I live in Rome") are never superseded.

The decision for a pair (new ``n``, older ``o``) is a rule, then a score:

1. **Gates** (all must hold, else no supersession): ``o`` is not newer than ``n``; same subject
   owner (``I``/``my``, a relative, a named person; see :func:`subjects_match`); compatible
   head nouns ("the standup" is not "the design review"); a value change (the values that
   differ share a type, or ``n`` negates ``o``'s value: "I no longer work at Acme"); and no
   coexistence cue ("like", "also", "another", "have a son"...) unless ``n`` says the old one
   is replaced ("instead", "no longer", "switched", "favourite").
2. **Score** ``s = sigmoid(w . x + b)`` over six features in [0, 1]: the slot lexicon agrees
   (:data:`SLOTS`), the Jaccard overlap of the frames (the words left once values, subject and
   cues are removed), the what-cosine, an update cue in ``n`` ("now", "moved", "changed",
   "new"...), a change of a typed value (code, date, time, proper name, ...) rather than of a
   plain word, and a negation of the old value.
3. ``n`` supersedes ``o`` iff ``s >= threshold``.

The weights and the threshold (:data:`DEFAULT_MODEL`, and the stricter :data:`POOL_MODEL`)
were fitted by logistic regression on the training slots of the bundled labelled set, the
threshold chosen by grouped (by slot) cross-validation there; see
:mod:`scrubjay.bench.supersession` and ``docs/supersession.md``.

Each candidate is judged on its own, so the answer does not depend on candidate order. Pure:
numpy and the standard library only; the LLM confirmation is a prompt builder and a strict
parser (the call itself belongs to the caller), with the offline decision as the fallback.
"""

from __future__ import annotations

import functools
import json
import logging
import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import numpy as np
from numpy.typing import NDArray

from .errors import InvalidInputError, LLMError
from .llm import parse_json_object

if TYPE_CHECKING:
    from .update_model import UpdateModel

__all__ = [
    "DEFAULT_MODEL",
    "FEATURES",
    "POOL_MODEL",
    "SLOTS",
    "Claim",
    "PairFeatures",
    "Statement",
    "Supersession",
    "SupersessionModel",
    "build_confirmation_prompt",
    "confirm_or_fallback",
    "detect_supersessions",
    "pair_features",
    "parse_claim",
    "parse_confirmation",
    "score_candidates",
    "subjects_match",
]

logger = logging.getLogger(__name__)

FEATURES = ("slot", "frame", "cosine", "update_cue", "typed_change", "negation")
"""Names of the score's features, in the order of :attr:`SupersessionModel.weights`."""


# ------------------------------------------------------------------------------ value types
@dataclass(frozen=True, slots=True, kw_only=True)
class Statement:
    """One memory as the detector sees it."""

    id: str
    text: str
    what: NDArray[np.floating] | None = None
    """Its L2-normalised what-embedding (None: the cosine feature counts as 0)."""
    recorded_at_s: float = 0.0
    """When it was recorded (epoch seconds): only older or equal-time memories are superseded."""


@dataclass(frozen=True, slots=True, kw_only=True)
class Supersession:
    """``old_id`` is superseded by the new memory."""

    old_id: str
    score: float
    """The detector's score in [0, 1] (at least the model's threshold when returned by
    :func:`detect_supersessions`)."""
    reason: str
    """Human-readable, e.g. "same slot 'parking spot', new value: d3, level 3 (was b17, ...)"."""
    slot: str
    """The slot's name (from :data:`SLOTS`, or the shared frame words)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class SupersessionModel:
    """The score's weights (one per :data:`FEATURES` entry), bias and thresholds."""

    weights: tuple[float, ...]
    bias: float
    threshold: float
    """A pair supersedes iff its score is at least this."""
    llm_floor: float = 0.2
    """Candidates scoring at least this are shown to a chat model for confirmation."""

    def __post_init__(self) -> None:
        if len(self.weights) != len(FEATURES):
            raise InvalidInputError(f"The 'weights' parameter of SupersessionModel must have "
                                    f"{len(FEATURES)} entries. Got {len(self.weights)} instead.")
        for name in ("threshold", "llm_floor"):
            value = getattr(self, name)
            if not 0.0 <= value <= 1.0:
                raise InvalidInputError(f"The '{name}' parameter of SupersessionModel must be "
                                        f"in [0, 1]. Got {value!r} instead.")


#: The default, fitted by ``scrubjay bench supersession`` on the training slots' labelled pairs
#: (each new memory against its one labelled partner): logistic regression with non-negative
#: weights, ridge and threshold chosen by 5-fold cross-validation grouped by slot on the
#: training split (the highest out-of-fold recall with out-of-fold precision >= 0.97). On those
#: pairs the gates alone reach that precision, so CV keeps every pair that passes them: the
#: score is near-constant. Against a new memory's nearest *other* memories it over-flags (see
#: docs/supersession.md and :data:`POOL_MODEL`). A test pins these to a refit.
DEFAULT_MODEL = SupersessionModel(
    weights=(0.765, 1.323, 4.942, 5.263, 0.375, 2.881),
    bias=-2.927,
    threshold=0.4,
)

#: Fitted the same way with, beside each labelled pair, the 5 nearest old memories of other
#: slots as negatives (what a caller comparing a new memory with its nearest memories meets):
#: much more precise among many candidates, much lower recall (it misses the Acme/Globex pair,
#: whose cosine is 0.34). See docs/supersession.md.
POOL_MODEL = SupersessionModel(
    weights=(2.094, 3.361, 7.899, 1.45, 0.636, 2.197),
    bias=-7.25,
    threshold=0.85,
)


# ------------------------------------------------------------------------------ lexicons


_MEETING = (r"\b(?:meeting|meetings|standup|stand-up|sync|review|call|interview|workshop|"
            r"seminar|lecture|class|session|retro|retrospective|1:1|one-on-one|briefing|demo|"
            r"kickoff|kick-off|catch-up|offsite|training)\b")
_PROFESSIONS = (
    "engineer|developer|programmer|teacher|nurse|doctor|designer|analyst|accountant|lawyer|"
    "manager|consultant|architect|scientist|researcher|chef|cook|waiter|waitress|barista|"
    "cashier|driver|pilot|mechanic|electrician|plumber|carpenter|writer|editor|journalist|"
    "student|intern|freelancer|translator|pharmacist|dentist|therapist|librarian|"
    "salesperson|recruiter|tester|administrator|technician|professor|lecturer|tutor|clerk"
)

_DAYS = ("monday", "tuesday", "wednesday", "thursday", "friday", "saturday", "sunday",
         "january", "february", "march", "april", "may", "june", "july", "august", "september",
         "october", "november", "december", "tomorrow", "today")

#: The slot lexicon: slot name -> patterns searched in the lower-cased text; a pattern is a
#: regex, or a tuple of regexes that must all match. The words a match covers are the slot's
#: cue words: part of the frame, never values.
SLOTS: Mapping[str, tuple[str | tuple[str, ...], ...]] = {
    "parking spot": (r"\bpark(?:ed|ing)?\b", r"\b(?:level|deck|bay|spot|row)\s+[a-z]?\d",
                     (r"\b(?:car|vehicle) is (?:parked )?(?:on|in|at) (?:level|floor|deck|bay|"
                      r"row|spot|the garage)\b")),
    "meeting room": ((_MEETING, r"\broom\b"),),
    "wifi password": (r"\bwi-?fi\b", r"\bwireless\b", r"\bhotspot\b", r"\bnetwork (?:password|key)\b"),
    "job": (r"\bwork(?:s|ing|ed)? (?:as|at|for)\b", r"\bjobs?\b", r"\bemploy(?:er|ed|ment)\b",
            r"\bhired\b", r"\bjoined\b", r"\bposition\b", r"\brole\b", r"\bpromoted\b",
            r"\bcareer\b", r"\bnew company\b", r"\bhired\b", r"\bquit\b"),
    "home city": (r"\bli(?:ve|ves|ved|ving) in\b", r"\bbased in\b", r"\brelocat\w*\b",
                  r"\bmoved (?:back |out )?(?:to|from) (?!(?:the|a|an|my|our|room|desk|level|"
                  r"platform|gate|next|this|noon|midnight|\d|" + "|".join(_DAYS) + r")\b)", r"\bhome(?:town| town| city)\b", r"\bhome (?:for me )?is\b", r"\bi'?m from\b",
                  r"\bi am from\b"),
    "phone number": (r"\bphone\b", r"\bmobile\b", r"\bcell(?:phone)?\b", r"\bwhatsapp\b",
                     r"\bnumber (?=\+?\(?\d[\d\s().-]{5,})", r"\bcall me (?:on|at)\b", r"\breach me (?:on|at)\b"),
    "deadline": (r"\bdeadline\b", r"\bdue\b", r"\bsubmi(?:t|tted|ssion)\b", r"\bhand(?:ed)? in\b",
                 r"\bextension\b"),
    "flight": (r"\bflights?\b", r"\bfly(?:ing)?\b", r"\bflew\b", r"\bboarding\b", r"\bgate\b",
               r"\bdepart(?:s|ure)?\b", r"\btakes off\b", r"\bairline\b", r"\bplane\b"),
    "hotel": (r"\bhotels?\b", r"\bstaying (?:at|in)\b", r"\bhostel\b", r"\bairbnb\b", r"\binn\b",
              r"\bcheck(?:ed)?[- ]in\b", r"\bb&b\b", r"\blodge\b", r"\bresort\b"),
    "diet": (r"\bdiet\b", r"\bgluten\b", r"\bdairy\b", r"\blactose\b", r"\beat(?:s|ing)? meat\b",
             r"\bintermittent fasting\b", r"\bfasting\b"),
    "current book": (r"\bread(?:ing)?\b", r"\bbooks?\b", r"\bnovel\b", r"\baudiobook\b",
                     r"\bhalfway through\b", r"\bfinished\b"),
    "desk": (r"\bdesks?\b", r"\bseat(?:ed)?\b", r"\bworkstation\b", r"\bhot-?desk\w*\b",
             r"\bcubicle\b", r"\bsit(?:s|ting)? (?:at|by|near|next to)\b"),
    "manager": (r"\bmanager\b", r"\bboss\b", r"\breport(?:s|ing)? (?:directly )?to\b",
                r"\bsupervisor\b", r"\bteam lead\b", r"\bline manager\b"),
    "car": (r"\b(?:drive|drives|driving|drove) (?:a|an|the|my)\b", r"\bcar is (?:a|an)\b",
            r"\bnew car\b", r"\bbought (?:a|an) (?:\w+ )?(?:car|suv|van|truck|hatchback)\b",
            r"\blease[ds]?\b", r"\bleasing\b", r"\b(?:car|vehicle) (?:is|was) (?:a|an)\b"),
    "gym schedule": (r"\bgym\b", r"\bwork(?:ing)? ?out\b", r"\bworkouts?\b",
                     r"\btrain(?:ing)? (?:on|at|every)\b", r"\bexercis\w+\b"),
    "partner": (r"\bpartner\b", r"\bboyfriend\b", r"\bgirlfriend\b", r"\bhusband\b", r"\bwife\b",
                r"\bspouse\b", r"\bdating\b", r"\bengaged to\b", r"\bmarried to\b",
                r"\bfianc[eé]e?\b", r"\bseeing\b", r"\bbroke up\b", r"\bsplit up\b",
                r"\bdivorced\b"),
    "pet care": (r"\bvet\b", r"\bvets\b", r"\bveterinar\w*\b", r"\bdog ?sitter\b",
                 r"\bcat ?sitter\b", r"\bdog walker\b", r"\b(?:dog|cat|pet) food\b",
                 r"\bkibble\b", r"\bgroomer\b", r"\bkennel\b"),
    "favourite": (r"\bfavou?rite\b",),
    "appointment": (r"\bappointment\b", r"\bappt\b", r"\bcheck-?up\b", r"\bcleaning\b",
                    r"\bconsultation\b"),
    "email address": (r"\be-?mail\b", r"\binbox\b"),
    "doctor": (r"\bdoctors?\b", r"\bgp\b", r"\bphysician\b", r"\bdr\.?(?= [a-z])", r"\bclinic\b",
               r"\bpractice\b"),
    "laptop": (r"\blaptop\b", r"\bcomputer\b", r"\bmacbook\b", r"\bthinkpad\b", r"\bnotebook\b",
               r"\bchromebook\b", r"\bpc\b"),
    "train platform": (r"\bplatform\b", r"\btrains?\b", r"\btrack \d", r"\bcarriage\b",
                       r"\bcoach \w\b"),
    "coffee order": (r"\bcoffee\b", r"\border(?:s|ed|ing)?\b", r"\busual\b", r"\bgo-to\b"),
    "address": (r"\baddress\b", r"\bli(?:ve|ves|ved|ving) at\b", r"\bstreet\b", r"\bavenue\b",
                r"\broad\b", r"\bapartment\b", r"\bflat (?:is|\d)", r"\bzip\b", r"\bpostcode\b"),
    "school": (r"\bschools?\b", r"\bkindergarten\b", r"\bdaycare\b", r"\bnursery\b",
               r"\buniversity\b", r"\bcollege\b", r"\bpreschool\b", r"\battend(?:s|ed|ing)?\b",
               r"\b(?:primary|elementary|secondary|academy|high)\b"),
}
#: Slot words that are values ("vegetarian" / "vegan"): they name the slot but change with it.
SLOT_TERMS: Mapping[str, str] = {
    "diet": r"\b(?:vegetarian|vegan|pescatarian|keto|paleo|omnivore|carnivore|flexitarian)\b",
    "job": rf"\b(?:{_PROFESSIONS})s?\b",
    "coffee order": (r"\b(?:latte|lattes|cappuccino|cappuccinos|flat white|espresso|espressos|"
                     r"americano|macchiato|mocha|mochas|cortado|chai|decaf|tea)\b"),
}
_TERM_RES = {name: re.compile(p) for name, p in SLOT_TERMS.items()}
_SLOT_RES = {name: tuple(tuple(re.compile(r) for r in ((p,) if isinstance(p, str) else p))
                         for p in pats) for name, pats in SLOTS.items()}

#: Update cues in the new memory (a feature): the speaker says the value changed.
_UPDATE_RE = re.compile(
    r"\b(?:now|moved|move|moving|changed|change|changing|switched|switch|switching|new|"
    r"instead|updated|update|rescheduled|postponed|pushed|brought forward|relocated|"
    r"replaced|upgraded|swapped|actually|correction|transferred|promoted|became|from now on|"
    r"no longer|anymore|any more|not .{0,20}any ?more|shifted|extended|bumped|"
    r"got a new|today'?s|this week'?s|latest|current|currently|hired|joined|started|starting|"
    r"began|these days|as of|from next|since|reset|raised|lowered|went up|gone up|increased|"
    r"decreased|dropped|cut back|downgraded|rebooked|re-?assigned|put me on)\b")
#: The new memory denies or replaces the old value: overrides a coexistence cue.
_REPLACE_RE = re.compile(
    r"\b(?:instead|no longer|anymore|any more|switched|replaced|used to|stopped|quit|"
    r"gave up|favou?rite|ex-|not .{0,20}any ?more|left)\b")
_NEGATION_RE = re.compile(
    r"\b(?:no longer|not .{0,30}any ?more|anymore|any more|stopped|quit|left|gave up|sold|"
    r"moved out of|not (?:at|in|with) |used to|cancell?ed|ended|broke up|split up|divorced|"
    r"retired|instead of|replaced|finished|done with)\b")
#: Things that coexist: tastes, plural possessions and people, additions.
_COEXIST_RE = re.compile(
    r"(?<!'d )(?<!would )\b(?:like|likes|love|loves|enjoy|enjoys|adore|adores|also|too|"
    r"another|other|both|besides|additionally|as well|one of my|fan of|"
    r"(?:a|my|our) second)\b"
    r"|\b(?:have|has|got|adopted) (?:a|an|two|three|four|\d+) (?:\w+ )?(?:sons?|daughters?|"
    r"kids?|child|children|friends?|brothers?|sisters?|dogs?|cats?|pets?|pupp(?:y|ies)|"
    r"kittens?|siblings?|cousins?|colleagues?|hamsters?|rabbits?|birds?|fish)\b"
    r"|\b(?:sons?|daughters?|kids?|child|children|brothers?|sisters?|cousins?|friends?|dogs?|"
    r"cats?|twins?)(?:'s name)? (?:is |are )?(?:called|named)\b"
    r"|\b(?:son|daughter|brother|sister|kid|child|dog|cat)'s name\b")


def _wordset(text: str) -> frozenset[str]:
    """The whitespace-separated words of ``text``."""
    return frozenset(text.split())

_STOP = _wordset("""
a an the this that these those some any my our your his her their its me i we us you he she
they them it is are was were be been being am 's 're 've 'd 'll has have had do does did will
would shall should can could may might must of in on at to for from by with about as into over
under after before than then so and or but if when while where which who whom what how why
there here up down out off just very really also too again still yet already ever only even
not no nor don't doesn't didn't isn't aren't wasn't i'm i've i'd i'll we're we've it's that's
there's he's she's they're let's s get got gets getting go going goes went gone make made
set near next via per each every all both either neither one same such
""")
_TEMPORAL = _wordset("""
today yesterday tomorrow tonight now currently recently lately
week weekend month year week's today's yesterday's tomorrow's tonight's this last earlier later
soon since until ago anymore always usually sometimes often from then onwards btw fyi update
heads-up note ok okay quick actually so well
""")
_ADJ = _wordset("""
new current old usual favourite favorite main regular weekly daily monthly next previous
latest first other little older younger big small temporary permanent actual proper real
""")
_HEAD_ADVERBS = _wordset("currently newly recently now still")
"""Adverbs that may open a subject's noun phrase ("Kenji's currently open file")."""
_VERBS = _wordset("""
is are was were has have had moved changed leaves leave starts start begins ends departs lands
arrives arrive got lives live works work meets opens closes goes runs takes costs sits shifted
switched became becomes will needs should must can got now still also said says gets
""")
_WEEKDAYS = _wordset("""monday tuesday wednesday thursday friday saturday sunday mondays
tuesdays wednesdays thursdays fridays saturdays sundays mon tue tues wed thu thur thurs fri sat
sun weekdays weekends""")
_MONTHS = _wordset("""january february march april may june july august september october
november december jan feb mar apr jun jul aug sep sept oct nov dec""")
#: Relatives and other people a sentence can be about ("my sister lives in Paris").
_RELATIONS = _wordset("""
mom mum mother dad father wife husband partner boyfriend girlfriend fiance fiancee boss manager
grandma grandpa grandmother grandfather landlord landlady dentist doctor therapist sister
brother son daughter kid child friend colleague coworker co-worker cousin aunt uncle neighbour
neighbor roommate flatmate housemate teammate classmate nephew niece grandson granddaughter
stepson stepdaughter stepmom stepdad parents
""")
#: Relations that are also a slot of the user's: "my manager is Sarah" is about the user.
_ROLES = _wordset("""wife husband partner boyfriend girlfriend fiance fiancee boss manager
landlord landlady dentist doctor therapist""")
#: Relations that do not identify one person without a name ("my friend" is any friend).
_NON_IDENTIFYING = _wordset("""friend colleague coworker co-worker cousin neighbour neighbor
classmate teammate roommate flatmate housemate""")
_FIRST_PERSON = _wordset("i i'm i've i'd i'll me my mine we we're we've our ours us myself")
_REL_ALIAS = {"mum": "mom", "mommy": "mom", "mother": "mom", "father": "dad", "daddy": "dad",
              "co-worker": "coworker", "neighbor": "neighbour", "fiancee": "fiance"}
#: Verbs after which a capitalised first word is a person's name ("Anna moved to Bergen").
_NAME_VERBS = _wordset("""is was has had lives lived works worked moved changed got left
started goes went says said can will just now still also takes sits drives flies""")
_PRONOUN_SUBJECTS = _wordset("i i'm i've i'd i'll we we're we've you it there")
_AGENT_VERBS = _wordset("""sent put gave moved changed raised lowered replaced upgraded switched
gave assigned reassigned""")
_PREPS = _wordset("at on in to from for with by near outside inside into the a an my our")
_TITLES = _wordset("dr dr. mr mrs ms miss prof")
_COMPANY_SUFFIX = _wordset("corp corporation inc ltd llc co company gmbh plc group")
_LEAD = _wordset("""so ok okay update btw fyi heads-up note actually quick today yesterday
tomorrow tonight now also and but just reminder correction please since after""")

def _known_words() -> frozenset[str]:
    """Words of the lexicons: a capitalised first word among them is not a name."""
    words: set[str] = set()
    for pats in SLOTS.values():
        for p in pats:
            for r in (p,) if isinstance(p, str) else p:
                words.update(re.findall(r"[a-z]{3,}", re.sub(r"\\[a-zA-Z]", " ", r)))
    words.update(re.findall(r"[a-z]{3,}", _MEETING + _PROFESSIONS))
    return frozenset(words | _STOP | _TEMPORAL | _ADJ | _VERBS | _RELATIONS | _LEAD)


_TOKEN_RE = re.compile(r"[\w@+][\w@+.\-:/'’&]*")
_KNOWN = _known_words()
_TIME_RE = re.compile(r"^(?:\d{1,2}(?:[:.]\d{2})?(?:am|pm|h)|\d{1,2}:\d{2}|noon|midnight)$")
_QUARTER_RE = re.compile(r"^(?:q[1-4]|h[12])$")
_DAYPARTS = _wordset("morning afternoon evening night mornings afternoons evenings nights")
_ORDINAL_RE = re.compile(r"^\d{1,2}(?:st|nd|rd|th)$")
_PHONE_RE = re.compile(r"^\+?\d[\d\-().]{6,}\d$")


@dataclass(frozen=True, slots=True, kw_only=True)
class Claim:
    """What :func:`parse_claim` reads in one memory: its subject, slot cues and values."""

    owner: tuple[str, str | None]
    """Whose it is: ``("user", None)``, ``(relation, name)`` or ``("", name)``."""
    head: tuple[str, ...]
    """Head nouns of an impersonal subject, the last one the head ("the wifi password" ->
    (wifi, password))."""
    qualifiers: frozenset[str]
    """Values that identify the subject ("the workshop on Monday" -> {monday})."""
    slots: frozenset[str]
    """Names of the :data:`SLOTS` entries it matches."""
    frame: frozenset[str]
    """Stemmed content words that are neither values, subject nor cue words."""
    values: frozenset[tuple[str, str]]
    """``(type, value)``; types ``code``, ``date``, ``time``, ``phone``, ``email``, ``proper``
    (typed), ``word`` (untyped)."""
    update_cue: bool
    replace_cue: bool
    negation: bool
    coexist: bool


def _stem(word: str) -> str:
    """A crude, deterministic stem: enough to match "jobs"/"job", "parked"/"park"."""
    w = word.lower().strip("'’")
    if w.endswith(("'s", "’s")):
        w = w[:-2]
    for suffix, repl, min_len in (("ies", "y", 5), ("ing", "", 6), ("ed", "", 5), ("s", "", 4)):
        if w.endswith(suffix) and len(w) >= min_len and not w.endswith("ss"):
            w = w[: -len(suffix)] + repl
            break
    return w[:-1] if len(w) > 3 and w.endswith("e") else w


def _lower_same_length(text: str) -> str:
    return "".join(c.lower() if len(c.lower()) == 1 else c for c in text)


def _value_type(tok: str, low: str) -> str | None:
    """The type of a value token (None: not a typed value)."""
    if "@" in low and "." in low:
        return "email"
    if _TIME_RE.match(low):
        return "time"
    if low in _DAYPARTS:
        return "time"
    if _ORDINAL_RE.match(low) or low in _WEEKDAYS or low in _MONTHS or _QUARTER_RE.match(low):
        return "date"
    if _PHONE_RE.match(low) and sum(c.isdigit() for c in low) >= 7:
        return "phone"
    if any(c.isdigit() for c in low):
        return "code"
    return None


#: Value types that can replace each other (a room code by a room code, a date by a date).
_GROUP = {"code": "code", "proper": "name", "term": "term", "word": "word", "date": "date",
          "time": "time", "phone": "phone", "email": "email"}


def _is_cap(toks: Sequence[tuple[str, int]], lows: Sequence[str], j: int) -> bool:
    """Token ``j`` is a capitalised word that is not a function, time or date word."""
    return j < len(toks) and toks[j][0][:1].isupper() and lows[j] not in _STOP \
        and lows[j] not in _WEEKDAYS and lows[j] not in _MONTHS and lows[j] not in _TEMPORAL


def _third_person(toks: Sequence[tuple[str, int]], j: int, low: str) -> bool:
    """Token ``j`` reads as a verb in the third person after a name ("Hines Ward plays ...",
    "Kylie Minogue speaks ..."): a lowercase word ending in a single "s" that is not a function
    word, nor a plural noun before its own verb ("Office keys are ...")."""
    if j >= len(toks) or not toks[j][0][:1].islower():
        return False
    nxt = toks[j + 1][0].lower() if j + 1 < len(toks) else ""
    return low.endswith("s") and not low.endswith(("ss", "'s", "us", "is")) and len(low) > 3 \
        and low not in _STOP and nxt not in _VERBS and not nxt.endswith("ed")


def _name_end(toks: Sequence[tuple[str, int]], lows: Sequence[str], k: int, end: int) -> int:
    """The last index of the run of capitalised words that starts at ``k`` (before ``end``; a
    possessive closes it): "Tang Empire", "United Kingdom" are one name each."""
    e = k
    while e + 1 < end and _is_cap(toks, lows, e + 1) and not lows[e].endswith("'s"):
        e += 1
    return e


def _subject(toks: Sequence[tuple[str, int]], lows: Sequence[str], first_person: bool,
             colon: set[int], breaks: set[int], start: int = 0) -> tuple[
        tuple[str, str | None], tuple[str, ...], frozenset[str], set[int]]:
    """``(owner, head nouns, qualifiers, token indices)`` of the sentence's subject.

    The owner is the user ("I", "my X", "the X"), a relative ("my sister ..."), or a named
    person ("Anna moved ...", "Tom's number ..."). An impersonal subject's head nouns ("the
    wifi password" -> (wifi, password)) and qualifiers ("the workshop on Monday" -> {monday},
    "the 8:15 to Leeds" -> {8:15, leeds}) tell one thing of the user's from another.
    """
    n = len(lows)
    i = start
    while i < n and lows[i] in _LEAD:
        i += 1
    head_end = next((j for j in range(i, min(n - 1, i + 3)) if j in colon), None)
    if head_end is not None:  # a header: "Track change: my train is on track 7"
        i = head_end + 1
    if i < n and lows[i] not in _PRONOUN_SUBJECTS:
        for j in range(i + 1, min(n - 1, i + 5)):
            nxt = lows[j + 1]
            if (lows[j] in ("is", "was", "became") and nxt in ("my", "our")) or (
                    lows[j:j + 3] in (["has", "become", "my"], ["has", "become", "our"])):
                i = j + 1 if nxt in ("my", "our") else j + 2  # "Pizza is my favourite meal"
                break
            if (lows[j].endswith("ed") or lows[j] in _AGENT_VERBS) and nxt in (
                    "my", "our", "me", "us"):  # "The landlord raised my rent": about my rent
                if nxt in ("me", "us"):
                    return ("user", None), (), frozenset(), set()
                i = j + 1
                break
            if lows[j] in _STOP and lows[j] not in ("of", "the", "'s"):
                break
    result = _subject_at(toks, lows, first_person, i)
    if result[0] != ("user", None):
        # "Chloe left, our new babysitter is Hannah": the later clause is about the user's
        for b in sorted(breaks):
            if b >= i:
                c = b + 1
                while c < n and lows[c] in ("so", "and", "but", "then", "now"):
                    c += 1
                if c < n and (lows[c] in ("my", "our", "the", "i", "i'm", "we", "we're")
                              or (lows[c].endswith("'s") and not _is_cap(toks, lows, c))
                              or lows[c] in _TEMPORAL and lows[c].endswith("'s")
                              or (lows[c].endswith("'s")
                                  and lows[c].removesuffix("'s") in _WEEKDAYS)):
                    return _subject(toks, lows, first_person, colon, set(), c)
                break
    return result


def _names_before_copula(toks: Sequence[tuple[str, int]], lows: Sequence[str], j: int,
                         nouns: list[str], quals: set[str], idx: set[int]) -> None:
    """Names inside a long subject are qualifiers of it, not values: in "The type of music
    that John McVie plays is rock" or "The name of the head of state in United Kingdom is
    ...", the names before the copula say which thing ("John McVie's music", "the UK's head of
    state"); only what follows "is" is the value. Adds them to ``quals`` and ``idx``."""
    n = len(lows)
    end = next((c for c in range(j, min(n, j + 12)) if lows[c] in ("is", "was", "are", "were")),
               None)
    if end is None or any(lows[c] in (",", ".", ";", "and", "but") for c in range(j, end)):
        return
    c = j
    while c < end:
        if _is_cap(toks, lows, c) and _value_type(lows[c], lows[c]) is None:
            e = _name_end(toks, lows, c, end)
            name = " ".join(lows[c:e + 1]).removesuffix("'s")
            if _stem(name) not in nouns:
                quals.add(name)
            idx.update(range(c, e + 1))
            c = e + 1
        else:
            c += 1


def _subject_at(toks: Sequence[tuple[str, int]], lows: Sequence[str], first_person: bool,
                i: int) -> tuple[tuple[str, str | None], tuple[str, ...], frozenset[str],
                                 set[int]]:
    n = len(lows)
    owner: tuple[str, str | None] = ("user", None)
    nouns: list[str] = []
    quals: set[str] = set()
    idx: set[int] = set()

    def read_head(j: int) -> None:
        start = j
        while j < n and len(nouns) < 4:
            w = lows[j]
            if not nouns and (w in _ADJ or w in _HEAD_ADVERBS) and j + 1 < n:
                idx.add(j)  # "current work spot", "currently open file": the head starts
                # after its adjectives
                j += 1
                start = j
                continue
            if _value_type(w, w) is not None and j == start:  # "the 8:15 to Leeds"
                quals.add(w)
            elif w in _STOP or (w in _VERBS and j > start) or _value_type(w, w) is not None \
                    or w in _AGENT_VERBS \
                    or (_UPDATE_RE.fullmatch(w) and w not in _ADJ) \
                    or (w.endswith("ed") and j > start) \
                    or (w in _TEMPORAL and not w.endswith("'s")):
                break
            elif w.endswith("s") and not w.endswith("ss") and j > start and j + 1 < n and (
                    lows[j + 1] in _PREPS or _value_type(lows[j + 1], lows[j + 1])):
                break  # a verb: "the dog walker comes at noon"
            elif w not in _ADJ and w.removesuffix("'s") not in _TEMPORAL:
                nouns.append(_stem(w))
            idx.add(j)
            j += 1
        # qualifiers: "on Monday", "to Leeds", "for the building", "of Tang Empire", when a
        # verb follows; a run of capitalised words is one name ("the capital of Tang Empire"
        # and "the capital of France" are two things, not two values of one)
        found: set[str] = set()
        taken: set[int] = set()
        while j + 1 < n and lows[j] in ("on", "to", "for", "from", "at", "with", "of"):
            k = j + 1
            if k < n and lows[k] == "the":
                k += 1
            if k < n and _is_cap(toks, lows, k) and _value_type(lows[k], lows[k]) is None:
                e = _name_end(toks, lows, k, n)
                found.add(" ".join(lows[k:e + 1]).removesuffix("'s"))
                taken.update(range(j, e + 1))
                j = e + 1
            elif k < n and (_value_type(lows[k], lows[k]) is not None
                            or (lows[j] in ("for", "of") and lows[k] not in _STOP)):
                w = lows[k].removesuffix("'s")
                found.add(w if _value_type(w, w) is not None else _stem(w))
                taken.update(range(j, k + 1))
                j = k + 1
            else:
                break
        if found and j < n and (lows[j] in _VERBS or lows[j] in _NAME_VERBS
                                or lows[j].endswith(("ed", "s"))):
            quals.update(found)
            idx.update(taken)

    if i >= n:
        return owner, (), frozenset(), idx
    w = lows[i]
    if w in ("my", "our"):
        j = i + 1
        while j < n and lows[j] in _ADJ:
            j += 1
        word = lows[j].removesuffix("'s") if j < n else ""
        rel = _REL_ALIAS.get(word, word)
        if rel not in _RELATIONS and _stem(word) in _RELATIONS:  # "our neighbours' babysitter"
            rel = _stem(word)
        if rel not in _RELATIONS:
            read_head(i + 1)
            return owner, tuple(nouns), frozenset(quals), idx
        idx.update(range(i, j + 1))
        name = None
        k = j + 1
        if not lows[j].endswith("'s") and _is_cap(toks, lows, k):
            name = lows[k].removesuffix("'s")
            idx.add(k)
            k += 1
        copula = k < n and lows[k] in ("is", "was", "=")
        nxt = k + 1
        while copula and nxt < n and lows[nxt] in ("now", "called", "named", "still", "actually"):
            nxt += 1
        if copula and rel in _ROLES and not lows[j].endswith("'s") and (
                _is_cap(toks, lows, nxt) or lows[nxt:nxt + 1] in (["dr"], ["at"], ["with"])):
            # "my manager is Sarah": the user's manager slot
            return owner, (rel,), frozenset(), idx
        if lows[j].endswith("'s") or lows[k - 1].endswith("'s"):
            read_head(k)
        return (rel, name), tuple(nouns), frozenset(quals), idx
    if w in ("the", "this", "that") or (w.endswith("'s") and w in _TEMPORAL):
        read_head(i + 1)
        _names_before_copula(toks, lows, max(idx, default=i) + 1, nouns, quals, idx)
        return owner, tuple(nouns), frozenset(quals), idx
    if w in _FIRST_PERSON or w in ("you", "it", "there", "please", "let's"):
        return owner, (), frozenset(), idx
    rel = _REL_ALIAS.get(w.removesuffix("'s"), w.removesuffix("'s"))
    if rel in _RELATIONS and rel not in _NON_IDENTIFYING:  # "Mom changed her number"
        idx.add(i)
        if w.endswith("'s"):
            read_head(i + 1)
        return (rel, None), tuple(nouns), frozenset(quals), idx
    if _is_cap(toks, lows, i) and w.removesuffix("'s") not in _KNOWN:
        k = i
        while k + 1 < n and not lows[k].endswith("'s") and _is_cap(toks, lows, k + 1) \
                and lows[k + 1] not in _KNOWN:
            k += 1
        after = lows[k + 1:k + 4]
        verb_next = bool(after) and (after[0] in _NAME_VERBS or after[0].endswith("ed")
                                     # two words or more: one capitalised word at
                                     # the start may be an imperative ("Send invoices")
                                     or (k > i and _third_person(toks, k + 1, after[0])))
        object_me = after[1:2] in (["me"], ["us"])
        if lows[k].endswith("'s") or (verb_next and not object_me):
            owner = ("", " ".join(lows[i:k + 1]).removesuffix("'s"))
            idx.update(range(i, k + 1))
            if lows[k].endswith("'s"):
                read_head(k + 1)
            return owner, tuple(nouns), frozenset(quals), idx
        if k > i:  # "Stark Industries hired me": a value, not the subject
            return ("user", None), (), frozenset(), idx
    if w.endswith("'s") and _is_cap(toks, lows, i):  # "Car's in the garage"
        read_head(i + 1)
        return owner, (_stem(w),) + tuple(nouns), frozenset(quals), idx
    if w not in _VERBS and not w.endswith("ed") and _UPDATE_RE.fullmatch(w) is None:
        read_head(i)  # a bare noun phrase: "Budget meeting changed to room 512" ...
        after = lows[max(idx, default=i) + 1] if max(idx, default=i) + 1 < n else ""
        if not (after in _VERBS or after in _NAME_VERBS or after.endswith("ed")
                or _UPDATE_RE.fullmatch(after)):  # ... but not "Call me at 212-555-0101"
            return owner, (), frozenset(), set()
    return owner, tuple(nouns), frozenset(quals), idx


_THE_USER_RE = re.compile(r"\b(?:the|our|this) (?:user|customer|client)(?:'s|’s)(?=\s)|"
                          r"\b(?:the|our|this) (?:user|customer|client)\b", re.IGNORECASE)


def _as_first_person(text: str) -> str:
    """An agent's note about "the user" read as the user's own words ("The user's job" ->
    "my job", "The user is ..." -> "I is ..."): the same owner as "I" and "my"."""
    return _THE_USER_RE.sub(lambda m: "my" if m.group(0).endswith(("'s", "’s")) else "I", text)


#: Texts whose claims are kept (chosen: a batch's new memories and their candidates, which
#: recur from one new memory to the next; a claim is a few hundred bytes).
CLAIM_CACHE = 8192


@functools.lru_cache(maxsize=CLAIM_CACHE)
def parse_claim(text: str) -> Claim:
    """Read the subject, slot cues, values and cue words of one memory (cached by text: a
    claim is immutable).

    >>> c = parse_claim("I parked on level 3, spot D3")
    >>> c.owner, sorted(c.slots), sorted(v for _, v in c.values)
    (('user', None), ['parking spot'], ['3', 'd3'])
    >>> parse_claim("my sister lives in Paris").owner
    ('sister', None)
    >>> parse_claim("The user's sister lives in Paris").owner   # an agent's notes: the user
    ('sister', None)
    """
    text = _as_first_person(text)
    low = _lower_same_length(text)
    spans: list[tuple[int, int]] = []
    slots = set()
    for name, alternatives in _SLOT_RES.items():
        for regs in alternatives:
            found = [list(reg.finditer(low)) for reg in regs]
            if all(found):
                slots.add(name)
                spans.extend(m.span() for ms in found for m in ms if m.end() > m.start())
    term_spans: list[tuple[int, int, str]] = []
    for name, reg in _TERM_RES.items():
        term_spans.extend((*m.span(), name) for m in reg.finditer(low))
    raw = [(m.group(0), m.start()) for m in _TOKEN_RE.finditer(text)]
    toks = [(t.rstrip(".,:;!?'’-/"), s) for t, s in raw]
    colon = {j for j, (t, s) in enumerate(raw)
             if t.endswith(":") or text[s + len(t):].lstrip().startswith(":")}
    keep = [j for j, (t, _) in enumerate(toks) if t]
    colon = {keep.index(j) for j in colon if j in keep}
    breaks = {j for j, (t, s) in enumerate(raw) if t.endswith((",", ";"))
              or text[s + len(t):].lstrip().startswith((",", ";"))}
    breaks = {keep.index(j) for j in breaks if j in keep}
    toks = [toks[j] for j in keep]
    lows = [_lower_same_length(t).replace("’", "'") for t, _ in toks]
    first_person = any(w in _FIRST_PERSON for w in lows)
    owner, head, quals, subject_idx = _subject(toks, lows, first_person, colon, breaks)
    i = 0
    while i < len(lows) and lows[i] in _LEAD:
        i += 1

    def inside(start: int, end: int, where: list[tuple[int, int]]) -> bool:
        return any(a <= start and end <= b for a, b in where)

    values: set[tuple[str, str]] = set()
    frame: set[str] = set()
    cue_words = set()
    for reg in (_UPDATE_RE, _COEXIST_RE, _NEGATION_RE):
        for m in reg.finditer(low):
            cue_words.update(m.group(0).split())
    j = 0
    while j < len(toks):
        tok, start = toks[j]
        w = lows[j]
        typ = _value_type(tok, w)
        if j in subject_idx:
            j += 1
            continue
        if typ is not None:
            if typ == "time" and w in _DAYPARTS and j > 0 and lows[j - 1] in _TEMPORAL:
                j += 1  # "this morning": when it was said, not a value
                continue
            if w in _WEEKDAYS or w in _DAYPARTS:
                w = w.removesuffix("s")
            values.add((typ, w))
            j += 1
            continue
        term = [name for a, b, name in term_spans if a <= start and start + len(tok) <= b]
        if term:  # a slot word that is a value: "vegan", "nurse" (not "my doctor is ...")
            slots.update(term)
            values.add(("term", _stem(w)))
            j += 1
            continue
        # a proper name: capitalised words, merged ("Acme Corp"); at the start of the sentence
        # only a run of two or more ("Stark Industries hired me")
        if tok[:1].isupper() and w not in _STOP and w not in _TEMPORAL and w not in _ADJ \
                and not inside(start, start + len(tok), spans) \
                and (j > i or _is_cap(toks, lows, j + 1)):
            k = j
            parts = []
            while k < len(toks) and toks[k][0][:1].isupper() and lows[k] not in ("i", "i'm") \
                    and _value_type(toks[k][0], lows[k]) is None and k not in subject_idx:
                if lows[k] not in _COMPANY_SUFFIX and lows[k] != "the":
                    parts.append(lows[k].removesuffix("'s"))
                k += 1
            if parts:
                values.add(("proper", " ".join(parts)))
                j = k
                continue
        if w in _STOP or w in _TEMPORAL or w in cue_words or w in _ADJ:
            j += 1
            continue
        if inside(start, start + len(tok), spans) or (len(w) > 4 and w.endswith("ed")) or (
                len(w) > 5 and w.endswith("ing")):  # slot cues and verbs: the frame
            frame.add(_stem(w))
        else:
            values.add(("word", _stem(w)))
        j += 1
    frame |= set(head)
    return Claim(owner=owner, head=head, qualifiers=quals, slots=frozenset(slots),
                 frame=frozenset(frame), values=frozenset(values),
                 update_cue=_UPDATE_RE.search(low) is not None,
                 replace_cue=_REPLACE_RE.search(low) is not None,
                 negation=_NEGATION_RE.search(low) is not None,
                 coexist=_COEXIST_RE.search(low) is not None)


def subjects_match(a: Claim, b: Claim) -> bool:
    """Same owner: both the user; or the same name; or the same identifying relation.

    "my friend" alone names no one in particular, so two unnamed friends never match.

    >>> subjects_match(parse_claim("my sister lives in Paris"), parse_claim("I live in Rome"))
    False
    >>> subjects_match(parse_claim("my friend Tom is a nurse"),
    ...                parse_claim("my friend Anna is a nurse"))
    False
    """
    (ra, na), (rb, nb) = a.owner, b.owner
    if ra == "user" or rb == "user":
        return ra == rb
    if na and nb:
        return na == nb
    if na or nb:
        return ra == rb and ra != "" and ra not in _NON_IDENTIFYING
    return ra == rb and ra not in _NON_IDENTIFYING


def _heads_match(a: Claim, b: Claim) -> str:
    """``"same"`` thing: the same head noun, and one side's modifiers and qualifiers among the
    other's ("the wifi password" / "today's wifi password"; not "my work phone" / "my personal
    phone", nor "the 8:15 to Leeds" / "the 8:20 to York"); ``"extends"``: one head extends
    the other ("my work phone" / "my work phone extension", "the plumber" / "the plumber's
    visit"); else ``""``."""
    ha, hb = set(a.head) | a.qualifiers, set(b.head) | b.qualifiers
    if a.head and b.head and a.head[-1] != b.head[-1]:
        return "extends" if ha <= hb or hb <= ha else ""
    ma, mb = set(a.head[:-1]) | a.qualifiers, set(b.head[:-1]) | b.qualifiers
    return "same" if ma <= mb or mb <= ma else ""


def _value_change(old: Claim, new: Claim) -> tuple[bool, bool, frozenset[tuple[str, str]],
                                                   frozenset[tuple[str, str]]]:
    """``(changed, typed, gone, came)``: whether the values differ, whether typed values
    (not plain words) carry the difference, and the differing values on each side.

    A plain word one side has as a value and the other as a frame word is neither ("my locker
    is 214" / "I got a new locker, 87"). When both sides have typed values, only those count:
    equal typed values are a restatement, whatever the wording.
    """
    vo, vn = _merge_propers(old.values, new.values)
    vo = frozenset(v for v in vo if not (v[0] == "word" and v[1] in new.frame))
    vn = frozenset(v for v in vn if not (v[0] == "word" and v[1] in old.frame))
    so = frozenset(v for v in vo if v[0] != "word")
    sn = frozenset(v for v in vn if v[0] != "word")
    if so and sn:
        gone, came = so - sn, sn - so
        groups = {_GROUP[t] for t, _ in gone} & {_GROUP[t] for t, _ in came}
        if groups or not new.update_cue:
            return bool(groups), bool(groups), gone, came
        if came and not gone:  # "after ten years in Toronto we now live in Vancouver"
            return True, False, gone, came
        if so != sn:
            return False, False, gone, came
        # the same typed values with an update cue: "promoted to senior developer at Spotify"
        vo, vn = vo - so, vn - sn
    gone, came = vo - vn, vn - vo
    return bool(gone and came), False, gone, came


def _merge_propers(vo: frozenset[tuple[str, str]], vn: frozenset[tuple[str, str]]) -> tuple[
        frozenset[tuple[str, str]], frozenset[tuple[str, str]]]:
    """A proper name whose words are among another's counts as that one ("Civic" and "Honda
    Civic"; "Dr Patel" and "Patel"; not "Hillside Primary" and "Oakwood Primary"): the new
    side's spelling is replaced by the old side's."""
    old_props = [v for t, v in vo if t == "proper"]
    out = set()
    for t, v in vn:
        if t == "proper":
            words = set(v.split()) - _TITLES
            same = [o for o in old_props if words and words <= set(o.split())]
            if same:
                out.add(("proper", same[0]))
                continue
        out.add((t, v))
    return vo, frozenset(out)


@dataclass(frozen=True, slots=True, kw_only=True)
class PairFeatures:
    """The gates and features of one (new, old) pair."""

    passed: bool
    """All gates hold (else the pair is never a supersession)."""
    gate: str
    """The first gate that failed, or "" ."""
    x: tuple[float, ...]
    """The features, in :data:`FEATURES` order."""
    slot: str
    detail: str = field(default="")


def _words(claim: Claim) -> frozenset[str]:
    return frozenset(v for t, v in claim.values if t == "word")


def _tails(claim: Claim) -> frozenset[str]:
    """The last words of multi-word names: the kind of thing named ("Pacific Time",
    "Yes Hostel"), an attribute word rather than a value."""
    return frozenset(_stem(v.split()[-1]) for t, v in claim.values
                     if t == "proper" and " " in v)


def _fmt(values: frozenset[tuple[str, str]]) -> str:
    return ", ".join(sorted(v for _, v in values)) or "-"


def pair_features(old: Claim, new: Claim, cosine: float = 0.0) -> PairFeatures:
    """Gates and features for "does ``new`` supersede ``old``?" (see the module docstring)."""
    shared = sorted(old.slots & new.slots)
    a_old, a_new = old.frame | _words(old) | _tails(old), new.frame | _words(new) | _tails(new)
    common = a_old & a_new
    jaccard = len(common) / len(a_old | a_new) if common else 0.0
    slot = shared[0] if shared else (" ".join(sorted(common)) or "same subject")
    changed, typed, gone, came = _value_change(old, new)
    vo, vn = _merge_propers(old.values, new.values)
    kept = vo & vn  # a value both state: "I quit Globex" / "I work at Globex"
    negated = new.negation and not new.coexist and bool(kept or (shared and not came))
    x = (1.0 if shared else 0.0, jaccard, float(np.clip(cosine, 0.0, 1.0)),
         1.0 if new.update_cue else 0.0, 1.0 if typed else 0.0, 1.0 if negated else 0.0)
    detail = f"new value: {_fmt(came)} (was {_fmt(gone)})" if changed else \
        f"old value negated: {_fmt(kept)}" if negated else "no new value"
    heads = _heads_match(old, new)
    # an extended head is the same thing only with a slot in common, or when a code, date or
    # time changes ("the car insurance renews on 12 April" / "... renewal moved to 20 April";
    # not "my car insurance is with Aviva" / "my car is a grey Prius")
    same_thing = heads == "same" or (heads == "extends" and (bool(shared) or typed and any(
        _GROUP[t] not in ("name", "word", "term") for t, _ in came)))
    for ok, gate in ((subjects_match(old, new), "different subject"),
                     (same_thing, "different thing"),
                     (changed or negated, "no new value"),
                     (not ((old.coexist or new.coexist) and not new.replace_cue), "coexist"),
                     (bool(shared) or jaccard > 0.0 or (bool(kept) and (negated or typed)),
                      "no shared attribute")):
        if not ok:
            return PairFeatures(passed=False, gate=gate, x=x, slot=slot, detail=detail)
    return PairFeatures(passed=True, gate="", x=x, slot=slot, detail=detail)


def _score(x: Sequence[float], model: SupersessionModel) -> float:
    z = float(np.dot(np.asarray(model.weights), np.asarray(x))) + model.bias
    return 1.0 / (1.0 + math.exp(-z)) if z > -500 else 0.0


def _cosine(a: Statement, b: Statement) -> float:
    if a.what is None or b.what is None:
        return 0.0
    va, vb = np.asarray(a.what, dtype=np.float64), np.asarray(b.what, dtype=np.float64)
    na, nb = float(np.linalg.norm(va)), float(np.linalg.norm(vb))
    if na == 0.0 or nb == 0.0 or va.shape != vb.shape:
        return 0.0
    return float(va @ vb / (na * nb))


_SPEAKER = re.compile(r"^\s*([A-Z][\w'’-]*(?: [A-Z][\w'’-]*){0,2}):\s")


def _speaker(text: str) -> str | None:
    """The speaker a transcript line starts with ("Melanie: I ..."), case-folded, else None.

    >>> _speaker("Melanie: I painted a lake"), _speaker("I parked on level 3: spot D3")
    ('melanie', None)
    """
    m = _SPEAKER.match(text)
    return m.group(1).strip().casefold() if m else None


_SENTENCE_END = re.compile(r"[.!?]+[\"'”’)]*\s+(?=[A-Z\"'“‘(])")


def _sentences(text: str) -> int:
    """Sentences in a memory (ends ``. ! ?`` followed by a capitalised word); "2.20", "Dr."
    before a lower-case word and "3 p.m." are no ends.

    >>> _sentences("I moved to room 2.20."), _sentences("Thanks! I painted a lake. Nice?")
    (1, 3)
    """
    return 1 + len(_SENTENCE_END.findall(text.strip()))


def _asks(text: str) -> bool:
    """Whether a memory ends with a question ("Cool! What type of music do you play?")."""
    return text.rstrip().rstrip("\"'”’)").endswith("?")


def score_candidates(new: Statement, candidates: Sequence[Statement], *,
                     model: SupersessionModel | UpdateModel = DEFAULT_MODEL,
                     ) -> tuple[Supersession, ...]:
    """The older candidates with their scores, best first.

    A :class:`SupersessionModel` (the default, :data:`DEFAULT_MODEL`) scores with the rules
    (gates, then the six-feature score) and returns every candidate that passes the gates;
    an :class:`~scrubjay.update_model.UpdateModel` scores with the learned, slot-independent
    features and returns every older candidate scoring at least its ``llm_floor``. Both skip
    a pair that is one sentence with a span swapped inside its subject ("the 8:15 to Leeds ..."
    / "the 8:20 to York ..."), and one that differs only by whole numbers ("note 3 about ..." /
    "note 9 about ...") unless the new one has an update cue or both share a slot of the
    lexicon ("I parked on level 2" / "I parked on level 3") and no differing number follows a
    word that numbers things ("note 3", "day 5"): two things, not two values. They
    also skip a pair where one text holds the other's words in a row ("I am parked on level 3" /
    "user: I am parked on level 3 right now"), a restatement, unless the new one has an update
    cue the old one lacks. A new memory that is a question supersedes nothing; two transcript
    lines of different speakers ("Melanie: I ..." / "Caroline: I ...") are about two people;
    and when either text is a passage of several sentences, a pair needs a shared slot or an
    update cue (one reading of a passage is not enough to call it the same slot), and when
    both are, a shared slot (a cue in one passage does not say which claim of the other it
    updates). The reason and the slot name come from the rules' reading in both cases. Candidates newer than
    ``new`` or with its id are skipped. Ties are broken by id, so the result does not depend
    on the order of ``candidates``.
    """
    from .update_model import (
        UpdateModel,
        numbered_things,
        numbers_only,
        restates,
        subject_swap,
        update_features,
    )

    learned = model if isinstance(model, UpdateModel) else None
    if _asks(new.text):  # a question states no new value
        return ()
    claim = parse_claim(new.text)
    speaker = _speaker(new.text)
    passage = _sentences(new.text) > 1
    out = []
    for cand in candidates:
        if cand.id == new.id or cand.recorded_at_s > new.recorded_at_s:
            continue
        if speaker is not None and _speaker(cand.text) not in (None, speaker):
            continue  # two speakers' "I": two people
        if subject_swap(cand.text, new.text):
            continue
        old_claim = parse_claim(cand.text)
        if numbers_only(cand.text, new.text) and not claim.update_cue \
                and (numbered_things(cand.text, new.text) or not old_claim.slots & claim.slots):
            continue
        if restates(cand.text, new.text) and (old_claim.update_cue or not claim.update_cue):
            continue
        passages = passage + (_sentences(cand.text) > 1)
        if passages and not (old_claim.slots & claim.slots
                             or (claim.update_cue and passages == 1)):
            # a passage holds several claims: one reading of it is not enough; and when both
            # are passages, a cue in one does not say which of the other's claims it updates
            continue
        cos = _cosine(new, cand)
        feats = pair_features(old_claim, claim, cos)
        if learned is not None:
            s = learned.score(update_features(cand.text, new.text, cos, old_claim, claim))
            if s < learned.llm_floor:
                continue
        elif not feats.passed:
            continue
        else:
            assert isinstance(model, SupersessionModel)
            s = _score(feats.x, model)
        out.append(Supersession(old_id=cand.id, score=s, slot=feats.slot,
                                reason=f"same slot '{feats.slot}', {feats.detail}"))
    return tuple(sorted(out, key=lambda h: (-h.score, h.old_id)))


def detect_supersessions(new: Statement, candidates: Sequence[Statement], *,
                         model: SupersessionModel | UpdateModel = DEFAULT_MODEL,
                         ) -> tuple[Supersession, ...]:
    """The older candidates ``new`` supersedes (score >= the model's threshold), best first.

    >>> w = np.array([1.0, 0.0])  # the two what-embeddings: as close as paraphrases
    >>> new = Statement(id="n", text="I parked on level 3, spot D3", what=w, recorded_at_s=2.0)
    >>> old = Statement(id="o", text="I parked on level 2, spot B17", what=w, recorded_at_s=1.0)
    >>> [(h.old_id, h.slot) for h in detect_supersessions(new, [old])]
    [('o', 'parking spot')]
    """
    return tuple(h for h in score_candidates(new, candidates, model=model)
                 if h.score >= model.threshold)


# ------------------------------------------------------------------------------ LLM confirmation
_CONFIRM_PROMPT = (
    "Each NEW memory below may replace OLDER memories that state the same slot (the same "
    "subject and attribute) with a new value, e.g. a new parking spot, a new employer, a moved "
    "meeting room. Memories that can both be true (two hobbies, two children, two friends, "
    "different people) do not replace each other. For every (new, old) pair listed, answer "
    "whether the new memory replaces the old one. Return strict JSON only: "
    '{{"decisions": [{{"new": int, "old": str, "supersedes": bool}}, ...]}} with exactly one '
    "entry per pair.\n{items}"
)


def build_confirmation_prompt(
        batch: Sequence[tuple[Statement, Sequence[tuple[Statement, Supersession]]]]) -> str:
    """One prompt for a whole batch: per new memory, its candidates (old memory, proposal).

    Pass the candidates :func:`score_candidates` scored at least ``model.llm_floor``.
    """
    lines = []
    for n, (new, cands) in enumerate(batch):
        lines.append(f"NEW {n}: {json.dumps(new.text)}")
        for old, _ in cands:
            lines.append(f"  OLD {json.dumps(old.id)}: {json.dumps(old.text)}")
    return _CONFIRM_PROMPT.format(items="\n".join(lines))


def parse_confirmation(
        reply: str,
        batch: Sequence[tuple[Statement, Sequence[tuple[Statement, Supersession]]]],
) -> tuple[tuple[Supersession, ...], ...]:
    """The chat model's decisions, strictly: per new memory, the proposals it confirmed.

    Raises :class:`~scrubjay.errors.LLMError` unless the reply is one JSON object whose
    ``decisions`` list answers every listed pair exactly once with a boolean, and nothing else.
    """
    obj = parse_json_object(reply)
    if set(obj) != {"decisions"} or not isinstance(obj["decisions"], list):
        raise LLMError("The chat model's reply must be {\"decisions\": [...]}. Got keys "
                       f"{sorted(obj)} instead.")
    expected = {(n, old.id) for n, (_, cands) in enumerate(batch) for old, _ in cands}
    answers: dict[tuple[int, str], bool] = {}
    for entry in obj["decisions"]:
        if not isinstance(entry, dict) or set(entry) != {"new", "old", "supersedes"}:
            raise LLMError(f"Each decision must have exactly 'new', 'old', 'supersedes'. Got "
                           f"{entry!r} instead.")
        n, old_id, yes = entry["new"], entry["old"], entry["supersedes"]
        if isinstance(n, bool) or not isinstance(n, int) or not isinstance(old_id, str) \
                or not isinstance(yes, bool):
            raise LLMError(f"A decision has the wrong types: {entry!r}.")
        key = (n, old_id)
        if key not in expected or key in answers:
            raise LLMError(f"The decision {entry!r} is not a listed pair or is repeated.")
        answers[key] = yes
    if set(answers) != expected:
        raise LLMError(f"The chat model left {len(expected - set(answers))} pairs unanswered.")
    out = []
    for n, (_, cands) in enumerate(batch):
        kept = [Supersession(old_id=h.old_id, score=h.score, slot=h.slot,
                             reason=h.reason + " (confirmed by the chat model)")
                for old, h in cands if answers[(n, old.id)]]
        out.append(tuple(kept))
    return tuple(out)


def confirm_or_fallback(
        reply: str | None,
        batch: Sequence[tuple[Statement, Sequence[tuple[Statement, Supersession]]]],
        *, model: SupersessionModel | UpdateModel = DEFAULT_MODEL,
) -> tuple[tuple[tuple[Supersession, ...], ...], str | None]:
    """``(decisions, fallback_reason)``: the parsed reply, or, when it is missing or malformed,
    the offline decision (the proposals scoring at least ``model.threshold``) and why."""
    if reply is not None:
        try:
            return parse_confirmation(reply, batch), None
        except LLMError as err:
            logger.debug("supersession confirmation unusable, offline decision kept: %s", err)
            reason = str(err)
    else:
        reason = "no reply"
    offline = tuple(tuple(h for _, h in cands if h.score >= model.threshold)
                    for _, cands in batch)
    return offline, reason
