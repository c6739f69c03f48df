"""Validate ``core/scrubjay/data/perishability_statements.jsonl`` and print its summary tables.

Checks (any failure exits with status 1):

- schema: every line is a JSON object with exactly the keys text, context, label, lifetime_s,
  domain, split, of the right types; label and split from the allowed sets;
- ranges: 60 <= lifetime_s <= 3.2e9; text of 5-25 words; at least 1,200 rows;
- coverage: at least 15 domains with >= 40 rows each; every lifetime band holds >= 10% of rows;
  the test split holds >= 300 rows and 15-30% of rows (it stayed fixed at 363 rows when the
  train split grew from 966 to 1,667 rows); at most 20% of contexts are empty;
- shortcuts: at most 15% of texts contain one of the keyword-fallback cue words (today, right
  now, temporary, session, meeting, task, ticket, project, how to, steps, ...);
- duplicates: no exact duplicate text (case- and whitespace-insensitive);
- split leakage: no test text shares more than 70% of its word tokens (as a set) with any train
  text;
- independence from the TGT benchmark: no TGT category identifier, checkpoint tag, or TGT
  vocabulary value (``TGT_VOCABULARY`` below, plus any ``--tgt-vocab`` JSON file) occurs as a
  whole word, case-insensitive, in a text or context.

Usage::

    python scripts/check_perishability_data.py [PATH] [--tgt-vocab FILE.json] [--markdown]

``--markdown`` prints the tables as Markdown (that is how the README's tables are made).
"""

from __future__ import annotations

import argparse
import json
import math
import re
import sys
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
DEFAULT_PATH = ROOT / "core" / "scrubjay" / "data" / "perishability_statements.jsonl"

KEYS = {"text", "context", "label", "lifetime_s", "domain", "split"}
LABELS = ("ephemeral", "task_specific", "procedural", "factual")
SPLITS = ("train", "test")
MIN_ROWS = 1200
MIN_DOMAINS = 15
MIN_ROWS_PER_DOMAIN = 40
LIFETIME_MIN_S = 60
LIFETIME_MAX_S = 3.2e9
WORDS_MIN, WORDS_MAX = 5, 25
TEST_FRACTION = (0.15, 0.30)
#: The held-out split must stay large enough for its figures to mean something.
MIN_TEST_ROWS = 300
MAX_EMPTY_CONTEXT = 0.20
MAX_KEYWORD_FRACTION = 0.15
MIN_BAND_FRACTION = 0.10
MAX_TOKEN_OVERLAP = 0.70

DAY = 86400
YEAR = 365.25 * DAY
# (upper bound in seconds, name); a lifetime falls in the first band whose bound exceeds it.
BANDS = (
    (3600, "minutes (<1 h)"),
    (DAY, "hours (1 h-1 d)"),
    (14 * DAY, "days (1 d-2 w)"),
    (YEAR, "weeks-months (2 w-1 y)"),
    (10 * YEAR, "years (1-10 y)"),
    (math.inf, "decades-lifelong (>=10 y)"),
)

# Cue words of the keyword fallback classifier (SPEC section 2) and of the brief; a text that
# contains one can be classified without understanding it.
KEYWORD_CUES = (
    "today", "right now", "immediate", "immediately", "temporary", "session", "meeting",
    "task", "ticket", "issue", "project", "how to", "steps", "process", "procedure", "workflow",
)

# TGT (paper arXiv 2608.04746, App. B and SPEC section 10). The paper names its twenty memory
# categories and the checkpoint tag but publishes only the SIZES of its slot vocabularies
# (12 names, 6 cities, 6 companies, ...), not the values; the values live in the TGT generator.
# Known TGT surface forms:
TGT_CATEGORIES = (
    "current_location", "todays_plan", "transient_mood", "immediate_context", "real_time_status",
    "project_decision", "meeting_outcome", "recent_preference_shift", "active_bug",
    "short_term_goal", "food_preference", "communication_style", "tool_preference",
    "working_hours", "aesthetic_preference", "occupation", "location", "long_term_goal",
    "family_info", "education",
)
TGT_TAG_WORDS = ("checkpoint", "logged in checkpoint")
TGT_TAG_RE = re.compile(r"\bP\d+-[A-D]?\d+\b")
# Stand-ins for the unpublished slot values: the names, cities, companies, universities,
# languages, tools, data stores and frameworks that a generator like TGT's is most likely to
# draw on. The data set avoids all of them (it names no software products, companies or
# universities at all). Add the real TGT lists with --tgt-vocab once they exist.
TGT_PROXY_VOCABULARY = (
    # names and child names
    "Alice", "Bob", "Carol", "Dave", "Sarah", "John", "Emma", "Liam", "Olivia", "Noah",
    "Sophia", "Mia", "Ava", "Ethan", "Lucas", "Alex", "Sam", "Jordan", "Taylor", "Chris", "Priya",
    "Raj", "Wei", "Chen", "Maya", "Maria", "Carlos", "David", "Michael", "Anna", "Lily", "Leo",
    "Ella", "Oliver", "Jack", "Mei", "Aisha", "Omar", "Elena", "Marcus", "Nina",
    # office areas
    "cafeteria", "break room", "mezzanine", "east wing", "west wing", "north wing",
    # cities
    "Berlin", "Tokyo", "London", "Paris", "New York", "San Francisco", "Seattle", "Austin",
    "Boston", "Toronto", "Sydney", "Singapore", "Amsterdam", "Barcelona", "Chicago", "Denver",
    "Dublin", "Lisbon", "Madrid", "Munich", "Stockholm", "Vancouver", "Zurich", "Bangalore",
    # companies
    "Google", "Microsoft", "Netflix", "Stripe", "Shopify", "OpenAI",
    "Acme", "Initech", "Globex", "Spotify", "Airbnb", "Uber",
    # universities
    "MIT", "Stanford", "Harvard", "Berkeley", "Oxford", "Cambridge", "Princeton", "Yale",
    "ETH", "Caltech",
    # programming languages, tools, data stores, frameworks, filenames
    "Python", "Golang", "Java", "JavaScript", "TypeScript", "Kotlin", "Docker", "Kubernetes", "VS Code", "VSCode", "Vim", "Emacs", "Git", "GitHub",
    "Jira", "Terraform", "Postgres", "PostgreSQL", "MySQL", "Redis", "MongoDB", "SQLite",
    "Cassandra", "Elasticsearch", "DynamoDB", "ReactJS", "Django", "Flask", "FastAPI", "Vue",
    "Angular", "PyTorch", "TensorFlow", "main.py", "config.yaml",
    "README.md", "utils.py", "index.js", "Dockerfile",
    # project codenames
    "Phoenix", "Atlas", "Orion", "Apollo", "Nebula", "Falcon", "Titan", "Hermes", "Zephyr",
    # dishes typical of "favourite food" slots
    "sushi", "tacos", "pad thai", "biryani",
)
# Ordinary English words (moods such as "tired", build states such as "failing", foods such as
# "pizza"), and product names that are also English words (Slack, Zoom, React, Apple), are
# NOT in the stand-in list: without the real TGT values, banning them would only
# ban everyday language. The real lists, passed with --tgt-vocab, are checked in full.

TOKEN_RE = re.compile(r"[a-z0-9]+(?:'[a-z]+)?")


def band_of(lifetime_s: float) -> str:
    for bound, name in BANDS:
        if lifetime_s < bound:
            return name
    raise AssertionError("unreachable")


def tokens(text: str) -> set[str]:
    return set(TOKEN_RE.findall(text.lower()))


def whole_word(term: str) -> re.Pattern[str]:
    return re.compile(r"(?<![\w])" + re.escape(term) + r"(?![\w])", re.IGNORECASE)


def load(path: Path, errors: list[str]) -> list[dict]:
    rows = []
    for lineno, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        try:
            row = json.loads(line)
        except json.JSONDecodeError as exc:
            errors.append(f"line {lineno}: not JSON ({exc})")
            continue
        if not isinstance(row, dict) or set(row) != KEYS:
            errors.append(f"line {lineno}: keys must be exactly {sorted(KEYS)}")
            continue
        row["_line"] = lineno
        rows.append(row)
    return rows


def check_rows(rows: list[dict], errors: list[str]) -> None:
    for row in rows:
        where = f"line {row['_line']}"
        if not isinstance(row["text"], str) or not isinstance(row["context"], str):
            errors.append(f"{where}: text and context must be strings")
            continue
        if not isinstance(row["domain"], str) or not row["domain"]:
            errors.append(f"{where}: domain must be a non-empty string")
        if row["label"] not in LABELS:
            errors.append(f"{where}: label {row['label']!r} not in {LABELS}")
        if row["split"] not in SPLITS:
            errors.append(f"{where}: split {row['split']!r} not in {SPLITS}")
        life = row["lifetime_s"]
        if isinstance(life, bool) or not isinstance(life, (int, float)):
            errors.append(f"{where}: lifetime_s must be a number")
        elif not LIFETIME_MIN_S <= life <= LIFETIME_MAX_S:
            errors.append(f"{where}: lifetime_s {life} outside [{LIFETIME_MIN_S}, {LIFETIME_MAX_S:g}]")
        n_words = len(row["text"].split())
        if not WORDS_MIN <= n_words <= WORDS_MAX:
            errors.append(f"{where}: text has {n_words} words (want {WORDS_MIN}-{WORDS_MAX})")


def check_counts(rows: list[dict], errors: list[str]) -> None:
    n = len(rows)
    if n < MIN_ROWS:
        errors.append(f"{n} rows; want at least {MIN_ROWS}")
    domains = Counter(r["domain"] for r in rows)
    big = [d for d, c in domains.items() if c >= MIN_ROWS_PER_DOMAIN]
    if len(big) < MIN_DOMAINS:
        errors.append(f"only {len(big)} domains have >= {MIN_ROWS_PER_DOMAIN} rows; want {MIN_DOMAINS}")
    bands = Counter(band_of(r["lifetime_s"]) for r in rows if isinstance(r["lifetime_s"], (int, float)))
    for _, name in BANDS:
        if bands[name] < MIN_BAND_FRACTION * n:
            errors.append(f"band {name} has {bands[name]} rows; want >= {MIN_BAND_FRACTION:.0%}")
    test = sum(r["split"] == "test" for r in rows)
    lo, hi = TEST_FRACTION
    if n and not lo <= test / n <= hi:
        errors.append(f"test split is {test / n:.1%} of rows; want {lo:.0%}-{hi:.0%}")
    if test < MIN_TEST_ROWS:
        errors.append(f"test split has {test} rows; want >= {MIN_TEST_ROWS}")
    empty = sum(r["context"] == "" for r in rows)
    if n and empty / n > MAX_EMPTY_CONTEXT:
        errors.append(f"{empty / n:.1%} of contexts are empty; want <= {MAX_EMPTY_CONTEXT:.0%}")


def keyword_rows(rows: list[dict], field: str) -> list[dict]:
    patterns = [whole_word(k) for k in KEYWORD_CUES]
    return [r for r in rows if any(p.search(r[field]) for p in patterns)]


def check_keywords(rows: list[dict], errors: list[str]) -> None:
    hits = keyword_rows(rows, "text")
    if rows and len(hits) / len(rows) > MAX_KEYWORD_FRACTION:
        errors.append(f"{len(hits)} texts ({len(hits) / len(rows):.1%}) contain keyword cues")


def check_duplicates(rows: list[dict], errors: list[str]) -> None:
    seen: dict[str, int] = {}
    for row in rows:
        key = " ".join(row["text"].lower().split())
        if key in seen:
            errors.append(f"line {row['_line']}: duplicate of line {seen[key]}: {row['text']!r}")
        seen.setdefault(key, row["_line"])


def max_overlaps(rows: list[dict]) -> list[tuple[float, dict, dict]]:
    """For each test row, its highest share of tokens found in one train text, and that text."""
    train = [(tokens(r["text"]), r) for r in rows if r["split"] == "train"]
    out = []
    for row in rows:
        if row["split"] != "test":
            continue
        mine = tokens(row["text"])
        best, best_row = 0.0, None
        for theirs, other in train:
            share = len(mine & theirs) / len(mine) if mine else 0.0
            if share > best:
                best, best_row = share, other
        out.append((best, row, best_row))
    return out


def check_leakage(rows: list[dict], errors: list[str]) -> float:
    worst = 0.0
    for share, row, other in max_overlaps(rows):
        worst = max(worst, share)
        if share > MAX_TOKEN_OVERLAP:
            errors.append(
                f"line {row['_line']} (test) shares {share:.0%} of its tokens with line "
                f"{other['_line']} (train): {row['text']!r} / {other['text']!r}"
            )
    return worst


def check_tgt(rows: list[dict], extra: list[str], errors: list[str]) -> int:
    terms = list(TGT_CATEGORIES) + list(TGT_TAG_WORDS) + list(extra)
    terms += list(TGT_PROXY_VOCABULARY)
    patterns = [(t, whole_word(t)) for t in terms]
    for row in rows:
        for field in ("text", "context"):
            value = row[field]
            for term, pattern in patterns:
                if pattern.search(value):
                    errors.append(f"line {row['_line']}: TGT vocabulary {term!r} in {field}: {value!r}")
            if TGT_TAG_RE.search(value):
                errors.append(f"line {row['_line']}: TGT checkpoint tag in {field}: {value!r}")
    return len(terms)


def load_tgt_vocab(path: Path | None) -> list[str]:
    if path is None:
        return []
    data = json.loads(path.read_text(encoding="utf-8"))
    values = data.values() if isinstance(data, dict) else [data]
    return [str(v) for group in values for v in (group if isinstance(group, list) else [group])]


def table(title: str, counter: Counter, order: list[str], total: int, md: bool, split_of=None) -> str:
    lines = []
    if md:
        head = f"| {title} | rows | share |" + (" train | test |" if split_of else "")
        lines += [head, "|" + "---|" * (head.count("|") - 1)]
    else:
        lines.append(f"{title:<28}{'rows':>6}{'share':>8}" + (f"{'train':>7}{'test':>6}" if split_of else ""))
    for key in order:
        c = counter[key]
        extra = split_of(key) if split_of else None
        if md:
            lines.append(f"| {key} | {c} | {c / total:.1%} |" + (f" {extra[0]} | {extra[1]} |" if extra else ""))
        else:
            lines.append(f"{key:<28}{c:>6}{c / total:>8.1%}" + (f"{extra[0]:>7}{extra[1]:>6}" if extra else ""))
    if md:
        lines.append(f"| **total** | {total} | 100% |" + (" | |" if split_of else ""))
    else:
        lines.append(f"{'total':<28}{total:>6}")
    return "\n".join(lines)


def summary(rows: list[dict], md: bool) -> str:
    n = len(rows)

    def splits(field, fn=lambda r, k, f: r[f] == k):
        def inner(key):
            train = sum(1 for r in rows if fn(r, key, field) and r["split"] == "train")
            test = sum(1 for r in rows if fn(r, key, field) and r["split"] == "test")
            return train, test
        return inner

    by_band = lambda r, k, f: band_of(r["lifetime_s"]) == k
    parts = [
        table("split", Counter(r["split"] for r in rows), list(SPLITS), n, md),
        table("label", Counter(r["label"] for r in rows), list(LABELS), n, md, splits("label")),
        table(
            "lifetime band",
            Counter(band_of(r["lifetime_s"]) for r in rows),
            [name for _, name in BANDS],
            n,
            md,
            splits("lifetime_s", by_band),
        ),
        table(
            "domain",
            Counter(r["domain"] for r in rows),
            sorted({r["domain"] for r in rows}),
            n,
            md,
            splits("domain"),
        ),
    ]
    # label x band cross-tab
    head = ["label \\ band"] + [name.split(" ")[0] for _, name in BANDS]
    cross = [head]
    for label in LABELS:
        cross.append([label] + [str(sum(1 for r in rows if r["label"] == label and band_of(r["lifetime_s"]) == name)) for _, name in BANDS])
    if md:
        lines = ["| " + " | ".join(cross[0]) + " |", "|" + "---|" * len(head)]
        lines += ["| " + " | ".join(r) + " |" for r in cross[1:]]
    else:
        lines = ["".join(f"{c:>14}" if i else f"{c:<16}" for i, c in enumerate(r)) for r in cross]
    parts.append("\n".join(lines))
    return "\n\n".join(parts)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("path", nargs="?", type=Path, default=DEFAULT_PATH)
    parser.add_argument("--tgt-vocab", type=Path, default=None, help="JSON list or {group: [values]} of TGT vocabulary")
    parser.add_argument("--markdown", action="store_true", help="print the tables as Markdown")
    args = parser.parse_args(argv)

    errors: list[str] = []
    rows = load(args.path, errors)
    check_rows(rows, errors)
    if not errors:
        check_counts(rows, errors)
        check_keywords(rows, errors)
        check_duplicates(rows, errors)
        worst = check_leakage(rows, errors)
        n_terms = check_tgt(rows, load_tgt_vocab(args.tgt_vocab), errors)
        print(summary(rows, args.markdown))
        kw_text = len(keyword_rows(rows, "text"))
        kw_ctx = len(keyword_rows(rows, "context"))
        empty = sum(r["context"] == "" for r in rows)
        print(
            f"\nkeyword cues: {kw_text} texts ({kw_text / len(rows):.1%}), {kw_ctx} contexts "
            f"({kw_ctx / len(rows):.1%}); empty contexts: {empty} ({empty / len(rows):.1%}); "
            f"worst test-vs-train token overlap: {worst:.0%}; TGT terms checked: {n_terms}"
        )
    for err in errors:
        print(f"ERROR: {err}", file=sys.stderr)
    if errors:
        print(f"{len(errors)} violation(s)", file=sys.stderr)
        return 1
    print("OK")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
